"""`ledger run` across engines with stand-ins: a vLLM-mode control against an SGLang-mode candidate
(tests/helpers/fake_server.py), one command instrument for both. Checks the wiring: the engine per
arm and the client per bar in the record, SGLang's readiness and flush in a real run, and the
failure entry when an SGLang server answers /health but cannot generate."""

from __future__ import annotations

import json

import pytest

from helpers.net import free_port, nothing_listens_on
from helpers.pipeline import entries, experiment_yaml, ledger, stand_in_repo, write_committed


@pytest.fixture()
def repo(tmp_path):
    return stand_in_repo(tmp_path)


def cross_engine_yaml(port: int, candidate_flags: list[str]) -> str:
    spec = json.loads(experiment_yaml(port, []))
    spec["control"]["engine"] = "vllm"
    spec["candidates"]["fast"] = {
        "engine": "sglang",
        "argv": [*spec["control"]["argv"], "--engine", "sglang", *candidate_flags],
    }
    return json.dumps(spec)


def test_a_cross_engine_run_records_each_arms_engine_and_the_one_client(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", cross_engine_yaml(port, ["--flush-busy", "1"]))
    ledger(repo, "run", "experiments/x.yaml", "--no-mlflow")
    record = entries(repo)[-1]["payload"]["experiment"]
    assert record["arms"]["control"]["engine"] == "vllm" and record["arms"]["fast"]["engine"] == "sglang"
    assert record["arms"]["fast"]["argv"][-1] == "--enable-metrics"  # the planner adds it for SGLang
    version = record["instruments"]["probe"]
    assert version.startswith("command:")
    assert record["clients"] == {"output_tps_total@4": f"{version} (instrument probe)"}
    assert record["bars"][0]["outcome"] == "win"
    log = next((repo / "runs").rglob("server-fast-r1.log")).read_text()
    assert "POST /generate" in log and "Cache flushed successfully!" in log
    assert nothing_listens_on(port)


def test_an_sglang_that_cannot_generate_leaves_a_failure_entry_and_nothing_running(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", cross_engine_yaml(port, ["--fail-generate"]))
    result = ledger(repo, "run", "experiments/x.yaml", "--no-mlflow", check=False)
    assert result.returncode == 5, result.stdout + result.stderr
    failure = entries(repo)[-1]
    assert failure["kind"] == "failure" and "generate_failed" in failure["payload"]["cause"]
    assert failure["payload"]["cause_class"] == "bad-output"  # up on /health, wrong on a real request
    assert nothing_listens_on(port)


def test_a_single_engine_run_records_no_clients(repo):
    port = free_port()
    write_committed(repo, "experiments/x.yaml", experiment_yaml(port, []))
    ledger(repo, "run", "experiments/x.yaml", "--no-mlflow")
    record = entries(repo)[-1]["payload"]["experiment"]
    assert "clients" not in record and "engine" not in record["arms"]["control"]  # engine "none"
