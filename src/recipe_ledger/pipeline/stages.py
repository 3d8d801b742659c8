"""The stages the CLI calls, each once: plan an experiment, run it, calibrate its control.

Each stage loads the experiment file once, refuses a dirty tree (unless allowed), records a setup
failure when planning or preflight refuses, and runs inside ``recording_failure`` so that every
run leaves exactly one entry. Progress and notices go to one ``events`` callback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from recipe_ledger import runs
from recipe_ledger.errors import InputError, LedgerError
from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.views import allowed_dirty_text
from recipe_ledger.pipeline import abandoned, sequence
from recipe_ledger.pipeline import run as runner
from recipe_ledger.pipeline.clean_tree import require_clean_tree
from recipe_ledger.pipeline.events import Events, Notice, Planned, print_notices
from recipe_ledger.pipeline.failures import recording_failure, recording_setup_failure
from recipe_ledger.pipeline.measure import PointRecord
from recipe_ledger.pipeline.plan import ReleaseLookup, RunPlan, plan_run
from recipe_ledger.pipeline.power import power_lines, power_plans
from recipe_ledger.pipeline.preflight import preflight
from recipe_ledger.pipeline.steps import StepClock
from recipe_ledger.provenance import host_fingerprint
from recipe_ledger.recipes.catalog import RecipeRoot


@dataclass(frozen=True)
class RunOptions:
    allow_dirty: bool = False  # run from a tree whose inputs differ from HEAD (recorded, flagged)
    allow_network_fs: bool = False
    allow_busy_gpu: bool = False


def plan_experiment(spec_path: Path, repo: Path, release_lookup: ReleaseLookup | None = None) -> RunPlan:
    """Every arm resolved to the exact command it will launch (what `ledger run --plan` shows).

    ``release_lookup`` resolves a release arm ("LANE@VERSION") to its pins; the releases layer sits
    above this one, so its caller hands it in."""
    return plan_run(spec_path, load_experiment(spec_path), RecipeRoot.of_project(repo), repo, release_lookup)


def power_report(plan: RunPlan, repo: Path, host: dict[str, str] | None = None) -> list[str]:
    """What each bar can see, said before any launch, so a bar the experiment cannot reach is known
    while it is still cheap to change: under the sequential design the expected launches and
    box-hours to a decision and whether the cap reaches the bar; under the fixed design each bar's
    MDE with the planned repeats. Both from the ledger's matching calibration."""
    lookup = _calibration_lookup(plan, repo, host)
    if plan.experiment.sequential:
        ledger = _existing_ledger(repo)
        entries = ledger.entries() if ledger is not None else []
        return sequence.plan_lines(plan, lookup, sequence.recorded_launch_seconds(entries, plan.box.id))
    return power_lines(power_plans(plan, lookup))


def calibration_needs(
    plan: RunPlan, repo: Path, host: dict[str, str] | None = None
) -> list[tuple[str, str, dict | None]]:
    """(instrument, metric, the matching calibration entry or None) for each metric a bar uses:
    what `ledger calibrate` would measure, and what `ledger run` would reuse instead."""
    lookup = _calibration_lookup(plan, repo, host)
    needs = dict.fromkeys(
        (plan.experiment.instrument_of(bar).name, bar.metric) for bar in plan.experiment.speed_bars
    )
    return [(instrument, metric, lookup(instrument, metric)) for instrument, metric in needs]


def _calibration_lookup(
    plan: RunPlan, repo: Path, host: dict[str, str] | None
) -> Callable[[str, str], dict | None]:
    """(instrument, metric) -> the newest active matching calibration in the ledger, or None."""
    host = host or host_fingerprint()
    ledger = _existing_ledger(repo)

    def calibration_of(instrument: str, metric: str) -> dict | None:
        if ledger is None:
            return None
        key = runner.calibration_key(plan, instrument, metric, host)
        return runner.find_calibration(ledger, key, plan.experiment.calibration.max_age_days)

    return calibration_of


def _existing_ledger(repo: Path) -> Ledger | None:
    """The ledger when there is one (planning needs none: `--plan` works before `ledger init`)."""
    try:
        return Ledger.open(repo)
    except LedgerError:
        return None


def run_experiment(
    spec_path: Path,
    repo: Path,
    *,
    writer: str,
    options: RunOptions = RunOptions(),
    release_lookup: ReleaseLookup | None = None,
    events: Events = print_notices,
) -> runner.RunOutcome:
    """`ledger run`: calibrate (or reuse a calibration), measure ABBA, decide, record the result.

    Raises SetupFailed (planning/preflight refused, exit 2 or 3), RunFailed (exit 5) or
    RunInterrupted (exit 130), each after writing its failure entry; a dirty tree is refused
    (StateError) before anything is written."""
    ctx = _started(spec_path, repo, writer, options, release_lookup, events)
    if ctx.plan.experiment.sequential:
        return _run_sequential(ctx, None, [], [])
    with recording_failure(ctx, "calibration") as tracker:
        cals, inline = runner.calibrations(ctx)
        if inline:  # the noise is known only now: say what the bars can see before measuring
            for line in power_lines(power_plans(ctx.plan, lambda i, m: cals.get((i, m)))):
                events(Notice(line))
        tracker.stage = "measurement"
        records = runner.run_schedule(ctx)
        tracker.stage = "verdict"
        with ctx.clock.step("verdict"):
            verdict_list, bars = runner.decide_bars(ctx, records, cals)
        with ctx.clock.step("records"):
            entry = runner.record_result(ctx, records, bars, cals, inline)
        runner.write_timings(ctx)
    return runner.RunOutcome(
        ctx.run_id, ctx.run_dir, entry, verdict_list, bars, records, [e["id"] for e in cals.values()], inline
    )


def _run_sequential(
    ctx: runner.RunContext,
    saved: sequence.SequenceRun | None,
    records: list[PointRecord],
    refs: list[tuple[str, str]],
) -> runner.RunOutcome:
    """The sequential design: reuse a same-box calibration where the ledger has one (never launch
    one first: the sequence carries its own evidence about noise), launch pairs and look after each
    until every bar is decided, record the result and, where none matched, the control's launches
    as this box's calibration for the next run."""
    exp = ctx.plan.experiment
    with recording_failure(ctx, "calibration lookup") as tracker:
        if saved is None:
            with ctx.clock.step("calibration lookup"):
                cals, _ = runner.existing_calibrations(ctx)
            launch_seconds = sequence.recorded_launch_seconds(ctx.ledger.entries(), ctx.plan.box.id)
            design, cap_source = sequence.design_for(exp, launch_seconds)
            saved = sequence.start_run(ctx, cals, design, cap_source)
            sequence.write_state(ctx.run_dir, saved)
        else:
            cals = sequence.lent_calibrations(ctx.ledger, saved)
        run = saved
        ctx.progress = lambda: sequence.partial_conditions(run)
        ctx.launched = run.launched  # the same list: the record reads what was launched
        for line in sequence.start_lines(run, cals):
            ctx.events(Notice(line))
        tracker.stage = "measurement"
        records = sequence.run_sequence(ctx, run, records)
        tracker.stage = "verdict"
        with ctx.clock.step("verdict"):
            bars = sequence.bar_verdicts(ctx.plan, run)
        with ctx.clock.step("records"):
            entry = runner.record_result(ctx, records, bars, cals, False, sequence.design_record(run), refs)
            learned = runner.record_calibrations(ctx, records, skip=set(cals))
        runner.write_timings(ctx)
    ids = [e["id"] for e in cals.values()] + [e["id"] for e in learned.values()]
    return runner.RunOutcome(ctx.run_id, ctx.run_dir, entry, [], bars, records, ids, False)


def resume_experiment(
    run_id: str,
    repo: Path,
    *,
    writer: str,
    options: RunOptions = RunOptions(),
    release_lookup: ReleaseLookup | None = None,
    events: Events = print_notices,
) -> runner.RunOutcome:
    """`ledger run --resume RUN`: the interrupted sequence continued from its last kept launch, on the
    same commit, spec, box and host, or refused (InputError, exit 2) naming what differs."""
    run_dir = runs.run_dir(repo, run_id)
    if not run_dir.is_dir():
        raise InputError(
            f"no run folder {run_id!r} under runs/", where=str(runs.runs_dir(repo)), hint="ls runs/"
        )
    saved = sequence.read_state(run_dir)
    ledger = Ledger.open(repo)
    record_abandoned(repo, ledger, events)  # a killed try of this very run gets its entry (and a ref)
    done = sequence.result_of(ledger.entries(), run_id)
    if done is not None:
        raise InputError(
            f"run {run_id} is finished: result entry {done['id'][:12]}",
            hint=f"ledger show {done['id'][:12]}",
        )
    spec_path = repo / saved.spec
    if not spec_path.is_file():
        raise InputError(
            f"cannot resume {run_id}: its experiment file {saved.spec} is gone", hint="git status"
        )
    git = require_clean_tree(repo, [spec_path], allow_dirty=options.allow_dirty)
    host = host_fingerprint()
    differences = sequence.resume_differences(saved, spec_path, git, host)
    if differences:
        raise InputError(
            f"cannot resume {run_id}: {'; '.join(differences)}",
            where=str(run_dir / runs.SEQUENCE),
            hint=f"ledger run {saved.spec} starts a new sequence",
        )
    ctx = _started(spec_path, repo, writer, options, release_lookup, events, resume=(run_id, run_dir))
    records = sequence.kept_records(run_dir, saved)
    saved.resumed += 1
    ctx.events(Notice(f"resuming {run_id}: {len(saved.launched)} launches and {saved.looks} looks kept"))
    refs = [("see", e["id"]) for e in sequence.failures_of(ledger.entries(), run_id)]
    return _run_sequential(ctx, saved, records, refs)


def calibrate_experiment(
    spec_path: Path,
    repo: Path,
    *,
    writer: str,
    options: RunOptions = RunOptions(),
    release_lookup: ReleaseLookup | None = None,
    events: Events = print_notices,
) -> list[dict]:
    """`ledger calibrate`: A/A launches of the control; one calibration entry per bar metric.

    A refusal before any launch (a bad spec, a missing recipe, a busy GPU) writes no entry: a
    calibration that never launched measured nothing, and each bad spec tried would otherwise
    leave a permanent failure entry (one fuzz pass left 478). Only a launched run's failure is one."""
    ctx = _started(spec_path, repo, writer, options, release_lookup, events, record_setup=False)
    with recording_failure(ctx, "calibration"):
        records, _ = runner.calibrate_inline(ctx)
        with ctx.clock.step("records"):
            runner.write_records(ctx.run_dir / runs.CALIBRATION, records)
            entries = list(runner.record_calibrations(ctx, records).values())
        runner.write_timings(ctx)
        return entries


def record_abandoned(repo: Path, ledger: Ledger, events: Events = print_notices) -> list[dict]:
    """Record every abandoned run under runs/ (pipeline.abandoned) and say so; the entries."""
    entries = abandoned.record_abandoned(repo, ledger)
    for entry in entries:
        events(Notice(f"recorded failure entry {entry['id'][:12]}: {entry['payload']['cause'][:200]}"))
    return entries


def _started(
    spec_path: Path,
    repo: Path,
    writer: str,
    options: RunOptions,
    release_lookup: ReleaseLookup | None,
    events: Events,
    resume: tuple[str, Path] | None = None,
    *,
    record_setup: bool = True,
) -> runner.RunContext:
    """Tree checked, experiment loaded once, planned, preflighted: the context of a run about to
    launch (``resume``: the id and folder of the run it continues). The git stamp is taken here, at
    launch: that is the state the numbers belong to. ``record_setup``: a refusal while planning or
    in preflight is a failure entry (run, reproduce) or only an error (calibrate)."""
    clock = StepClock()
    with clock.step("planning"):
        return _prepared(
            spec_path, repo, writer, options, release_lookup, events, clock, resume, record_setup
        )


def _prepared(
    spec_path: Path,
    repo: Path,
    writer: str,
    options: RunOptions,
    release_lookup: ReleaseLookup | None,
    events: Events,
    clock: StepClock,
    resume: tuple[str, Path] | None = None,
    record_setup: bool = True,
) -> runner.RunContext:
    ledger = Ledger.open(repo)
    record_abandoned(repo, ledger, events)
    git = require_clean_tree(repo, [spec_path], allow_dirty=options.allow_dirty)
    summary = allowed_dirty_text(git)
    if summary:
        events(Notice(summary))
    recorded = ledger if record_setup else None
    with recording_setup_failure(recorded, writer, spec_path.stem, "planning", git) as setup:
        experiment = load_experiment(spec_path)
        setup.subject = experiment.name
        plan = plan_run(spec_path, experiment, RecipeRoot.of_project(repo), repo, release_lookup)
        events(Planned(plan))
        host = host_fingerprint()
        for line in power_report(plan, repo, host):
            events(Notice(line))
        setup.stage = "preflight"
        report = preflight(
            plan, allow_network_fs=options.allow_network_fs, allow_busy_gpu=options.allow_busy_gpu
        )
    for notice in report.notices:
        events(Notice(f"notice: {notice}"))
    if resume is not None:
        run_id, run_dir = resume
        lock = runs.take_lock(run_dir, writer, git)
        return runner.RunContext(
            plan, ledger, writer, repo, run_id, run_dir, git, host, events, clock=clock, lock=lock
        )
    return runner.start_context(plan, ledger, writer, repo, runs.runs_dir(repo), git, events, host, clock)
