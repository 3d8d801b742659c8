"""`ledger run`: calibrate (or reuse a calibration), measure the arms ABBA, decide, record.

The ledger is the record: every run leaves exactly one entry, a ``result`` when it completes or a
``failure`` when it does not (a boot failure, a client error, a dead server, Ctrl-C), with the
cause and the log tail. Raw outputs stay in ``runs/<run_id>/`` and are referenced by content hash.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from recipe_ledger import engines, instruments, runs
from recipe_ledger import metrics as metric_table
from recipe_ledger import verdict as verdicts
from recipe_ledger.experiment.engines import clients_by_bar
from recipe_ledger.experiment.spec import Bar as SpecBar
from recipe_ledger.instruments.base import sha256_file
from recipe_ledger.ledger.models import (
    ArmRecord,
    BarVerdict,
    DesignRecord,
    ExperimentRecord,
    QualityVerdict,
    current_version,
)
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.pipeline import quality as quality_bars
from recipe_ledger.pipeline.events import Events, Notice, PhaseStarted, print_notices
from recipe_ledger.pipeline.measure import Launch, PointRecord, measure_launch, refusals
from recipe_ledger.pipeline.plan import RunPlan
from recipe_ledger.pipeline.steps import StepClock
from recipe_ledger.provenance import comparable_host, host_fingerprint, model_revision
from recipe_ledger.redact import redact_env

CALIBRATION_TAG = "aa-"


@dataclass
class RunOutcome:
    run_id: str
    run_dir: Path
    entry: dict
    verdicts: list[verdicts.Verdict]
    bars: list[BarVerdict]
    records: list[PointRecord]
    calibration_entries: list[str] = field(default_factory=list)
    calibration_inline: bool = False


def new_run_id(name: str) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{name}-{stamp}-{secrets.token_hex(2)}"


# ------------------------------------------------------------------------------ calibration


def calibration_key(plan: RunPlan, instrument: str, metric: str, host: dict[str, str]) -> str:
    """What a calibration must share with a run to stand for its noise: the box and its hardware,
    the control's configuration, the instrument (name, options, version) and the points."""
    exp = plan.experiment
    inst = next(i for i in exp.instruments if i.name == instrument)
    blob = {
        "box": plan.box.id,
        "host": comparable_host(host),
        "control": plan.arms["control"].fingerprint,
        "instrument": [inst.kind, inst.options, inst.command],
        "metric": metric,
        "points": exp.arm_points("control"),
    }
    return "sha256:" + hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()


def find_calibration(ledger: Ledger, key: str, max_age_days: float) -> dict | None:
    """The newest active calibration entry with this key, younger than ``max_age_days``."""
    from recipe_ledger.ledger.fold import fold_statuses

    entries = ledger.entries()
    status = fold_statuses(entries)
    horizon = dt.datetime.now(dt.UTC) - dt.timedelta(days=max_age_days)
    for entry in reversed(entries):
        if entry["kind"] != "calibration" or entry["payload"].get("fingerprint") != key:
            continue
        if status.get(entry["id"], "active") != "active":
            continue
        if dt.datetime.fromisoformat(entry["ts"]) >= horizon:
            return entry
    return None


def to_verdict_calibration(entry: dict | None) -> verdicts.Calibration | None:
    """The entry's noise as the verdict reads it; None without an entry, or for one that refused
    every point (it stands for "not comparable", not for a noise level)."""
    if entry is None or not entry["payload"].get("points"):
        return None
    payload = entry["payload"]
    points = {
        name: verdicts.CalibrationPoint(
            n=p["n"],
            mean=p["mean"],
            sigma=p["sigma"],
            cv=p["cv"],
            sigma_log=p.get("sigma_log") or p["cv"],
            max_spread=p["max_spread"],
            samples=p.get("samples", []),
        )
        for name, p in payload["points"].items()
    }
    return verdicts.Calibration(metric=payload["metric"], points=points)


def samples(records: list[PointRecord], arm: str, instrument: str, metric: str, point: int) -> list[float]:
    """One number per launch for this arm, point and metric (refused points have none): the
    geometric mean of the launch's samples when the instrument measures a point several times
    inside one launch, so those never pass for launches."""
    by_launch = launch_samples(records, arm, instrument, metric, point)
    return [
        values[0] if len(values) == 1 else statistics.geometric_mean(values) for values in by_launch.values()
    ]


def launch_samples(
    records: list[PointRecord], arm: str, instrument: str, metric: str, point: int
) -> dict[int, list[float]]:
    """Repeat (a launch) -> the instrument's samples of this metric at this point in that launch."""
    by_launch: dict[int, list[float]] = {}
    for r in records:
        if (
            r.arm == arm
            and r.instrument == instrument
            and r.point == point
            and metric in r.metrics
            and not r.refused
        ):
            by_launch.setdefault(r.repeat, []).append(r.metrics[metric])
    return by_launch


# ------------------------------------------------------------------------------ the run


@dataclass
class RunContext:
    plan: RunPlan
    ledger: Ledger
    writer: str
    repo: Path
    run_id: str
    run_dir: Path
    git: dict | None  # the stamp every entry of this run carries: the tree as it was at launch
    host: dict[str, str]
    events: Events = print_notices
    started: float = field(default_factory=time.monotonic)
    clock: StepClock = field(default_factory=StepClock)  # where the wall time went, per step
    # What a failure entry keeps of the run's progress beyond the stage (an interrupted sequence's
    # launches, looks and resume command): called when the failure is recorded.
    progress: Callable[[], dict[str, str | int]] | None = None
    launched: list[str] | None = None  # the sequential design's launches ("arm#repeat"), in order
    # Held while the run is under way (runs/<id>/lock.json): a run whose process dies without an
    # entry is found by the next command through it (pipeline.abandoned).
    lock: runs.RunLock | None = None

    def release_lock(self) -> None:
        """The run has its entry: it is no longer under way."""
        if self.lock is not None:
            self.lock.release()

    def launch(self, arm: str, repeat: int, tag: str = "") -> Launch:
        """One fresh launch of ``arm`` in this run: its folder, progress events and step clock."""
        return Launch(
            self.plan,
            self.plan.arms[arm],
            repeat,
            self.run_dir,
            self.run_id,
            self.repo,
            self.events,
            tag,
            self.clock,
        )


def verdict_bar(bar: SpecBar, point: int) -> verdicts.Bar:
    """A spec bar at one point, as the verdict reads it."""
    return verdicts.Bar(metric=bar.metric, point=point, direction=bar.direction, min_effect=bar.min_effect)


def calibrate_inline(ctx: RunContext) -> tuple[list[PointRecord], int]:
    """A/A: the control launched ``calibration.repeats`` times, before the experiment proper."""
    repeats = ctx.plan.experiment.calibration.repeats
    ctx.events(PhaseStarted.of_launches("calibration", ctx.plan.experiment, ["control"] * repeats))
    records: list[PointRecord] = []
    for repeat in range(1, repeats + 1):
        records += measure_launch(ctx.launch("control", repeat, CALIBRATION_TAG))
    return records, repeats


def record_calibrations(
    ctx: RunContext, records: list[PointRecord], skip: set[tuple[str, str]] | None = None
) -> dict[tuple[str, str], dict]:
    """One calibration entry per (instrument, metric) that a bar uses, from the control's launches
    in ``records`` (an A/A run's, or a sequential run's, whose control launches are A/A launches
    too); ``skip``: those the run already had a calibration for."""
    out: dict[tuple[str, str], dict] = {}
    for bar in ctx.plan.experiment.speed_bars:
        instrument = ctx.plan.experiment.instrument_of(bar).name
        if (instrument, bar.metric) in out or (instrument, bar.metric) in (skip or set()):
            continue
        # Typed with int | str keys: calibrate takes either, and a Mapping is invariant in its key type.
        by_point: dict[int | str, list[float]] = {
            p: samples(records, "control", instrument, bar.metric, p)
            for p in ctx.plan.experiment.arm_points("control")
        }
        # A refused point (rejected at boot, flattered) has no noise to measure: it calibrates nothing.
        by_point = {p: v for p, v in by_point.items() if len(v) >= 2}
        if not by_point:
            refused = refused_calibration(ctx, records, instrument, bar.metric)
            if refused is not None:
                out[(instrument, bar.metric)] = ctx.ledger.append(
                    "calibration", refused, writer=ctx.writer, git=ctx.git
                )
            continue
        calibration = verdicts.calibrate(by_point, metric=bar.metric)
        payload = {
            "schema_version": current_version("calibration"),
            "instrument": instrument,
            "metric": bar.metric,
            # Not named "key": the redactor hides values of fields named like secrets (*KEY*).
            "fingerprint": calibration_key(ctx.plan, instrument, bar.metric, ctx.host),
            "method": verdicts.METHOD,
            "points": {k: p.model_dump() for k, p in calibration.points.items()},
            "text": f"A/A calibration of {ctx.plan.experiment.name}'s control on {ctx.plan.box.id}: "
            + ", ".join(f"p{k} cv {p.cv * 100:.2f}%" for k, p in calibration.points.items())
            + "; "
            + "; ".join(
                f"p{k} {verdicts.classify_instrument(p, bar.min_effect).text}"
                for k, p in calibration.points.items()
            ),
            "origin": {"how": "measured", "source": ctx.run_id},
            "conditions": {
                "box": ctx.plan.box.id,
                "experiment": ctx.plan.experiment.name,
                **{
                    f"instrument_class.p{k}": verdicts.classify_instrument(p, bar.min_effect).instrument_class
                    for k, p in calibration.points.items()
                },
            },
        }
        out[(instrument, bar.metric)] = ctx.ledger.append(
            "calibration", payload, writer=ctx.writer, git=ctx.git
        )
    return out


def refused_calibration(
    ctx: RunContext, records: list[PointRecord], instrument: str, metric: str
) -> dict | None:
    """The calibration of an instrument whose every A/A point was refused (a flattered harness, a
    value the engine rejects at boot): recorded with no points and the reasons, so later runs find
    it, reuse it and do not launch the A/A again to learn the same thing; None when nothing was
    refused (the metric is simply missing: there is nothing to record)."""
    why = {
        p: refusals(records, ("control",), instrument, p) for p in ctx.plan.experiment.arm_points("control")
    }
    reasons = {f"refused.p{p}": "; ".join(texts)[:300] for p, texts in why.items() if texts}
    if not reasons:
        return None
    return {
        "schema_version": current_version("calibration"),
        "instrument": instrument,
        "metric": metric,
        "fingerprint": calibration_key(ctx.plan, instrument, metric, ctx.host),
        "method": verdicts.METHOD,
        "points": {},
        "text": f"A/A calibration of {ctx.plan.experiment.name}'s control on {ctx.plan.box.id}: every "
        f"point of {instrument} was refused, so it calibrates nothing and its bars are not comparable",
        "origin": {"how": "measured", "source": ctx.run_id},
        "conditions": {"box": ctx.plan.box.id, "experiment": ctx.plan.experiment.name, **reasons},
    }


def existing_calibrations(ctx: RunContext) -> tuple[dict[tuple[str, str], dict], bool]:
    """Calibrations in the ledger that match this run, and whether they cover every bar."""
    exp = ctx.plan.experiment
    found: dict[tuple[str, str], dict] = {}
    for bar in exp.speed_bars:
        instrument = exp.instrument_of(bar).name
        key = calibration_key(ctx.plan, instrument, bar.metric, ctx.host)
        entry = find_calibration(ctx.ledger, key, exp.calibration.max_age_days)
        if entry:
            found[(instrument, bar.metric)] = entry
    needed = {(exp.instrument_of(b).name, b.metric) for b in exp.speed_bars}
    return found, needed <= set(found)


def calibrations(ctx: RunContext) -> tuple[dict[tuple[str, str], dict], bool]:
    """Matching calibrations from the ledger, or a fresh A/A run recorded now (and said so)."""
    exp = ctx.plan.experiment
    with ctx.clock.step("calibration lookup"):
        found, complete = existing_calibrations(ctx)
    if complete:
        ctx.events(
            Notice(f"using calibration {', '.join(e['id'][:12] for e in found.values())} from the ledger")
        )
        return found, False
    ctx.events(
        Notice(
            f"no matching calibration in the ledger: running {exp.calibration.repeats} A/A launches "
            "of the control first"
        )
    )
    records, _ = calibrate_inline(ctx)
    with ctx.clock.step("records"):
        write_records(ctx.run_dir / runs.CALIBRATION, records)
        return record_calibrations(ctx, records), True


def write_records(path: Path, records: list[PointRecord]) -> None:
    runs.write_records(path, [r.to_json() for r in records])


def run_schedule(ctx: RunContext) -> list[PointRecord]:
    arms = [arm for arm, _ in ctx.plan.schedule]
    ctx.events(PhaseStarted.of_launches("measurement", ctx.plan.experiment, arms))
    records: list[PointRecord] = []
    for arm_name, repeat in ctx.plan.schedule:
        records += measure_launch(ctx.launch(arm_name, repeat))
        with ctx.clock.step("records"):  # kept after each launch: a later one may fail
            write_records(ctx.run_dir / runs.MEASUREMENTS, records)
    return records


def decide_bars(
    ctx: RunContext, records: list[PointRecord], cals: dict[tuple[str, str], dict]
) -> tuple[list[verdicts.Verdict], list[BarVerdict]]:
    exp = ctx.plan.experiment
    out_v, out_b = [], []
    for candidate in exp.candidates:
        for bar in exp.speed_bars:
            instrument = ctx.plan.experiment.instrument_of(bar).name
            cal = cals.get((instrument, bar.metric))
            calibration = to_verdict_calibration(cal)
            for point in exp.compared_points(bar, candidate):
                v = decide_point(records, candidate, instrument, bar, point, calibration)
                out_v.append(v)
                out_b.append(
                    BarVerdict(
                        candidate=candidate,
                        metric=bar_metric_name(ctx.plan, bar),
                        point=point,
                        direction=bar.direction,
                        min_effect=bar.min_effect,
                        outcome=v.outcome,
                        effect=v.effect,
                        ci_low=v.ci_low,
                        ci_high=v.ci_high,
                        mde=v.mde,
                        control=v.control_geomean,
                        value=v.candidate_geomean,
                        reason=v.reason,
                    )
                )
    return out_v, out_b


def decide_point(
    records: list[PointRecord],
    candidate: str,
    instrument: str,
    bar: SpecBar,
    point: int,
    calibration: verdicts.Calibration | None,
) -> verdicts.Verdict:
    """One bar at one point: not comparable where a point was refused, the verdict otherwise, and a
    loose instrument's win held back until its MDE is under the bar."""
    vbar = verdict_bar(bar, point)
    refused = refusals(records, ("control", candidate), instrument, point)
    control = samples(records, "control", instrument, bar.metric, point)
    cand = samples(records, candidate, instrument, bar.metric, point)
    if refused or not control or not cand:
        why = "; ".join(refused) or "an arm has no measurement at this point"
        return verdicts.decide(
            control or [1.0], cand or [1.0], vbar, None, comparable=False, incomparable_reason=why
        )
    v = verdicts.decide(control, cand, vbar, calibration, agreement_threshold=bar.agreement_threshold)
    calibrated = calibration.for_point(point) if calibration else None
    if calibrated is None:
        return v
    classification = verdicts.classify_instrument(calibrated, bar.min_effect)
    return verdicts.gate_loose_instrument(v, classification, instrument, calibrated.n)


def instrument_classes(plan: RunPlan, cals: dict[tuple[str, str], dict]) -> dict[str, str]:
    """``instrument_class.<instrument>.<metric>.p<point>``: tight or loose, per bar, for the record
    (the site marks loose instruments from these)."""
    out: dict[str, str] = {}
    for bar in plan.experiment.speed_bars:
        instrument = plan.experiment.instrument_of(bar).name
        calibration = to_verdict_calibration(cals.get((instrument, bar.metric)))
        if calibration is None:
            continue
        for point in plan.experiment.compared_points(bar):
            calibrated = calibration.for_point(point)
            if calibrated is not None:
                cls = verdicts.classify_instrument(calibrated, bar.min_effect).instrument_class
                out[f"instrument_class.{instrument}.{bar.metric}.p{point}"] = cls
    return out


def refused_points(records: list[PointRecord]) -> dict[str, str]:
    """``refused.<arm>.p<point>.r<repeat>.<instrument>``: why, for every refused point (short)."""
    return {
        f"refused.{r.arm}.p{r.point}.r{r.repeat}.{r.instrument}": r.refused[:300]
        for r in records
        if r.refused
    }


def several_instruments(plan: RunPlan) -> bool:
    """Whether metric names carry their instrument (``<instrument>/<metric>``) in the record."""
    return len(plan.experiment.instruments) > 1


def bar_metric_name(plan: RunPlan, bar: SpecBar) -> str:
    """The bar's metric as the record names it: with its instrument when there are several."""
    if several_instruments(plan):
        return metric_table.instrument_metric(plan.experiment.instrument_of(bar).name, bar.metric)
    return bar.metric


def extra_summary_metrics(plan: RunPlan) -> dict[str, tuple[str, ...]]:
    """Instrument name -> the numbers of its own the result keeps beyond metrics.SUMMARY_METRICS
    (its kind's: the tail test's TTFT tail and prefill rate, the replay's cache reuse)."""
    extras = {i.name: instruments.get(i.kind).extra_summary_metrics for i in plan.experiment.instruments}
    return {name: metrics for name, metrics in extras.items() if metrics}


def summary_metrics(
    records: list[PointRecord],
    extra_metrics: Mapping[str, tuple[str, ...]] = MappingProxyType({}),
    per_instrument: bool = False,
) -> dict[str, float]:
    """Medians per arm, point and metric: ``<arm>.c<point>.<metric>`` (small, table-friendly); an
    instrument's own numbers too when ``extra_metrics`` names them (by instrument name). With
    ``per_instrument`` (an experiment of several instruments) each metric is named with its
    instrument, ``<instrument>/<metric>``: two instruments' numbers never share one median."""
    groups: dict[str, list[float]] = {}
    for r in records:
        if r.refused:
            continue  # refused points are in conditions, with why; their numbers are not results
        wanted = (*metric_table.SUMMARY_METRICS, *extra_metrics.get(r.instrument, ()))
        kept = {m: r.metrics[m] for m in wanted if m in r.metrics}
        kept.update({metric_table.SERVER_PREFIX + m: v for m, v in r.server.items()})
        for metric, value in kept.items():
            name = metric_table.instrument_metric(r.instrument, metric) if per_instrument else metric
            groups.setdefault(metric_table.summary_key(r.arm, r.point, name), []).append(value)
    return {k: round(statistics.median(v), 6) for k, v in sorted(groups.items())}


def fixed_design_record(plan: RunPlan) -> DesignRecord:
    """The fixed design in the record's words: its planned launches ran, then it decided once."""
    launches = len(plan.schedule)
    return DesignRecord(
        kind="fixed",
        method=verdicts.METHOD,
        launches=launches,
        stopped="planned",
        summary=f"fixed design: decided once after its {launches} planned launches "
        f"({plan.experiment.repeats} per arm)",
    )


def experiment_record(
    ctx: RunContext,
    records: list[PointRecord],
    bars: list[BarVerdict],
    cals: dict,
    inline: bool,
    design: DesignRecord | None = None,
    quality: list[QualityVerdict] | None = None,
) -> ExperimentRecord:
    plan, exp = ctx.plan, ctx.plan.experiment
    arms = {}
    for name, arm in plan.arms.items():
        revision = model_revision(Path(arm.model_dir)) if arm.model_dir else None
        arms[name] = ArmRecord(
            source=arm.source,
            fingerprint=arm.fingerprint,
            argv=arm.argv,
            env=redact_env(arm.env),
            image=arm.image,
            model_sha256=revision if revision and revision.startswith("sha256:") else None,
            engine=None if engines.get(arm.engine).stand_in else arm.engine,
            points=exp.arm_points(name) if exp.arm(name).points else None,
        )
    instruments: dict[str, str] = {}  # name -> version
    for r in records:
        instruments.setdefault(r.instrument, r.instrument_version)
    calibration_ids = [e["id"] for e in cals.values()]
    return ExperimentRecord(
        name=exp.name,
        spec=repo_relative(Path(plan.spec_path), ctx.repo),
        spec_sha256=sha256_file(Path(plan.spec_path)),
        hypothesis=exp.hypothesis,
        box=plan.box.id,
        run_id=ctx.run_id,
        points=exp.points,
        repeats=exp.repeats if ctx.launched is None else _pairs(ctx.launched),
        schedule=[f"{a}#{r}" for a, r in plan.schedule] if ctx.launched is None else list(ctx.launched),
        instruments=instruments,
        arms=arms,
        bars=bars,
        calibration=calibration_ids[0] if calibration_ids else None,
        calibration_inline=inline,
        method=verdicts.METHOD,
        host=ctx.host,
        duration_s=round(time.monotonic() - ctx.started, 1),
        clients=clients_by_bar(exp, instruments) if len(exp.engines) > 1 else None,
        design=design or fixed_design_record(plan),
        quality=quality or None,
    )


def _pairs(launched: list[str]) -> int:
    """The most launches any arm had in a sequential run ("arm#repeat" -> the largest repeat)."""
    return max((int(label.rsplit("#", 1)[1]) for label in launched), default=0)


def repo_relative(path: Path, repo: Path) -> str:
    """``path`` relative to the repository when inside it (POSIX form), else as given."""
    try:
        return path.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        return str(path)


def headline(bars: list[BarVerdict]) -> str:
    parts = [
        f"{b.candidate} {b.metric}@{b.point}: {b.outcome}"
        + (f" ({b.effect * 100:+.1f}%)" if b.effect is not None else "")
        for b in bars
    ]
    return "; ".join(parts)


def record_result(
    ctx: RunContext,
    records: list[PointRecord],
    bars: list[BarVerdict],
    cals: dict[tuple[str, str], dict],
    inline: bool,
    design: DesignRecord | None = None,
    refs: list[tuple[str, str]] | None = None,
) -> dict:
    """The result entry (and summary.json): verdicts, medians, conditions, the design and how it
    stopped; ``refs`` adds relations (a resumed run names the failure entries of its earlier tries)."""
    design = design or fixed_design_record(ctx.plan)
    kept = quality_bars.quality_verdicts(
        ctx.plan.experiment, records, quality_bars.quality_alpha(design), several_instruments(ctx.plan)
    )
    bars = quality_bars.with_quality(bars, kept)
    record = experiment_record(ctx, records, bars, cals, inline, design, kept)
    runs.write_json(ctx.run_dir / runs.SUMMARY, record.model_dump(mode="json"))
    said = "; ".join(part for part in (headline(bars), quality_bars.headline(kept)) if part)
    payload = {
        "schema_version": current_version("result"),
        "subject": ctx.plan.experiment.name,
        "text": said + _design_words(record.design),
        "metrics": summary_metrics(
            records, extra_summary_metrics(ctx.plan), per_instrument=several_instruments(ctx.plan)
        ),
        "verdict": _overall(bars, kept),
        "conditions": {
            "box": ctx.plan.box.id,
            "run_id": ctx.run_id,
            **instrument_classes(ctx.plan, cals),
            **refused_points(records),
        },
        "experiment": record.model_dump(mode="json", exclude_none=True),
        "origin": {"how": "measured", "source": ctx.run_id},
        "artifacts": runs.artifact_hashes(ctx.run_dir),
        "scripts": scripts_named(ctx),
    }
    related = [("evidence", e["id"]) for e in list(cals.values())[1:]] + list(refs or [])
    return ctx.ledger.append("result", payload, writer=ctx.writer, refs=related, git=ctx.git)


def scripts_named(ctx: RunContext) -> list[str]:
    """Scripts under scripts/ that an instrument runs: the entry pins their git blob hashes."""
    named = set()
    for instrument in ctx.plan.experiment.instruments:
        for part in instrument.command or []:
            if part.startswith("scripts/") and (ctx.repo / part).is_file():
                named.add(part)
    return sorted(named)


def _design_words(design: DesignRecord | None) -> str:
    """The result text's tail under the sequential design: "; decided after 6 launches"."""
    if design is None or design.kind != "sequential":
        return ""
    if design.stopped == "decided":
        return f"; decided after {design.launches} launches"
    return f"; {design.summary}"


# The outcome a run's verdict names first when its bars agree on it, most telling first.
_OVERALL_ORDER = (
    "regression",
    "faster, worse answers",
    "faster, quality not shown",
    "win",
    "inconclusive",
    "not-comparable",
    "no-change",
)


def _overall(bars: list[BarVerdict], kept: list[QualityVerdict] | None = None) -> str:
    outcomes = {b.outcome for b in bars}
    for outcome in _OVERALL_ORDER:
        if outcome in outcomes:
            return outcome if len(outcomes) == 1 else f"mixed ({', '.join(sorted(outcomes))})"
    if kept:  # quality bars alone: whether every candidate kept the control's answers
        words = set(quality_bars.candidate_quality(kept).values())
        return "answers kept" if words == {quality_bars.KEPT} else f"answers {' / '.join(sorted(words))}"
    return "none"


def start_context(
    plan: RunPlan,
    ledger: Ledger,
    writer: str,
    repo: Path,
    runs_dir: Path,
    git: dict | None,
    events: Events = print_notices,
    host: dict[str, str] | None = None,
    clock: StepClock | None = None,
) -> RunContext:
    run_id = new_run_id(plan.experiment.name)
    run_dir = runs.create(runs_dir, run_id)
    lock = runs.take_lock(run_dir, writer, git)  # before anything launches: a death is noticed
    plan_dump = {
        "experiment": plan.experiment.model_dump(mode="json"),
        "box": plan.box.model_dump(mode="json"),
        "arms": {
            n: {"argv": a.argv, "env": redact_env(a.env), "source": a.source, "fingerprint": a.fingerprint}
            for n, a in plan.arms.items()
        },
        "schedule": plan.schedule,
    }
    runs.write_json(run_dir / runs.PLAN, plan_dump)
    host = host or host_fingerprint()
    return RunContext(
        plan, ledger, writer, repo, run_id, run_dir, git, host, events, clock=clock or StepClock(), lock=lock
    )


def write_timings(ctx: RunContext) -> None:
    """``timings.json``: the wall seconds of each step of this run (not evidence: nothing pins it)."""
    runs.write_json(ctx.run_dir / runs.TIMINGS, {"steps": ctx.clock.to_json()})
