"""`ledger run` end to end with real processes: a stand-in server and a command instrument.

The stand-in (helpers/fake_server.py) boots, answers /health and stops like a server; the probe
script reports a throughput that depends on the arm, so the verdict is known in advance. These
tests check the wiring (calibration, ABBA, verdict, ledger entries, teardown), not vLLM.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.net import free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
FAKE_SERVER = REPO / "tests" / "integration" / "helpers" / "fake_server.py"

PROBE = textwrap.dedent("""\
    import json, os, signal, sys, urllib.request
    arm, point, repeat, base_url = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    assert urllib.request.urlopen(base_url + "/health").status == 200
    if os.environ.get("PROBE_INTERRUPT") and arm == "fast":
        os.kill(int(os.environ["PROBE_INTERRUPT"]), signal.SIGINT)
    speed = {"control": 100.0, "aa-control": 100.0, "fast": 130.0, "same": 100.2}[arm]
    jitter = 1 + 0.002 * ((repeat * 7 + point) % 3 - 1)   # repeats within 0.4%: a tight instrument
    print(json.dumps({"output_tps_total": speed * point * jitter}))
    """)


def experiment_yaml(port: int, candidate_flags: list[str], name: str = "fast") -> str:
    server = [sys.executable, str(FAKE_SERVER), "--prefix-cache"]
    return json.dumps(
        {
            "name": "wiring",
            "hypothesis": "the fast arm is faster",
            "box": "cpu-only",
            "engine": "none",
            "server": {"launcher": "process", "port": port, "health_timeout_s": 30},
            "control": {"argv": server},
            "candidates": {name: {"argv": server + candidate_flags}},
            "instruments": [
                {
                    "name": "probe",
                    "kind": "command",
                    "command": [
                        sys.executable,
                        "scripts/probe.py",
                        "{arm}",
                        "{point}",
                        "{repeat}",
                        "{base_url}",
                    ],
                }
            ],
            "points": [1, 4],
            "repeats": 2,
            "bars": [{"metric": "output_tps_total", "point": 4, "direction": "higher", "min_effect": 0.05}],
            "calibration": {"repeats": 2},
        }
    )


@pytest.fixture()
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "recipes" / "boxes").mkdir(parents=True)
    (root / "recipes" / "models").mkdir()
    shutil.copy(REPO / "recipes" / "boxes" / "cpu-only.yaml", root / "recipes" / "boxes")
    (root / "scripts").mkdir()
    (root / "scripts" / "probe.py").write_text(PROBE)
    (root / "experiments").mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    commit(root)
    ledger(root, "init")
    return root


def commit(root: Path, message: str = "what the run measures") -> None:
    """Commit everything: `ledger run` refuses a tree whose experiment or scripts differ from HEAD."""
    git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True)


def write_committed(root: Path, path: str, text: str) -> None:
    (root / path).write_text(text)
    commit(root)


def ledger(
    root: Path, *args: str, env: dict | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", *args, "--root", str(root)]
        if args[0] in ("init", "verify")
        else [sys.executable, "-m", "recipe_ledger.cli", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def entries(root: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", "log", "--json", "--root", str(root)],
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


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
    assert port_free(port)
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
    assert port_free(port)


def test_ctrl_c_during_a_sweep_stops_everything_and_is_recorded(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", experiment_yaml(port, []))
    # The probe of the candidate arm sends SIGINT to the runner (its pid handed over in the env),
    # which is what Ctrl-C in the terminal does, at a known moment: in the middle of the sweep.
    runner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import os,sys; os.environ['PROBE_INTERRUPT']=str(os.getpid()); "
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
    assert port_free(port)
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
    assert port_free(port)


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
    assert port_free(port)


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
