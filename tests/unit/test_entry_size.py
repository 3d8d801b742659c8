"""The result entry's size is checked before any launch (issue 26, bounds at the door): a spec whose
text could not be recorded is refused at load and at --plan, at the field to shorten, with its size
against the limit; the estimate follows a real recorded run; and `ledger calibrate` given a bad spec
writes no entry (only a launched run's failure is one). Real git repositories in tmp_path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recipe_ledger.errors import InputError, SpecError
from recipe_ledger.experiment import entry_size
from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.ledger import chain
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.pipeline import events, stages
from recipe_ledger.pipeline.failures import SetupFailed
from recipe_ledger.spec.bounds import MAX_ENTRY_BYTES

REPO = Path(__file__).resolve().parents[2]


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
    )


def study_spec(**changes) -> dict:
    spec = {
        "name": "sizes",
        "hypothesis": "h",
        "box": "cpu-only",
        "engine": "none",
        "server": {"needs_server": False},
        "control": {"params": {"p": "a"}},
        "candidates": {"b": {"params": {"p": "b"}}},
        "instruments": [
            {"name": "probe", "kind": "command", "command": [sys.executable, "scripts/probe.py", "{p}"]}
        ],
        "points": [1, 2],
        "repeats": 2,
        "bars": [{"metric": "m", "point": 1, "direction": "higher", "min_effect": 0.1}],
        "calibration": {"repeats": 2},
    }
    return {**spec, **changes}


@pytest.fixture()
def tree(tmp_path) -> Path:
    root = tmp_path / "repo"
    for folder in ("recipes/boxes", "recipes/models", "scripts", "experiments"):
        (root / folder).mkdir(parents=True)
    (root / "recipes" / "boxes" / "cpu-only.yaml").write_bytes(
        (REPO / "recipes" / "boxes" / "cpu-only.yaml").read_bytes()
    )
    (root / "recipes" / "models" / ".keep").write_text("")
    (root / "scripts" / "probe.py").write_text(
        "import json, sys\nprint(json.dumps({'m': 100.0 + (sys.argv[1] == 'b')}))\n"
    )
    (root / "experiments" / "x.yaml").write_text(json.dumps(study_spec(), indent=1))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    Ledger.init(root)
    return root


def write(path: Path, spec: dict) -> Path:
    path.write_text(json.dumps(spec, indent=1))
    return path


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_the_limit_is_the_chains():
    assert chain.MAX_LINE_BYTES == MAX_ENTRY_BYTES == 16 * 1024


def test_a_giant_hypothesis_is_refused_at_load_at_its_line_naming_its_size(tmp_path):
    path = write(tmp_path / "big.yaml", study_spec(hypothesis="x" * 20_000))
    with pytest.raises(SpecError) as raised:
        load_experiment(path)
    error = raised.value
    assert error.where == f"{path}:{line_of(path, 'hypothesis')}"
    assert "hypothesis (20,000 characters) takes 20,002" in error.message
    assert "the limit is 16,384" in error.message and error.hint


def test_non_ascii_text_counts_as_the_ledger_stores_it(tmp_path):
    # 2,500 characters pass the schema's 20,000 and fit as UTF-8; as \\u00e9 escapes they take 15,000.
    path = write(tmp_path / "accents.yaml", study_spec(hypothesis="é" * 2_500))
    with pytest.raises(SpecError, match=r"hypothesis \(2,500 characters\) takes 15,002"):
        load_experiment(path)
    assert load_experiment(write(tmp_path / "fits.yaml", study_spec(hypothesis="é" * 1_000)))


def test_the_field_that_takes_the_most_is_named_even_when_it_is_not_the_hypothesis(tmp_path):
    argv = ["server", *(f"--flag-{n}={'v' * 120}" for n in range(120))]  # each part far under 4,096
    spec = study_spec(
        engine="vllm",
        server={"needs_server": True},
        control={"argv": argv},
        candidates={"b": {"argv": ["server"]}},
        instruments=[{"name": "bench", "kind": "vllm_bench_serve"}],
        bars=[{"metric": "output_tps_total", "point": 1, "direction": "higher", "min_effect": 0.1}],
    )
    path = write(tmp_path / "argv.yaml", spec)
    with pytest.raises(SpecError, match=r"control\.argv \(") as raised:
        load_experiment(path)
    argv_line = line_of(path, '"argv"')
    assert raised.value.where == f"{path}:{argv_line}"


def test_a_name_repeated_in_the_entry_is_counted_each_time(tmp_path):
    experiment = load_experiment(write(tmp_path / "x.yaml", study_spec()))
    name = next(p for p in entry_size.estimate(experiment).parts if p.path == ("name",))
    assert name.times == 5 and name.entry_bytes == 5 * len('"sizes"')


def test_the_estimate_follows_a_recorded_run_and_leaves_headroom(tree, monkeypatch):
    monkeypatch.chdir(tree)  # the instrument names scripts/ relative to the repository
    spec_path = tree / "experiments" / "x.yaml"
    outcome = stages.run_experiment(spec_path, tree, writer="box", events=events.ignore)
    stored = len(chain.encode_line({k: v for k, v in outcome.entry.items() if k != "id"})[1])
    plan = stages.plan_experiment(spec_path, tree)
    estimated = entry_size.estimate(plan.experiment, plan.arms).total
    # Never more than the record (a spec that fits is not refused), and close below it: what a
    # run adds beyond the estimate fits in the headroom the check keeps.
    assert estimated <= stored <= estimated + entry_size.HEADROOM_BYTES


def test_plan_refuses_what_the_resolved_commands_make_too_big(tree, monkeypatch):
    """A study has no command to resolve; the planned arms are what --plan counts, so an arm whose
    planned text is oversized is refused there even when the spec alone fits."""
    experiment = load_experiment(tree / "experiments" / "x.yaml")

    class Planned:
        argv = ["x" * 4_000] * 4
        env: dict[str, str] = {}
        source = "recipe big"
        image = None

    with pytest.raises(SpecError, match=r"control\.argv \(16,000 characters\)") as raised:
        entry_size.refuse_oversized(experiment, lambda path: "plan", {"control": Planned(), "b": Planned()})
    assert raised.value.where == "plan"
    entry_size.refuse_oversized(experiment, lambda path: "plan")  # the spec alone fits


def test_calibrate_with_a_bad_spec_exits_2_and_writes_no_entry(tree):
    broken = tree / "experiments" / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    bomb = write(tree / "experiments" / "bomb.yaml", study_spec(hypothesis="x" * 20_000))
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "bad specs")
    for path in (broken, bomb):
        with pytest.raises(InputError) as raised:
            stages.calibrate_experiment(path, tree, writer="box", events=events.ignore)
        assert raised.value.exit_code == 2 and "failure entry" not in str(raised.value)
    assert Ledger.open(tree).entries() == []


def test_run_with_a_bad_spec_still_records_its_closed_door(tree):
    broken = tree / "experiments" / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "broken")
    with pytest.raises(SetupFailed) as raised:
        stages.run_experiment(broken, tree, writer="box", events=events.ignore)
    assert raised.value.exit_code == 2
    assert [e["kind"] for e in Ledger.open(tree).entries()] == ["failure"]
