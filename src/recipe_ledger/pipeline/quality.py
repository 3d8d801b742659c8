"""Quality bars in `ledger run`: the quality instruments' items, paired across arms, decided by
``recipe_ledger.quality`` once the run's launches are in, and what they do to a speed win.

Quality bars ride on the launches the design spends on the speed bars (the same pairs, sequential
or fixed): the items a quality instrument scored in each launch are in ``measurements.jsonl``, so a
resumed run decides them from the same records. They are decided once, at the end, at the design's
error rate per side (so a claim "faster, and not worse" is the intersection of two tests, each at
that rate: no error is split between them, Berger 1982). More launches would not show them sooner:
the items, not the launches, are the unit, and repeated launches answer the same items again.

The agreement instrument's reference launch (the control's first, which it compares every other
launch with) carries no items: its agreement with itself is no evidence. Task accuracy (lm_eval)
and the probes have no reference: every launch keeps its items. The control's other
launches against it are the box's own A/A: what "the same answers" means on this box.
"""

from __future__ import annotations

from collections.abc import Mapping

from recipe_ledger import metrics as metric_table
from recipe_ledger import quality, verdict
from recipe_ledger.experiment.spec import Experiment, QualityBar
from recipe_ledger.ledger.models import BarVerdict, DesignRecord, QualityVerdict
from recipe_ledger.pipeline.measure import PointRecord, refusals

# A candidate's quality bars together, as its speed bars carry it.
KEPT, NOT_SHOWN, WORSE = "kept", "not shown", "worse"
# What a speed win becomes when the candidate's answers were not shown kept.
CLAIMS = {NOT_SHOWN: "faster, quality not shown", WORSE: "faster, worse answers"}


def quality_alpha(design: DesignRecord | None) -> float:
    """The one-sided error rate of each quality call: the design's false-call rate per side (the
    sequential design's alpha covers both sides; the fixed design's bars are two-sided at 5%)."""
    if design is not None and design.kind == "sequential" and design.alpha is not None:
        return design.alpha / 2
    return verdict.DEFAULT_ALPHA / 2


def launch_items(
    records: list[PointRecord], arm: str, instrument: str, metric: str, point: int
) -> list[Mapping[str, float]]:
    """The items ``arm`` scored on ``metric`` at ``point``, one mapping per measurement (a launch,
    or a sample inside one), an agreement reference's (no items) left out."""
    return [
        r.items[metric]
        for r in records
        if r.arm == arm
        and r.instrument == instrument
        and r.point == point
        and not r.refused
        and r.items.get(metric)
    ]


def quality_verdicts(
    experiment: Experiment, records: list[PointRecord], alpha: float, several_instruments: bool
) -> list[QualityVerdict]:
    """Every quality bar decided, per candidate and point."""
    out = []
    for candidate in experiment.candidates:
        for bar in experiment.quality_bars:
            instrument = experiment.instrument_of(bar).name
            for point in experiment.compared_points(bar, candidate):
                out.append(_decided(records, candidate, instrument, bar, point, alpha, several_instruments))
    return out


def _decided(
    records: list[PointRecord],
    candidate: str,
    instrument: str,
    bar: QualityBar,
    point: int,
    alpha: float,
    several_instruments: bool,
) -> QualityVerdict:
    refused = refusals(records, ("control", candidate), instrument, point)
    control = launch_items(records, "control", instrument, bar.metric, point)
    measured = launch_items(records, candidate, instrument, bar.metric, point)
    call = quality.decide(control, measured, margin=bar.margin, alpha=alpha)
    if refused:
        call = call.model_copy(update={"outcome": "not-comparable", "reason": "; ".join(refused)})
    return QualityVerdict(
        candidate=candidate,
        # Named as the speed bars name theirs when an experiment has several instruments.
        metric=metric_table.instrument_metric(instrument, bar.metric) if several_instruments else bar.metric,
        instrument=instrument,
        point=point,
        margin=bar.margin,
        outcome=call.outcome,
        method=call.method,
        alpha=call.alpha,
        items=call.items,
        control_launches=call.control_launches,
        candidate_launches=call.candidate_launches,
        control=call.control_rate,
        value=call.candidate_rate,
        difference=call.difference,
        ci_low=call.low,
        ci_high=call.high,
        reason=call.reason,
    )


def candidate_quality(verdicts: list[QualityVerdict]) -> dict[str, str]:
    """Per candidate with quality bars: kept (every bar non-inferior), worse (any shown worse), or
    not shown."""
    out: dict[str, str] = {}
    for name in dict.fromkeys(v.candidate for v in verdicts):
        outcomes = {v.outcome for v in verdicts if v.candidate == name}
        out[name] = KEPT if outcomes == {"non-inferior"} else WORSE if "worse" in outcomes else NOT_SHOWN
    return out


def with_quality(bars: list[BarVerdict], verdicts: list[QualityVerdict]) -> list[BarVerdict]:
    """The speed bars as published: each carries its candidate's quality, and a win whose answers
    were not shown kept becomes "faster, quality not shown" or "faster, worse answers"."""
    kept = candidate_quality(verdicts)
    out = []
    for bar in bars:
        word = kept.get(bar.candidate)
        if word is None:
            out.append(bar)
            continue
        update: dict[str, object] = {"quality": word}
        if bar.outcome == "win" and word != KEPT:
            update["outcome"] = CLAIMS[word]
            update["reason"] = (
                f"{CLAIMS[word]}: a speed win, but its answers were {_answers(word)}; {bar.reason}"
            )
            if bar.decision:
                update["decision"] = bar.decision.replace(": win", f": {CLAIMS[word]}")
        out.append(bar.model_copy(update=update))
    return out


def _answers(word: str) -> str:
    return "shown worse than the control's" if word == WORSE else "not shown to be as good as the control's"


def headline(verdicts: list[QualityVerdict]) -> str:
    """The quality bars for the result's text: "fast quality answer_match_rate@1: non-inferior (-0.5 pt)"."""
    parts = []
    for v in verdicts:
        shown = f" ({v.difference * 100:+.1f} pt)" if v.difference is not None else ""
        parts.append(f"{v.candidate} quality {v.metric}@{v.point}: {v.outcome}{shown}")
    return "; ".join(parts)
