"""recipe_ledger.profile_summary: time shares by category from hand-made trace events."""

from __future__ import annotations

import pytest

from recipe_ledger import profile_summary as ps


def op(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur}


def test_names_map_to_categories_and_unknown_names_to_none():
    assert ps.category_of("_C::cpu_attention_with_kv_cache") == "attention"
    assert ps.category_of("vllm::fused_moe") == "moe"
    assert ps.category_of("_C::onednn_mm") == "gemm"
    assert ps.category_of("aten::addmm") == "gemm"
    assert ps.category_of("nccl:all_reduce") == "communication"
    assert ps.category_of("_C::greedy_argmax") == "sampling"
    assert ps.category_of("aten::view") is None
    # MoE and collectives win over the matmul they run.
    assert ps.category_of("fused_moe_gemm") == "moe"
    assert ps.category_of("all_reduce_mm") == "communication"


def test_self_time_subtracts_children_so_nesting_is_counted_once():
    events = [
        op("layer", 0, 100),  # no category: 100 - 30 - 20 = 50 of its own, "other"
        op("aten::mm", 10, 30),
        op("_C::cpu_attention_with_kv_cache", 50, 20),
    ]
    summary = ps.summarize(events, window_us=100)
    assert summary.busy_us == pytest.approx({"other": 50, "gemm": 30, "attention": 20})
    assert summary.shares["idle"] == pytest.approx(0.0)


def test_an_uncategorised_child_inherits_its_nearest_categorised_ancestor():
    events = [
        op("Qwen2Attention", 0, 100),
        op("aten::add", 10, 40),  # inherits attention
        op("aten::view", 20, 10),  # grandchild: still attention
        op("aten::linear", 60, 30),  # has its own category
    ]
    busy = ps.summarize(events, window_us=100).busy_us
    assert busy == pytest.approx({"attention": 30 + 30 + 10, "gemm": 30})


def test_idle_is_the_window_minus_busy_time_on_the_forward_thread():
    events = [op("aten::mm", 0, 30), op("aten::mm", 50, 10), op("aten::view", 0, 5, tid=2)]
    summary = ps.summarize(events, window_us=200)
    assert summary.thread == (7, 1)  # the busiest thread; thread 2's time is not added
    shares = summary.shares
    assert shares["gemm"] == pytest.approx(0.2)
    assert shares["idle"] == pytest.approx(0.8)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert set(shares) == set(ps.CATEGORIES)


def test_the_window_defaults_to_the_profilers_own_span_and_ignores_python_frames():
    events = [
        op("PyTorch Profiler (0)", 0, 1000, tid=0, cat="Trace"),
        op("vllm/v1/engine/core.py(900): run_busy_loop", 0, 1000, cat="python_function"),
        op("aten::mm", 100, 250),
    ]
    summary = ps.summarize(events)
    assert summary.window_us == 1000
    assert summary.shares["gemm"] == pytest.approx(0.25)
    assert summary.shares["idle"] == pytest.approx(0.75)


def test_without_a_profiler_span_the_window_is_the_extent_of_the_events():
    events = [op("aten::mm", 100, 50), op("aten::view", 250, 50)]
    summary = ps.summarize(events)
    assert summary.window_us == 200
    assert summary.shares["idle"] == pytest.approx(0.5)


def test_a_child_sticking_out_of_its_parent_is_clipped_to_the_parents_end():
    events = [op("aten::linear", 0, 50), op("aten::add", 40, 30)]  # overlaps the end by 20
    busy = ps.summarize(events, window_us=100).busy_us
    assert busy == pytest.approx({"gemm": 50})  # add's 10 in-parent us are gemm; the rest is dropped


def test_a_window_shorter_than_the_busy_time_still_gives_shares_summing_to_one():
    shares = ps.summarize([op("aten::mm", 0, 100)], window_us=80).shares
    assert shares["gemm"] == pytest.approx(1.0) and shares["idle"] == pytest.approx(0.0)


def test_non_complete_and_malformed_events_carry_no_time():
    events = [
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1},
        {"ph": "i", "name": "marker", "pid": 7, "tid": 1, "ts": 5},
        {"ph": "X", "name": "no timestamp", "pid": 7, "tid": 1, "dur": 10},
        {"ph": "X", "name": "aten::mm", "pid": 7, "tid": 1, "ts": "bad", "dur": 10},
        op("aten::mm", 0, 0),
    ]
    summary = ps.summarize(events, window_us=10)
    assert summary.busy_us == {} and summary.thread is None
    assert summary.shares["idle"] == pytest.approx(1.0)


def test_an_empty_trace_has_all_zero_shares_and_a_zero_window():
    summary = ps.summarize([])
    assert summary.window_us == 0
    assert set(summary.shares.values()) == {0.0}


def test_trace_events_reads_both_chrome_trace_shapes():
    events = [op("aten::mm", 0, 1)]
    assert ps.trace_events({"traceEvents": events, "schemaVersion": 1}) == events
    assert ps.trace_events(events) == events
    assert ps.trace_events({"other": 1}) == []


def test_metrics_name_every_category_and_the_window_in_seconds():
    metrics = ps.profile_metrics(ps.summarize([op("_C::greedy_argmax", 0, 500_000)], window_us=2_000_000))
    assert metrics["profile_window_s"] == pytest.approx(2.0)
    assert metrics["profile_share_sampling"] == pytest.approx(0.25)
    assert {f"profile_share_{c}" for c in ps.CATEGORIES} <= set(metrics)
    assert sum(v for k, v in metrics.items() if k.startswith("profile_share_")) == pytest.approx(1.0)
