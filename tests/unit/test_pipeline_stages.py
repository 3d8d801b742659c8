"""The pipeline's own wiring without launching anything: the clean-tree guard, the failure-recording
contexts and the progress events. Real git repositories in tmp_path, a fake server, no mocks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recipe_ledger.errors import InputError, StateError, Terminated
from recipe_ledger.launch import registry
from recipe_ledger.ledger import gitinfo
from recipe_ledger.ledger.models import Envelope
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.views import allowed_dirty_text
from recipe_ledger.pipeline import events, stages
from recipe_ledger.pipeline import run as runner
from recipe_ledger.pipeline.clean_tree import require_clean_tree
from recipe_ledger.pipeline.failures import (
    RunFailed,
    RunInterrupted,
    SetupFailed,
    recording_failure,
    recording_setup_failure,
)

REPO = Path(__file__).resolve().parents[2]


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture()
def tree(tmp_path) -> Path:
    root = tmp_path / "repo"
    for folder in ("recipes/boxes", "recipes/models", "scripts", "experiments", "src/recipe_ledger", "docs"):
        (root / folder).mkdir(parents=True)
    (root / "recipes" / "boxes" / "cpu-only.yaml").write_bytes(
        (REPO / "recipes" / "boxes" / "cpu-only.yaml").read_bytes()
    )
    (root / "recipes" / "models" / ".keep").write_text("")
    (root / "scripts" / "probe.py").write_text("print(1)\n")
    (root / "src" / "recipe_ledger" / "tool.py").write_text("X = 1\n")
    (root / "experiments" / "x.yaml").write_text(json.dumps(study_spec()))
    (root / ".gitignore").write_text("scratch/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    Ledger.init(root)
    return root


def study_spec() -> dict:
    return {
        "name": "wiring",
        "hypothesis": "h",
        "box": "cpu-only",
        "engine": "none",
        "server": {"needs_server": False},
        "control": {"params": {"p": "a"}},
        "candidates": {"b": {"params": {"p": "b"}}},
        "instruments": [
            {"name": "probe", "kind": "command", "command": [sys.executable, "scripts/probe.py"]}
        ],
        "points": [1, 2],
        "repeats": 2,
        "bars": [{"metric": "m", "point": 1, "direction": "higher", "min_effect": 0.1}],
        "calibration": {"repeats": 2},
    }


# ------------------------------------------------------------------------------ which files differ


def test_an_untouched_tree_has_no_feeding_changes(tree):
    (tree / "docs" / "notes.md").write_text("not an input\n")  # untracked, but outside the inputs
    (tree / "runs").mkdir()
    (tree / "runs" / "r.json").write_text("{}")
    changes = gitinfo.feeding_changes(tree, [tree / "experiments" / "x.yaml"])
    assert changes is not None and not changes.dirty and changes.diff_sha256 is None
    assert changes.commit == git(tree, "rev-parse", "HEAD").strip()


def test_modified_staged_and_untracked_inputs_are_named_and_ignored_files_are_not(tree):
    (tree / "scripts" / "probe.py").write_text("print(2)\n")
    (tree / "recipes" / "new.yaml").write_text("a: 1\n")
    git(tree, "add", "recipes/new.yaml")
    (tree / "src" / "recipe_ledger" / "extra.py").write_text("Y = 2\n")
    (tree / "scratch").mkdir()
    (tree / "scratch" / "ignored.py").write_text("")
    (tree / "experiments" / "x.yaml").write_text("{}")
    changes = gitinfo.feeding_changes(tree, [])  # the experiment is only an input when named
    assert changes.files == ("recipes/new.yaml", "scripts/probe.py", "src/recipe_ledger/extra.py")
    named = gitinfo.feeding_changes(tree, [tree / "experiments" / "x.yaml"])
    assert "experiments/x.yaml" in named.files


def test_the_diff_hash_is_stable_and_follows_the_content(tree):
    probe = tree / "scripts" / "probe.py"
    probe.write_text("print(2)\n")
    (tree / "scripts" / "new.py").write_text("a\n")
    first = gitinfo.feeding_changes(tree).diff_sha256
    assert first == gitinfo.feeding_changes(tree).diff_sha256
    (tree / "scripts" / "new.py").write_text("b\n")  # an untracked file's bytes count too
    second = gitinfo.feeding_changes(tree).diff_sha256
    probe.write_text("print(3)\n")
    assert len({first, second, gitinfo.feeding_changes(tree).diff_sha256}) == 3


def test_a_dirty_input_is_refused_naming_it_and_allow_dirty(tree):
    (tree / "scripts" / "probe.py").write_text("print(2)\n")
    with pytest.raises(StateError) as refused:
        require_clean_tree(tree, [], allow_dirty=False)
    text = refused.value.one_line()
    assert refused.value.exit_code == 3
    assert "1 file that feeds this measurement differs from commit" in text
    assert "scripts/probe.py" in text and "--allow-dirty" in text


def test_an_allowed_dirty_tree_gives_a_stamp_that_says_so_and_validates(tree):
    (tree / "scripts" / "probe.py").write_text("print(2)\n")
    stamp = require_clean_tree(tree, [], allow_dirty=True)
    assert stamp["dirty"] is True and stamp["dirty_files"] == ["scripts/probe.py"]
    assert stamp["diff_sha256"] == gitinfo.feeding_changes(tree).diff_sha256
    assert "DIRTY TREE" in allowed_dirty_text(stamp)
    entry = Ledger.open(tree).append("note", {"text": "n"}, writer="box", git=stamp)
    Envelope.model_validate(entry)  # the envelope model reads the new stamp fields
    assert allowed_dirty_text({"commit": "abc", "dirty": True}) is None  # dirty outside the inputs: no flag


def test_outside_git_the_stated_state_is_recorded_and_nothing_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(gitinfo.SNAPSHOT_ENV, "abc123+dirty")
    (tmp_path / "scripts").mkdir()
    assert require_clean_tree(tmp_path, [], allow_dirty=False) == {"commit": "abc123", "dirty": True}


# ------------------------------------------------------------------------------ recording failures


class FakeServer:
    def __init__(self):
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        registry.unregister(self)


def _context(tree: Path, seen: list) -> runner.RunContext:
    plan = stages.plan_experiment(tree / "experiments" / "x.yaml", tree)
    return runner.start_context(plan, Ledger.open(tree), "box", tree, tree / "runs", None, seen.append)


@pytest.mark.parametrize(
    ("error", "typed", "exit_code", "cause"),
    [
        (KeyboardInterrupt(), RunInterrupted, 130, "interrupted (Ctrl-C)"),
        (Terminated("signal 15"), RunInterrupted, 130, "interrupted (SIGTERM)"),  # the CLI's SIGTERM
        (ValueError("bad number"), RunFailed, 5, "ValueError: bad number"),
        (InputError("no such column", where="bench.json"), RunFailed, 5, "bench.json: no such column"),
    ],
)
def test_a_failing_stage_stops_servers_records_once_and_raises_with_the_entry(
    tree, error, typed, exit_code, cause
):
    seen: list = []
    ctx = _context(tree, seen)
    server = FakeServer()
    registry.register(server)
    with pytest.raises(typed) as raised:
        with recording_failure(ctx, "calibration") as tracker:
            tracker.stage = "measurement"
            raise error
    entry = raised.value.entry
    assert server.stopped and raised.value.exit_code == exit_code
    assert entry["id"][:12] in raised.value.one_line() and raised.value.__cause__ is error
    assert entry["payload"]["conditions"]["stage"] == "measurement"
    assert entry["payload"]["cause"] == f"measurement: {cause}"
    assert [e["id"] for e in Ledger.open(tree).entries()] == [entry["id"]]
    assert any(isinstance(e, events.Notice) and "failure entry" in e.text for e in seen)


def test_a_setup_refusal_keeps_its_exit_code_and_names_the_entry(tree):
    ledger = Ledger.open(tree)
    with pytest.raises(SetupFailed) as raised:
        with recording_setup_failure(ledger, "box", "x", "planning") as setup:
            setup.subject, setup.stage = "wiring", "preflight"
            raise StateError("port 1 is in use", where="127.0.0.1:1", hint="stop it")
    failure = raised.value
    assert failure.exit_code == 3 and failure.where == "127.0.0.1:1" and failure.hint == "stop it"
    assert failure.entry["payload"]["subject"] == "wiring"
    assert failure.entry["payload"]["conditions"]["stage"] == "preflight"
    assert f"failure entry {failure.entry['id'][:12]}" in failure.one_line()


def test_planning_without_a_ledger_records_nothing(tree):
    with pytest.raises(InputError):
        with recording_setup_failure(None, "box", "x", "planning"):
            raise InputError("bad spec")


# ------------------------------------------------------------------------------ the stages


def test_a_dirty_tree_is_refused_before_the_stage_writes_anything(tree):
    (tree / "experiments" / "x.yaml").write_text(json.dumps({**study_spec(), "repeats": 3}))
    with pytest.raises(StateError, match=r"experiments/x\.yaml"):
        stages.run_experiment(tree / "experiments" / "x.yaml", tree, writer="box", events=events.ignore)
    assert Ledger.open(tree).entries() == []


def test_a_planning_failure_is_recorded_under_the_file_name(tree):
    (tree / "experiments" / "broken.yaml").write_text("name: [unclosed\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "broken")
    with pytest.raises(SetupFailed) as raised:
        stages.run_experiment(tree / "experiments" / "broken.yaml", tree, writer="box", events=events.ignore)
    assert raised.value.exit_code == 2
    assert raised.value.entry["payload"]["subject"] == "broken"


def test_a_study_run_reports_typed_progress_and_records_one_result(tree, monkeypatch):
    monkeypatch.chdir(tree)  # the instrument names scripts/ relative to the repository, as `ledger run` does
    (tree / "scripts" / "probe.py").write_text("import json, sys\nprint(json.dumps({'m': 100.0}))\n")
    git(tree, "commit", "-qam", "probe")
    seen: list = []
    outcome = stages.run_experiment(tree / "experiments" / "x.yaml", tree, writer="box", events=seen.append)
    phases = [e for e in seen if isinstance(e, events.PhaseStarted)]
    points = [e for e in seen if isinstance(e, events.PointMeasured)]
    assert [(p.name, p.total_points) for p in phases] == [("calibration", 4), ("measurement", 8)]
    assert len(points) == sum(p.total_points for p in phases)
    assert isinstance(seen[0], events.Planned) and seen[0].plan.experiment.name == "wiring"
    kinds = [e["kind"] for e in Ledger.open(tree).entries()]
    assert kinds == ["calibration", "result"] and outcome.entry["kind"] == "result"
    steps = json.loads((outcome.run_dir / "timings.json").read_text())["steps"]
    assert {"planning", "calibration lookup"} <= set(steps)
    assert steps["client"]["n"] == 12  # 2 A/A + 4 ABBA launches x 2 points, one client call each
    assert {"records", "verdict"} <= set(steps) and "boot" not in steps  # a study launches no server
    assert "timings.json" not in outcome.entry["payload"]["artifacts"]  # not evidence: not pinned
    assert outcome.entry["git"]["dirty"] is False and "diff_sha256" not in outcome.entry["git"]


def test_an_instrument_refused_at_every_calibration_point_is_calibrated_as_refused_and_reused(tree):
    """A flattered harness has no noise to measure; recorded as refused, the next run reuses that
    instead of launching the A/A again to learn the same thing, and the power line says why."""
    from recipe_ledger.pipeline.measure import PointRecord
    from recipe_ledger.pipeline.power import power_lines, power_plans

    ctx = stages._started(
        tree / "experiments" / "x.yaml", tree, "box", stages.RunOptions(), None, events.ignore
    )
    assert runner.existing_calibrations(ctx) == ({}, False)
    refused = [
        PointRecord("control", r, p, "probe", "1", 0, {}, refused="flattered: the cache served 93%")
        for r in (1, 2)
        for p in ctx.plan.experiment.points
    ]
    recorded = runner.record_calibrations(ctx, refused)
    entry = recorded[("probe", "m")]
    assert entry["payload"]["points"] == {}
    assert "flattered" in entry["payload"]["conditions"]["refused.p1"]
    found, complete = runner.existing_calibrations(ctx)
    assert complete and found[("probe", "m")]["id"] == entry["id"]
    (line,) = power_lines(power_plans(ctx.plan, lambda i, m: found.get((i, m))))
    assert "refused every point" in line and "no calibration" not in line


def test_a_metric_missing_without_a_refusal_records_no_calibration(tree):
    from recipe_ledger.pipeline.measure import PointRecord

    ctx = stages._started(
        tree / "experiments" / "x.yaml", tree, "box", stages.RunOptions(), None, events.ignore
    )
    records = [PointRecord("control", r, 1, "probe", "1", 0, {"other": 1.0}) for r in (1, 2)]
    assert runner.record_calibrations(ctx, records) == {}
    assert runner.existing_calibrations(ctx)[1] is False


def test_an_experiment_of_two_instruments_names_each_metric_with_its_instrument(tree, monkeypatch):
    monkeypatch.chdir(tree)
    for name, value in (("probe", 100.0), ("other", 300.0)):  # output_tps_total: one the summary keeps
        numbers = {"m": value, "output_tps_total": value}
        (tree / "scripts" / f"{name}.py").write_text(f"import json\nprint(json.dumps({numbers!r}))\n")
    spec = study_spec()
    spec["instruments"].append(
        {"name": "other", "kind": "command", "command": [sys.executable, "scripts/other.py"]}
    )
    spec["bars"].append(
        {"metric": "m", "instrument": "other", "point": 1, "direction": "higher", "min_effect": 0.1}
    )
    (tree / "experiments" / "x.yaml").write_text(json.dumps(spec))
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "two probes")
    outcome = stages.run_experiment(tree / "experiments" / "x.yaml", tree, writer="box", events=events.ignore)
    medians = outcome.entry["payload"]["metrics"]
    assert medians["control.c1.probe/output_tps_total"] == 100.0
    assert medians["b.c2.other/output_tps_total"] == 300.0
    assert not any(key.endswith(".output_tps_total") for key in medians)  # no median pools the two
    assert [bar.metric for bar in outcome.bars] == ["probe/m", "other/m"]
    assert (
        "b probe/m@1" in outcome.entry["payload"]["text"]
        and "b other/m@1" in outcome.entry["payload"]["text"]
    )


def test_sigterm_takes_the_ctrl_c_path_a_failure_entry_and_exit_130(tree):
    """A CI timeout or `kill` sends SIGTERM: the run stops its work, records why, exits 130; the
    default handler would end the process at once with no entry (and leave a server behind)."""
    import os
    import signal
    import time

    started = tree / "probe-started"
    (tree / "scripts" / "probe.py").write_text(
        f"import pathlib, time\npathlib.Path({str(started)!r}).write_text('1')\ntime.sleep(120)\n"
    )
    git(tree, "commit", "-qam", "a slow probe")
    env = {**os.environ, "RECIPE_LEDGER_WRITER": "box"}
    argv = [
        sys.executable,
        "-m",
        "recipe_ledger.cli",
        "run",
        "experiments/x.yaml",
        "--root",
        str(tree),
        "--no-mlflow",
    ]
    run = subprocess.Popen(
        argv, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 60
    while not started.exists():
        assert run.poll() is None and time.monotonic() < deadline, run.stdout.read() if run.stdout else ""
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    output, _ = run.communicate(timeout=60)
    assert run.returncode == 130, output
    (entry,) = [e for e in Ledger.open(tree).entries() if e["kind"] == "failure"]
    assert entry["payload"]["subject"] == "wiring" and "interrupt" in entry["payload"]["cause"].lower()


def test_arms_measured_at_their_own_points_are_compared_where_both_are(tree, monkeypatch):
    # InferenceX sweeps each configuration over its own concurrencies: the control at 1, 2, 4, the
    # candidate at 2, 4, 8. Each launch measures only its arm's points; the bar on all points decides
    # the two they share, and the progress total counts what is really measured.
    monkeypatch.chdir(tree)
    (tree / "scripts" / "probe.py").write_text(
        "import json, sys\nprint(json.dumps({'m': 100.0 if sys.argv[1] == 'control' else 300.0}))\n"
    )
    spec = study_spec() | {
        "points": [1, 2, 4, 8],
        "control": {"params": {"p": "a"}, "points": [1, 2, 4]},
        "candidates": {"b": {"params": {"p": "b"}, "points": [2, 4, 8]}},
        "bars": [{"metric": "m", "point": "all", "direction": "higher", "min_effect": 0.1}],
    }
    spec["instruments"][0]["command"] = [sys.executable, "scripts/probe.py", "{arm}"]
    (tree / "experiments" / "x.yaml").write_text(json.dumps(spec))
    git(tree, "commit", "-qam", "arms at their own points")
    seen: list = []
    outcome = stages.run_experiment(tree / "experiments" / "x.yaml", tree, writer="box", events=seen.append)
    measured = {(e.arm, e.point) for e in seen if isinstance(e, events.PointMeasured)}
    assert {p for a, p in measured if a == "control"} == {1, 2, 4}
    assert {p for a, p in measured if a == "b"} == {2, 4, 8}
    phases = [e for e in seen if isinstance(e, events.PhaseStarted)]
    # 2 A/A launches x 3 points, then 2 launches per arm: 2 x 3 + 2 x 3
    assert [(p.name, p.total_points) for p in phases] == [("calibration", 6), ("measurement", 12)]
    assert sum(isinstance(e, events.PointMeasured) for e in seen) == 18
    recorded = outcome.entry["payload"]["experiment"]
    assert sorted(b["point"] for b in recorded["bars"]) == [2, 4]
    assert recorded["arms"]["b"]["points"] == [2, 4, 8] and recorded["points"] == [1, 2, 4, 8]


def test_the_plan_says_each_arm_points_and_those_no_bar_compares(tree):
    from recipe_ledger.cli.progress import print_plan

    spec = study_spec() | {
        "points": [1, 2, 4, 8],
        "control": {"params": {"p": "a"}, "points": [1, 2, 4]},
        "candidates": {"b": {"params": {"p": "b"}, "points": [2, 4, 8]}},
        "bars": [{"metric": "m", "point": "all", "direction": "higher", "min_effect": 0.1}],
    }
    (tree / "experiments" / "x.yaml").write_text(json.dumps(spec))
    lines: list[str] = []
    print_plan(stages.plan_experiment(tree / "experiments" / "x.yaml", tree), lines.append)
    assert "    control at points [1, 2, 4] ([1] measured, compared by no bar)" in lines
    assert "    b at points [2, 4, 8] ([8] measured, compared by no bar)" in lines
