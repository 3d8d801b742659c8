"""`ledger run` end to end with real processes: a stand-in server and a command instrument.

The stand-in (tests/helpers/pipeline.py: helpers/fake_server.py) boots, answers /health and stops
like a server; the probe script reports a throughput that depends on the arm, so the verdict is
known in advance. These tests check the wiring (calibration, ABBA, verdict, ledger entries,
teardown), not vLLM.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap

import pytest

from helpers.net import free_port, nothing_listens_on
from helpers.pipeline import commit, entries, experiment_yaml, ledger, stand_in_repo, write_committed


@pytest.fixture()
def repo(tmp_path):
    return stand_in_repo(tmp_path)


def test_a_run_calibrates_measures_abba_and_records_a_win(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", experiment_yaml(port, []))
    result = ledger(repo, "run", "experiments/x.yaml", "--no-mlflow")
    assert "running 2 A/A launches" in result.stdout
    assert "WIN" in result.stdout
    kinds = [e["kind"] for e in entries(repo)]
    assert kinds == ["calibration", "result"]
    result_entry = entries(repo)[-1]
    record = result_entry["payload"]["experiment"]
    assert record["schedule"] == ["control#1", "fast#1", "fast#2", "control#2"]
    assert record["calibration_inline"] is True
    (bar,) = record["bars"]
    assert bar["outcome"] == "win" and 0.25 < bar["effect"] < 0.35
    assert result_entry["git"]["scripts"]["scripts/probe.py"]  # the probe's blob hash is pinned
    assert nothing_listens_on(port)
    ledger(repo, "verify")


def test_a_second_run_reuses_the_calibration(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", experiment_yaml(port, []))
    ledger(repo, "run", "experiments/x.yaml", "--no-mlflow")
    second = ledger(repo, "run", "experiments/x.yaml", "--no-mlflow")
    assert "using calibration" in second.stdout
    assert [e["kind"] for e in entries(repo)] == ["calibration", "result", "result"]


def test_a_boot_failure_leaves_a_failure_entry_and_no_process(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", experiment_yaml(port, ["--oom-after", "0"]))
    result = ledger(repo, "run", "experiments/x.yaml", "--no-mlflow", check=False)
    assert result.returncode == 5, result.stdout + result.stderr
    failure = entries(repo)[-1]
    assert failure["kind"] == "failure" and failure["payload"]["cause_class"] == "oom"
    assert "out of memory" in failure["payload"]["log_tail"].lower()
    assert nothing_listens_on(port)


def test_ctrl_c_during_a_sweep_stops_everything_and_is_recorded(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", experiment_yaml(port, []))
    # The probe of the candidate arm sends SIGINT to the runner (its pid handed over in the env),
    # which is what Ctrl-C in the terminal does, at a known moment: in the middle of the sweep. The
    # runner restores Python's own SIGINT handler first, as a terminal would have it: started from a
    # background job of a non-interactive shell, SIGINT arrives ignored and Python keeps it so.
    runner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import os,signal,sys; os.environ['PROBE_INTERRUPT']=str(os.getpid()); "
                "signal.signal(signal.SIGINT, signal.default_int_handler); "
                "from recipe_ledger.cli import main; "
                "sys.argv=['ledger','run','experiments/x.yaml','--no-mlflow']; main()"
            ),
        ],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = runner.communicate(timeout=300)
    assert runner.returncode == 130, out + err
    failure = entries(repo)[-1]
    assert failure["kind"] == "failure" and "interrupted" in failure["payload"]["cause"]
    assert nothing_listens_on(port)
    leftovers = subprocess.run(
        ["pgrep", "-f", f"fake_server.py.*{port}"], capture_output=True, text=True, check=False
    )
    assert leftovers.stdout.strip() == ""


def failure_after(repo, exit_code):
    def check(result):
        assert result.returncode == exit_code, result.stdout + result.stderr
        last = entries(repo)[-1]
        assert last["kind"] == "failure"
        return last

    return check


def test_a_server_that_never_becomes_healthy(repo):
    port = free_port()
    spec = json.loads(experiment_yaml(port, ["--never-healthy"]))
    spec["server"]["health_timeout_s"] = 3
    spec["calibration"] = {"repeats": 2}
    write_committed(
        repo, "experiments/x.yaml", json.dumps(spec).replace('"--prefix-cache"]', '"--never-healthy"]', 1)
    )
    failure = failure_after(repo, 5)(ledger(repo, "run", "experiments/x.yaml", "--no-mlflow", check=False))
    assert failure["payload"]["cause_class"] == "hang"
    assert nothing_listens_on(port)


def test_a_server_that_dies_in_the_middle_of_a_sweep(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", experiment_yaml(port, ["--oom-after", "1.5"]))
    probe = repo / "scripts" / "probe.py"
    probe.write_text(
        probe.read_text().replace(
            "assert urllib", "import time; time.sleep(2.5 if arm == 'fast' else 0)\nassert urllib"
        )
    )
    commit(repo)
    failure = failure_after(repo, 5)(ledger(repo, "run", "experiments/x.yaml", "--no-mlflow", check=False))
    assert failure["payload"]["conditions"]["stage"] == "measurement"
    assert nothing_listens_on(port)


def test_a_port_in_use_is_refused_before_launching_and_recorded(repo):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        write_committed(repo, "experiments/x.yaml", experiment_yaml(port, []))
        result = ledger(repo, "run", "experiments/x.yaml", "--no-mlflow", check=False)
    failure = failure_after(repo, 3)(result)
    assert (
        str(port) in failure["payload"]["cause"] and failure["payload"]["conditions"]["stage"] == "preflight"
    )


def test_an_experiment_naming_a_missing_recipe(repo):
    spec = json.loads(experiment_yaml(free_port(), []))
    spec["control"] = {"recipe": "nobody/missing-model"}
    write_committed(repo, "experiments/x.yaml", json.dumps(spec))
    result = ledger(repo, "run", "experiments/x.yaml", "--no-mlflow", check=False)
    failure = failure_after(repo, 2)(result)
    assert "missing-model" in failure["payload"]["cause"]
    assert len(result.stderr.strip().splitlines()) <= 2 and "Traceback" not in result.stderr


STUDY_PROBE = textwrap.dedent("""\
    import json, sys
    placement, seed = sys.argv[1], int(sys.argv[2])
    step = {"layer_copy": 330.0, "uva": 12.0, "hbm": 1.5}[placement] * (1 + 0.001 * (seed % 3))
    print("allocating...")
    print(json.dumps({"moe_step_ms_b1": step, "h2d_memcpy_gbps": 55.0, "arm": placement}))
    """)


def test_a_study_with_no_server_runs_the_command_instrument_per_arm(repo):
    (repo / "scripts" / "study.py").write_text(STUDY_PROBE)  # committed with the experiment below
    spec = {
        "name": "placement",
        "hypothesis": "reading rows over UVA beats copying the layer",
        "box": "cpu-only",
        "engine": "none",
        "server": {"needs_server": False},
        "control": {"params": {"placement": "layer_copy"}},
        "candidates": {"uva": {"params": {"placement": "uva"}}, "hbm": {"params": {"placement": "hbm"}}},
        "instruments": [
            {
                "name": "bench",
                "kind": "command",
                "command": [sys.executable, "scripts/study.py", "{placement}", "{seed}"],
            }
        ],
        "points": [1],
        "repeats": 2,
        "bars": [{"metric": "moe_step_ms_b1", "point": 1, "direction": "lower", "min_effect": 0.1}],
        "calibration": {"repeats": 2},
    }
    write_committed(repo, "experiments/study.yaml", json.dumps(spec))
    result = ledger(repo, "run", "experiments/study.yaml", "--no-mlflow")
    bars = entries(repo)[-1]["payload"]["experiment"]["bars"]
    assert {(b["candidate"], b["outcome"]) for b in bars} == {("uva", "win"), ("hbm", "win")}
    assert "WIN" in result.stdout


# ------------------------------------------------------------------------------ a clean tree


def test_a_modified_tracked_script_is_refused_naming_the_file_and_allow_dirty(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", experiment_yaml(port, []))
    probe = repo / "scripts" / "probe.py"
    probe.write_text(probe.read_text() + "# tuned\n")
    result = ledger(repo, "run", "experiments/x.yaml", "--no-mlflow", check=False)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "scripts/probe.py" in result.stderr and "--allow-dirty" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert entries(repo) == []  # refused before anything was launched or written
    assert "scripts/probe.py" not in ledger(repo, "run", "experiments/x.yaml", "--plan").stderr


def test_an_allowed_dirty_run_records_the_files_and_the_diff_hash(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", experiment_yaml(port, []))
    probe = repo / "scripts" / "probe.py"
    probe.write_text(probe.read_text() + "# tuned\n")
    (repo / "scripts" / "helper.py").write_text("# new, not yet committed\n")
    result = ledger(repo, "run", "experiments/x.yaml", "--no-mlflow", "--allow-dirty")
    assert "DIRTY TREE" in result.stdout
    written = entries(repo)
    assert [e["kind"] for e in written] == ["calibration", "result"]
    stamps = [e["git"] for e in written]
    assert all(
        s["dirty"] is True and s["dirty_files"] == ["scripts/helper.py", "scripts/probe.py"] for s in stamps
    )
    assert len({s["diff_sha256"] for s in stamps}) == 1 and stamps[0]["diff_sha256"].startswith("sha256:")
    ledger(repo, "verify")


def test_an_untouched_tree_runs_and_records_a_clean_stamp(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", experiment_yaml(port, []))
    (repo / "notes.txt").write_text("not something a measurement reads\n")
    ledger(repo, "run", "experiments/x.yaml", "--no-mlflow")
    stamp = entries(repo)[-1]["git"]
    assert stamp["commit"] and "diff_sha256" not in stamp and "dirty_files" not in stamp
