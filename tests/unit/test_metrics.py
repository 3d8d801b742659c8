"""The metric table: names, units, directions, formats, and the fallback for names it lacks."""

from __future__ import annotations

import pytest

from recipe_ledger import metrics
from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.instruments import server_metrics, vllm_bench
from recipe_ledger.pipeline.measure import PointRecord
from recipe_ledger.pipeline.run import summary_metrics
from recipe_ledger.releases import reproduce


def test_every_metric_in_the_table_is_described_completely():
    for name, metric in metrics.METRICS.items():
        assert metric.name == name and metric.known
        assert metric.unit and metric.label and metric.description, name
        assert metric.direction in ("higher", "lower", None)
        assert metric.sources, f"{name}: no engine says where it comes from"


def test_the_lists_name_only_metrics_in_the_table():
    assert set(metrics.SUMMARY_METRICS) <= set(metrics.METRICS)
    # The server's own counters are charted under the runner's name for them (server.<metric>).
    assert all(metrics.lookup(m).known for m in metrics.CHART_METRICS)
    assert not metrics.lookup("server.no_such_counter").known


def test_what_vllm_bench_serve_reports_is_in_the_table():
    raw = {
        "output_throughput": 10.0,
        "total_token_throughput": 30.0,
        "request_throughput": 1.0,
        "completed": 8,
        "failed": 0,
        "duration": 8.0,
    }
    for stat in ("median", "mean", "p90", "p99"):
        raw.update({f"{stat}_{lat}_ms": 5.0 for lat in ("ttft", "tpot", "itl", "e2el")})
    normalized = vllm_bench.normalize(raw)
    assert normalized and set(normalized) <= set(metrics.METRICS)


def test_what_the_server_counters_give_is_in_the_table():
    before = {name: 0.0 for name in ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")}
    after = {"vllm:prefix_cache_hits_total": 5.0, "vllm:prefix_cache_queries_total": 10.0}
    derived = server_metrics.derive(before, after, VLLM)
    assert derived and set(derived) <= set(metrics.METRICS)


@pytest.mark.parametrize(
    ("name", "unit", "direction"),
    [
        ("moe_step_ms_p90_b8", "ms", "lower"),
        ("step_ms", "ms", "lower"),
        ("effective_gbps_b4", "GB/s", "higher"),
        ("link_gbps", "GB/s", "higher"),
        ("prefill_tps", "tok/s", "higher"),
        ("decode_tps_per_user", "tok/s", "higher"),
        ("routing_skew", "", None),
        ("msgs_sent", "", None),  # "ms" inside a word is not milliseconds
        ("items_ms", "ms", "lower"),
    ],
)
def test_a_name_the_table_lacks_is_described_by_its_name(name, unit, direction):
    metric = metrics.lookup(name)
    assert (metric.unit, metric.direction, metric.known) == (unit, direction, False)
    assert metrics.direction(name) == direction and metrics.unit(name) == unit


def test_a_server_counter_in_a_summary_reads_as_its_metric():
    metric = metrics.lookup("server.spec_accept_len")
    base = metrics.METRICS["spec_accept_len"]
    assert (metric.name, metric.unit, metric.direction) == (
        "server.spec_accept_len",
        base.unit,
        base.direction,
    )


def test_format_puts_the_unit_and_the_metrics_precision():
    assert metrics.format_value("output_tps_total", 137.32206) == "137.32 tok/s"
    assert metrics.format_value("ttft_ms_p50", 1234.5) == "1,234.50 ms"
    assert metrics.format_value("completed", 32.0) == "32 requests"
    assert metrics.format_value("routing_skew", 1.23456) == "1.235"
    assert metrics.format_value("ttft_ms_p50", None) == "" and metrics.format_value("x", float("nan")) == ""


@pytest.mark.parametrize(
    ("effect", "text"),
    [(0.031, "+3.1%"), (-0.1234, "-12.3%"), (0.0, "+0.0%"), (None, ""), (float("inf"), "")],
)
def test_format_effect_is_a_signed_percentage(effect, text):
    assert metrics.format_effect(effect) == text


def test_headline_keeps_the_preferred_order_or_falls_back_to_sorted_names():
    assert metrics.headline({"tpot_ms_p50", "zzz", "output_tps_total"}) == ["output_tps_total", "tpot_ms_p50"]
    assert metrics.headline({"e", "d", "c", "b", "a"}) == ["a", "b", "c", "d"]


def test_summary_keys_round_trip():
    key = metrics.summary_key("control", 16, "server.spec_accept_len")
    assert key == "control.c16.server.spec_accept_len"
    assert metrics.parse_summary_key(key) == ("control", 16, "server.spec_accept_len")
    assert metrics.parse_summary_key("output_tps_total") is None


def test_the_runner_summary_keeps_the_table_s_summary_metrics_and_the_server_counters():
    record = PointRecord(
        "control",
        1,
        4,
        "bench",
        "v",
        0,
        {"output_tps_total": 100.0, "e2el_ms_p99": 9.0, "my_study_number": 1.0},
        server={"spec_accept_len": 2.5},
    )
    summary = summary_metrics([record])
    assert summary == {"control.c4.output_tps_total": 100.0, "control.c4.server.spec_accept_len": 2.5}


def test_two_instruments_of_one_experiment_never_share_a_median():
    """tiny-replay measured output_tps_total with the replay and with the bench sweep; one median
    over both was a number neither instrument measured."""
    records = [
        PointRecord(
            "control", r, 2, instrument, "v", 0, {"output_tps_total": value}, server={"spec_accept_len": 2.0}
        )
        for r in (1, 2, 3)
        for instrument, value in (("replay", 200.0 + r), ("bench", 400.0 + r))
    ]
    assert summary_metrics(records)["control.c2.output_tps_total"] == 302.0  # what pooling did
    split = summary_metrics(records, per_instrument=True)
    assert split["control.c2.replay/output_tps_total"] == 202.0
    assert split["control.c2.bench/output_tps_total"] == 402.0
    assert split["control.c2.bench/server.spec_accept_len"] == 2.0
    assert "control.c2.output_tps_total" not in split


def test_an_instrument_s_metric_keeps_the_base_metric_s_unit_direction_and_headline_place():
    metric = metrics.lookup("replay/ttft_ms_p50")
    assert (metric.unit, metric.direction, metric.known) == ("ms", "lower", True)
    assert metric.label == f"{metrics.lookup('ttft_ms_p50').label} (replay)"
    assert metrics.lookup("bench/server.spec_accept_len").unit == metrics.unit("spec_accept_len")
    assert metrics.split_instrument("replay/output_tps_total") == ("replay", "output_tps_total")
    assert metrics.split_instrument("output_tps_total") == (None, "output_tps_total")
    assert metrics.split_instrument("/x") == (None, "/x")
    chosen = metrics.headline(["replay/output_tps_total", "bench/output_tps_total", "replay/zzz"])
    assert chosen == ["bench/output_tps_total", "replay/output_tps_total"]


def test_reproduce_takes_a_metric_s_direction_from_the_table():
    assert reproduce._direction("ttft_ms_p50") == "lower"
    assert reproduce._direction("output_tps_total") == "higher"
    assert reproduce._direction("failed") == "lower"  # once guessed "higher": no "_ms_" in it
    # Unknown to the table: a label only (a win and a regression both read "not-reproduced").
    assert reproduce._direction("routing_skew") == "higher"
