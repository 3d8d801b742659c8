"""The SVG writers: the knee, determinism, escaping, empty data."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from recipe_ledger.site import plots
from recipe_ledger.site.pages.experiments import sweep_series


def test_the_knee_is_the_first_point_reaching_90_percent_of_the_best() -> None:
    assert plots.knee([(1, 10.0), (2, 19.0), (4, 30.0), (8, 34.0), (16, 35.0)]) == (8, 34.0)
    assert plots.knee([(4, 5.0)]) == (4, 5.0)
    assert plots.knee([]) is None


def test_a_sweep_chart_is_valid_svg_with_the_knee_ringed() -> None:
    svg = plots.sweep_chart(
        {"control": [(1, 10.0), (4, 30.0), (16, 35.0)], "candidate": [(1, 12.0), (4, 40.0)]},
        title="output_tps_total",
        y_label="tok/s",
    )
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert svg.count('class="knee"') == 2
    assert svg == plots.sweep_chart(
        {"candidate": [(4, 40.0), (1, 12.0)], "control": [(1, 10.0), (4, 30.0), (16, 35.0)]},
        title="output_tps_total",
        y_label="tok/s",
    )


def test_labels_are_escaped() -> None:
    svg = plots.history_chart(["v1", "<script>v2</script>"], {"a&b": [1.0, 2.0]}, title="<b>lane</b>")
    ET.fromstring(svg)
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_effects_with_their_intervals() -> None:
    bars = [
        {
            "candidate": "uva",
            "metric": "m",
            "point": 1,
            "outcome": "win",
            "effect": -0.5,
            "ci_low": -0.6,
            "ci_high": -0.4,
            "min_effect": 0.2,
        },
        {"candidate": "x", "metric": "m", "point": 1, "outcome": "inconclusive", "effect": None},
    ]
    svg = plots.effects_chart(bars)
    ET.fromstring(svg)
    assert "win -50.0%" in svg and "inconclusive" not in svg
    assert svg.count('stroke="#2ca02c" stroke-width="3"') == 1  # the win's CI line


def test_no_data_still_gives_a_chart() -> None:
    for svg in (
        plots.sweep_chart({}, title="t", y_label="y"),
        plots.history_chart([], {}, title="t"),
        plots.effects_chart([]),
    ):
        assert "no data" in svg
        ET.fromstring(svg)


def test_summary_metrics_become_sweeps_per_arm() -> None:
    series = sweep_series(
        {
            "control.c1.output_tps_total": 10.0,
            "control.c4.output_tps_total": 30.0,
            "cand.c1.output_tps_total": 12.0,
            "cand.c1.server.kv_usage": 0.5,
            "flat": 1.0,
        }
    )
    assert series["output_tps_total"] == {"cand": [(1.0, 12.0)], "control": [(1.0, 10.0), (4.0, 30.0)]}
    assert series["server.kv_usage"] == {"cand": [(1.0, 0.5)]}


def test_skew_curve_runs_from_nothing_to_everything_through_the_measured_shares():
    from recipe_ledger.site import plots

    curves = plots.skew_curves({"control": {25: 0.7, 50: 0.95, 73: 0.99}, "empty": {}})
    assert list(curves) == ["control"]
    assert curves["control"] == [(0.0, 0.0), (25.0, 70.0), (50.0, 95.0), (73.0, 99.0), (100.0, 100.0)]
    svg = plots.skew_chart(curves, title="skew")
    assert "hits (%)" in svg and "experts, hottest first (%)" in svg
    assert "uniform routing" in svg and "73%" in svg
    assert plots.skew_chart({}, title="none").count("no data") == 1
