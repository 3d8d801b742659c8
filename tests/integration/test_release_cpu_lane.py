"""The verified CPU lane: the real vLLM image by digest, `ledger run`, publish, reproduce.

Needs the docker daemon, the local registry, the image of scripts/build_cpu_image.sh (run here: it
returns in seconds when the image is current, about 7 minutes from nothing), the serving venv (the
bench client) and the tiny model: ``require("cpu-lane")``. `.ci/run` provides them all and
requires them; elsewhere the tests are skipped with the reason.

- A short lane in a temporary repository, on whatever digest this box's build has: 8 container
  launches (2 A/A + 2 x 2 ABBA for the run, 2 for the reproduction), about 6 minutes.
- The committed lane (tiny-cpu@v2): every pin but the image (and the box) holds on any clone; on
  the box that built its image, all of them do. No launch.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import StateError
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.releases import catalog, pins, reproduce

from helpers.net import free_port
from helpers.resources import SERVE_VLLM, TINY_MODEL, require

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
VLLM, MODEL = SERVE_VLLM, TINY_MODEL


@pytest.fixture(scope="module")
def image() -> str:
    """The lane image's repository digest reference, from the (idempotent) build script."""
    require("cpu-lane")
    built = subprocess.run(
        [str(REPO / "scripts" / "build_cpu_image.sh"), str(MODEL)],
        capture_output=True,
        check=False,
        text=True,
        timeout=1500,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    lines = dict(line.split("=", 1) for line in built.stdout.splitlines() if "=" in line)
    return lines["repo_digest"]


def short_lane(image: str, port: int) -> dict:
    """experiments/examples/tiny-lane.yaml, cut to one point and short benchmarks."""
    doc = json.loads(json.dumps(_example()))
    doc["server"].update(image=image, port=port)
    doc["instruments"][0]["options"].update(num_prompts=8, random_input_len=64, random_output_len=32)
    doc["points"] = [4]
    doc["bars"] = [bar for bar in doc["bars"] if bar["point"] == 4]
    return doc


def short_release(image: str) -> dict:
    """recipes/releases/tiny-cpu/v1.yaml with this build's digest and the short lane's one point."""
    from recipe_ledger.spec.yamlfile import load_yaml

    doc = load_yaml(REPO / "recipes" / "releases" / "tiny-cpu" / "v1.yaml").data
    return {**doc, "image": image, "numbers": [n for n in doc["numbers"] if n["point"] == 4]}


def _example() -> dict:
    from recipe_ledger.spec.yamlfile import load_yaml

    return load_yaml(REPO / "experiments" / "examples" / "tiny-lane.yaml").data


@pytest.fixture()
def repo(tmp_path, image, monkeypatch) -> Path:
    root = tmp_path / "repo"
    (root / "recipes").mkdir(parents=True)
    shutil.copytree(REPO / "recipes" / "boxes", root / "recipes" / "boxes")
    (root / "recipes" / "models").mkdir()
    (root / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "make_tiny_model.py", root / "scripts")
    shutil.copytree(MODEL, root / ".cache" / "tiny-model")
    (root / "experiments").mkdir()
    (root / "experiments" / "lane.yaml").write_text(json.dumps(short_lane(image, free_port()), indent=1))
    (root / "recipes" / "releases" / "tiny-cpu").mkdir(parents=True)
    (root / "recipes" / "releases" / "tiny-cpu" / "v1.yaml").write_text(
        json.dumps(short_release(image), indent=1)
    )
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "lane"]):
        subprocess.run(
            ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args], check=True
        )
    Ledger.init(root)
    monkeypatch.chdir(root)  # `ledger run` is started at the repository root (the tokenizer path)
    monkeypatch.setenv("RECIPE_LEDGER_VLLM", str(VLLM))
    monkeypatch.setenv("RECIPE_LEDGER_WRITER", "ci-lane")
    return root


def cli(root: Path, *args: str):
    result = CliRunner().invoke(main, [*args, "--root", str(root)], catch_exceptions=False)
    return result


def test_the_cpu_lane_is_measured_published_verified_and_reproduced(repo, image):
    run = cli(repo, "run", "experiments/lane.yaml", "--no-mlflow")
    assert run.exit_code == 0, run.output[-4000:]
    published = cli(
        repo, "release", "publish", "tiny-cpu", "v1", "--from", "recipes/releases/tiny-cpu/v1.yaml"
    )
    assert published.exit_code == 0, published.output
    release = catalog.find(Ledger.open(repo), "tiny-cpu@v1")
    assert release.verification == "verified", release.payload.unverified
    assert release.payload.image.digest == image.split("@")[1] and release.payload.image.pinned
    assert release.payload.model.revision_source == "content-hash"
    assert all(n.verified and len(n.samples) == 2 for n in release.payload.numbers)

    listed = [json.loads(line) for line in cli(repo, "release", "list", "--json").output.splitlines()]
    assert listed[-1]["status"] == "verified" and listed[-1]["pins"]["image"]["digest"] == image.split("@")[1]

    reproduced = cli(repo, "reproduce", "tiny-cpu@v1")
    entry = next(e for e in reversed(Ledger.open(repo).entries()) if e["kind"] == "reproduction")
    assert entry["payload"]["target"] == release.id
    # Two launches per arm on a shared two-core box spread up to ~20% (the lane's own repeats did,
    # measured here): the CI can straddle the ±25% tolerance, so an honest `inconclusive` is allowed;
    # a clear departure from the published numbers is not.
    outcome = entry["payload"]["outcome"]
    assert outcome in ("reproduced", "inconclusive"), reproduced.output
    assert {"output_tps_c4.effect", "output_tps_c4.ci_low", "output_tps_c4.ci_high"} <= set(
        entry["payload"]["metrics"]
    )
    assert reproduced.exit_code == (0 if outcome == "reproduced" else 1)
    assert catalog.find(Ledger.open(repo), "tiny-cpu@v1").status == (
        "reproduced" if outcome == "reproduced" else "active"
    )
    assert cli(repo, "verify").exit_code == 0


def test_the_committed_lane_holds_every_pin_here_or_names_the_image(image):
    """tiny-cpu@v2 as committed: verified, reproduced once on its box, and re-runnable where its image is.

    On the box that built it the image is in the daemon and every pin holds, so a plan comes back;
    on another box the only differences may be the image digest (its own build has its own) and the
    box itself: the model, scripts, experiment spec and flags hold on any clean clone."""
    ledger = Ledger.open(REPO)
    release = catalog.find(ledger, "tiny-cpu@v2")
    assert release.verification == "verified", release.payload.unverified
    assert release.payload.image.pinned and release.payload.model.revision_source == "content-hash"
    outcomes = [
        e["payload"]["outcome"]
        for e in ledger.entries()
        if e["kind"] == "reproduction" and e["payload"]["target"] == release.id
    ]
    assert "reproduced" in outcomes

    problems, _ = reproduce.pin_problems(release.payload, REPO)
    assert [p for p in problems if not p.startswith(("image ", "box differs"))] == []
    if any(p.startswith("image ") for p in problems):
        assert image.split("@")[1] != release.payload.image.digest, problems
        with pytest.raises(StateError, match="image digest"):
            reproduce.plan_reproduction(ledger, REPO, "tiny-cpu@v2")
    elif problems:  # the image is here, but on another box: the box pin refuses it by name
        with pytest.raises(StateError, match="box differs"):
            reproduce.plan_reproduction(ledger, REPO, "tiny-cpu@v2")
    else:
        plan = reproduce.plan_reproduction(ledger, REPO, "tiny-cpu@v2")
        assert [target.arms for target in plan.targets] == [["lane"]]
        assert plan.targets[0].plan.arms["lane"].image == pins.run_reference(release.payload.image)
