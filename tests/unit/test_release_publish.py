"""Publishing and checking releases against a stand-in docker daemon (no daemon, no server).

The fixture builds a small git repository with an experiment (docker launcher, image by digest),
a script, a model directory and the ledger entries a `ledger run` would have left (a calibration,
a result with its experiment record, the run's measurements file). The daemon's answers come from
``FakeDaemon``, patched in where ``recipe_ledger.launch.images`` asks the real one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest

from recipe_ledger import runs
from recipe_ledger import verdict as verdicts
from recipe_ledger.errors import InputError, SpecError, StateError
from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.instruments.base import InstrumentError
from recipe_ledger.launch import images
from recipe_ledger.launch.images import ImageInfo
from recipe_ledger.ledger import actions
from recipe_ledger.ledger.models import current_version
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.pipeline import events
from recipe_ledger.pipeline import run as runner
from recipe_ledger.pipeline.failures import RunFailed
from recipe_ledger.pipeline.measure import PointRecord
from recipe_ledger.pipeline.plan import plan_run
from recipe_ledger.provenance import host_fingerprint, model_revision
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.releases import catalog, publish, reproduce
from recipe_ledger.releases.spec import load_release_spec

REPO = Path(__file__).resolve().parents[2]
REGISTRY_REPO = "127.0.0.1:5000/rl/vllm-cpu"
DIGEST = "sha256:" + "a" * 64
IMAGE_ID = "sha256:" + "1" * 64
RUN_ID = "lane-20261129T000000Z-abcd"
SAMPLES = {"control": [100.0, 104.0], "lane": [300.0, 310.0]}


class FakeDaemon:
    """What `docker image inspect` would say, for the references it knows."""

    def __init__(self):
        self.images: list[ImageInfo] = []

    def add(
        self, image_id: str, tags: list[str], repo_digests: list[str], labels: dict | None = None
    ) -> None:
        self.images = [i for i in self.images if not set(i.tags) & set(tags)]  # a tag moves
        self.images.append(
            ImageInfo(ref="", image_id=image_id, repo_digests=repo_digests, tags=tags, labels=labels or {})
        )

    def image_info(self, ref: str, client=None) -> ImageInfo:
        for image in self.images:
            if ref in image.tags or ref in image.repo_digests or ref == image.image_id:
                return ImageInfo(ref, image.image_id, image.repo_digests, image.tags, image.labels)
        raise StateError(f"image {ref} is not on this machine", where=ref)


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
    )


def experiment_doc(image: str) -> dict:
    argv = ["vllm", "serve", "/model", "--served-model-name", "tiny", "--enforce-eager"]
    return {
        "name": "lane",
        "hypothesis": "batching beats one sequence at a time",
        "box": "cpu-only",
        "server": {"launcher": "docker", "image": image, "port": 8199},
        "control": {"argv": argv + ["--max-num-seqs", "1"], "env": {"VLLM_TARGET_DEVICE": "cpu"}},
        "candidates": {"lane": {"argv": argv, "env": {"VLLM_TARGET_DEVICE": "cpu"}}},
        "instruments": [{"name": "bench", "kind": "vllm_bench_serve", "options": {"tokenizer": ".cache/m"}}],
        "points": [4],
        "repeats": 2,
        "bars": [
            {
                "metric": "output_tps_total",
                "point": 4,
                "direction": "higher",
                "min_effect": 0.25,
                "agreement_threshold": 0.2,
            }
        ],
        "calibration": {"repeats": 2},
    }


def release_doc(**over) -> dict:
    doc = {
        "lane": "tiny-cpu",
        "lane_title": "Tiny CPU",
        "version": "v1",
        "changes": ["first"],
        "image": f"{REGISTRY_REPO}@{DIGEST}",
        "model": {"name": "t/m", "path": ".cache/m", "container_path": "/model"},
        "scripts": ["scripts/gen.py"],
        "numbers": [
            {
                "name": "tps_c4",
                "metric": "output_tps_total",
                "point": 4,
                "arm": "lane",
                "experiment": "lane",
                "unit": "tok/s",
            }
        ],
    }
    return {**doc, **over}


def write_release(repo: Path, name: str = "v1", **over) -> Path:
    """The release spec, committed as its author would before publishing (a dirty one is refused)."""
    path = repo / "recipes" / "releases" / "tiny-cpu" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(release_doc(**over)))
    if (repo / ".git").is_dir():
        git(repo, "add", str(path))
        git(repo, "commit", "-q", "--allow-empty", "-m", f"release spec {name}")
    return path


def record_run(
    ledger: Ledger,
    repo: Path,
    spec: Path,
    samples: dict[str, list[float]] = SAMPLES,
    run_id: str = RUN_ID,
    tail: str = "",
) -> dict:
    """The calibration and result entries (and the run folder) `ledger run` leaves; ``tail`` is
    written after the records (a torn line of a run killed mid-write)."""
    plan = plan_run(spec, load_experiment(spec), RecipeRoot(repo / "recipes"), repo)
    # Six A/A launches: rl-verdict/2 takes a calibration at its upper bound, x3.95 for two launches.
    aa_launches = [100.0, 103.0, 101.0, 102.0, 100.5, 102.5]
    calibration = verdicts.calibrate({4: aa_launches}, metric="output_tps_total")
    cal = ledger.append(
        "calibration",
        {
            "instrument": "bench",
            "metric": "output_tps_total",
            "method": verdicts.METHOD,
            "points": {k: p.model_dump() for k, p in calibration.points.items()},
            "origin": {"how": "measured", "source": run_id},
        },
        writer="box",
        git=None,
    )
    run_dir = repo / "runs" / run_id
    run_dir.mkdir(parents=True)
    rows = [
        PointRecord(arm, r + 1, 4, "bench", "vllm 0.32.0", r, {"output_tps_total": v}).to_json()
        for arm, values in samples.items()
        for r, v in enumerate(values)
    ]
    (run_dir / "measurements.jsonl").write_text("".join(row + "\n" for row in rows) + tail)
    digest = "sha256:" + hashlib.sha256((run_dir / "measurements.jsonl").read_bytes()).hexdigest()
    medians = {f"{arm}.c4.output_tps_total": statistics.median(v) for arm, v in samples.items()}
    arms = {
        name: {
            "source": a.source,
            "fingerprint": a.fingerprint,
            "argv": a.argv,
            "env": a.env,
            "image": a.image,
        }
        for name, a in plan.arms.items()
    }
    record = {
        "name": "lane",
        "spec": spec.relative_to(repo).as_posix(),
        "spec_sha256": "sha256:" + hashlib.sha256(spec.read_bytes()).hexdigest(),
        "box": "cpu-only",
        "run_id": run_id,
        "points": [4],
        "repeats": 2,
        "arms": arms,
        "calibration": cal["id"],
        "host": host_fingerprint(),
        "bars": [
            {
                "candidate": "lane",
                "metric": "output_tps_total",
                "point": 4,
                "direction": "higher",
                "min_effect": 0.25,
                "outcome": "win",
            }
        ],
    }
    return ledger.append(
        "result",
        {
            "subject": "lane",
            "metrics": medians,
            "experiment": record,
            "origin": {"how": "measured", "source": run_id},
            "artifacts": {"measurements.jsonl": digest},
            "scripts": ["scripts/gen.py"],
        },
        writer="box",
        refs=[],
    )


@pytest.fixture()
def daemon(monkeypatch) -> FakeDaemon:
    fake = FakeDaemon()
    monkeypatch.setattr(images, "image_info", fake.image_info)
    monkeypatch.setattr(
        images,
        "container_runtime",
        lambda client=None: {
            "container_runtime": "docker 20.10.24",
            "oci_runtime": "runc",
            "storage_driver": "overlay2",
        },
    )
    return fake


@pytest.fixture()
def repo(tmp_path, daemon) -> Path:
    root = tmp_path / "repo"
    (root / "recipes" / "boxes").mkdir(parents=True)
    shutil.copy(REPO / "recipes" / "boxes" / "cpu-only.yaml", root / "recipes" / "boxes")
    (root / "recipes" / "models").mkdir()
    (root / "recipes" / "models" / ".keep").write_text("")
    (root / "scripts").mkdir()
    (root / "scripts" / "gen.py").write_text("print('model')\n")
    (root / ".cache" / "m").mkdir(parents=True)
    (root / ".cache" / "m" / "config.json").write_text('{"hidden": 8}\n')
    (root / "experiments").mkdir()
    (root / "experiments" / "lane.yaml").write_text(json.dumps(experiment_doc(f"{REGISTRY_REPO}@{DIGEST}")))
    git(root, "init", "-q")
    git(root, "add", "scripts", "experiments", "recipes")
    git(root, "commit", "-q", "-m", "init")
    ledger = Ledger.init(root)
    record_run(ledger, root, root / "experiments" / "lane.yaml")
    model_hash = model_revision(root / ".cache" / "m")
    daemon.add(
        IMAGE_ID,
        [f"{REGISTRY_REPO}:1"],
        [f"{REGISTRY_REPO}@{DIGEST}"],
        {"org.recipe-ledger.model.sha256": model_hash},
    )
    return root


def publish_v1(repo: Path, allow_dirty: bool = False, **over) -> dict:
    return publish.publish(
        Ledger.open(repo),
        repo,
        write_release(repo, **over),
        "tiny-cpu",
        "v1",
        writer="box",
        allow_dirty=allow_dirty,
    )


# ------------------------------------------------------------------------------------- publish


def test_a_release_with_every_pin_and_a_measured_result_is_verified(repo):
    entry = publish_v1(repo)
    p = entry["payload"]
    assert p["verified"] is True and p["unverified"] == [] and p["schema_version"] == 2
    assert p["image"] == {
        "ref": f"{REGISTRY_REPO}@{DIGEST}",
        "digest": DIGEST,
        "pinned": True,
        "image_id": IMAGE_ID,
        "repo_digests": [f"{REGISTRY_REPO}@{DIGEST}"],
    }
    assert p["model"]["revision"] == model_revision(repo / ".cache" / "m")
    assert p["model"]["revision_source"] == "content-hash"
    (number,) = p["numbers"]
    result = next(e for e in Ledger.open(repo).entries() if e["kind"] == "result")
    assert number["result"] == result["id"] and number["samples"] == [300.0, 310.0] and number["verified"]
    assert number["value"] == 305.0 and number["tolerance"] == 0.25
    assert p["script_pins"]["scripts/gen.py"] == entry["git"]["scripts"]["scripts/gen.py"]
    assert p["argv"][:3] == ["vllm", "serve", "/model"] and "--max-num-seqs" not in p["argv"]
    assert p["box"]["gpu_count"] == "0" and p["box"]["container_runtime"].startswith("docker")
    assert f"{REGISTRY_REPO}@{DIGEST}" in p["command"] and p["command"].startswith("docker run")
    assert {"rel": "evidence", "id": result["id"]} in entry["refs"]


def test_a_torn_line_in_the_runs_measurements_is_named_not_skipped(repo):
    """The hash matches (the file was torn when the run wrote it): the bad line must still stop it."""
    spec = repo / "experiments" / "lane.yaml"
    record_run(Ledger.open(repo), repo, spec, run_id="lane-torn", tail='{"arm": "lane", "rep')
    with pytest.raises(InputError) as info:
        publish_v1(repo)
    assert "runs/lane-torn/measurements.jsonl:5" in str(info.value) and "torn last line" in str(info.value)


def test_a_digest_that_does_not_exist_is_refused_and_named(repo):
    missing = "sha256:" + "b" * 64
    with pytest.raises(StateError, match=f"image {REGISTRY_REPO}@{missing} is not on this machine"):
        publish_v1(repo, image=f"{REGISTRY_REPO}@{missing}")
    assert not [e for e in Ledger.open(repo).entries() if e["kind"] == "release"]


def test_an_image_never_pushed_is_unpinned_and_the_release_unverified(repo, daemon):
    daemon.add("sha256:" + "2" * 64, ["local/only:1"], [])
    p = publish_v1(repo, image="local/only:1")["payload"]
    assert p["verified"] is False and p["image"]["pinned"] is False
    assert any("no repository digest" in r for r in p["unverified"])
    assert any("the numbers were measured with" in r for r in p["unverified"])


def test_a_tag_is_resolved_to_its_repository_digest_and_said_so(repo):
    p = publish_v1(repo, image=f"{REGISTRY_REPO}:1")["payload"]
    assert p["image"]["digest"] == DIGEST and p["image"]["pinned"] is True and p["verified"] is True
    assert any("resolved to" in n for n in p["notes"])


def test_a_dirty_script_is_refused_naming_it_and_allow_dirty(repo):
    (repo / "scripts" / "gen.py").write_text("print('changed')\n")
    with pytest.raises(StateError, match=r"scripts/gen\.py.*--allow-dirty") as refused:
        publish_v1(repo)
    assert refused.value.exit_code == 3
    assert not [e for e in Ledger.open(repo).entries() if e["kind"] == "release"]


def test_an_allowed_dirty_script_makes_the_release_unverified_and_records_the_diff(repo):
    (repo / "scripts" / "gen.py").write_text("print('changed')\n")
    entry = publish_v1(repo, allow_dirty=True)
    p = entry["payload"]
    assert p["verified"] is False
    assert any("script scripts/gen.py is dirty" in r for r in p["unverified"])
    assert any("changed since result" in r for r in p["unverified"])
    assert entry["git"]["dirty"] is True and entry["git"]["dirty_files"] == ["scripts/gen.py"]
    assert entry["git"]["diff_sha256"].startswith("sha256:")


def test_a_dry_run_shows_the_pins_and_reasons_and_writes_nothing(repo):
    from click.testing import CliRunner

    from recipe_ledger.cli import main

    spec = write_release(repo)
    (repo / "scripts" / "gen.py").write_text("print('changed')\n")
    before = sorted(p.read_bytes() for p in (repo / "ledger").glob("*.jsonl"))
    args = ["release", "publish", "tiny-cpu", "v1", "--from", str(spec), "--dry-run", "--root", str(repo)]
    shown = CliRunner().invoke(main, args)
    assert shown.exit_code == 0, shown.output
    assert "would be published UNVERIFIED" in shown.output and "nothing was written" in shown.output
    assert f"image: {REGISTRY_REPO}@{DIGEST}" in shown.output
    assert "script: scripts/gen.py" in shown.output
    assert "unverified: script scripts/gen.py is dirty" in shown.output
    assert "refused without --allow-dirty" in shown.output
    assert sorted(p.read_bytes() for p in (repo / "ledger").glob("*.jsonl")) == before


def test_a_retracted_result_cannot_verify_a_number(repo):
    ledger = Ledger.open(repo)
    result = next(e for e in ledger.entries() if e["kind"] == "result")
    actions.retract(ledger, result["id"], reason="bad run", writer="box", git=None)
    with pytest.raises(InputError, match="no active result of experiment 'lane'"):
        publish_v1(repo)
    p = publish_v1(
        repo, numbers=[{**release_doc()["numbers"][0], "experiment": None, "result": result["id"]}]
    )["payload"]
    assert p["verified"] is False and any("is retracted" in r for r in p["unverified"])


def test_a_number_the_result_does_not_hold_is_refused(repo):
    bad = {**release_doc()["numbers"][0], "point": 8}
    with pytest.raises(InputError, match=r"holds no lane\.c8\.output_tps_total"):
        publish_v1(repo, numbers=[bad])


def test_a_version_is_published_once(repo):
    publish_v1(repo)
    with pytest.raises(StateError, match="already published"):
        publish_v1(repo)


def test_the_spec_must_name_the_release_being_published(repo):
    with pytest.raises(InputError, match="describes tiny-cpu@v1, not tiny-cpu@v2"):
        publish.publish(Ledger.open(repo), repo, write_release(repo), "tiny-cpu", "v2", writer="box")


def test_a_spec_with_an_unknown_field_or_both_sources_is_refused(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(json.dumps({**release_doc(), "colour": "red"}))
    with pytest.raises(SpecError, match="colour"):
        load_release_spec(path)
    both = {**release_doc()["numbers"][0], "result": "abcd"}
    path.write_text(json.dumps(release_doc(numbers=[both])))
    with pytest.raises(SpecError, match="exactly one of 'result'"):
        load_release_spec(path)


# ---------------------------------------------------------------------------- reproduce: pins


def test_with_every_pin_met_the_reproduction_plans_the_lane_arm_by_digest(repo):
    publish_v1(repo)
    plan = reproduce.plan_reproduction(Ledger.open(repo), repo, "tiny-cpu@v1")
    (target,) = plan.targets
    assert target.arms == ["lane"] and plan.notices == []
    assert target.plan.arms["lane"].image == f"{REGISTRY_REPO}@{DIGEST}"


def test_a_pinned_digest_no_longer_on_the_machine_is_refused_and_named(repo, daemon):
    publish_v1(repo)
    daemon.images = []
    with pytest.raises(StateError, match=f"image digest {REGISTRY_REPO}@{DIGEST} is not on this machine"):
        reproduce.plan_reproduction(Ledger.open(repo), repo, "tiny-cpu@v1")


def test_a_tag_that_moved_after_publishing_is_named(repo, daemon):
    publish_v1(repo, image=f"{REGISTRY_REPO}:1")
    # The tag now names a new build; the published digest is still here under its digest.
    daemon.images[0] = ImageInfo("", IMAGE_ID, [f"{REGISTRY_REPO}@{DIGEST}"], [], daemon.images[0].labels)
    daemon.images.append(
        ImageInfo(
            "", "sha256:" + "3" * 64, [f"{REGISTRY_REPO}@sha256:{'c' * 64}"], [f"{REGISTRY_REPO}:1"], {}
        )
    )
    plan = reproduce.plan_reproduction(Ledger.open(repo), repo, "tiny-cpu@v1")
    (notice,) = plan.notices
    assert f"tag {REGISTRY_REPO}:1 moved since publishing" in notice
    assert plan.targets[0].plan.arms["lane"].image == f"{REGISTRY_REPO}@{DIGEST}"


def test_a_script_changed_after_publishing_is_refused_and_named(repo):
    publish_v1(repo)
    (repo / "scripts" / "gen.py").write_text("print('dirty')\n")
    with pytest.raises(StateError, match="script scripts/gen.py changed since publishing"):
        reproduce.plan_reproduction(Ledger.open(repo), repo, "tiny-cpu@v1")


def test_a_model_directory_changed_after_publishing_is_refused_and_named(repo):
    publish_v1(repo)
    (repo / ".cache" / "m" / "config.json").write_text('{"hidden": 9}\n')
    with pytest.raises(StateError, match=r"model directory \.cache/m changed since publishing"):
        reproduce.plan_reproduction(Ledger.open(repo), repo, "tiny-cpu@v1")


def test_a_changed_experiment_spec_is_refused_and_named(repo):
    publish_v1(repo)
    spec = repo / "experiments" / "lane.yaml"
    doc = json.loads(spec.read_text())
    doc["candidates"]["lane"]["argv"].append("--max-num-batched-tokens=512")
    spec.write_text(json.dumps(doc))
    with pytest.raises(StateError, match="experiment spec experiments/lane.yaml changed since result"):
        reproduce.plan_reproduction(Ledger.open(repo), repo, "tiny-cpu@v1")


def test_flag_and_env_differences_are_named_one_by_one(repo):
    publish_v1(repo)
    release = catalog.find(Ledger.open(repo), "tiny-cpu@v1")
    spec = repo / "experiments" / "lane.yaml"
    doc = json.loads(spec.read_text())
    doc["candidates"]["lane"]["argv"] += ["--max-num-seqs", "2"]
    doc["candidates"]["lane"]["env"]["VLLM_CPU_KVCACHE_SPACE"] = "2"
    spec.write_text(json.dumps(doc))
    plan = plan_run(spec, load_experiment(spec), RecipeRoot(repo / "recipes"), repo)
    problems = reproduce.configuration_problems(plan, "lane", release.payload)
    assert "flag --max-num-seqs: 2 now, (absent) published" in problems
    assert "env VLLM_CPU_KVCACHE_SPACE: 2 now, (unset) published" in problems


# --------------------------------------------------------------------------- reproduce: verdict


def _outcome(repo: Path, new: list[float]) -> reproduce.NumberOutcome:
    publish_v1(repo)
    ledger = Ledger.open(repo)
    plan = reproduce.plan_reproduction(ledger, repo, "tiny-cpu@v1")
    (target,) = plan.targets
    records = [
        PointRecord("lane", r + 1, 4, "bench", "v", r, {"output_tps_total": v}) for r, v in enumerate(new)
    ]
    return reproduce.decide(ledger, target, target.numbers[0], records)


def test_new_numbers_inside_the_tolerance_and_the_noise_confirm_the_release(repo):
    outcome = _outcome(repo, [304.0, 309.0])
    assert outcome.outcome == "reproduced" and outcome.verdict.outcome == "no-change"
    assert outcome.verdict.ci_low > -0.25 and outcome.verdict.ci_high < 0.25
    metrics = reproduce.number_metrics(outcome)
    assert metrics["tps_c4.published"] == pytest.approx(304.96, abs=0.01) and "tps_c4.ci_low" in metrics


def test_a_clear_slowdown_is_not_reproduced_with_its_effect_and_ci(repo):
    outcome = _outcome(repo, [150.0, 152.0])
    assert outcome.outcome == "not-reproduced" and outcome.verdict.outcome == "regression"
    assert outcome.verdict.effect == pytest.approx(-0.505, abs=0.01)
    assert "not-reproduced" in reproduce.describe(outcome) and "[" in reproduce.describe(outcome)
    assert outcome.verdict.ci_high < -outcome.verdict.bar.min_effect  # the whole CI outside
    assert "lies outside the ±25% tolerance" in outcome.reason


def test_a_regression_whose_ci_reaches_back_inside_the_tolerance_is_inconclusive_not_departed(repo):
    # About 26% slower against a 25% tolerance: the verdict calls a regression, but its CI reaches
    # back inside the tolerance, so the number is shown neither to hold nor to have departed.
    outcome = _outcome(repo, [225.0, 228.0])
    v = outcome.verdict
    assert v.outcome == "regression" and v.ci_low < -v.bar.min_effect < v.ci_high
    assert outcome.outcome == "inconclusive" and "crosses the edge of the ±25% tolerance" in outcome.reason
    assert reproduce.describe(outcome) == f"tps_c4: inconclusive: {outcome.reason}"


def test_reproduction_outcomes_fold_onto_the_release(repo):
    entry = publish_v1(repo)
    ledger = Ledger.open(repo)
    ledger.append("reproduction", {"target": entry["id"], "outcome": "reproduced"}, writer="box", git=None)
    assert catalog.find(Ledger.open(repo), "tiny-cpu@v1").status == "reproduced"


def test_reproduce_check_through_the_cli_names_what_is_not_met(repo):
    from click.testing import CliRunner

    from recipe_ledger.cli import main

    publish_v1(repo)
    ok = CliRunner().invoke(main, ["reproduce", "tiny-cpu@v1", "--check", "--root", str(repo)])
    assert ok.exit_code == 0 and "every pin of tiny-cpu@v1 is met" in ok.output and "lane:lane" in ok.output
    (repo / "scripts" / "gen.py").write_text("print('dirty')\n")
    (repo / ".cache" / "m" / "config.json").write_text("{}\n")
    bad = CliRunner().invoke(main, ["reproduce", "tiny-cpu@v1", "--check", "--root", str(repo)])
    assert bad.exit_code == 3
    assert "model directory .cache/m changed since publishing" in bad.output
    assert "script scripts/gen.py changed since publishing" in bad.output


def test_a_reproduction_entry_records_the_outcome_effects_and_refs(repo):
    from types import SimpleNamespace

    release = publish_v1(repo)
    ledger = Ledger.open(repo)
    plan = reproduce.plan_reproduction(ledger, repo, "tiny-cpu@v1")
    (target,) = plan.targets
    records = [
        PointRecord("lane", r + 1, 4, "bench", "v", r, {"output_tps_total": v})
        for r, v in enumerate([304.0, 309.0])
    ]
    outcome = reproduce.decide(ledger, target, target.numbers[0], records)
    run_dir = repo / "runs" / "rp-run"
    run_dir.mkdir()
    (run_dir / "measurements.jsonl").write_text(records[0].to_json() + "\n")
    ctx = SimpleNamespace(run_id="rp-run", run_dir=run_dir, host={"hostname": "box"})
    entry = reproduce.record(ledger, plan, [outcome], [ctx], "box")
    p = entry["payload"]
    assert p["target"] == release["id"] and p["outcome"] == "reproduced"
    assert p["rule"] == reproduce.RULE and p["schema_version"] == current_version("reproduction")
    assert reproduce.describe(outcome) in p["text"]  # each number's line, reason and all
    assert set(p["metrics"]) >= {
        "tps_c4.published",
        "tps_c4.reproduced",
        "tps_c4.effect",
        "tps_c4.ci_low",
        "tps_c4.ci_high",
        "tps_c4.tolerance",
    }
    assert p["artifacts"] and p["origin"] == {"how": "measured", "source": "rp-run"}
    rels = {(r["rel"], r["id"]) for r in entry["refs"]}
    assert ("reproduces", release["id"]) in rels and ("see", target.result["id"]) in rels
    assert ("evidence", target.record.calibration) in rels
    assert entry["git"]["scripts"]["scripts/gen.py"] == release["payload"]["script_pins"]["scripts/gen.py"]
    assert catalog.find(Ledger.open(repo), "tiny-cpu@v1").status == "reproduced"


def test_rerun_launches_each_release_arm_the_requested_number_of_times(repo, monkeypatch):
    publish_v1(repo)
    ledger = Ledger.open(repo)
    (target,) = reproduce.plan_reproduction(ledger, repo, "tiny-cpu@v1").targets
    launches = []

    def fake_launch(launch):
        launches.append((launch.arm.name, launch.repeat, launch.tag))
        assert launch.plan is target.plan and launch.run_dir == run_dir and launch.run_id == "rp"
        return [
            PointRecord(
                launch.arm.name, launch.repeat, 4, "bench", "v", launch.repeat, {"output_tps_total": 300.0}
            )
        ]

    monkeypatch.setattr(reproduce.measure, "measure_launch", fake_launch)
    run_dir = repo / "runs" / "rp"
    run_dir.mkdir(parents=True)
    ctx = runner.RunContext(target.plan, ledger, "box", repo, "rp", run_dir, None, {}, events.ignore)
    records = reproduce.rerun(ctx, target, 3)
    assert launches == [("lane", 1, reproduce.TAG), ("lane", 2, reproduce.TAG), ("lane", 3, reproduce.TAG)]
    assert len(records) == 3 and len(runs.read_records(run_dir / "measurements.jsonl").records) == 3


def test_a_failed_rerun_records_a_failure_and_raises_it_with_the_entry(repo, monkeypatch):
    publish_v1(repo)
    ledger = Ledger.open(repo)
    (target,) = reproduce.plan_reproduction(ledger, repo, "tiny-cpu@v1").targets

    def broken_launch(launch):
        raise InstrumentError("the bench client exited 1", where="vllm bench serve")

    monkeypatch.setattr(reproduce.measure, "measure_launch", broken_launch)
    ctx = runner.start_context(target.plan, ledger, "box", repo, repo / "runs", None, events.ignore)
    with pytest.raises(RunFailed) as failed:
        reproduce.rerun(ctx, target, 2)
    entry = failed.value.entry
    assert failed.value.exit_code == 5 and entry["id"][:12] in str(failed.value)
    assert entry["kind"] == "failure" and entry["payload"]["conditions"]["stage"] == "reproduction"
    assert entry["payload"]["cause_class"] == "crash" and "bench client" in entry["payload"]["cause"]
    assert Ledger.open(repo).entries()[-1]["id"] == entry["id"]


def test_a_dirty_tree_refuses_the_reproduction_before_any_launch(repo):
    publish_v1(repo)
    (repo / "recipes" / "models" / ".keep").write_text("edited\n")
    with pytest.raises(StateError, match=r"recipes/models/\.keep.*--allow-dirty"):
        reproduce.reproduce(Ledger.open(repo), repo, "tiny-cpu@v1", writer="box")
    assert [e["kind"] for e in Ledger.open(repo).entries()][-1] == "release"


def test_a_reproduction_needs_two_launches_per_arm(repo):
    from click.testing import CliRunner

    from recipe_ledger.cli import main

    publish_v1(repo)
    refused = CliRunner().invoke(main, ["reproduce", "tiny-cpu@v1", "--repeats", "1", "--root", str(repo)])
    assert refused.exit_code == 2 and "--repeats" in refused.output
    with pytest.raises(InputError, match="at least 2 launches"):
        reproduce.reproduce(Ledger.open(repo), repo, "tiny-cpu@v1", writer="box", repeats=1)
