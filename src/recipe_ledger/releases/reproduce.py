"""`ledger reproduce LANE@VERSION`: re-measure a published release against its own numbers.

1. **Pins first.** Before any launch, every pin is checked against this machine: the image digest
   (and its image id), the model revision, the scripts' blob hashes, the experiment specs the
   numbers came from, the resolved argv and env, the box. Any difference refuses the reproduction
   and names it; a tag that moved is named too, but does not matter, since the run uses the digest.
2. **Re-run** the arms behind the numbers, with the experiment's repeats, through the same pieces
   as `ledger run` (plan, preflight, launch, sweep, failure entries), the image given by digest.
3. **Decide** each number (``judge``, rule ``RULE``): ``recipe_ledger.verdict`` gives the effect
   and its CI (the published samples are the control, the new ones the candidate, the noise is the
   original run's calibration); the number's tolerance is the bar, read as an equivalence margin,
   as a quality bar reads its margin. The whole CI inside ±tolerance: ``reproduced``; the whole
   CI outside it, with replicates that agree: ``not-reproduced``; a CI across its edge (or
   replicates that disagree): ``inconclusive``. Each outcome carries its reason; a
   ``reproduction`` entry records the outcome, the rule, each effect and its CI.
4. **Quality evidence.** A result whose quality bars (``experiment.quality``) covered a release arm
   pinned that evidence with it: the re-run launches the experiment's control too (first, so it is
   the agreement instrument's reference again) and decides those quality bars afresh
   (``pipeline.quality``). A bar published non-inferior that is now worse does not reproduce;
   non-inferior again reproduces; anything else is inconclusive.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipe_ledger import metrics as metric_table
from recipe_ledger import runs
from recipe_ledger import verdict as verdicts
from recipe_ledger.errors import InputError, StateError
from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.instruments.base import sha256_file
from recipe_ledger.launch import images
from recipe_ledger.ledger import gitinfo
from recipe_ledger.ledger.models import ExperimentRecord, QualityVerdict, ReleaseNumber, ReleasePayload
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.views import allowed_dirty_text
from recipe_ledger.pipeline import abandoned, measure
from recipe_ledger.pipeline import quality as quality_bars
from recipe_ledger.pipeline import run as runner
from recipe_ledger.pipeline.clean_tree import require_clean_tree
from recipe_ledger.pipeline.events import Events, Notice, PhaseStarted, print_notices
from recipe_ledger.pipeline.failures import recording_failure
from recipe_ledger.pipeline.measure import PointRecord
from recipe_ledger.pipeline.plan import RunPlan, plan_run
from recipe_ledger.pipeline.preflight import preflight
from recipe_ledger.provenance import host_fingerprint
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.flags import flag_values
from recipe_ledger.redact import redact_env
from recipe_ledger.releases import catalog, pins

TAG = "rp-"  # raw files of a reproduction's launches, beside a run's own


@dataclass
class Target:
    """One experiment to re-run: its result entry, its plan, the arms behind the release's numbers."""

    result: dict[str, Any]
    record: ExperimentRecord
    plan: RunPlan
    arms: list[str]
    numbers: list[ReleaseNumber]
    quality: list[QualityVerdict] = field(default_factory=list)  # the published bars it re-checks

    @property
    def launched(self) -> list[str]:
        """The arms each repeat launches: the control first when quality bars are re-checked."""
        return ["control", *[a for a in self.arms if a != "control"]] if self.quality else self.arms


@dataclass(frozen=True)
class QualityCheck:
    """One published quality bar decided again: reproduced, not-reproduced or inconclusive."""

    published: QualityVerdict
    now: QualityVerdict
    outcome: str


@dataclass
class ReproductionPlan:
    release: catalog.Release
    targets: list[Target]
    notices: list[str] = field(default_factory=list)


# The rule a reproduction decides by, recorded in its entry (payload v2). rl-reproduce/1 (v1
# entries, no `rule`) read the verdict's outcome: no-change reproduced, a win or a regression did not,
# so a CI reaching back inside the tolerance could read not-reproduced.
RULE = "rl-reproduce/2"


@dataclass(frozen=True)
class NumberOutcome:
    number: ReleaseNumber
    verdict: verdicts.Verdict
    outcome: str  # reproduced | not-reproduced | inconclusive
    samples: list[float]
    reason: str  # why, in one line (``judge``: the verdict's own reason where the rule adds nothing)


# ------------------------------------------------------------------------------------ checking


def plan_reproduction(ledger: Ledger, repo: Path, ref: str) -> ReproductionPlan:
    """Check every pin of ``ref`` against this machine and plan the re-run; refuse, naming every
    difference, when a pin cannot be met."""
    release = catalog.find(ledger, ref)
    payload = release.payload
    numbers = [n for n in payload.numbers if n.result]
    if not numbers:
        raise StateError(
            f"release {release.ref} has no numbers linked to result entries"
            + (" (imported: nothing was measured by this tool)" if release.imported else "")
            + ": there is nothing to re-run",
            where=release.ref,
            hint=f"ledger release show {release.ref}",
        )
    problems, notices = pin_problems(payload, repo)
    targets = []
    for result_id in dict.fromkeys(n.result for n in numbers if n.result):
        target, found = _target(
            ledger, repo, payload, result_id, [n for n in numbers if n.result == result_id]
        )
        problems += found
        if target:
            targets.append(target)
    if problems:
        raise StateError(
            f"cannot reproduce {release.ref} as published: " + "; ".join(problems),
            where=release.ref,
            hint=_hint(problems, release.ref),
        )
    return ReproductionPlan(release, targets, notices)


def pin_problems(payload: ReleasePayload, repo: Path) -> tuple[list[str], list[str]]:
    """(problems, notices): the release's pins against this machine as it is now."""
    problems, notices = [], []
    if payload.image is None:
        notices.append("the release pins no image: its server is launched as its experiment says")
    else:
        image_problems, notices = pins.check_image(payload.image)
        problems += image_problems
        if not image_problems:
            labels = images.image_info(pins.run_reference(payload.image)).labels
            problems += pins.check_model_in_image(payload.model, labels)
    problems += pins.check_model(payload.model, repo)
    problems += pins.check_scripts(payload.script_pins, repo)
    problems += (
        pins.check_box(payload.box, host_fingerprint()) if payload.box else ["the release pins no box"]
    )
    return problems, notices


def _target(
    ledger: Ledger, repo: Path, payload: ReleasePayload, result_id: str, numbers: list[ReleaseNumber]
) -> tuple[Target | None, list[str]]:
    result = ledger.get(result_id)
    record = ExperimentRecord.model_validate(result["payload"]["experiment"])
    spec_path = repo / record.spec
    if not spec_path.is_file():
        return None, [f"experiment spec {record.spec} (of result {result_id[:12]}) is missing"]
    sha = sha256_file(spec_path)
    if sha != record.spec_sha256:
        return None, [
            (
                f"experiment spec {record.spec} changed since result {result_id[:12]} "
                f"({sha[:19]}… now, {record.spec_sha256[:19]}… then)"
            )
        ]
    plan = plan_run(spec_path, load_experiment(spec_path), RecipeRoot.of_project(repo), repo)
    arms = list(dict.fromkeys(n.arm for n in numbers if n.arm))
    problems = [p for arm in arms for p in configuration_problems(plan, arm, payload)]
    # The quality evidence the release stands on: the published quality bars of its arms.
    kept = [q for q in record.quality or [] if q.candidate in arms and q.outcome != "not-comparable"]
    return Target(result, record, _pinned_plan(plan, arms, payload), arms, numbers, kept), problems


def configuration_problems(plan: RunPlan, arm: str, payload: ReleasePayload) -> list[str]:
    """The arm as planned today against the argv and env the release pinned."""
    if arm not in plan.arms:
        return [f"arm {arm!r} is no longer in the experiment"]
    planned = plan.arms[arm]
    problems = [
        f"flag {name}: {now} now, {then} published"
        for name, now, then in flag_differences(planned.argv, payload.argv)
    ]
    env_now, env_then = redact_env(planned.env), payload.env
    problems += [
        f"env {name}: {env_now.get(name, '(unset)')} now, {env_then.get(name, '(unset)')} published"
        for name in sorted(set(env_now) | set(env_then))
        if env_now.get(name) != env_then.get(name)
    ]
    if planned.argv[:3] != payload.argv[:3] and not problems:
        problems.append(
            f"server command {' '.join(planned.argv[:3])} now, {' '.join(payload.argv[:3])} published"
        )
    return problems


def flag_differences(now: list[str], then: list[str]) -> list[tuple[str, str, str]]:
    """``(flag, value now, value published)`` for every flag that differs (absent: "(absent)")."""
    a, b = flag_values(now), flag_values(then)
    return [
        (name, a.get(name, "(absent)"), b.get(name, "(absent)"))
        for name in sorted(set(a) | set(b))
        if a.get(name) != b.get(name)
    ]


def _pinned_plan(plan: RunPlan, arms: list[str], payload: ReleasePayload) -> RunPlan:
    """The plan with the release's arms launched from the pinned digest, never from a tag."""
    if payload.image is None or plan.experiment.server.launcher != "docker":
        return plan
    reference = pins.run_reference(payload.image)
    pinned = {
        name: dataclasses.replace(arm, image=reference) if name in arms else arm
        for name, arm in plan.arms.items()
    }
    return dataclasses.replace(plan, arms=pinned)


def _hint(problems: list[str], ref: str) -> str:
    text = " ".join(problems)
    if "image digest" in text:
        return "scripts/build_cpu_image.sh, or docker pull the pinned digest"
    if "script" in text or "spec" in text:
        return "git diff; restore the pinned files (git checkout <commit> -- PATH), then rerun"
    if "model directory" in text:
        return "restore the pinned model (scripts/make_tiny_model.py for the tiny one)"
    return f"ledger release show {ref}"


# ------------------------------------------------------------------------------------- running


def reproduce(
    ledger: Ledger,
    repo: Path,
    ref: str,
    *,
    writer: str,
    events: Events = print_notices,
    repeats: int | None = None,
    allow_dirty: bool = False,
) -> tuple[dict[str, Any], list[NumberOutcome]]:
    """Check, re-run, decide and record; returns the reproduction entry and each number's outcome.

    ``repeats``: launches per arm (default: the experiment's own). More launches narrow the new
    side's share of the CI; the published side keeps the samples it was published with.
    A tree whose experiment specs, recipes, scripts or tool differ from HEAD is refused (StateError)
    unless ``allow_dirty``; a failed re-run raises RunFailed / RunInterrupted after its failure entry."""
    if repeats is not None and repeats < 2:
        raise InputError(
            f"--repeats {repeats}: a reproduction needs at least 2 launches per arm to see its own noise"
        )
    abandoned.record_abandoned(repo, ledger)  # an earlier killed run gets its entry first
    plan = plan_reproduction(ledger, repo, ref)
    git = require_clean_tree(repo, [repo / t.record.spec for t in plan.targets], allow_dirty=allow_dirty)
    for line in [allowed_dirty_text(git)] + [f"notice: {n}" for n in plan.notices]:
        if line:
            events(Notice(line))
    outcomes, contexts, checks = [], [], []
    for target in plan.targets:
        preflight(target.plan)
        ctx = runner.start_context(target.plan, ledger, writer, repo, runs.runs_dir(repo), git, events)
        contexts.append(ctx)
        records = rerun(ctx, target, repeats or target.plan.experiment.repeats)
        outcomes += [decide(ledger, target, number, records) for number in target.numbers]
        checks += recheck_quality(target, records)
    return record(ledger, plan, outcomes, contexts, writer, git=git, checks=checks), outcomes


def rerun(ctx: runner.RunContext, target: Target, repeats: int) -> list[PointRecord]:
    """The release's arms, each launched ``repeats`` times; a failure leaves a failure entry."""
    launched = target.launched
    ctx.events(PhaseStarted("reproduction", repeats * len(launched), len(ctx.plan.experiment.points)))
    records: list[PointRecord] = []
    # Instrument options may hold repository-relative paths (the tokenizer), as for `ledger run`
    # started at the repository root.
    with recording_failure(ctx, "reproduction"), contextlib.chdir(ctx.repo):
        for repeat in range(1, repeats + 1):
            for arm in launched:
                records += measure.measure_launch(ctx.launch(arm, repeat, TAG))
                runner.write_records(ctx.run_dir / runs.MEASUREMENTS, records)
    return records


# ------------------------------------------------------------------------------------ deciding


def decide(
    ledger: Ledger, target: Target, number: ReleaseNumber, records: list[PointRecord]
) -> NumberOutcome:
    """The published samples (control) against the new ones (candidate), the tolerance as the bar."""
    if not isinstance(number.point, int) or number.arm is None:
        raise InputError(f"number {number.name} names no arm and integer point: it cannot be re-measured")
    instrument = _instrument(target, number.metric)
    new = runner.samples(records, number.arm, instrument, number.metric, number.point)
    published = number.samples or [number.value]
    bar_spec = next((b for b in target.plan.experiment.speed_bars if b.metric == number.metric), None)
    bar = verdicts.Bar(
        metric=number.metric,
        point=number.point,
        direction=bar_spec.direction if bar_spec else _direction(number.metric),
        min_effect=number.tolerance or 0.1,
    )
    threshold = bar_spec.agreement_threshold if bar_spec else verdicts.DEFAULT_AGREEMENT_THRESHOLD
    verdict = verdicts.decide(
        published, new, bar, _calibration(ledger, target, number), agreement_threshold=threshold
    )
    outcome, reason = judge(verdict)
    return NumberOutcome(number, verdict, outcome, new, reason)


def recheck_quality(target: Target, records: list[PointRecord]) -> list[QualityCheck]:
    """The published quality bars of the release's arms, decided again from the re-run's launches."""
    if not target.quality:
        return []
    plan = target.plan
    design = target.record.design
    alpha = quality_bars.quality_alpha(design)
    several = runner.several_instruments(plan)
    fresh = {
        (v.candidate, v.metric, str(v.point)): v
        for v in quality_bars.quality_verdicts(plan.experiment, records, alpha, several)
    }
    checks = []
    for published in target.quality:
        now = fresh.get((published.candidate, published.metric, str(published.point)))
        if now is None:
            continue  # the bar is no longer in the experiment (its spec hash would have said so)
        checks.append(QualityCheck(published, now, _quality_outcome(published.outcome, now.outcome)))
    return checks


def _quality_outcome(published: str, now: str) -> str:
    if published == now == "non-inferior":
        return "reproduced"
    if published == "non-inferior" and now == "worse":
        return "not-reproduced"
    return "inconclusive"


def describe_quality(check: QualityCheck) -> str:
    now, then = check.now, check.published
    shown = f" ({now.difference * 100:+.1f} pt on {now.items} items)" if now.difference is not None else ""
    why = f": {now.reason}" if check.outcome == "inconclusive" and now.reason else ""
    return (
        f"quality {now.candidate} {now.metric}@{now.point}: {check.outcome}: {now.outcome} now{shown}, "
        f"{then.outcome} published{why}"
    )


def _instrument(target: Target, metric: str) -> str:
    """The instrument a bar on ``metric`` names, else the experiment's default one."""
    experiment = target.plan.experiment
    named = (bar.instrument for bar in experiment.bars if bar.metric == metric and bar.instrument)
    return next(named, experiment.default_instrument.name)


def _direction(metric: str) -> metric_table.Direction:
    # With no bar on the metric, the metric table says which way is better. For a metric it knows
    # nothing about, "higher" is a label only: a win and a regression both read "not-reproduced".
    return metric_table.direction(metric) or "higher"


def _calibration(ledger: Ledger, target: Target, number: ReleaseNumber) -> verdicts.Calibration | None:
    """The original run's A/A noise at this point: what "within the noise" means for this number."""
    if not target.record.calibration:
        return None
    entry = ledger.get(target.record.calibration)
    if entry["payload"].get("metric") != number.metric or str(number.point) not in entry["payload"].get(
        "points", {}
    ):
        return None
    return runner.to_verdict_calibration(entry)


def judge(verdict: verdicts.Verdict) -> tuple[str, str]:
    """``(outcome, reason)`` of one re-measured number (``RULE``): its effect's CI against the
    tolerance (``verdict.bar.min_effect``), both ways. Inside: reproduced; outside, with replicates
    that agree: not-reproduced; across the edge: inconclusive. Pure: the numbers it says are the
    verdict's."""
    low, high, effect = verdict.ci_low, verdict.ci_high, verdict.effect
    if low is None or high is None or effect is None:  # the noise is unknown: the verdict says why
        return "inconclusive", verdict.reason
    tolerance = verdict.bar.min_effect
    pct = metric_table.format_effect
    said = (
        f"{verdict.candidate_geomean:.4g} now vs {verdict.control_geomean:.4g} published, effect "
        f"{pct(effect)} [{pct(low)}, {pct(high)}]"
    )
    margin = f"the ±{tolerance * 100:g}% tolerance"
    if -tolerance < low and high < tolerance:
        return "reproduced", f"{said} lies inside {margin}"
    if not (low > tolerance or high < -tolerance):  # an edge inside the CI (or touching it)
        mde = f", MDE {verdict.mde * 100:.1f}%" if verdict.mde is not None else ""
        return "inconclusive", (
            f"{said} crosses the edge of {margin}{mde}: shown neither inside nor outside it "
            "(more launches, --repeats N, narrow the new side's share of the CI)"
        )
    if verdict.agreement is not None and not verdict.agreement.passed:
        return "inconclusive", f"{said} lies outside {margin}, but {verdict.reason}"
    return "not-reproduced", f"{said} lies outside {margin}: the number does not hold today"


def overall(outcomes: list[NumberOutcome], checks: list[QualityCheck] | None = None) -> str:
    found = {o.outcome for o in outcomes} | {c.outcome for c in checks or []}
    if "not-reproduced" in found:
        return "not-reproduced"
    return "reproduced" if found == {"reproduced"} else "inconclusive"


# ------------------------------------------------------------------------------------ recording


def describe(outcome: NumberOutcome) -> str:
    """``name: outcome: reason``, the line `ledger reproduce` prints and the entry's text keeps."""
    return f"{outcome.number.name}: {outcome.outcome}: {outcome.reason}"


def number_metrics(outcome: NumberOutcome) -> dict[str, float]:
    v, name = outcome.verdict, outcome.number.name
    values = {
        "published": v.control_geomean,
        "reproduced": v.candidate_geomean,
        "effect": v.effect,
        "ci_low": v.ci_low,
        "ci_high": v.ci_high,
        "mde": v.mde,
        "tolerance": v.bar.min_effect,
        "n_published": float(v.n_control),
        "n_reproduced": float(v.n_candidate),
    }
    return {f"{name}.{key}": round(value, 6) for key, value in values.items() if value is not None}


def quality_metrics(check: QualityCheck) -> dict[str, float]:
    now = check.now
    name = f"quality.{now.candidate}.{now.metric}.c{now.point}"
    values = {"difference": now.difference, "ci_low": now.ci_low, "items": float(now.items)}
    return {f"{name}.{key}": round(value, 6) for key, value in values.items() if value is not None}


def record(
    ledger: Ledger,
    plan: ReproductionPlan,
    outcomes: list[NumberOutcome],
    contexts: list[runner.RunContext],
    writer: str,
    git: dict[str, Any] | None = None,
    checks: list[QualityCheck] | None = None,
) -> dict[str, Any]:
    """The reproduction entry; ``git`` is the stamp taken before the re-run (default: one now)."""
    release = plan.release
    checks = checks or []
    metrics = {k: v for o in outcomes for k, v in number_metrics(o).items()}
    metrics.update({k: v for c in checks for k, v in quality_metrics(c).items()})
    lines = [describe(o) for o in outcomes] + [describe_quality(c) for c in checks]
    lines += [f"notice: {n}" for n in plan.notices]
    artifacts = {
        f"{ctx.run_id}/{name}": digest
        for ctx in contexts
        for name, digest in runs.artifact_hashes(ctx.run_dir).items()
    }
    payload = {
        "target": release.id,
        "outcome": overall(outcomes, checks),
        "rule": RULE,
        "text": f"reproduction of {release.ref} on {contexts[0].host.get('hostname', '?')}: "
        + "; ".join(lines),
        "metrics": metrics,
        "origin": {"how": "measured", "source": ", ".join(c.run_id for c in contexts)},
        "artifacts": artifacts,
        "scripts": sorted(release.payload.script_pins),
    }
    refs = [("see", t.result["id"]) for t in plan.targets]
    refs += [("evidence", t.record.calibration) for t in plan.targets if t.record.calibration]
    stamp = git or gitinfo.snapshot(ledger.root)
    return ledger.append("reproduction", payload, writer=writer, refs=refs, git=stamp)
