"""`ledger run` with the answer-agreement instrument beside a speed instrument, end to end with real
processes: stand-in servers (helpers/fake_server.py ``--completions``, scripted answers) and the
probe script of tests/helpers/pipeline.py. Checks the wiring the instrument relies on: every
measurement names the control's first launch at its point as its reference (``aa-`` in the A/A
calibration), that launch is measured first and carries no items, the others carry one item per
prompt, and a candidate whose answers diverge is seen in ``measurements.jsonl``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers import FAKE_SERVER
from helpers.net import free_port
from helpers.pipeline import ledger, stand_in_repo, write_committed

PROMPTS = 6


def experiment(port: int) -> str:
    server = [sys.executable, str(FAKE_SERVER), "--prefix-cache", "--completions"]
    probe = [sys.executable, "scripts/probe.py", "{arm}", "{point}", "{repeat}", "{base_url}"]
    return json.dumps(
        {
            "name": "answers-wiring",
            "hypothesis": "the fast arm is faster and answers otherwise",
            "box": "cpu-only",
            "engine": "none",
            "server": {"launcher": "process", "port": port, "health_timeout_s": 30},
            "control": {"argv": server},
            "candidates": {"fast": {"argv": server + ["--diverge-at", "2"]}},
            "instruments": [
                {"name": "probe", "kind": "command", "command": probe},
                {"name": "answers", "kind": "agreement", "options": {"limit": PROMPTS, "max_tokens": 4}},
            ],
            "points": [2],
            "repeats": 2,
            "bars": [{"metric": "output_tps_total", "point": 2, "direction": "higher", "min_effect": 0.05}],
            "calibration": {"repeats": 2},
        }
    )


def records(run_dir: Path, name: str) -> list[dict]:
    lines = (run_dir / name).read_text().splitlines()[1:]  # after the header
    return [r for r in map(json.loads, lines) if r["instrument"] == "answers"]


def test_a_run_compares_every_launch_s_answers_with_the_control_s_first(tmp_path):
    repo = stand_in_repo(tmp_path)
    write_committed(repo, "experiments/x.yaml", experiment(free_port()))
    ledger(repo, "run", "experiments/x.yaml", "--no-mlflow")
    (run_dir,) = (repo / "runs").iterdir()

    calibration = records(run_dir, "calibration.jsonl")
    assert [(r["arm"], r["repeat"], r["facts"]["reference"]) for r in calibration] == [
        ("control", 1, "self"),
        ("control", 2, "aa-control-p2-r1"),
    ]
    measured = {(r["arm"], r["repeat"]): r for r in records(run_dir, "measurements.jsonl")}
    assert (
        measured[("control", 1)]["facts"]["reference"] == "self" and "items" not in measured[("control", 1)]
    )
    again, fast = measured[("control", 2)], measured[("fast", 1)]
    assert again["facts"]["reference"] == "control-p2-r1" and again["metrics"]["answer_match_rate"] == 1.0
    assert fast["metrics"]["answer_match_rate"] == 0.0 and fast["metrics"]["first_divergence_mean"] == 2
    assert fast["items"]["top1_agreement"] == {str(i): 2 / 3 for i in range(PROMPTS)}
    assert fast["instrument_version"].startswith("agreement/1 prompts:")
    # Several instruments: each one's raw files in its own folder, the reference's among them.
    assert fast["raw_file"] == "raw/answers/fast-p2-r1.answers.json"
    assert (run_dir / "raw" / "answers" / "control-p2-r1.answers.json").is_file()
