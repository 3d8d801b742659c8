"""`ledger run` under the sequential design, through the real CLI against the stand-in server.

The probe's numbers are a function of the arm, the point and the repeat alone, so two runs of one
experiment see the same numbers launch for launch: an interrupted and resumed run must reach the
verdict an uninterrupted one reaches, after the same launches.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from helpers.net import free_port
from helpers.pipeline import entries, experiment_yaml, ledger, stand_in_repo, write_committed

pytestmark = pytest.mark.integration

# The candidate is 7% faster against a 5% bar; the launches scatter by up to 2% (the same for both
# arms of a pair, as they share a repeat number), so the sequence needs a few looks to decide.
PROBE = textwrap.dedent("""\
    import json, math, os, signal, sys
    arm, point, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if os.environ.get("PROBE_TERM_AT") == f"{arm}#{repeat}" and point == 4:
        os.kill(os.getppid(), signal.SIGTERM)  # the ledger process: as a scheduler or `kill` would
    speed = {"control": 100.0, "fast": 107.0}[arm]
    jitter = 1 + 0.02 * (((repeat * 7919 + point * 31) % 13) - 6) / 6
    value = speed * point * jitter
    if os.environ.get("PROBE_BAD_AT") == f"{arm}#{repeat}":
        value = float("nan")
    print(json.dumps({"output_tps_total": value}))
    """)


def sequential_spec(port: int, **design) -> str:
    spec = json.loads(experiment_yaml(port, ["--delay", "0"]))
    del spec["repeats"], spec["calibration"]  # the sequential default
    if design:
        spec["design"] = design
    return json.dumps(spec)


@pytest.fixture()
def repo(tmp_path) -> Path:
    root = stand_in_repo(tmp_path)
    (root / "scripts" / "probe.py").write_text(PROBE)
    write_committed(root, "experiments/x.yaml", sequential_spec(free_port()))
    return root


def results(root: Path) -> list[dict]:
    return [e for e in entries(root) if e["kind"] == "result"]


def the_bar(entry: dict) -> dict:
    (bar,) = entry["payload"]["experiment"]["bars"]
    return bar


def test_a_sequential_run_stops_once_decided_and_says_how_in_the_record(repo):
    result = ledger(repo, "run", "experiments/x.yaml", "--no-mlflow")
    assert "design rl-sequential/1: decided after 10 launches: win" in result.stdout
    (entry,) = results(repo)
    design = entry["payload"]["experiment"]["design"]
    assert design["kind"] == "sequential" and design["stopped"] == "decided"
    assert design["launches"] == 10 and design["looks"] == 4 and design["cap"] == 24
    bar = the_bar(entry)
    assert (bar["outcome"], bar["launches"], bar["stopped"]) == ("win", 10, "decided")
    assert bar["decision"] == "decided after 10 launches: win"
    assert entry["payload"]["text"].endswith("; decided after 10 launches")
    # ABBA over pairs, every launch of pair k being repeat k (the arms share its workload seeds).
    assert entry["payload"]["experiment"]["schedule"][:4] == ["control#1", "fast#1", "fast#2", "control#2"]
    run_dir = repo / "runs" / entry["payload"]["conditions"]["run_id"]
    state = json.loads((run_dir / "sequence.json").read_text())
    assert [look["pairs"] for look in state["bars"][0]["state"]["looks"]] == [2, 3, 4, 5]
    assert "sequence.json" in entry["payload"]["artifacts"]
    # No A/A launched first; the control's launches are recorded as this box's calibration after it.
    kinds = [e["kind"] for e in entries(repo)]
    assert kinds == ["result", "calibration"]
    shown = ledger(repo, "show", entry["id"][:12]).stdout
    assert "rl-sequential/1: decided after 10 launches: win (cap 24 per arm, 4 looks)" in shown


def test_a_run_stopped_by_sigterm_resumes_to_the_verdict_of_an_uninterrupted_run(repo, tmp_path):
    stopped = ledger(
        repo, "run", "experiments/x.yaml", "--no-mlflow", env={"PROBE_TERM_AT": "fast#4"}, check=False
    )
    assert stopped.returncode == 130, stopped.stdout + stopped.stderr
    (failure,) = [e for e in entries(repo) if e["kind"] == "failure"]
    conditions = failure["payload"]["conditions"]
    run_id = conditions["run_id"]
    # The partial state: the launches kept (pair 4's first launch was cut short), the looks made.
    assert conditions["sequence.launches"] == 6 and conditions["sequence.looks"] == 2
    assert conditions["sequence.resume"] == f"ledger run --resume {run_id}"
    assert "interrupted (SIGTERM)" in failure["payload"]["cause"]
    assert conditions["sequence.fast.output_tps_total@4"].startswith("look 2 after 6 launches")
    resumed = ledger(repo, "run", "--resume", run_id, "--no-mlflow")
    assert f"resuming {run_id}: 6 launches and 2 looks kept" in resumed.stdout
    (after,) = results(repo)
    assert after["payload"]["conditions"]["run_id"] == run_id
    assert {"rel": "see", "id": failure["id"]} in after["refs"]
    # The same experiment uninterrupted, in a second repository: the same launches, the same verdict.
    other = stand_in_repo(tmp_path / "other")
    (other / "scripts" / "probe.py").write_text(PROBE)
    write_committed(other, "experiments/x.yaml", sequential_spec(free_port()))
    ledger(other, "run", "experiments/x.yaml", "--no-mlflow")
    (straight,) = results(other)
    for key in ("outcome", "effect", "ci_low", "ci_high", "launches", "looks", "decision"):
        assert the_bar(after)[key] == the_bar(straight)[key], key
    assert after["payload"]["experiment"]["schedule"] == straight["payload"]["experiment"]["schedule"]
    assert after["payload"]["experiment"]["design"]["resumed"] == 1
    # A finished run does not resume again.
    again = ledger(repo, "run", "--resume", run_id, "--no-mlflow", check=False)
    assert again.returncode == 2 and f"run {run_id} is finished" in again.stderr


def test_a_resume_after_the_experiment_changed_is_refused_naming_what_differs(repo):
    stopped = ledger(
        repo, "run", "experiments/x.yaml", "--no-mlflow", env={"PROBE_TERM_AT": "fast#3"}, check=False
    )
    assert stopped.returncode == 130
    run_id = next(e for e in entries(repo) if e["kind"] == "failure")["payload"]["conditions"]["run_id"]
    spec = json.loads((repo / "experiments" / "x.yaml").read_text())
    spec["bars"][0]["min_effect"] = 0.06
    write_committed(repo, "experiments/x.yaml", json.dumps(spec))
    refused = ledger(repo, "run", "--resume", run_id, "--no-mlflow", check=False)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in refused.stderr
    assert f"cannot resume {run_id}" in lines[0]
    assert "the commit differs" in lines[0] and "experiments/x.yaml differs" in lines[0]
    assert len(results(repo)) == 0


def test_a_non_finite_measurement_fails_the_run_naming_the_raw_file_and_is_not_absorbed(repo):
    bad = ledger(
        repo, "run", "experiments/x.yaml", "--no-mlflow", env={"PROBE_BAD_AT": "fast#2"}, check=False
    )
    assert bad.returncode == 5, bad.stdout + bad.stderr
    assert "a measurement must be positive and finite" in bad.stderr
    assert "raw/fast-p4-r2" in bad.stderr and "instrument probe of experiments/x.yaml" in bad.stderr
    (failure,) = [e for e in entries(repo) if e["kind"] == "failure"]
    run_dir = repo / "runs" / failure["payload"]["conditions"]["run_id"]
    state = json.loads((run_dir / "sequence.json").read_text())
    launches = state["bars"][0]["state"]["launches"]
    assert [launch["arm"] for launch in launches] == ["control", "candidate"]  # fast#2 not absorbed


def test_plan_says_the_design_and_a_cap_too_small_to_decide(repo):
    write_committed(repo, "experiments/small.yaml", sequential_spec(free_port(), cap=3))
    planned = ledger(repo, "run", "experiments/small.yaml", "--plan").stdout
    assert "design: rl-sequential/1, a look after every launch pair" in planned
    assert "cap 3 per arm (the experiment's)" in planned
    assert "the cap of 3 launches per arm is below what a decision at the bar needs" in planned
    assert "set the cap to" in planned


def test_samples_inside_a_launch_are_kept_apart_from_launch_to_launch_noise(repo):
    spec = json.loads(sequential_spec(free_port()))
    spec["instruments"][0]["samples_per_launch"] = 2
    write_committed(repo, "experiments/twice.yaml", json.dumps(spec))
    ledger(repo, "run", "experiments/twice.yaml", "--no-mlflow")
    (entry,) = results(repo)
    run_dir = repo / "runs" / entry["payload"]["conditions"]["run_id"]
    assert (run_dir / "raw" / "control-p4-r1.stdout.log").is_file() and (
        run_dir / "raw" / "control-p4-r1-s1.stdout.log"
    ).is_file()
    state = json.loads((run_dir / "sequence.json").read_text())["bars"][0]["state"]
    assert all(len(launch["samples"]) == 2 for launch in state["launches"])
    # Each launch counts once (the same launches decide as with one sample), its spread reported apart.
    assert the_bar(entry)["launches"] == 10
    noise = state["looks"][-1]["noise"]
    assert noise["within_launch_sigma"] is not None and noise["within_launch_sigma"] < noise["sigma"]
