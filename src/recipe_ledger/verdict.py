"""Verdicts: is the candidate arm better, worse, the same, or can we not tell? (method ``rl-verdict/1``)

Pure functions over numbers; no I/O and nothing beyond the standard library and pydantic, because
the runner must work on a bare, offline GPU box.

The method, per bar (one metric at one point, e.g. ``output_tps_total`` at concurrency 8):

1. **Scale.** Every sample is taken as ``ln(value)``. Serving noise is multiplicative (a slower
   launch is x% slower at every level), so effects are ratios: ``effect = candidate/control - 1``
   with each arm summarised by its geometric mean (for repeats within 1% of each other it equals
   the arithmetic mean to within 0.01%). Higher- and lower-is-better metrics are treated alike.
2. **Noise is measured, never assumed.** ``sigma`` (relative) is the larger of (a) the pooled
   within-arm standard deviation of the log samples of this experiment and (b) the calibrated
   relative sigma of this point from A/A runs of the control (the larger of its cv and log-sd).
   Degrees of freedom: ``(n_control - 1) + (n_candidate - 1) + (n_calibration - 1)``. Taking the
   max of two estimates that share one true sigma gives a value at least as large as their pooled
   estimate, whose t statistic has exactly those degrees of freedom, so the test stays
   conservative; and a calibration can only widen the interval, never narrow it below what this
   experiment shows. With one repeat per arm and no calibration the noise is unknown:
   inconclusive.
3. **Interval.** ``d = mean ln(candidate) - mean ln(control)``, ``se = sigma * sqrt(1/n_c + 1/n_t)``,
   CI = ``exp(d -/+ t(1 - alpha/2, df) * se) - 1`` (two-sided, Student t, default 95%).
   MDE = ``exp((t(1 - alpha/2, df) + t(power, df)) * se) - 1`` with power 0.8: the smallest true
   effect this experiment finds four times in five.
4. **Outcome**, in this order:
   ``not-comparable`` when the caller says the arms differ in something not under test;
   ``no-change`` when the whole CI lies strictly inside ``+-min_effect`` (equivalence, TOST-style);
   ``inconclusive`` when replicates within an arm disagree by more than the agreement threshold
   (relative spread ``(max - min) / mean``, default 2%) or an arm has a single repeat, since that
   cannot be checked; ``win`` / ``regression`` only when the CI excludes zero on that side AND
   ``|effect| >= min_effect`` AND ``|effect| > MDE``; otherwise ``inconclusive``, with the number
   of repeats per arm that would make the MDE smaller than the bar.
5. **Not pyperf's shortcut.** pyperf calls a difference significant when the means differ by more
   than the standard deviations; a noisy instrument then declares wins on one lucky run. Here a
   win has to clear a t interval, the bar and the MDE, and the replicate gate guards data quality
   on its own (the retracted replay "win" swung 90/119/124 tok/s; the sweep that told the truth
   agreed within 1%).

Requiring ``|effect| > MDE`` on top of significance is deliberately conservative: an effect that
only just clears zero is most often an overestimate (the winner's curse), and a published number
must survive a rerun. The cost is power: an effect exactly at the MDE is called a win about half
the time. ``benchmarks/verdict_power.py`` prints the measured false-positive rate and power.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from recipe_ledger.errors import InputError

METHOD = "rl-verdict/1"
DEFAULT_REPEATS = 3  # per arm and point; see docs/verdicts.md for the power table behind it
DEFAULT_CALIBRATION_REPEATS = 6  # A/A launches of the control per calibration
DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.8
DEFAULT_AGREEMENT_THRESHOLD = 0.02  # the seed's tight instrument agreed within ~1%; 2% leaves room
MAX_REPEATS_SUGGESTED = 1000  # beyond this the bar is inside the instrument's noise
TIGHTER_INSTRUMENT_HINT_AT = 10  # repeats per arm past which a tighter instrument beats more launches

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
    calibrated_sigma_rel: float | None  # None without a calibration
    source: Literal["observed", "calibration"]
    df: int


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
    agreement_threshold: float


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


# ------------------------------------------------------------------------------- Student t (stdlib)


def _continued_fraction_beta(a: float, b: float, x: float) -> float:
    """Lentz's evaluation of the continued fraction of the incomplete beta (Numerical Recipes 6.4)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 20_000):
        for numerator in _beta_terms(a, b, x, m):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < eps:
            return result
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def _beta_terms(a: float, b: float, x: float, m: int) -> tuple[float, float]:
    even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
    odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
    return even, odd


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the CDF of a Beta(a, b) variable at x."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):  # the fraction converges fast on this side
        return math.exp(log_front) * _continued_fraction_beta(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction_beta(b, a, 1.0 - x) / b


def t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom, t >= 0."""
    return 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with df degrees of freedom (df > 0, 0 < p < 1).

    Solved by bisection on the upper tail (not on 1 - tail, which loses digits near p = 1).
    """
    if not 0.0 < p < 1.0 or not df > 0:
        raise InputError(f"t quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    if df > 1e5:  # Cornish-Fisher: error O(1/df^2), far below what a verdict can resolve
        z = statistics.NormalDist().inv_cdf(p)
        return z + (z**3 + z) / (4.0 * df)
    return _bisect_upper_tail(1.0 - p, df)


def _bisect_upper_tail(tail: float, df: float) -> float:
    low, high = 0.0, 1.0
    while t_upper_tail(high, df) > tail:
        low, high = high, high * 2.0
    for _ in range(200):
        middle = 0.5 * (low + high)
        if t_upper_tail(middle, df) > tail:
            low = middle
        else:
            high = middle
        if high - low <= 1e-12 * high:
            break
    return 0.5 * (low + high)


# ------------------------------------------------------------------------------ power arithmetic


def _mde_log(
    sigma_rel: float, n_control: int, n_candidate: int, df: int, alpha: float, power: float
) -> float:
    """MDE on the log scale: the effect whose t statistic clears the two-sided test with `power`."""
    standard_error = sigma_rel * math.sqrt(1.0 / n_control + 1.0 / n_candidate)
    return (t_quantile(1.0 - alpha / 2.0, df) + t_quantile(power, df)) * standard_error


def mde(
    sigma_rel: float,
    n_per_arm: int,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    *,
    extra_df: int = 0,
) -> float:
    """Minimum detectable effect (relative) with n repeats per arm and relative noise sigma_rel.

    ``extra_df`` adds the degrees of freedom of a calibration (its n - 1).
    """
    df = 2 * n_per_arm - 2 + extra_df
    if n_per_arm < 1 or df < 1:
        raise InputError(
            f"an MDE needs at least 1 degree of freedom (n_per_arm={n_per_arm}, extra_df={extra_df})",
            hint="use at least 2 repeats per arm or a calibration",
        )
    return math.expm1(_mde_log(sigma_rel, n_per_arm, n_per_arm, df, alpha, power))


def repeats_needed(
    effect: float,
    sigma_rel: float,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    *,
    extra_df: int = 0,
    cap: int = MAX_REPEATS_SUGGESTED,
) -> int:
    """Fewest repeats per arm (at least 2) whose MDE is no larger than |effect|; ``cap + 1`` if none."""
    if effect == 0:
        raise InputError(
            "repeats_needed: a zero effect can never be detected", hint="pass the bar's min_effect"
        )
    target = abs(effect)
    if mde(sigma_rel, cap, alpha, power, extra_df=extra_df) > target:
        return cap + 1
    low, high = 1, cap  # mde(high) <= target; find the smallest such n by bisection (MDE falls with n)
    while high - low > 1:
        middle = (low + high) // 2
        if mde(sigma_rel, middle, alpha, power, extra_df=extra_df) <= target:
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
    mean, sigma = statistics.fmean(values), statistics.stdev(values)
    return CalibrationPoint(
        n=len(values),
        mean=mean,
        sigma=sigma,
        cv=sigma / mean,
        sigma_log=statistics.stdev(math.log(value) for value in values),
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
    """The effect on the log scale with its CI half-width and MDE, all in log units."""

    log_ratio: float
    half_width: float
    mde_log: float

    @property
    def effect(self) -> float:
        return math.expm1(self.log_ratio)

    @property
    def ci(self) -> tuple[float, float]:
        return math.expm1(self.log_ratio - self.half_width), math.expm1(self.log_ratio + self.half_width)

    @property
    def mde(self) -> float:
        return math.expm1(self.mde_log)


def _sum_of_squares(values: Sequence[float]) -> float:
    center = statistics.fmean(values)
    return sum((value - center) ** 2 for value in values)


def _noise(
    control_logs: list[float], candidate_logs: list[float], calibrated: CalibrationPoint | None
) -> Noise | None:
    observed_df = len(control_logs) + len(candidate_logs) - 2
    observed = None
    if observed_df > 0:
        observed = math.sqrt((_sum_of_squares(control_logs) + _sum_of_squares(candidate_logs)) / observed_df)
    calibrated_sigma = calibrated.sigma_rel if calibrated else None
    calibration_df = calibrated.n - 1 if calibrated else 0
    if observed is None and calibrated_sigma is None:
        return None
    use_calibration = observed is None or (calibrated_sigma is not None and calibrated_sigma > observed)
    sigma = calibrated_sigma if use_calibration else observed
    assert sigma is not None  # one of the two exists, checked above
    return Noise(
        sigma_rel=sigma,
        observed_sigma_rel=observed,
        calibrated_sigma_rel=calibrated_sigma,
        source="calibration" if use_calibration else "observed",
        df=observed_df + calibration_df,
    )


def _estimate(control_logs: list[float], candidate_logs: list[float], noise: Noise, bar: Bar) -> _Estimate:
    n_control, n_candidate = len(control_logs), len(candidate_logs)
    standard_error = noise.sigma_rel * math.sqrt(1.0 / n_control + 1.0 / n_candidate)
    return _Estimate(
        log_ratio=statistics.fmean(candidate_logs) - statistics.fmean(control_logs),
        half_width=t_quantile(1.0 - bar.alpha / 2.0, noise.df) * standard_error,
        mde_log=_mde_log(noise.sigma_rel, n_control, n_candidate, noise.df, bar.alpha, DEFAULT_POWER),
    )


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


def _suggested_repeats(estimate: _Estimate, bar: Bar, noise: Noise, n_now: int, extra_df: int) -> int | None:
    """Repeats per arm that would settle it: first make the MDE beat the bar, then resolve the gap."""
    plan_for = bar.min_effect or abs(estimate.effect)
    if plan_for == 0:
        return None
    needed = repeats_needed(plan_for, noise.sigma_rel, bar.alpha, DEFAULT_POWER, extra_df=extra_df)
    gap = abs(abs(estimate.effect) - bar.min_effect)
    if needed <= n_now and gap > 0:  # already powered for the bar: the effect sits near it
        needed = repeats_needed(gap, noise.sigma_rel, bar.alpha, DEFAULT_POWER, extra_df=extra_df)
    return min(max(needed, n_now + 1), MAX_REPEATS_SUGGESTED + 1)


def _rerun_text(repeats: int | None) -> str:
    if repeats is None:
        return "rerun with more repeats"
    if repeats > MAX_REPEATS_SUGGESTED:
        return (
            f"more than {MAX_REPEATS_SUGGESTED} repeats per arm needed:"
            " the bar is inside this instrument's noise"
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
            "one repeat in an arm: replicate agreement cannot be checked;"
            " rerun with at least 2 repeats per arm"
        )
    worst = agreement.worst_spread or 0.0
    text = (
        f"replicates disagree ({worst * 100:.1f}% > {agreement.threshold * 100:g}%, "
        f"{agreement.worst_arm} arm): no win or regression on this data"
    )
    if calibrated is not None and calibrated.max_spread > agreement.threshold:
        text += (
            f"; the A/A calibration itself spreads {calibrated.max_spread * 100:.1f}%:"
            " use a tighter instrument"
        )
    return text


@dataclass(frozen=True)
class _Call:
    outcome: Outcome
    reason: str
    repeats: int | None = None


def _classify(
    estimate: _Estimate,
    agreement: Agreement,
    bar: Bar,
    calibrated: CalibrationPoint | None,
    suggest: int | None,
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
    if abs(estimate.effect) < bar.min_effect:
        return _Call(
            "inconclusive",
            f"{_interval_text(estimate)} clears zero but not the {_bar_text(bar)} bar, and "
            f"the CI reaches past it: {_rerun_text(suggest)}",
            suggest,
        )
    if abs(estimate.log_ratio) <= estimate.mde_log:
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
) -> Verdict:
    """The verdict on one bar from the repeats of each arm at the bar's point (see the module docstring)."""
    control_values = _checked_samples(control, "control")
    candidate_values = _checked_samples(candidate, "candidate")
    common = {
        "bar": bar,
        "thresholds": _thresholds(bar, agreement_threshold),
        "n_control": len(control_values),
        "n_candidate": len(candidate_values),
    }
    if not comparable:
        why = incomparable_reason or "control and candidate differ in something not under test"
        return Verdict(outcome="not-comparable", reason=f"not comparable: {why}", **common)
    calibrated = _calibrated_point(calibration, bar)
    control_logs = [math.log(value) for value in control_values]
    candidate_logs = [math.log(value) for value in candidate_values]
    noise = _noise(control_logs, candidate_logs, calibrated)
    if noise is None:
        return Verdict(
            outcome="inconclusive",
            reason="one repeat per arm and no calibration: the noise is unknown; "
            "run an A/A calibration of the control or rerun with at least 2 repeats per arm",
            **common,
        )
    estimate = _estimate(control_logs, candidate_logs, noise, bar)
    agreement = _agreement(control_values, candidate_values, agreement_threshold)
    n_now = min(len(control_values), len(candidate_values))
    suggest = _suggested_repeats(estimate, bar, noise, n_now, calibrated.n - 1 if calibrated else 0)
    call = _classify(estimate, agreement, bar, calibrated, suggest)
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


def _thresholds(bar: Bar, agreement_threshold: float) -> Thresholds:
    if not 0 < agreement_threshold < 1:
        raise InputError(f"agreement threshold must be between 0 and 1 (relative), got {agreement_threshold}")
    return Thresholds(
        alpha=bar.alpha,
        confidence=1.0 - bar.alpha,
        power=DEFAULT_POWER,
        min_effect=bar.min_effect,
        agreement_threshold=agreement_threshold,
    )


# ---------------------------------------------------------------------------------- simulation


def _draw(rng: random.Random, level: float, sigma_rel: float, count: int) -> list[float]:
    return [level * math.exp(rng.gauss(0.0, sigma_rel)) for _ in range(count)]


def simulate_error_rates(
    effect_sigmas: Sequence[float],
    n: int = DEFAULT_REPEATS,
    trials: int = 1000,
    seed: int = 0,
    *,
    sigma_rel: float = 0.005,
    min_effect_sigmas: float = 1.0,
    calibration_repeats: int = DEFAULT_CALIBRATION_REPEATS,
    agreement_threshold: float = DEFAULT_AGREEMENT_THRESHOLD,
) -> dict[float, dict[str, float]]:
    """Fraction of each outcome over simulated experiments, per true effect (in units of sigma_rel).

    Each trial draws a fresh A/A calibration of the control (``calibration_repeats`` launches), then
    ``n`` control and ``n`` candidate repeats with log-normal noise ``sigma_rel`` (0.5%: the seed's
    tight instrument, pairs within ~1%); the candidate's true level is ``(1 + k * sigma_rel)`` times
    the control's. The bar is ``min_effect_sigmas * sigma_rel`` so the rates measure the noise test,
    not the bar. At k = 0, ``win + regression`` is the false-positive rate; at k > 0, ``win`` is power.
    Returns ``{k: {outcome: fraction, ..., "gate_failed": fraction}}``.
    """
    rng = random.Random(seed)
    bar = Bar(metric="simulated", point=1, direction="higher", min_effect=min_effect_sigmas * sigma_rel)
    rates: dict[float, dict[str, float]] = {}
    for k in effect_sigmas:
        counts = dict.fromkeys((*OUTCOMES, "gate_failed"), 0)
        for _ in range(trials):
            calibration = calibrate({1: _draw(rng, 100.0, sigma_rel, calibration_repeats)})
            control = _draw(rng, 100.0, sigma_rel, n)
            candidate = _draw(rng, 100.0 * (1.0 + k * sigma_rel), sigma_rel, n)
            verdict = decide(control, candidate, bar, calibration, agreement_threshold=agreement_threshold)
            counts[verdict.outcome] += 1
            counts["gate_failed"] += verdict.agreement is not None and not verdict.agreement.passed
        rates[float(k)] = {key: count / trials for key, count in counts.items()}
    return rates
