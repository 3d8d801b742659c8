"""The task-accuracy instrument running lm-eval for real (the eval venv's lm-eval 0.4.13 through
scripts/lm_eval_local.py), against the stand-in server (fast: a fixed answer, then a server whose
every completion fails, then ``ledger run`` end to end with a quality bar on eval_accuracy) and
against the tiny model on vLLM's CPU build (completions, then chat completions with the server's
template). A few documents per task: lm-eval's start and CI time,
not coverage; the tiny random model answers nothing right, which is an accuracy like any other.

Needs ``./dev serve-setup``: ``require("lm_eval")``, and ``require("vllm")`` for the real server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from recipe_ledger.instruments import lm_eval
from recipe_ledger.instruments.base import InstrumentError, MeasureContext, Measurement, sha256_file
from recipe_ledger.launch.process import ProcessLauncher

from helpers.net import free_port
from helpers.pipeline import commit, ledger, stand_in_repo, write_committed
from helpers.resources import REPO, require
from helpers.servers import tiny_vllm_spec
from helpers.waiting import wait_for

pytestmark = pytest.mark.slow

FAKE_SERVER = REPO / "tests" / "helpers" / "fake_server.py"
# Right for the first document of each shipped task (and the second of rl_reasoning_budget).
ANSWER = ' {"name": "get_weather", "arguments": {"city": "Paris"}} 157 5'
RIGHT = {"rl_arith/0", "rl_toolcall_format/0", "rl_reasoning_budget/0", "rl_reasoning_budget/1"}


@contextmanager
def stand_in(tmp_path: Path, *flags: str) -> Iterator[str]:
    """tests/helpers/fake_server.py answering /v1/completions, as its own process."""
    port = free_port()
    log = (tmp_path / f"fake-{port}.log").open("w")
    argv = [sys.executable, str(FAKE_SERVER), "--port", str(port), "--completions", *flags]
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for(lambda: "startup complete" in (tmp_path / f"fake-{port}.log").read_text(), 30)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


def measure(raw: Path, base_url: str, options: dict, arm: str = "control", point: int = 1) -> Measurement:
    ctx = MeasureContext(arm, point, 1, 1001, raw, base_url, "tiny", reference="control-p1-r1")
    return lm_eval.measure(lm_eval.find_client(REPO), options, ctx, env=dict(os.environ), repo=REPO)


def test_against_a_fixed_answer_each_document_is_an_item_and_the_reference_keeps_its_own(tmp_path):
    require("lm_eval")
    with stand_in(tmp_path, "--completion-text", ANSWER) as url:
        measured = measure(tmp_path / "raw", url, {"limit": 3})
    items = measured.items["eval_accuracy"]
    assert measured.context.stem == measured.context.reference  # the control's first launch
    assert {item for item, value in items.items() if value == 1.0} == RIGHT and len(items) == 9
    assert measured.metrics["eval_accuracy"] == pytest.approx(4 / 9)
    assert measured.metrics["eval_accuracy_low"] < 4 / 9 < measured.metrics["eval_accuracy_high"]
    assert measured.instrument_version.startswith("lm-eval 0.4.13 tasks:")
    assert measured.raw_path.name.startswith("results_") and measured.raw_sha256 == sha256_file(
        measured.raw_path
    )
    config = json.loads(measured.raw_path.read_text())["config"]["model_args"]
    assert config["tokenized_requests"] is False and config["tokenizer_backend"] == "none"


def test_a_server_whose_completions_fail_fails_the_point_with_lm_eval_s_own_words(tmp_path):
    require("lm_eval")
    with stand_in(tmp_path, "--fail-completions") as url:
        with pytest.raises(InstrumentError, match=r"lm_eval exited with 1: .*500") as caught:
            measure(tmp_path / "raw", url, {"limit": 1, "tasks": ["rl_arith"]})
    assert "Internal Server Error" in caught.value.output_tail
    assert not list((tmp_path / "raw").glob("*.lm_eval/*/results_*.json"))  # nothing to read as a number


def accuracy_experiment(port: int) -> str:
    """A faster candidate that answers every document wrong: its speed win must not be published."""
    server = [sys.executable, str(FAKE_SERVER), "--prefix-cache", "--completions"]
    probe = [sys.executable, "scripts/probe.py", "{arm}", "{point}", "{repeat}", "{base_url}"]
    return json.dumps(
        {
            "name": "accuracy-wiring",
            "hypothesis": "the fast arm is faster and answers worse",
            "box": "cpu-only",
            "engine": "none",
            "server": {"launcher": "process", "port": port, "health_timeout_s": 30},
            "control": {"argv": [*server, "--completion-text", ANSWER]},
            "candidates": {"fast": {"argv": [*server, "--completion-text", " no idea"]}},
            "instruments": [
                {"name": "probe", "kind": "command", "command": probe},
                {"name": "accuracy", "kind": "lm_eval", "options": {"limit": 3}},
            ],
            "points": [1],
            "repeats": 2,
            "bars": [
                {"metric": "output_tps_total", "point": 1, "direction": "higher", "min_effect": 0.05},
                {"metric": "eval_accuracy", "instrument": "accuracy", "point": 1, "margin": 0.05},
            ],
            "calibration": {"repeats": 2},
        }
    )


def test_ledger_run_records_every_launch_s_items_and_a_candidate_that_answers_worse_is_no_win(tmp_path):
    require("lm_eval")
    repo = stand_in_repo(tmp_path)
    shutil.copytree(REPO / "evals", repo / "evals")
    shutil.copy(REPO / "scripts" / lm_eval.DRIVER, repo / "scripts")
    commit(repo, "the shipped tasks and the lm_eval client script")
    write_committed(repo, "experiments/x.yaml", accuracy_experiment(free_port()))
    python = str(lm_eval.find_client(REPO).python)
    result = ledger(
        repo, "run", "experiments/x.yaml", "--no-mlflow", env={"RECIPE_LEDGER_EVAL_PYTHON": python}
    )
    (run_dir,) = (repo / "runs").iterdir()
    lines = (run_dir / "measurements.jsonl").read_text().splitlines()[1:]
    measured = {(r["arm"], r["repeat"]): r for r in map(json.loads, lines) if r["instrument"] == "accuracy"}
    assert set(measured) == {("control", 1), ("control", 2), ("fast", 1), ("fast", 2)}
    for (arm, _), record in measured.items():  # the control's first launch keeps its items too
        right = {item for item, value in record["items"]["eval_accuracy"].items() if value == 1.0}
        assert right == (RIGHT if arm == "control" else set()) and len(record["items"]["eval_accuracy"]) == 9
    (entry,) = [e for e in ledger_entries(repo) if e["kind"] == "result"]
    (call,) = entry["payload"]["experiment"]["quality"]
    # 4 of 9 documents lost: worse, but 9 documents cannot show it at the design's error rate.
    assert (call["candidate"], call["outcome"], call["items"]) == ("fast", "not-shown", 9)
    assert call["difference"] == pytest.approx(-4 / 9)
    assert "FASTER, QUALITY NOT SHOWN" in result.stdout  # the speed bar's outcome: never a plain win


def ledger_entries(repo: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted((repo / "ledger").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


@pytest.fixture(scope="module")
def vllm_runs(tmp_path_factory) -> dict[str, Measurement]:
    require("lm_eval")
    require("vllm")
    root = tmp_path_factory.mktemp("lm-eval-vllm")
    with ProcessLauncher().start(tiny_vllm_spec(root, "vllm")) as server:
        return {
            "completions": measure(root / "raw", server.base_url, {"limit": 3}, point=4),
            "chat": measure(root / "raw", server.base_url, {"limit": 2, "model": "local-chat-completions"}),
        }


@pytest.mark.parametrize(("run", "documents"), [("completions", 3), ("chat", 2)])
def test_the_tiny_model_on_vllm_answers_every_document_of_every_task(vllm_runs, run, documents):
    measured = vllm_runs[run]
    print(f"{run}: {measured.wall_s:.1f} s, {measured.facts['eval_accuracy']}")
    expected = {f"{task}/{doc}" for task in lm_eval.SHIPPED_TASKS for doc in range(documents)}
    assert set(measured.items["eval_accuracy"]) == expected
    assert measured.metrics["eval_items"] == len(expected)
    assert 0.0 <= measured.metrics["eval_accuracy"] <= 1.0
    samples = sorted(measured.raw_path.parent.glob("samples_*.jsonl"))
    assert len(samples) == 3 and measured.facts["samples_sha256"].startswith("sha256:")


def test_lm_eval_sent_text_to_the_served_name_at_the_point_s_concurrency(vllm_runs):
    completions = vllm_runs["completions"]
    args = json.loads(completions.raw_path.read_text())["config"]["model_args"]
    assert args["model"] == "tiny" and args["num_concurrent"] == 4
    assert args["base_url"].endswith("/v1/completions")
    chat = json.loads(vllm_runs["chat"].raw_path.read_text())
    assert chat["config"]["model_args"]["base_url"].endswith("/v1/chat/completions")
