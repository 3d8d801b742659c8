"""The answer-agreement instrument against the real servers on the tiny model: vLLM's CPU build and
SGLang's CPU path, each answering the same /v1/completions request with token ids and logprobs.

On each engine a reference is measured and then an A/A measurement against the same server
(sequential, as the reference), and one at concurrency 4 against the sequential reference (batching
is what changes numerics). vLLM is then relaunched in float32 instead of bfloat16, a numerics change
the instrument must see. One server at a time: each fixture boots, measures, stops, and hands the
measurements to the tests. 16 prompts of the shipped set, 8 tokens each: CI time, not coverage.

Needs ``./dev serve-setup``: ``require("vllm")``, ``require("sglang")``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipe_ledger.instruments import agreement
from recipe_ledger.instruments.base import MeasureContext, Measurement
from recipe_ledger.launch.process import ProcessLauncher

from helpers.resources import require
from helpers.servers import tiny_sglang_spec, tiny_vllm_spec

pytestmark = pytest.mark.slow

PROMPTS = 16  # the shipped set's first 16 (its categories interleave), 8 tokens each, top 5
OPTIONS = {"limit": PROMPTS, "max_tokens": 8}


def measure(raw: Path, base_url: str, arm: str, point: int = 1) -> Measurement:
    """One measurement compared with the sequential reference, ``control-p1-r1``."""
    ctx = MeasureContext(arm, point, 1, 1001, raw, base_url, "tiny", reference="control-p1-r1")
    return agreement.measure(OPTIONS, ctx, repo=Path("."))


def reference_and_a_a(raw: Path, base_url: str) -> dict[str, Measurement]:
    return {
        "reference": measure(raw, base_url, "control"),
        "a_a": measure(raw, base_url, "again"),
        "batched": measure(raw, base_url, "batched", point=4),
    }


@pytest.fixture(scope="module")
def vllm_runs(tmp_path_factory) -> dict[str, Measurement]:
    require("vllm")
    root = tmp_path_factory.mktemp("agreement-vllm")
    with ProcessLauncher().start(tiny_vllm_spec(root, "vllm-bfloat16")) as server:
        runs = reference_and_a_a(root / "raw", server.base_url)
    with ProcessLauncher().start(tiny_vllm_spec(root, "vllm-float32", dtype="float32")) as server:
        runs["float32"] = measure(root / "raw", server.base_url, "float32")
    return runs


@pytest.fixture(scope="module")
def sglang_runs(tmp_path_factory) -> dict[str, Measurement]:
    require("sglang")
    root = tmp_path_factory.mktemp("agreement-sglang")
    with ProcessLauncher().start(tiny_sglang_spec(root, "sglang")) as server:
        return reference_and_a_a(root / "raw", server.base_url)


def summary(runs: dict[str, Measurement]) -> str:
    keys = ("answer_match_rate", "top1_agreement", "first_divergence_mean", "kl_per_token_mean")
    shown = (
        f"{name} {m.wall_s:.1f}s " + " ".join(f"{k}={m.metrics[k]:.4g}" for k in keys)
        for name, m in runs.items()
    )
    return "; ".join(shown)


def check_real_answers(runs: dict[str, Measurement]) -> None:
    """The real server's answers have what the instrument reads, one per generated token."""
    reference = runs["reference"]
    assert reference.facts["reference"] == "self" and reference.items == {}
    assert reference.metrics["answers_prompts"] == PROMPTS and reference.metrics["answers_tokens_mean"] > 1
    for answer in json.loads(reference.raw_path.read_text())["answers"]:
        assert len(answer["token_ids"]) == len(answer["token_logprobs"]) == len(answer["top_logprobs"])
        assert all(1 <= len(top) <= 6 for top in answer["top_logprobs"])  # k, or k + 1 with the sampled one
        assert answer["finish_reason"] in ("length", "stop") and answer["prompt_token_ids"]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_reference_and_an_a_a_measurement_on_one_server_agree(engine, request):
    runs = request.getfixturevalue(f"{engine}_runs")
    print(f"{engine}: {summary(runs)}")
    check_real_answers(runs)
    a_a = runs["a_a"]
    assert a_a.facts["reference"] == "control-p1-r1"
    assert set(a_a.items["answer_match_rate"]) == {str(i) for i in range(PROMPTS)}
    # Greedy, the same server, the same requests one at a time: the same answers.
    assert a_a.metrics["answer_match_rate"] == 1.0 and a_a.metrics["kl_per_token_mean"] == pytest.approx(0.0)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_answers_at_concurrency_4_are_compared_with_the_sequential_reference(engine, request):
    batched = request.getfixturevalue(f"{engine}_runs")["batched"]
    assert batched.context.client_concurrency == 4 and batched.facts["reference"] == "control-p1-r1"
    compared = dict(enumerate(json.loads(batched.raw_path.read_text())["comparisons"]))
    assert len(compared) == PROMPTS  # prompt by prompt, the items as the raw file's comparisons say
    assert batched.items["answer_match_rate"] == {str(i): float(c["match"]) for i, c in compared.items()}
    assert batched.items["top1_agreement"] == {str(i): c["top1"] for i, c in compared.items()}


def test_vllm_in_float32_answers_measurably_unlike_bfloat16(vllm_runs):
    changed = vllm_runs["float32"].metrics
    assert changed["kl_per_token_mean"] > 0  # another dtype: other log-probabilities
    assert changed["kl_per_token_mean"] > 100 * max(vllm_runs["a_a"].metrics["kl_per_token_mean"], 1e-9)
