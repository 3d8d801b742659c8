"""The sequential design in `ledger run` (``rl-sequential/1``): a pair, a look, a stop once decided.

One sequence (``recipe_ledger.sequential``) per candidate, bar and point, all fed by the same
launches. A pair is one launch of the control and one of each candidate still undecided, in ABBA
order (odd pairs control first, even pairs candidates first), every launch of pair ``k`` being
repeat ``k`` so the arms of a pair see the same workload seeds. After each pair every sequence whose
look is due looks; a candidate whose bars are all decided launches no more, and the run ends when
none is left (each sequence's last look is at its cap, so it always ends).

``runs/<id>/sequence.json`` holds the whole state (design, every launch's samples, every look with
its statistic and the spending so far, what the run is bound to) and is rewritten atomically after
every launch and every look, so an interrupted run loses at most the launch in flight and
``ledger run --resume RUN`` continues the same sequence (``resume_differences`` says what must match).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from recipe_ledger import runs, sequential
from recipe_ledger.errors import InputError
from recipe_ledger.experiment.spec import Bar as SpecBar
from recipe_ledger.experiment.spec import Experiment
from recipe_ledger.instruments.base import sha256_file
from recipe_ledger.ledger.models import BarVerdict, DesignRecord
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.pipeline.events import Notice, PhaseStarted
from recipe_ledger.pipeline.measure import PointRecord, measure_launch, refusals
from recipe_ledger.pipeline.plan import RunPlan
from recipe_ledger.pipeline.run import (
    RunContext,
    bar_metric_name,
    launch_samples,
    repo_relative,
    to_verdict_calibration,
    verdict_bar,
    write_records,
)
from recipe_ledger.provenance import comparable_host

RECENT_LAUNCHES = 20  # the box's launch time is the median of its latest recorded runs, at most this many


class _Open(BaseModel):
    # Mutable: the run updates its state in place between writes; strict and closed on read.
    model_config = ConfigDict(strict=True, extra="forbid", ser_json_inf_nan="constants")


class TrackedBar(_Open):
    """One sequence of the run: a candidate against the control on one bar at one point."""

    candidate: str
    bar: int = Field(ge=0)  # index into the experiment's bars
    instrument: str
    metric: str  # the bar's metric as the result names it (with its instrument when there are several)
    point: int
    state: sequential.SequenceState
    not_comparable: str | None = None  # why, when a launch refused this point: the sequence stops

    @property
    def decided(self) -> bool:
        return self.not_comparable is not None or self.state.decision is not None

    @property
    def name(self) -> str:
        return f"{self.candidate} {self.metric}@{self.point}"


class SequenceRun(_Open):
    """``runs/<id>/sequence.json``: what the run is bound to, what it launched, every sequence."""

    schema_version: Literal[1] = 1
    method: str = sequential.METHOD
    run_id: str
    spec: str  # the experiment file, relative to the repository
    spec_sha256: str
    commit: str | None  # the tree the run started from; a resume must start from the same
    box: str
    host: dict[str, str]  # the comparable part of the host fingerprint
    cap_source: str
    calibrations: dict[str, str] = {}  # "instrument/metric" -> the calibration entry lent to its bars
    launched: list[str] = []  # "arm#repeat", in launch order
    launch_seconds: list[float] = []  # wall seconds of each launch (boot to teardown)
    resumed: int = 0
    bars: list[TrackedBar]

    @property
    def design(self) -> sequential.Design:
        return self.bars[0].state.design

    def active_candidates(self, candidates: list[str]) -> list[str]:
        """The candidates with a bar still undecided, in the experiment's order."""
        open_ = {tracked.candidate for tracked in self.bars if not tracked.decided}
        return [name for name in candidates if name in open_]

    @property
    def looks(self) -> int:
        return max((len(t.state.looks) for t in self.bars), default=0)


# ------------------------------------------------------------------------------------- the design


def design_for(experiment: Experiment, launch_seconds: float | None) -> tuple[sequential.Design, str]:
    """The sequential design of this experiment and where its cap comes from (for people)."""
    spec = experiment.chosen_design
    cap, source = sequential.DEFAULT_CAP, f"cap {sequential.DEFAULT_CAP} per arm (the default)"
    if spec.cap is not None:
        cap, source = spec.cap, f"cap {spec.cap} per arm (the experiment's)"
    elif spec.budget_box_hours is not None and launch_seconds is not None:
        cap = sequential.cap_for_budget(spec.budget_box_hours, launch_seconds)
        source = (
            f"cap {cap} per arm: {spec.budget_box_hours:g} box-hours at {launch_seconds / 60:.1f} min "
            "a launch (this box's recorded launches)"
        )
    elif spec.budget_box_hours is not None:
        source = (
            f"cap {cap} per arm (the default: budget_box_hours needs a recorded launch on this box, none yet)"
        )
    design = sequential.Design(alpha=spec.alpha, pairs_per_look=spec.pairs_per_look, cap=cap)
    return design, source


def recorded_launch_seconds(entries: list[dict], box: str) -> float | None:
    """The median wall seconds of one launch on ``box``, from its latest result entries: the
    sequential runs' own per-launch times, else a fixed run's duration over its launches."""
    per_run: list[float] = []
    for entry in reversed(entries):
        if entry["kind"] != "result":
            continue
        experiment = entry["payload"].get("experiment") or {}
        seconds = _seconds_per_launch(experiment) if experiment.get("box") == box else None
        if seconds:
            per_run.append(seconds)
        if len(per_run) >= RECENT_LAUNCHES:
            break
    return statistics.median(per_run) if per_run else None


def _seconds_per_launch(experiment: Mapping) -> float | None:
    design = experiment.get("design") or {}
    if design.get("launch_seconds"):
        return float(design["launch_seconds"])
    launches = len(experiment.get("schedule") or [])
    duration = experiment.get("duration_s")
    if not launches or not duration or experiment.get("calibration_inline"):
        return None  # an inline calibration's launches are not in the schedule: the quotient would lie
    return float(duration) / launches


# ------------------------------------------------------------------------------------- the start


def start_run(
    ctx: RunContext, cals: Mapping[tuple[str, str], dict], design: sequential.Design, cap_source: str
) -> SequenceRun:
    """A new sequence per candidate, bar and point; a same-box calibration, where the ledger has
    one, is lent to the bar's sequence (it can steady the noise, never shrink it)."""
    plan, exp = ctx.plan, ctx.plan.experiment
    tracked = []
    for candidate in exp.candidates:
        for index, bar in enumerate(exp.bars):
            if not isinstance(bar, SpecBar):
                continue  # a quality bar rides on the same launches: pipeline.quality decides it
            instrument = exp.instrument_of(bar).name
            calibration = to_verdict_calibration(cals.get((instrument, bar.metric)))
            for point in exp.compared_points(bar, candidate):
                noise = calibration.for_point(point) if calibration else None
                lent = sequential.CalibrationNoise.from_point(noise) if noise and noise.n >= 2 else None
                state = sequential.start(verdict_bar(bar, point), design, lent)
                tracked.append(
                    TrackedBar(
                        candidate=candidate,
                        bar=index,
                        instrument=instrument,
                        metric=bar_metric_name(plan, bar),
                        point=point,
                        state=state,
                    )
                )
    git = ctx.git or {}
    return SequenceRun(
        run_id=ctx.run_id,
        spec=repo_relative(Path(plan.spec_path), ctx.repo),
        spec_sha256=sha256_file(Path(plan.spec_path)),
        commit=git.get("commit"),
        box=plan.box.id,
        host=comparable_host(ctx.host),
        cap_source=cap_source,
        calibrations={f"{instrument}/{metric}": entry["id"] for (instrument, metric), entry in cals.items()},
        bars=tracked,
    )


# ------------------------------------------------------------------------------------- the loop


def pair_order(pair: int, candidates: list[str]) -> list[str]:
    """ABBA over pairs: odd pairs launch the control first, even pairs the candidates first (in
    reverse), so a slow drift of the box lands on every arm alike."""
    return ["control", *candidates] if pair % 2 else [*reversed(candidates), "control"]


def run_sequence(ctx: RunContext, run: SequenceRun, records: list[PointRecord]) -> list[PointRecord]:
    """Launch pairs until every sequence is decided; ``records`` holds what earlier attempts of this
    run measured (a resume), and every launch is kept on disk before the next one starts."""
    candidates = list(ctx.plan.experiment.candidates)
    pair = 1
    while True:
        _look_due(ctx, run)
        active = run.active_candidates(candidates)
        if not active:
            return records
        order = [arm for arm in pair_order(pair, active) if f"{arm}#{pair}" not in run.launched]
        if order:
            ctx.events(PhaseStarted.of_launches(f"pair {pair}", ctx.plan.experiment, order))
        for arm in order:
            started = time.monotonic()
            measured = measure_launch(ctx.launch(arm, pair))
            run.launch_seconds.append(round(time.monotonic() - started, 3))
            records += measured
            with ctx.clock.step("records"):
                write_records(ctx.run_dir / runs.MEASUREMENTS, records)
            absorb(run, ctx.plan, arm, pair, measured, ctx.repo)
            run.launched.append(f"{arm}#{pair}")
            write_state(ctx.run_dir, run)
        pair += 1


def absorb(
    run: SequenceRun, plan: RunPlan, arm: str, repeat: int, measured: list[PointRecord], repo: Path
) -> None:
    """One launch's samples into every undecided sequence it belongs to. A refused point stops
    its sequences as not comparable; a non-finite or non-positive number is refused (InputError
    naming the instrument's raw file) and absorbed nowhere."""
    for tracked in run.bars:
        if tracked.decided or arm not in ("control", tracked.candidate):
            continue
        why = refusals(measured, (arm,), tracked.instrument, tracked.point)
        metric = plan.experiment.bars[tracked.bar].metric
        values = launch_samples(measured, arm, tracked.instrument, metric, tracked.point).get(repeat)
        if why or not values:
            tracked.not_comparable = "; ".join(why) or (
                f"{arm} repeat {repeat} has no {metric} at point {tracked.point}"
            )
            continue
        side: sequential.Arm = "control" if arm == "control" else "candidate"
        tracked.state = sequential.add_launch(
            tracked.state, side, values, where=_raw_file(measured, tracked, run, repo)
        )


def _raw_file(measured: list[PointRecord], tracked: TrackedBar, run: SequenceRun, repo: Path) -> str:
    """Where a bad number came from: the instrument's raw output of that point, and the spec."""
    raw = next(
        (r.raw_file for r in measured if r.instrument == tracked.instrument and r.point == tracked.point),
        "",
    )
    inside = f"runs/{run.run_id}/{raw}" if raw else f"runs/{run.run_id}"
    return f"{inside} (instrument {tracked.instrument} of {run.spec})"


def _look_due(ctx: RunContext, run: SequenceRun) -> None:
    """Every sequence whose look is due looks now; each look is said and kept on disk."""
    looked = False
    for tracked in run.bars:
        if tracked.decided or not sequential.is_due(tracked.state):
            continue
        tracked.state = sequential.look(tracked.state)
        last = tracked.state.looks[-1]
        launches = last.n_control + last.n_candidate
        ctx.events(Notice(f"look {last.index} after {launches} launches: {tracked.name}: {_said(tracked)}"))
        looked = True
    if looked:
        write_state(ctx.run_dir, run)


def _said(tracked: TrackedBar) -> str:
    decision = tracked.state.decision
    if decision is not None:
        return decision.summary
    return f"{tracked.state.looks[-1].reason}; continue"


# ------------------------------------------------------------------------------------- on disk


def write_state(run_dir: Path, run: SequenceRun) -> None:
    runs.write_json(run_dir / runs.SEQUENCE, run.model_dump(mode="json"))


def read_state(run_dir: Path) -> SequenceRun:
    """The state a run left, every recorded look checked against its launches (a state edited by
    hand, or written by another method, is refused naming the first look that differs)."""
    path = run_dir / runs.SEQUENCE
    if not path.is_file():
        raise InputError(
            f"run {run_dir.name} has no {runs.SEQUENCE}: only a run of the sequential design resumes",
            where=str(path.parent),
            hint="ledger run <experiment> starts a new run",
        )
    try:
        run = SequenceRun.model_validate(runs.read_json(path))
    except ValueError as error:
        raise InputError(
            f"{runs.SEQUENCE} is not a sequence state this tool wrote: {str(error).splitlines()[0]}",
            where=str(path),
        ) from error
    for tracked in run.bars:
        sequential.check_replay(tracked.state)
    return run


def partial_conditions(run: SequenceRun) -> dict[str, str | int]:
    """What a failure entry keeps of an interrupted sequence: launches, looks, each sequence's last
    look and the command that resumes it (the whole state is in the run folder, hashed)."""
    out: dict[str, str | int] = {
        "sequence.launches": len(run.launched),
        "sequence.looks": run.looks,
        "sequence.resume": f"ledger run --resume {run.run_id}",
    }
    for tracked in run.bars:
        out[f"sequence.{tracked.name.replace(' ', '.')}"] = _progress(tracked)[:300]
    return out


def _progress(tracked: TrackedBar) -> str:
    if tracked.not_comparable:
        return f"not comparable: {tracked.not_comparable}"
    state = tracked.state
    if not state.looks:
        return f"{len(state.launches)} launches, no look yet"
    last = state.looks[-1]
    done = state.decision.summary if state.decision else "continue"
    interval = f"[{last.call_low * 100:+.1f}%, {last.call_high * 100:+.1f}%]"
    launches = last.n_control + last.n_candidate
    return f"look {last.index} after {launches} launches: effect {last.effect * 100:+.1f}% {interval}: {done}"


# ------------------------------------------------------------------------------------- the record


def bar_verdicts(plan: RunPlan, run: SequenceRun) -> list[BarVerdict]:
    """Each sequence as the result records it: its outcome, interval, geometric means and the
    words that say how it stopped ("decided after 6 launches: win")."""
    return [_bar_verdict(_speed_bar(plan, tracked), tracked) for tracked in run.bars]


def _speed_bar(plan: RunPlan, tracked: TrackedBar) -> SpecBar:
    bar = plan.experiment.bars[tracked.bar]
    assert isinstance(bar, SpecBar)  # start_run tracks speed bars only
    return bar


def _bar_verdict(bar: SpecBar, tracked: TrackedBar) -> BarVerdict:
    state = tracked.state
    launches = len(state.launches)
    refused = BarVerdict(
        candidate=tracked.candidate,
        metric=tracked.metric,
        point=tracked.point,
        direction=bar.direction,
        min_effect=bar.min_effect,
        outcome="not-comparable",
        reason=tracked.not_comparable or "",
        launches=launches,
        looks=len(state.looks),
        stopped="refused",
        decision=f"not comparable after {launches} launches",
    )
    if tracked.not_comparable is not None:
        return refused
    decision, last = state.decision, state.looks[-1]
    assert decision is not None  # the loop ends only when every sequence is decided
    # The interval that decided: the equivalence interval for no-change, else the call interval.
    same = decision.outcome == "no-change"
    return refused.model_copy(
        update={
            "outcome": decision.outcome,
            "effect": decision.effect,
            "ci_low": last.equivalence_low if same else decision.low,
            "ci_high": last.equivalence_high if same else decision.high,
            "control": math.exp(last.control_log_mean),
            "value": math.exp(last.candidate_log_mean),
            "reason": decision.reason,
            "stopped": decision.stopped,
            "decision": decision.summary,
        }
    )


Stopped = Literal["decided", "cap", "refused"]


def design_record(run: SequenceRun) -> DesignRecord:
    """The run's design, its error rate and cap, its looks and launches, and why it stopped."""
    design = run.design
    stopped = _stopped(run)
    return DesignRecord(
        kind="sequential",
        method=sequential.METHOD,
        alpha=design.alpha,
        cap=design.cap,
        cap_source=run.cap_source,
        pairs_per_look=design.pairs_per_look,
        looks=run.looks,
        launches=len(run.launched),
        stopped=stopped,
        summary=_run_summary(run, stopped),
        launch_seconds=round(statistics.median(run.launch_seconds), 3) if run.launch_seconds else None,
        resumed=run.resumed,
    )


def _stopped(run: SequenceRun) -> Stopped:
    """decided: every bar decided; cap: one reached the cap undecided; refused: the rest were refused."""
    ways = {t.state.decision.stopped for t in run.bars if t.state.decision is not None}
    if "cap" in ways:
        return "cap"
    return "decided" if ways and all(t.not_comparable is None for t in run.bars) else "refused"


def _run_summary(run: SequenceRun, stopped: Stopped) -> str:
    outcomes: set[str] = {t.state.decision.outcome for t in run.bars if t.state.decision is not None}
    if any(t.not_comparable for t in run.bars):
        outcomes.add("not-comparable")
    said, launches = ", ".join(sorted(outcomes)), len(run.launched)
    if stopped == "decided":
        return f"decided after {launches} launches: {said}"
    if stopped == "cap":
        return f"stopped at the cap ({run.design.cap} per arm) after {launches} launches: {said}"
    return f"stopped after {launches} launches: {said}"


# ------------------------------------------------------------------------------------- resume


def resume_differences(
    saved: SequenceRun, spec_path: Path, git: Mapping | None, host: dict[str, str]
) -> list[str]:
    """What differs between the interrupted run and this attempt, in words (empty: it may resume).
    The commit, the experiment file (and so the box it names) and the host's hardware must all be
    the same."""
    out = []
    commit = (git or {}).get("commit")
    if commit != saved.commit:
        out.append(
            f"the commit differs (the run started at {_short(saved.commit)}, HEAD is {_short(commit)})"
        )
    if (git or {}).get("dirty"):
        out.append("the tree is dirty (a resumed sequence continues from a clean commit only)")
    # The box is named by the experiment file (its hash covers it) and profiled under recipes/ (the
    # commit covers it); the machine itself is the host's hardware below.
    if sha256_file(spec_path) != saved.spec_sha256:
        out.append(f"the experiment file {saved.spec} differs from the one the run started with")
    now = comparable_host(host)
    if now != saved.host:
        changed = sorted(k for k in set(now) | set(saved.host) if now.get(k) != saved.host.get(k))
        out.append(
            f"the host differs ({', '.join(f'{k}: {saved.host.get(k)} -> {now.get(k)}' for k in changed)})"
        )
    return out


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "no commit"


def kept_records(run_dir: Path, run: SequenceRun) -> list[PointRecord]:
    """The measurements of the launches the state holds (a launch cut short left none that count)."""
    path = run_dir / runs.MEASUREMENTS
    if not path.is_file():
        return []
    kept = set(run.launched)
    rows = runs.read_records(path).raise_if_problems()
    records = [PointRecord(**row) for row in rows]
    return [r for r in records if f"{r.arm}#{r.repeat}" in kept]


def result_of(entries: list[dict], run_id: str) -> dict | None:
    """The result entry of run ``run_id``, when it finished."""
    return next((e for e in entries if e["kind"] == "result" and _run_of(e) == run_id), None)


def failures_of(entries: list[dict], run_id: str) -> list[dict]:
    """The failure entries of run ``run_id``'s interrupted attempts."""
    return [e for e in entries if e["kind"] == "failure" and _run_of(e) == run_id]


def _run_of(entry: dict) -> str | None:
    return (entry["payload"].get("conditions") or {}).get("run_id")


def lent_calibrations(ledger: Ledger, run: SequenceRun) -> dict[tuple[str, str], dict]:
    """The calibration entries the sequences were started with (a resume keeps the same ones)."""
    by_id = ledger.by_id()
    out: dict[tuple[str, str], dict] = {}
    for key, entry_id in run.calibrations.items():
        instrument, metric = key.split("/", 1)
        if entry_id in by_id:
            out[(instrument, metric)] = by_id[entry_id]
    return out


def start_lines(run: SequenceRun, cals: Mapping[tuple[str, str], dict]) -> list[str]:
    """What a sequential run says before its first launch (the plan lines said the design): which
    calibration its sequences borrow, if any."""
    if cals:
        return [
            "lending the sequences the same-box calibration "
            + ", ".join(e["id"][:12] for e in cals.values())
            + " (it can steady the noise, never shrink it)"
        ]
    return ["no same-box calibration: the sequences learn the noise from their own launches"]


# ------------------------------------------------------------------------------------- planning

# Without a same-box calibration the plan is drawn at these shares of each bar: a tight instrument
# and one at the edge of what the design decides with its cap (docs/verdicts.md has the table).
ASSUMED_NOISE_SHARES = (0.2, 0.6)


def plan_lines(
    plan: RunPlan,
    calibration_of: Callable[[str, str], dict | None],
    launch_seconds: float | None,
) -> list[str]:
    """`ledger run --plan` under the sequential design: per bar and point the expected launches and
    box-hours to a decision, from the ledger's same-box calibration when there is one (else at a
    tight and a middling noise, said so), whether the cap can reach the bar, and a loose instrument
    named before any launch."""
    exp = plan.experiment
    design, cap_source = design_for(exp, launch_seconds)
    timing = (
        f"{launch_seconds / 60:.1f} min a launch on {plan.box.id} (its recorded launches)"
        if launch_seconds
        else f"no launch recorded on {plan.box.id} yet: box-hours follow once one is"
    )
    lines = [
        f"design: {sequential.METHOD}, a look after every {_block(design)}; false calls at most "
        f"{design.alpha:.0%} per bar; {cap_source}; {timing}"
    ]
    for bar in exp.speed_bars:
        instrument = exp.instrument_of(bar).name
        calibration = to_verdict_calibration(calibration_of(instrument, bar.metric))
        for point in exp.compared_points(bar):
            vbar = verdict_bar(bar, point)
            noise = calibration.for_point(point) if calibration else None
            if noise is not None and noise.sigma_log > 0:
                source = f"same-box calibration, {noise.n} launches"
                lines += sequential.plan(
                    vbar, noise.sigma_log, design, launch_seconds=launch_seconds, noise_source=source
                ).lines
                continue
            for share in ASSUMED_NOISE_SHARES:
                source = f"assumed {share:g}x the bar: no same-box calibration"
                sigma = share * bar.min_effect
                lines += sequential.plan(
                    vbar, sigma, design, launch_seconds=launch_seconds, noise_source=source
                ).lines
    return lines


def _block(design: sequential.Design) -> str:
    return "launch pair" if design.pairs_per_look == 1 else f"{design.pairs_per_look} launch pairs"
