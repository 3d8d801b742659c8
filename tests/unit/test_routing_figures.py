"""recipe_ledger.routing: skew figures from per-pass expert-hit counts."""

from __future__ import annotations

import pytest

from recipe_ledger import routing


def one_hot(experts: int, chosen: list[int]) -> list[int]:
    return [1 if e in chosen else 0 for e in range(experts)]


def test_uniform_hits_have_no_skew():
    hits = [10] * 8
    assert routing.gini(hits) == pytest.approx(0.0)
    assert routing.normalized_entropy(hits) == pytest.approx(1.0)
    assert routing.hit_share_on_top(hits, 0.5) == pytest.approx(0.5)


def test_one_expert_taking_everything_is_maximal_skew():
    hits = [0, 0, 0, 40]
    assert routing.gini(hits) == pytest.approx(0.75)  # (n - 1) / n for n = 4
    assert routing.normalized_entropy(hits) == pytest.approx(0.0)
    assert routing.hit_share_on_top(hits, 0.25) == pytest.approx(1.0)


def test_hit_share_interpolates_between_whole_experts():
    hits = [6, 3, 1, 0]  # ranked: 60%, 30%, 10%, 0%
    assert routing.hit_share_on_top(hits, 0.5) == pytest.approx(0.9)
    assert routing.hit_share_on_top(hits, 0.375) == pytest.approx(0.75)  # halfway into the 2nd expert
    curve = routing.cumulative_curve(hits)
    assert curve[0] == (0.0, 0.0) and curve[-1] == (1.0, 1.0)


def test_window_multiplier_counts_distinct_experts_of_consecutive_decode_tokens():
    # One layer, 8 experts, top-2. A prefill pass (4 tokens) then four decode passes.
    prefill = [[2, 2, 2, 2, 0, 0, 0, 0]]
    decode = [[one_hot(8, [0, 1])], [one_hot(8, [0, 1])], [one_hot(8, [2, 3])], [one_hot(8, [0, 4])]]
    counts = [prefill, *decode]
    runs = routing.decode_runs(counts, topk=2)
    assert len(runs[0]) == 1 and len(runs[0][0]) == 4
    # Windows of 2: {0,1}, {0,1,2,3}, {0,2,3,4}: 2, 4, 4 experts over top-2 -> (1 + 2 + 2) / 3.
    assert routing.window_multiplier(runs, 2, 2) == pytest.approx(5 / 3)
    assert routing.window_multiplier(runs, 5, 2) is None


def test_a_prefill_pass_ends_a_window():
    a, b = [one_hot(4, [0, 1])], [one_hot(4, [2, 3])]
    counts = [a, [[1, 1, 1, 1]], b]  # decode, prefill of 2 tokens, decode
    runs = routing.decode_runs(counts, topk=2)
    assert [len(r) for r in runs[0]] == [1, 1]
    assert routing.window_multiplier(runs, 2, 2) is None


def test_figures_name_every_metric():
    counts = [[one_hot(16, [e % 16, (e + 1) % 16]), one_hot(16, [0, 1])] for e in range(10)]
    figures = routing.routing_figures(counts, topk=2)
    assert figures["routing_hits"] == 40 and figures["routing_layers"] == 2
    assert {"routing_hit_share_top25", "routing_hit_share_top50", "routing_hit_share_top73"} <= set(figures)
    # Layer 1 always routes to experts 0 and 1: a window never grows there; layer 0 always moves on.
    assert figures["routing_window_multiplier_k2"] == pytest.approx((1.5 + 1.0) / 2)
    assert 0 < figures["routing_gini"] < 1


def test_no_hits_give_no_figures():
    assert routing.routing_figures([], topk=2) == {}
    assert routing.routing_figures([[[0, 0, 0]]], topk=2) == {}


def test_the_probe_refuses_a_dense_model_before_any_request(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    dense = tmp_path / "dense"
    dense.mkdir()
    (dense / "config.json").write_text(json.dumps({"model_type": "qwen2", "num_hidden_layers": 2}))
    probe = Path(__file__).resolve().parents[2] / "scripts" / "routing_probe.py"
    result = subprocess.run(
        [
            sys.executable,
            str(probe),
            "--url",
            "http://127.0.0.1:9",
            "--recorder-dir",
            str(tmp_path / "d"),
            "--model-dir",
            str(dense),
            "--out",
            str(tmp_path / "out.json"),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "is not a MoE model" in result.stderr
    assert not (tmp_path / "out.json").exists()


def _probe_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "routing_probe.py"
    spec = importlib.util.spec_from_file_location("routing_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_vllms_routed_experts_array_becomes_one_pass_per_token():
    import base64
    import io

    numpy = pytest.importorskip("numpy")
    probe = _probe_module()
    # Three tokens, two layers, top-2 over 4 experts: the [tokens, layers, k] array vLLM returns.
    routed = numpy.array([[[0, 1], [2, 3]], [[0, 2], [2, 3]], [[1, 3], [2, 3]]], dtype=numpy.uint8)
    buffer = io.BytesIO()
    numpy.save(buffer, routed, allow_pickle=False)
    decoded = probe.decode_routed_experts(base64.b64encode(buffer.getvalue()).decode())
    passes = probe.token_passes(decoded, experts=4)
    assert passes[0] == [[1, 1, 0, 0], [0, 0, 1, 1]]
    figures = routing.routing_figures(passes, topk=2)
    # Layer 1 never changes experts (x1); layer 0 touches 3 then 4 distinct over windows of 2: (1.5 + 2) / 2.
    assert figures["routing_window_multiplier_k2"] == pytest.approx((1.0 + 1.0 + 1.5 + 2.0) / 4)
