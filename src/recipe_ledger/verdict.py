"""Verdicts: is the candidate arm better, worse, the same, or can we not tell? (method ``rl-verdict/2``)

Pure functions over numbers; no I/O and nothing beyond the standard library and pydantic, because
the runner must work on a bare, offline GPU box. The t and chi-square distributions and the sample
statistics under these rules are ``recipe_ledger.stats``; simulated error rates of the rules are
``benchmarks/verdict_sim.py``.

The method, per bar (one metric at one point, e.g. ``output_tps_total`` at concurrency 8):

1. **Scale.** Every sample is taken as ``ln(value)``. Serving noise is multiplicative, so effects
   are ratios: ``effect = candidate/control - 1`` with each arm summarised by its geometric mean.
   Higher- and lower-is-better metrics are treated alike.
2. **Noise is measured, never assumed, and a calibration is taken at its upper bound.** ``sigma``
   (relative) is the larger of (a) the pooled within-arm standard deviation of the log samples and
   (b) the 80% one-sided upper confidence bound of the calibrated sigma from A/A runs of the control:
   ``s * sqrt(df / chi2_0.2(df))`` with ``df = n_calibration - 1`` (x3.95 for 2 launches, x2.12 for
   3, x1.46 for 6). A lucky-tight A/A therefore cannot narrow the interval. Degrees of freedom:
   ``(n_control - 1) + (n_candidate - 1)``, plus the calibration's only when its bound set sigma (the
   max of the two is then at least the pooled estimate, whose t has exactly those df). With one
   repeat per arm and no calibration the noise is unknown: inconclusive.
3. **Interval.** ``d = mean ln(candidate) - mean ln(control)``, ``se = sigma * sqrt(1/n_c + 1/n_t)``,
   CI = ``exp(d -/+ t(1 - alpha/2, df) * se) - 1`` (two-sided, Student t, default 95%).
4. **Outcome**, in this order: ``not-comparable`` when the caller says so; ``no-change`` when the
   whole CI lies strictly inside ``+-min_effect``; ``inconclusive`` when the replicate gate fails
   (an arm's relative spread ``(max - min) / mean`` beyond the threshold, or a single repeat); with
   a calibration the threshold scales with its noise (``agreement_threshold_for``); ``win`` /
   ``regression`` only when the CI excludes zero on that side, ``|d|`` clears the noise threshold
   ``(t(1 - alpha/2) + t(0.8)) * se``, and the bar lies within the effect's one-sided 80% reach
   (``|d| + t(0.8) * se >= ln(1 + bar)``); otherwise ``inconclusive`` with the repeats that would settle it.
5. **MDE** = ``exp((t(1 - alpha/2) + 2 t(0.8)) * se) - 1``: the true effect these rules call a win
   four times in five. ``plan_power`` states it per bar before any launch, from the calibration.

rl-verdict/1 (``METHOD_V1``, still reachable through ``decide(..., method=METHOD_V1)``) took the
calibration's point estimate at face value, always added its df, used a fixed 2% gate, and asked
``|effect| >= bar`` and ``|d| >`` its MDE ``(t(1 - alpha/2) + t(0.8)) * se``, so a true effect at
the bar was a win at most half the time. ``benchmarks/verdict_power.py`` prints both side by side;
docs/verdicts.md has the figures.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from recipe_ledger import stats
from recipe_ledger.errors import InputError

METHOD = "rl-verdict/2"
METHOD_V1 = "rl-verdict/1"  # kept reachable: entries recorded under it, and the benchmark's comparison
DEFAULT_REPEATS = 3  # per arm and point; see docs/verdicts.md for the power table behind it
DEFAULT_CALIBRATION_REPEATS = 6  # A/A launches of the control per calibration
DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.8
DEFAULT_AGREEMENT_THRESHOLD = 0.02  # the seed's tight instrument agreed within ~1%; 2% leaves room
MAX_REPEATS_SUGGESTED = 1000  # beyond this the bar is inside the instrument's noise
TIGHTER_INSTRUMENT_HINT_AT = 10  # repeats per arm past which a tighter instrument beats more launches
# One-sided confidence of the upper bound put on a calibration's sigma. 80% matches the planning power:
# the bound is exceeded by the true sigma one time in five, and then the observed sigma and the t
# interval still stand behind it (90% would cost a default 6-launch calibration 1.76x in sigma, not 1.46x).
CALIBRATION_UCB_CONFIDENCE = 0.8
# The scaled replicate gate fails honest repeats at most this often (see agreement_threshold_for).
GATE_MISS = 0.01
# A plan chooses repeats from a 90% bound on sigma, one step more careful than the verdict's 80%:
# a plan is accepted exactly when the calibration looks good, so its luck must not set the repeats.
PLANNING_UCB_CONFIDENCE = 0.9
# Below this many A/A launches the repeats a plan recommends fell short of 80% power at the bar in
# simulation (benchmarks/verdict_power.py; docs/verdicts.md has the table): plan_power asks for more.
MIN_PLANNING_CALIBRATION = 5
DEFAULT_MAX_PLANNED_REPEATS = 20

Outcome = Literal["win", "regression", "no-change", "inconclusive", "not-comparable"]
OUTCOMES: tuple[Outcome, ...] = ("win", "regression", "no-change", "inconclusive", "not-comparable")
Direction = Literal["higher", "lower"]
Arm = Literal["control", "candidate"]


class _Frozen(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


# ----------------------------------------------------------------------------------------- models


class Bar(_Frozen):
    """What counts as a change worth publishing, for one metric at one point."""

    schema_version: Literal[1] = 1
    metric: str = Field(min_length=1)
    point: int | str  # a concurrency level, or "all"
    direction: Direction
    min_effect: float = Field(ge=0, lt=1)  # relative: 0.03 means 3%
    alpha: float = Field(DEFAULT_ALPHA, gt=0, lt=0.5)


class CalibrationPoint(_Frozen):
    """The control's own noise at one point, from A/A runs (the same arm launched n times)."""

    n: int = Field(ge=2)
    mean: float = Field(gt=0)
    sigma: float = Field(ge=0)  # absolute, in the metric's unit
    cv: float = Field(ge=0)  # sigma / mean
    sigma_log: float = Field(ge=0)  # standard deviation of ln(sample): the relative sigma used
    max_spread: float = Field(ge=0)  # (max - min) / mean: the worst pair
    samples: list[float] = []

    @property
    def sigma_rel(self) -> float:
        # Both are estimates of the same relative noise; the larger one keeps the floor honest.
        return max(self.cv, self.sigma_log)


class Calibration(_Frozen):
    schema_version: Literal[1] = 1
    method: str = METHOD
    metric: str | None = None
    points: dict[str, CalibrationPoint] = Field(min_length=1)

    def for_point(self, point: int | str) -> CalibrationPoint | None:
        return self.points.get(str(point))


class Noise(_Frozen):
    """The relative sigma a verdict used, where it came from, and its degrees of freedom."""

    sigma_rel: float
    observed_sigma_rel: float | None  # None with one repeat per arm
    calibrated_sigma_rel: float | None  # None without a calibration: its point estimate
    source: Literal["observed", "calibration"]
    df: int
    # rl-verdict/2: the upper confidence bound that stood in for the calibration's point estimate
    calibrated_sigma_ucb: float | None = None
    ucb_confidence: float | None = None


class Agreement(_Frozen):
    """The replicate-agreement gate: do repeats of one arm agree with each other?"""

    checked: bool  # False when an arm has one repeat
    passed: bool
    worst_spread: float | None  # relative (max - min) / mean of the worse arm
    worst_arm: Arm | None
    threshold: float


class Thresholds(_Frozen):
    alpha: float
    confidence: float
    power: float
    min_effect: float
    agreement_threshold: float  # the one applied (rl-verdict/2 scales it with the calibrated noise)
    agreement_configured: float | None = None  # what the caller passed, when it differs


class Verdict(_Frozen):
    schema_version: Literal[1] = 1
    method: str = METHOD
    outcome: Outcome
    reason: str
    bar: Bar
    thresholds: Thresholds
    n_control: int
    n_candidate: int
    control_geomean: float | None = None
    candidate_geomean: float | None = None
    effect: float | None = None  # candidate / control - 1
    ci_low: float | None = None
    ci_high: float | None = None
    mde: float | None = None
    noise: Noise | None = None
    agreement: Agreement | None = None
    repeats_suggested: int | None = None  # per arm, when more repeats would settle it


class _VerdictCommon(TypedDict):
    """The fields every Verdict of one ``decide`` call shares, whatever its outcome (a dict at run time)."""

    method: str
    bar: Bar
    thresholds: Thresholds
    n_control: int
    n_candidate: int


# -------------------------------------------------------------------- the calibration's noise bound


def calibrated_sigma_ucb(point: CalibrationPoint, confidence: float = CALIBRATION_UCB_CONFIDENCE) -> float:
    """The relative sigma a calibration vouches for: the upper bound of its estimate (n - 1 df)."""
    return stats.sigma_upper_bound(point.sigma_rel, point.n - 1, confidence)


# ----------------------------------------------------------------------------------- methods


@dataclass(frozen=True)
class _Rules:
    """What differs between the methods; everything else is shared."""

    method: str
    ucb_confidence: float | None  # None: the calibration's point estimate is taken at face value (v1)
    scaled_gate: bool  # the replicate gate follows the calibrated noise (v2) or stays fixed (v1)
    power_margin: bool  # v2: the bar need only lie within the effect's 80% bound; v1: |effect| >= bar, > MDE


_RULES = {
    METHOD_V1: _Rules(METHOD_V1, ucb_confidence=None, scaled_gate=False, power_margin=False),
    METHOD: _Rules(METHOD, ucb_confidence=CALIBRATION_UCB_CONFIDENCE, scaled_gate=True, power_margin=True),
}


def _rules(method: str) -> _Rules:
    rules = _RULES.get(method)
    if rules is None:
        raise InputError(f"unknown verdict method {method!r} (known: {sorted(_RULES)})", hint=f"use {METHOD}")
    return rules


# ------------------------------------------------------------------------------ power arithmetic


def _mde_log(
    sigma_rel: float,
    n_control: int,
    n_candidate: int,
    df: int,
    alpha: float,
    power: float,
    method: str = METHOD,
) -> float:
    """MDE on the log scale: the true effect that this method calls a win with probability `power`.

    A call needs the effect beyond ``t(1 - alpha/2) + t(power)`` standard errors (the noise threshold,
    shared by both methods). rl-verdict/1 reported that threshold itself as the MDE, so an effect at
    its MDE was found half the time; rl-verdict/2 adds ``t(power)`` standard errors more, which is
    what finding it four times in five takes.
    """
    standard_error = sigma_rel * math.sqrt(1.0 / n_control + 1.0 / n_candidate)
    margins = 2.0 if _rules(method).power_margin else 1.0
    return (stats.t_quantile(1.0 - alpha / 2.0, df) + margins * stats.t_quantile(power, df)) * standard_error


def mde(
    sigma_rel: float,
    n_per_arm: int,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    *,
    extra_df: int = 0,
    method: str = METHOD,
) -> float:
    """Minimum detectable effect (relative) with n repeats per arm and relative noise sigma_rel.

    ``extra_df`` adds the degrees of freedom of a calibration (its n - 1). Plan with the calibration's
    upper bound (``calibrated_sigma_ucb``), the sigma a verdict will use.
    """
    df = 2 * n_per_arm - 2 + extra_df
    if n_per_arm < 1 or df < 1:
        raise InputError(
            f"an MDE needs at least 1 degree of freedom (n_per_arm={n_per_arm}, extra_df={extra_df})",
            hint="use at least 2 repeats per arm or a calibration",
        )
    return math.expm1(_mde_log(sigma_rel, n_per_arm, n_per_arm, df, alpha, power, method))


def repeats_needed(
    effect: float,
    sigma_rel: float,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    *,
    extra_df: int = 0,
    cap: int = MAX_REPEATS_SUGGESTED,
    method: str = METHOD,
) -> int:
    """Fewest repeats per arm (at least 2) whose MDE is no larger than |effect|; ``cap + 1`` if none."""
    if effect == 0:
        raise InputError(
            "repeats_needed: a zero effect can never be detected", hint="pass the bar's min_effect"
        )
    target = abs(effect)
    if mde(sigma_rel, cap, alpha, power, extra_df=extra_df, method=method) > target:
        return cap + 1
    low, high = 1, cap  # mde(high) <= target; find the smallest such n by bisection (MDE falls with n)
    while high - low > 1:
        middle = (low + high) // 2
        if mde(sigma_rel, middle, alpha, power, extra_df=extra_df, method=method) <= target:
            high = middle
        else:
            low = middle
    return max(high, 2)


# --------------------------------------------------------------------------------- calibration


def _checked_samples(samples: Sequence[float], what: str) -> list[float]:
    values = [float(value) for value in samples]
    if not values:
        raise InputError(f"{what}: no samples", hint="run the arm at least once before asking for a verdict")
    bad = [value for value in values if not math.isfinite(value) or value <= 0]
    if bad:
        raise InputError(f"{what}: samples must be positive and finite, got {bad[:3]}")
    return values


def relative_spread(samples: Sequence[float]) -> float:
    """(max - min) / mean: for a pair, how far apart the two runs are, relative to their level."""
    return (max(samples) - min(samples)) / statistics.fmean(samples)


def _calibration_point(samples: Sequence[float], where: str) -> CalibrationPoint:
    values = _checked_samples(samples, where)
    if len(values) < 2:
        raise InputError(
            f"{where}: a calibration needs at least 2 A/A samples, got 1",
            hint=f"calibrate with {DEFAULT_CALIBRATION_REPEATS} repeats of the control",
        )
    mean, sigma = statistics.fmean(values), stats.sample_stdev(values)
    return CalibrationPoint(
        n=len(values),
        mean=mean,
        sigma=sigma,
        cv=sigma / mean,
        sigma_log=stats.sample_stdev([math.log(value) for value in values]),
        max_spread=relative_spread(values),
        samples=values,
    )


def calibrate(
    samples_by_point: Mapping[int | str, Sequence[float]], *, metric: str | None = None
) -> Calibration:
    """Noise per point from A/A samples of the control (each sample a fresh launch)."""
    if not samples_by_point:
        raise InputError("calibrate: no points", hint="pass {point: [A/A samples]}")
    points = {
        str(point): _calibration_point(values, f"calibration point {point}")
        for point, values in samples_by_point.items()
    }
    return Calibration(metric=metric, points=points)


# ------------------------------------------------------------------------------------- decide


@dataclass(frozen=True)
class _Estimate:
    """The effect on the log scale with its CI half-width and MDE, all in log units.

    ``call_log`` is how far from zero the effect must be to be called at all: ``t(1 - alpha/2) +
    t(power)`` standard errors (v1 reported it as the MDE). ``margin_log`` is ``t(power)`` standard
    errors: the one-sided 80% reach of the effect (v2's bar rule) and v2's extra MDE margin.
    """

    log_ratio: float
    half_width: float
    mde_log: float
    call_log: float
    margin_log: float

    @property
    def effect(self) -> float:
        return math.expm1(self.log_ratio)

    @property
    def ci(self) -> tuple[float, float]:
        return math.expm1(self.log_ratio - self.half_width), math.expm1(self.log_ratio + self.half_width)

    @property
    def mde(self) -> float:
        return math.expm1(self.mde_log)

    @property
    def reach(self) -> float:
        """|effect| at the one-sided 80% bound away from zero: how large the change may plausibly be."""
        far = abs(self.log_ratio) + self.margin_log
        return math.expm1(far) if self.log_ratio >= 0 else -math.expm1(-far)


def _noise(
    control_logs: list[float],
    candidate_logs: list[float],
    calibrated: CalibrationPoint | None,
    ucb_confidence: float | None,
) -> Noise | None:
    observed_df = len(control_logs) + len(candidate_logs) - 2
    observed = None
    if observed_df > 0:
        observed = math.sqrt(
            (stats.sum_of_squares(control_logs) + stats.sum_of_squares(candidate_logs)) / observed_df
        )
    if observed is None and calibrated is None:
        return None
    calibrated_sigma = calibrated.sigma_rel if calibrated else None
    floor = calibrated_sigma
    if calibrated is not None and ucb_confidence is not None:
        floor = calibrated_sigma_ucb(calibrated, ucb_confidence)
    use_calibration = observed is None or (floor is not None and floor > observed)
    sigma = floor if use_calibration else observed
    assert sigma is not None  # one of the two exists, checked above
    return Noise(
        sigma_rel=sigma,
        observed_sigma_rel=observed,
        calibrated_sigma_rel=calibrated_sigma,
        source="calibration" if use_calibration else "observed",
        df=_degrees_of_freedom(observed_df, calibrated, use_calibration, ucb_confidence),
        calibrated_sigma_ucb=floor if ucb_confidence is not None else None,
        ucb_confidence=ucb_confidence if calibrated is not None else None,
    )


def _degrees_of_freedom(
    observed_df: int, calibrated: CalibrationPoint | None, use_calibration: bool, ucb_confidence: float | None
) -> int:
    """v1: all of them. v2: a calibration lends its degrees of freedom only when its bound set sigma.

    When the experiment is the noisier of the two, its own sigma has only its own degrees of freedom;
    counting a lucky-tight calibration's as well shrank t exactly when the calibration was wrong.
    """
    calibration_df = calibrated.n - 1 if calibrated else 0
    if ucb_confidence is None or use_calibration:
        return observed_df + calibration_df
    return observed_df


def _estimate(
    control_logs: list[float], candidate_logs: list[float], noise: Noise, bar: Bar, rules: _Rules
) -> _Estimate:
    n_control, n_candidate = len(control_logs), len(candidate_logs)
    standard_error = noise.sigma_rel * math.sqrt(1.0 / n_control + 1.0 / n_candidate)
    critical = stats.t_quantile(1.0 - bar.alpha / 2.0, noise.df) * standard_error
    margin = stats.t_quantile(DEFAULT_POWER, noise.df) * standard_error
    return _Estimate(
        log_ratio=statistics.fmean(candidate_logs) - statistics.fmean(control_logs),
        half_width=critical,
        mde_log=critical + (2.0 if rules.power_margin else 1.0) * margin,
        call_log=critical + margin,
        margin_log=margin,
    )


def agreement_threshold_for(
    configured: float,
    calibrated: CalibrationPoint | None,
    repeats: int = 2,
    *,
    confidence: float = CALIBRATION_UCB_CONFIDENCE,
) -> float:
    """The replicate gate's threshold (relative spread within an arm) for the calibrated noise.

    With a calibration: ``exp(2 * z(1 - GATE_MISS / (2 * repeats)) * sigma_ucb) - 1``. For the range of
    ``repeats`` honest samples to exceed ``2 w`` one of them must stray ``w`` from the true level, so
    by the union bound honest data fail the gate at most ``GATE_MISS`` (1%) of the time when sigma is
    within its bound. A threshold the caller chose stays a floor under it; the default (2%) does not,
    so a tight instrument gets a tighter gate. Without a calibration: ``configured``, as before.
    """
    if calibrated is None:
        return configured
    z = statistics.NormalDist().inv_cdf(1.0 - GATE_MISS / (2.0 * max(repeats, 2)))
    scaled = math.expm1(2.0 * z * calibrated_sigma_ucb(calibrated, confidence))
    if configured == DEFAULT_AGREEMENT_THRESHOLD:
        return scaled
    return max(configured, scaled)


def _agreement(control: list[float], candidate: list[float], threshold: float) -> Agreement:
    if min(len(control), len(candidate)) < 2:
        return Agreement(checked=False, passed=False, worst_spread=None, worst_arm=None, threshold=threshold)
    spreads: dict[Arm, float] = {"control": relative_spread(control), "candidate": relative_spread(candidate)}
    worst_arm = max(spreads, key=lambda arm: spreads[arm])
    worst = spreads[worst_arm]
    return Agreement(
        checked=True, passed=worst <= threshold, worst_spread=worst, worst_arm=worst_arm, threshold=threshold
    )


def _calibrated_point(calibration: Calibration | None, bar: Bar) -> CalibrationPoint | None:
    if calibration is None:
        return None
    if calibration.metric is not None and calibration.metric != bar.metric:
        raise InputError(
            f"calibration is for {calibration.metric!r}, the bar is on {bar.metric!r}",
            hint="calibrate the bar's metric",
        )
    point = calibration.for_point(bar.point)
    if point is None:
        raise InputError(
            f"calibration has no point {bar.point!r} (it has {sorted(calibration.points)})",
            hint="calibrate the bar's point, or pass no calibration",
        )
    return point


def _pct(value: float) -> str:
    return f"{value * 100:+.1f}%"


def _bar_text(bar: Bar) -> str:
    return f"{bar.min_effect * 100:g}%"


def _interval_text(estimate: _Estimate) -> str:
    low, high = estimate.ci
    return f"effect {_pct(estimate.effect)} [{_pct(low)}, {_pct(high)}]"


def _suggested_repeats(
    estimate: _Estimate, bar: Bar, noise: Noise, n_now: int, extra_df: int, method: str
) -> int | None:
    """Repeats per arm that would settle it: first make the MDE beat the bar, then resolve the gap."""
    plan_for = bar.min_effect or abs(estimate.effect)
    if plan_for == 0:
        return None

    def needed_for(effect: float) -> int:
        return repeats_needed(
            effect, noise.sigma_rel, bar.alpha, DEFAULT_POWER, extra_df=extra_df, method=method
        )

    needed = needed_for(plan_for)
    gap = abs(abs(estimate.effect) - bar.min_effect)
    if needed <= n_now and gap > 0:  # already powered for the bar: the effect sits near it
        needed = needed_for(gap)
    return min(max(needed, n_now + 1), MAX_REPEATS_SUGGESTED + 1)


def _rerun_text(repeats: int | None) -> str:
    if repeats is None:
        return "rerun with more repeats"
    if repeats > MAX_REPEATS_SUGGESTED:
        return (
            f"more than {MAX_REPEATS_SUGGESTED} repeats per arm needed: "
            "the bar is inside this instrument's noise"
        )
    text = f"rerun with more repeats (about {repeats} per arm needed)"
    if repeats > TIGHTER_INSTRUMENT_HINT_AT:
        text += "; a tighter instrument is cheaper"
    return text


def _side(estimate: _Estimate) -> Literal["up", "down"] | None:
    low, high = estimate.ci
    if low > 0:
        return "up"
    if high < 0:
        return "down"
    return None


def _outcome_for_side(side: Literal["up", "down"], bar: Bar) -> Outcome:
    return "win" if (side == "up") == (bar.direction == "higher") else "regression"


def _gate_text(agreement: Agreement, calibrated: CalibrationPoint | None) -> str:
    if not agreement.checked:
        return (
            "one repeat in an arm: replicate agreement cannot be checked; "
            "rerun with at least 2 repeats per arm"
        )
    worst = agreement.worst_spread or 0.0
    text = (
        f"replicates disagree ({worst * 100:.1f}% > {agreement.threshold * 100:.3g}%, "
        f"{agreement.worst_arm} arm): no win or regression on this data"
    )
    if calibrated is not None and calibrated.max_spread > agreement.threshold:
        spread = calibrated.max_spread * 100
        text += f"; the A/A calibration itself spreads {spread:.1f}%: use a tighter instrument"
    return text


@dataclass(frozen=True)
class _Call:
    outcome: Outcome
    reason: str
    repeats: int | None = None


def _short_of_the_bar(estimate: _Estimate, bar: Bar, rules: _Rules) -> bool:
    """v1: the point estimate must reach the bar. v2: the bar must lie within the effect's 80% reach,
    so a true effect at the bar passes four times in five instead of half the time."""
    if rules.power_margin:
        return estimate.reach < bar.min_effect
    return abs(estimate.effect) < bar.min_effect


def _classify(
    estimate: _Estimate,
    agreement: Agreement,
    bar: Bar,
    calibrated: CalibrationPoint | None,
    suggest: int | None,
    rules: _Rules,
) -> _Call:
    low, high = estimate.ci
    if -bar.min_effect < low and high < bar.min_effect:
        return _Call("no-change", f"{_interval_text(estimate)} lies inside the +-{_bar_text(bar)} bar")
    if not agreement.passed:
        return _Call("inconclusive", _gate_text(agreement, calibrated))
    side = _side(estimate)
    if side is None:
        return _Call(
            "inconclusive",
            f"{_interval_text(estimate)} spans the bar (neither clear of zero nor inside "
            f"+-{_bar_text(bar)}; MDE {estimate.mde * 100:.1f}%): {_rerun_text(suggest)}",
            suggest,
        )
    outcome = _outcome_for_side(side, bar)
    if _short_of_the_bar(estimate, bar, rules):
        return _Call(
            "inconclusive",
            f"{_interval_text(estimate)} clears zero but not the {_bar_text(bar)} bar, and "
            f"the CI reaches past it: {_rerun_text(suggest)}",
            suggest,
        )
    if abs(estimate.log_ratio) <= estimate.call_log:
        return _Call(
            "inconclusive",
            f"{_interval_text(estimate)} looks like a {outcome} but is inside the noise "
            f"(MDE {estimate.mde * 100:.1f}%): {_rerun_text(suggest)}",
            suggest,
        )
    verb = "exceeds" if outcome == "win" else "is worse than"
    lower = " (lower is better)" if bar.direction == "lower" else ""
    return _Call(
        outcome,
        f"{_interval_text(estimate)}{lower} {verb} the {_bar_text(bar)} bar and the noise "
        f"(MDE {estimate.mde * 100:.1f}%)",
    )


def decide(
    control: Sequence[float],
    candidate: Sequence[float],
    bar: Bar,
    calibration: Calibration | None,
    *,
    comparable: bool = True,
    incomparable_reason: str | None = None,
    agreement_threshold: float = DEFAULT_AGREEMENT_THRESHOLD,
    method: str = METHOD,
) -> Verdict:
    """The verdict on one bar from the repeats of each arm at the bar's point (see the module docstring).

    ``method`` selects the rules (default the current one; ``METHOD_V1`` reproduces rl-verdict/1).
    """
    rules = _rules(method)
    control_values = _checked_samples(control, "control")
    candidate_values = _checked_samples(candidate, "candidate")
    calibrated = _calibrated_point(calibration, bar) if comparable else None
    gate = agreement_threshold
    if rules.scaled_gate:
        repeats = max(len(control_values), len(candidate_values))
        gate = agreement_threshold_for(_checked_threshold(agreement_threshold), calibrated, repeats)
    common: _VerdictCommon = {
        "method": rules.method,
        "bar": bar,
        "thresholds": _thresholds(bar, agreement_threshold, gate),
        "n_control": len(control_values),
        "n_candidate": len(candidate_values),
    }
    if not comparable:
        why = incomparable_reason or "control and candidate differ in something not under test"
        return Verdict(outcome="not-comparable", reason=f"not comparable: {why}", **common)
    control_logs = [math.log(value) for value in control_values]
    candidate_logs = [math.log(value) for value in candidate_values]
    noise = _noise(control_logs, candidate_logs, calibrated, rules.ucb_confidence)
    if noise is None:
        return Verdict(
            outcome="inconclusive",
            reason="one repeat per arm and no calibration: the noise is unknown; "
            "run an A/A calibration of the control or rerun with at least 2 repeats per arm",
            **common,
        )
    estimate = _estimate(control_logs, candidate_logs, noise, bar, rules)
    agreement = _agreement(control_values, candidate_values, gate)
    n_now = min(len(control_values), len(candidate_values))
    suggest = _suggested_repeats(
        estimate, bar, noise, n_now, calibrated.n - 1 if calibrated else 0, rules.method
    )
    call = _classify(estimate, agreement, bar, calibrated, suggest, rules)
    return Verdict(
        outcome=call.outcome,
        reason=call.reason,
        **common,
        control_geomean=math.exp(statistics.fmean(control_logs)),
        candidate_geomean=math.exp(statistics.fmean(candidate_logs)),
        effect=estimate.effect,
        ci_low=estimate.ci[0],
        ci_high=estimate.ci[1],
        mde=estimate.mde,
        noise=noise,
        agreement=agreement,
        repeats_suggested=call.repeats,
    )


def _checked_threshold(agreement_threshold: float) -> float:
    if not 0 < agreement_threshold < 1:
        raise InputError(f"agreement threshold must be between 0 and 1 (relative), got {agreement_threshold}")
    return agreement_threshold


def _thresholds(bar: Bar, configured: float, applied: float) -> Thresholds:
    _checked_threshold(configured)
    return Thresholds(
        alpha=bar.alpha,
        confidence=1.0 - bar.alpha,
        power=DEFAULT_POWER,
        min_effect=bar.min_effect,
        agreement_threshold=applied,
        agreement_configured=configured if applied != configured else None,
    )


# ------------------------------------------------------------------------------------ planning


@dataclass(frozen=True)
class PowerPlan:
    """What one bar can see with the planned repeats, from the matching calibration, before any launch."""

    bar: Bar
    repeats: int  # planned, per arm
    sigma_rel: float | None  # the calibration's upper bound: the sigma a verdict will use at least
    mde: float | None  # at the planned repeats; None without a calibration
    reachable: bool  # the MDE at the planned repeats is within the bar
    repeats_needed: int | None  # fewest per arm (<= max_repeats) that bring the MDE within the bar
    reason: str  # one finished sentence, for `ledger run --plan`


def _bar_name(bar: Bar) -> str:
    return f"{bar.metric}@{bar.point}"


def plan_power(
    calibration_point: CalibrationPoint | None,
    bar: Bar,
    repeats: int,
    *,
    max_repeats: int = DEFAULT_MAX_PLANNED_REPEATS,
) -> PowerPlan:
    """The MDE this bar will have with ``repeats`` per arm, and the repeats that bring it within the bar.

    The MDE is the true effect that a verdict calls a win four times in five (see ``mde``), computed
    with the calibration's upper bound on sigma and its degrees of freedom, as ``decide`` will.
    """
    if repeats < 1 or max_repeats < 2:
        raise InputError(f"plan_power needs repeats >= 1 and max_repeats >= 2, got {repeats}, {max_repeats}")
    name, bar_text = _bar_name(bar), _bar_text(bar)
    if calibration_point is None:
        return PowerPlan(
            bar,
            repeats,
            None,
            None,
            False,
            None,
            f"{name}: no calibration, so the MDE is unknown before the run; calibrate the control first",
        )
    sigma = calibrated_sigma_ucb(calibration_point, PLANNING_UCB_CONFIDENCE)
    extra_df = calibration_point.n - 1
    planned = mde(sigma, repeats, bar.alpha, extra_df=extra_df)
    head = f"{name}: MDE {planned * 100:.1f}% with {repeats} repeats"
    if calibration_point.n < MIN_PLANNING_CALIBRATION:
        reason = (
            f"{head} (bar {bar_text}), from a {calibration_point.n}-launch calibration too loose to plan "
            f"with; recalibrate with {DEFAULT_CALIBRATION_REPEATS} launches of the control"
        )
        return PowerPlan(bar, repeats, sigma, planned, False, None, reason)
    needed = repeats_needed(bar.min_effect, sigma, bar.alpha, extra_df=extra_df, cap=max_repeats)
    found = needed if needed <= max_repeats else None
    if planned <= bar.min_effect:
        reason = f"{head} is within the {bar_text} bar"
    elif found is not None:
        reason = f"{head} > bar {bar_text}: {found} repeats reach it"
    else:
        reason = (
            f"{head} > bar {bar_text}: even {max_repeats} repeats do not reach it "
            f"(MDE {mde(sigma, max_repeats, bar.alpha, extra_df=extra_df) * 100:.1f}%); "
            "use a tighter instrument or a larger bar"
        )
    return PowerPlan(bar, repeats, sigma, planned, planned <= bar.min_effect, found, reason)


# ------------------------------------------------------------------------- tight or loose instruments

InstrumentClass = Literal["tight", "loose"]
# An instrument is tight for a metric when its A/A noise is at most this share of the bar: two
# launches of the same thing then differ by well under the effect that matters, and a few repeats
# decide. Above it the instrument is loose: the 000 replay (90, 119, 124 tok/s reruns of one
# configuration against a 10% bar) is the example. The noise is the calibration's 80% upper bound,
# the sigma a verdict uses (``calibrated_sigma_ucb``): a lucky-tight A/A of two launches must not
# make an instrument tight.
TIGHT_NOISE_SHARE = 0.5


class InstrumentClassification(_Frozen):
    """One instrument's class for one metric at one point, from its A/A calibration and a bar."""

    instrument_class: InstrumentClass
    sigma_rel: float  # the A/A's relative noise at its upper bound (what verdicts use)
    min_effect: float
    text: str


def classify_instrument(point: CalibrationPoint, min_effect: float) -> InstrumentClassification:
    """Tight when the calibrated noise (its upper bound) is at most ``TIGHT_NOISE_SHARE`` of the bar."""
    if not 0 < min_effect < 1:
        raise InputError(f"classify_instrument: the bar must be between 0 and 1, got {min_effect}")
    sigma = calibrated_sigma_ucb(point)
    tight = sigma <= TIGHT_NOISE_SHARE * min_effect
    relation = "well under" if tight else "not well under"
    return InstrumentClassification(
        instrument_class="tight" if tight else "loose",
        sigma_rel=sigma,
        min_effect=min_effect,
        text=f"{'tight' if tight else 'loose'}: A/A noise up to {sigma * 100:.1f}% (the "
        f"{CALIBRATION_UCB_CONFIDENCE:.0%} bound from {point.n} launches, {point.sigma_rel * 100:.1f}% "
        f"observed) is {relation} the {min_effect * 100:g}% bar (tight: at most "
        f"{TIGHT_NOISE_SHARE * 100:g}% of it)",
    )


def gate_loose_instrument(
    verdict: Verdict, classification: InstrumentClassification, instrument: str, calibration_n: int
) -> Verdict:
    """A loose instrument cannot carry a win (or a regression) while its MDE is above the bar: the
    call becomes inconclusive, saying why in words and how many repeats would bring the MDE under
    the bar. A tight instrument's verdict, and any other outcome, pass unchanged."""
    if classification.instrument_class != "loose" or verdict.outcome not in ("win", "regression"):
        return verdict
    if verdict.mde is None or verdict.noise is None or verdict.mde <= verdict.bar.min_effect:
        return verdict
    repeats = repeats_needed(
        verdict.bar.min_effect, verdict.noise.sigma_rel, verdict.bar.alpha, extra_df=max(calibration_n - 1, 0)
    )
    n_now = min(verdict.n_control, verdict.n_candidate)
    reason = (
        f"{instrument} is a loose instrument for {verdict.bar.metric} ({classification.text}): it looked "
        f"like a {verdict.outcome} (effect {_pct(verdict.effect or 0.0)}) but a loose instrument carries "
        f"one only when its MDE is under the bar, and with {n_now} repeats per arm it is "
        f"{verdict.mde * 100:.1f}%: {_rerun_text(max(repeats, n_now + 1))}"
    )
    return verdict.model_copy(
        update={"outcome": "inconclusive", "reason": reason, "repeats_suggested": max(repeats, n_now + 1)}
    )
