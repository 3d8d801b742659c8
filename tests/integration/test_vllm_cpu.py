"""`ledger run` against the real system under test: vLLM's CPU build serving the tiny model.

Needs the serving venv and the tiny model (scripts/setup_serve_venv.sh, scripts/make_tiny_model.py;
`./dev serve-setup` makes both): ``require("vllm")``, skipped without them unless required (CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.net import free_port, nothing_listens_on
from helpers.pipeline import commit
from helpers.resources import SERVE_VLLM, TINY_MODEL, require

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
VLLM, MODEL = SERVE_VLLM, TINY_MODEL


@pytest.fixture(scope="module", autouse=True)
def serving_environment() -> None:
    require("vllm")


@pytest.fixture()
def repo(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(REPO / "recipes", root / "recipes")
    (root / "experiments").mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    commit(root)
    cli(root, "init", "--root", str(root))
    return root


def cli(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "RECIPE_LEDGER_VLLM": str(VLLM), "VLLM_CACHE_ROOT": str(root / ".vllm-cache")}
    result = subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    if check:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def short_experiment(port: int) -> dict:
    arm = {
        "recipe": "recipe-ledger/tiny-qwen2",
        "model_path": str(MODEL),
        "features": [],
        "overrides": {"env": {"VLLM_SERVER_DEV_MODE": "1"}},
    }
    return {
        "name": "tiny-batching-short",
        "hypothesis": "batching beats one sequence at a time at concurrency 4",
        "box": "cpu-only",
        "server": {"launcher": "process", "port": port, "health_timeout_s": 300},
        "control": arm,
        "candidates": {"single_sequence": {**arm, "features": ["single_sequence"]}},
        "instruments": [
            {
                "name": "bench",
                "kind": "vllm_bench_serve",
                "options": {"num_prompts": 8, "random_input_len": 64, "random_output_len": 32},
            }
        ],
        "points": [4],
        "repeats": 1,
        "bars": [{"metric": "output_tps_total", "point": 4, "direction": "higher", "min_effect": 0.2}],
        "calibration": {"repeats": 2},
    }


def test_a_real_vllm_run_records_numbers_server_counters_and_cleans_up(repo):
    port = free_port()
    (repo / "experiments" / "short.yaml").write_text(json.dumps(short_experiment(port)))
    commit(repo)
    result = cli(repo, "run", "experiments/short.yaml", "--no-mlflow")
    assert "verdicts" in result.stdout
    log = [json.loads(line) for line in cli(repo, "log", "--json", "--root", str(repo)).stdout.splitlines()]
    assert [e["kind"] for e in log] == ["calibration", "result"]
    payload = log[-1]["payload"]
    metrics = payload["metrics"]
    assert metrics["control.c4.output_tps_total"] > 0 and metrics["single_sequence.c4.output_tps_total"] > 0
    # How much faster batching is depends on the machine and its load (one launch a side here):
    # the test checks what was launched and recorded, not a speed ratio.
    arms = payload["experiment"]["arms"]
    assert (
        "--max-num-seqs" in arms["single_sequence"]["argv"]
        and "--max-num-seqs" not in arms["control"]["argv"]
    )
    assert [bar["metric"] for bar in payload["experiment"]["bars"]] == ["output_tps_total"]  # decided
    assert "control.c4.server.prefix_cache_hit_rate" in metrics  # /metrics was read around the point
    assert payload["experiment"]["instruments"]["bench"].startswith("vllm 0.32")
    assert nothing_listens_on(port)  # the port is free again
    leftovers = subprocess.run(
        ["pgrep", "-f", f"vllm serve .*--port {port}"], capture_output=True, text=True, check=False
    )
    assert leftovers.stdout.strip() == ""


def test_a_rejected_flag_is_classified_and_recorded(repo):
    port = free_port()
    spec = short_experiment(port)
    spec["control"]["overrides"]["args"] = ["--no-such-flag-here", "1"]
    (repo / "experiments" / "bad.yaml").write_text(json.dumps(spec))
    commit(repo)
    result = cli(repo, "run", "experiments/bad.yaml", "--no-mlflow", check=False)
    assert result.returncode == 5, result.stdout[-2000:] + result.stderr[-2000:]
    log = [json.loads(line) for line in cli(repo, "log", "--json", "--root", str(repo)).stdout.splitlines()]
    assert log[-1]["kind"] == "failure" and log[-1]["payload"]["cause_class"] == "config"
