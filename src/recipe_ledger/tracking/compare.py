"""A result's bars as runs-table columns that line up across entries, and the runs its saved
comparison of control against candidate opens (pure).

MLflow's runs table has one column per metric name in the experiment. Names made of a bar's
candidate, metric and point (``verdict.<candidate>.<metric>.c<point>.effect_pct``) or of an arm
(``<arm>.c<point>.<metric>``) differ from one experiment to the next: hundreds of columns, each
filled on a row or two, and none of the view's columns filled on a parent run. So:

- a result's parent run carries its bars by position, in the order the record lists them:
  ``bar<n>`` (tag: what the bar compares), ``bar<n>.verdict`` (tag) and the metrics
  ``bar<n>.candidate``, ``.control`` (the compared medians), ``.effect_pct``, ``.ci_low_pct``,
  ``.ci_high_pct``, ``.mde_pct``: six metric columns per bar position, whatever the experiment;
- the arms' medians go to summary child runs, one per (arm, point) a bar compares (control and
  the candidate at the bar's point), under the metrics' plain names: the columns the
  measurement children already fill. MLflow's compare view of the control's and the candidates'
  summaries at the first bar's point is the result's saved comparison (``view.compare_url``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from recipe_ledger import metrics as metric_table
from recipe_ledger.experiment.spec import CONTROL_ARM
from recipe_ledger.tracking.runfolder import arm_differences
from recipe_ledger.tracking.runspec import (
    ENTRY_TAG,
    ROLE_TAG,
    RunSpec,
    finite_number,
    key,
    numbers,
)

SUMMARY_ROLE = "summary"  # ledger.role of a summary child run (beside "entry" and "measurement")
BAR_METRICS = ("candidate", "control", "effect_pct", "ci_low_pct", "ci_high_pct", "mde_pct")
_PERCENT = {"effect_pct": "effect", "ci_low_pct": "ci_low", "ci_high_pct": "ci_high", "mde_pct": "mde"}


def bar_name(position: int) -> str:
    """``bar1`` for the record's first bar: the prefix of its columns."""
    return f"bar{position}"


def bar_label(bar: Mapping[str, Any]) -> str:
    """What a bar compares, in words: ``fast vs control: output_tps_total (tok/s) at c4``."""
    unit = metric_table.unit(str(bar["metric"]))
    metric = f"{bar['metric']} ({unit})" if unit else str(bar["metric"])
    return f"{bar['candidate']} vs {CONTROL_ARM}: {metric} at c{bar['point']}"


def bar_columns(bars: Sequence[Mapping[str, Any]]) -> tuple[dict[str, str], dict[str, float]]:
    """The tags and metrics of a result's bars by position (``bar<n>``, ``bar<n>.verdict``,
    ``bar<n>.<BAR_METRICS>``): effects and CI as signed percentages, medians in the metric's unit."""
    tags: dict[str, str] = {}
    metrics: dict[str, float] = {}
    for position, bar in enumerate(bars, 1):
        name = bar_name(position)
        tags[name] = bar_label(bar)
        tags[name + ".verdict"] = str(bar["outcome"])
        values = {"candidate": bar.get("value"), "control": bar.get("control")}
        for column, field in _PERCENT.items():
            number = finite_number(bar.get(field))
            values[column] = None if number is None else number * 100
        metrics.update(numbers(values, name))
    return tags, metrics


def compared_arms(bars: Iterable[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """The (arm, point) pairs the bars compare, in the bars' order: the control's first at each point."""
    pairs: list[tuple[str, int]] = []
    for bar in bars:
        for arm in (CONTROL_ARM, str(bar["candidate"])):
            pair = (arm, int(bar["point"]))
            if pair not in pairs:
                pairs.append(pair)
    return pairs


def summary_specs(
    record: Mapping[str, Any], summary: Mapping[str, Any], parent: RunSpec
) -> tuple[tuple[RunSpec, ...], tuple[int, ...]]:
    """One summary child per (arm, point) the bars compare, holding the arm's medians there
    (``<arm>.c<point>.<metric>`` of the entry's summary) under the metrics' plain names, with what
    sets the arm apart as params (as the measurement children have them); and which of them the
    saved comparison opens: the control and the candidates at the first bar's point."""
    bars = record.get("bars") or []
    pairs = compared_arms(bars)
    medians: dict[tuple[str, int], dict[str, Any]] = {pair: {} for pair in pairs}
    for name, value in summary.items():
        parsed = metric_table.parse_summary_key(name)
        if parsed and (parsed[0], parsed[1]) in medians:
            medians[(parsed[0], parsed[1])][parsed[2]] = value
    arms = record.get("arms") or {}
    differences = arm_differences(arms)
    specs = tuple(
        summary_spec(
            arm,
            point,
            child_names(medians[(arm, point)], list(record.get("instruments") or {})),
            parent,
            arms.get(arm) or {},
            differences.get(arm, {}),
        )
        for arm, point in pairs
    )
    first_point = int(bars[0]["point"]) if bars else None
    opened = tuple(i for i, (_arm, point) in enumerate(pairs) if point == first_point)
    return specs, opened if len(opened) > 1 else ()


def child_names(medians: Mapping[str, Any], instruments: Sequence[str] = ()) -> dict[str, Any]:
    """The summary's ``<instrument>/<metric>`` names as the measurement children name them
    (runfolder.measurement_spec): the plain metric for the first instrument (in the run's order)
    that measured it, ``<instrument>.<metric>`` for another one that measured a metric of that name."""
    order = {name: position for position, name in enumerate(instruments)}

    def rank(name: str) -> int:
        return order.get(metric_table.split_instrument(name)[0] or "", len(order))

    out: dict[str, Any] = {}
    for name in sorted(medians, key=rank):
        instrument, metric = metric_table.split_instrument(name)
        out[key(instrument, metric) if instrument and metric in out else metric] = medians[name]
    return out


def summary_spec(
    arm: str,
    point: int,
    medians: Mapping[str, Any],
    parent: RunSpec,
    arm_record: Mapping[str, Any],
    differences: Mapping[str, str],
) -> RunSpec:
    tags = {
        ROLE_TAG: SUMMARY_ROLE,
        "ledger.parent_entry": parent.tags[ENTRY_TAG],
        "ledger.kind": parent.tags["ledger.kind"],
        "ledger.arm": arm,
        "ledger.phase": SUMMARY_ROLE,
    }
    if "box" in parent.tags:
        tags["box"] = parent.tags["box"]
    params = {
        "arm": arm,
        "point": str(point),
        "repeat": "median",
        "phase": SUMMARY_ROLE,
        "arm_fingerprint": str(arm_record.get("fingerprint") or "-"),
        **differences,
    }
    return RunSpec(
        name=f"{arm} c{point} (median)",
        tags=tags,
        status_tags={},
        params=params,
        metrics=numbers(medians),
        start_ms=parent.start_ms,
        end_ms=parent.end_ms,
    )
