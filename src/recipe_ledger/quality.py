"""Quality bars: does the candidate keep the model's answers? (method ``rl-quality/1``)

Pure functions over numbers, like ``verdict`` and ``sequential``: no I/O, the standard library and
pydantic only.

A quality instrument (answer agreement, task accuracy, functional probes) scores every *item* of a
fixed set (a prompt, a task document, a probe) in every launch: 1 when the answer was kept, correct
or the probe passed, else 0. A quality bar asks one question of one such metric, at one point:

    H0: p_candidate - p_control <= -margin   (the candidate answers worse by at least the margin)
    H1: p_candidate - p_control >  -margin   (it is *non-inferior*)

**Items are the unit, paired across arms.** Both arms answer the same items, so the comparison is
paired by item id. Repeated launches answer the *same* items again: they say how stable an item's
answer is, not that there are more items, so each arm's outcome on an item is its share of launches
that kept it (``item_shares``), and the number of items ``n`` never grows with launches.

**The test is Tango's score test** for a difference of paired proportions (Tango 1998, Stat Med
17:891; McNemar's test is its case ``margin = 0``). With ``b`` the items the candidate kept and the
control did not, ``c`` the reverse, and ``Delta = -margin``, the restricted maximum-likelihood
estimate ``q`` of the control-only cell under H0 solves ``2n q^2 + B q + C = 0`` with
``B = -b - c + (2n - b + c) Delta`` and ``C = -c Delta (1 - Delta)``, and

    Z = (b - c - n Delta) / sqrt(n (2q + Delta - Delta^2)).

Unlike a Wald interval it stays honest when no item differs (``b = c = 0``, the usual case at
temperature 0): then ``Z = sqrt(n margin / (1 - margin))``, so 200 identical answers show
non-inferiority at a 5% margin (Z = 3.24) and 32 do not (Z = 1.30): too few items cannot prove
anything, however alike they are. With shares instead of 0/1 outcomes (launches that disagree on an
item), ``b`` and ``c`` are the sums of the positive and negative per-item differences: exactly
Tango's counts when every arm's launches agree on every item, a continuous extension otherwise.

**Outcomes**, one-sided at ``alpha`` each way, read off the score interval (the ``Delta`` where Z
crosses the critical value, found by bisection): ``non-inferior`` when its lower end lies above
``-margin``; ``worse`` when its upper end lies below ``-margin`` (worse by more than the margin,
shown); ``not-shown`` otherwise; ``not-comparable`` when the arms share no item. What "the same"
means on a box comes from the control's own launches against the reference (its A/A), never from a
constant: a non-deterministic engine lowers the control's share as much as an honest candidate's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

METHOD = "rl-quality/1"
DEFAULT_MARGIN = 0.05  # absolute share of items: 0.05 = five answers in a hundred
_BISECTION_STEPS = 60  # halves (-1, 1) to below 1e-17: far under any share the record prints
_EDGE = 1e-12  # the score statistic's variance vanishes at Delta = +-1

QualityOutcome = Literal["non-inferior", "worse", "not-shown", "not-comparable"]
QUALITY_OUTCOMES: tuple[QualityOutcome, ...] = ("non-inferior", "worse", "not-shown", "not-comparable")

ItemLaunches = Sequence[Mapping[str, float]]  # one arm: per launch, item id -> outcome in [0, 1]


class QualityCall(BaseModel):
    """One quality bar decided: the outcome, the paired difference and its score interval."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    method: str = METHOD
    outcome: QualityOutcome
    margin: float = Field(gt=0, lt=1)
    alpha: float = Field(gt=0, lt=0.5)  # one-sided, each way
    items: int = Field(ge=0)  # items both arms answered
    control_launches: int = Field(ge=0)
    candidate_launches: int = Field(ge=0)
    control_rate: float | None = None  # mean item share
    candidate_rate: float | None = None
    difference: float | None = None  # candidate - control, in shares of items
    low: float | None = None  # score interval of the difference, one-sided alpha each end
    high: float | None = None
    kept_only_by_candidate: float = 0.0  # b: items the candidate kept and the control did not
    kept_only_by_control: float = 0.0  # c
    z: float | None = None  # Tango's statistic at Delta = -margin
    reason: str = ""


def item_shares(launches: ItemLaunches) -> dict[str, float]:
    """Each item's share of the launches that kept it (only the launches that scored it count)."""
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for launch in launches:
        for item, value in launch.items():
            if not 0.0 <= value <= 1.0 or math.isnan(value):
                raise ValueError(f"item {item!r} has outcome {value!r}; outcomes lie in [0, 1]")
            totals[item] = totals.get(item, 0.0) + value
            counts[item] = counts.get(item, 0) + 1
    return {item: totals[item] / counts[item] for item in totals}


def discordance(control: Mapping[str, float], candidate: Mapping[str, float]) -> tuple[float, float, int]:
    """(b, c, n) over the items both arms scored: b the candidate's gains, c its losses."""
    shared = control.keys() & candidate.keys()
    gains = sum(max(candidate[i] - control[i], 0.0) for i in shared)
    losses = sum(max(control[i] - candidate[i], 0.0) for i in shared)
    return gains, losses, len(shared)


def _restricted_control_cell(b: float, c: float, n: int, delta: float) -> float:
    # The root of 2n q^2 + B q + C = 0 in [0, 1] (the other is negative): Tango's restricted MLE.
    quadratic_b = -b - c + (2 * n - b + c) * delta
    quadratic_c = -c * delta * (1 - delta)
    root = math.sqrt(max(quadratic_b * quadratic_b - 8 * n * quadratic_c, 0.0))
    return (root - quadratic_b) / (4 * n)


def tango_z(b: float, c: float, n: int, delta: float) -> float:
    """Tango's score statistic for H0: p_candidate - p_control = ``delta`` (|delta| < 1)."""
    if n <= 0:
        raise ValueError("the score statistic needs at least one item")
    q = _restricted_control_cell(b, c, n, delta)
    variance = n * (2 * q + delta - delta * delta)
    numerator = b - c - n * delta
    if variance <= 0:
        return math.copysign(math.inf, numerator) if numerator else 0.0
    return numerator / math.sqrt(variance)


def score_interval(b: float, c: float, n: int, critical: float) -> tuple[float, float]:
    """The differences ``delta`` Tango's test does not reject at ``|Z| < critical``: (low, high)."""
    estimate = (b - c) / n
    # Z falls as delta rises: the low end is where Z comes down to +critical, the high end -critical.
    low = _crossing(b, c, n, critical, -1.0 + _EDGE, estimate)
    high = _crossing(b, c, n, -critical, estimate, 1.0 - _EDGE)
    return low, high


def _crossing(b: float, c: float, n: int, level: float, left: float, right: float) -> float:
    """The delta in [left, right] where Z(delta) = level, Z decreasing; an end when it never does."""
    if tango_z(b, c, n, left) <= level:
        return left
    if tango_z(b, c, n, right) >= level:
        return right
    for _ in range(_BISECTION_STEPS):
        middle = (left + right) / 2
        if tango_z(b, c, n, middle) > level:
            left = middle
        else:
            right = middle
    return (left + right) / 2


def normal_quantile(p: float) -> float:
    """The standard normal quantile (Acklam's rational approximation, refined by one Halley step:
    relative error below 1e-12 over (0, 1))."""
    if not 0.0 < p < 1.0:
        raise ValueError("a quantile needs 0 < p < 1")
    a = (
        -39.69683028665376,
        220.9460984245205,
        -275.9285104469687,
        138.3577518672690,
        -30.66479806614716,
        2.506628277459239,
    )
    b = (-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572)
    c = (
        -0.007784894002430293,
        -0.3223964580411365,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    )
    d = (0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416)
    low = 0.02425
    if p < low:
        q = math.sqrt(-2 * math.log(p))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    elif p <= 1 - low:
        q = p - 0.5
        r = q * q
        x = (
            (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
            * q
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
        )
    else:
        q = math.sqrt(-2 * math.log(1 - p))
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    error = 0.5 * math.erfc(-x / math.sqrt(2)) - p
    step = error * math.sqrt(2 * math.pi) * math.exp(x * x / 2)
    return x - step / (1 + x * step / 2)


def decide(
    control: ItemLaunches, candidate: ItemLaunches, *, margin: float = DEFAULT_MARGIN, alpha: float
) -> QualityCall:
    """One quality bar: the candidate's launches against the control's, paired by item."""
    control_shares, candidate_shares = item_shares(control), item_shares(candidate)
    b, c, n = discordance(control_shares, candidate_shares)
    base = QualityCall(
        outcome="not-comparable",
        margin=margin,
        alpha=alpha,
        items=n,
        control_launches=len(control),
        candidate_launches=len(candidate),
    )
    if n == 0:
        why = "no item answered by both arms" if control and candidate else _missing_arm(control, candidate)
        return base.model_copy(update={"reason": why})
    critical = normal_quantile(1 - alpha)
    low, high = score_interval(b, c, n, critical)
    shared = control_shares.keys() & candidate_shares.keys()
    outcome: QualityOutcome = "non-inferior" if low > -margin else "worse" if high < -margin else "not-shown"
    call = base.model_copy(
        update={
            "outcome": outcome,
            "control_rate": sum(control_shares[i] for i in shared) / n,
            "candidate_rate": sum(candidate_shares[i] for i in shared) / n,
            "difference": (b - c) / n,
            "low": low,
            "high": high,
            "kept_only_by_candidate": b,
            "kept_only_by_control": c,
            "z": tango_z(b, c, n, -margin),
        }
    )
    return call.model_copy(update={"reason": reason(call)})


def _missing_arm(control: ItemLaunches, candidate: ItemLaunches) -> str:
    return (
        "the control has no launch scored against the reference"
        if not control
        else "the candidate has no launch"
    )


def _pct(value: float) -> str:
    return f"{value * 100:+.1f} pt"


def reason(call: QualityCall) -> str:
    """The call in words: the difference, its interval, against the margin, on how many items."""
    if call.outcome == "not-comparable" or call.difference is None or call.low is None or call.high is None:
        return call.reason
    interval = f"{_pct(call.difference)} [{_pct(call.low)}, {_pct(call.high)}]"
    launched = f"{call.control_launches} control, {call.candidate_launches} candidate launches"
    on = f"on {call.items} items ({launched})"
    if call.outcome == "non-inferior":
        return f"{interval} {on}: not worse than the control by {call.margin * 100:g} pt"
    if call.outcome == "worse":
        return f"{interval} {on}: worse than the control by more than {call.margin * 100:g} pt"
    fewest = items_to_show(call.margin, call.alpha)
    more = f"; at least {fewest} items could show it" if call.items < fewest else ""
    return f"{interval} {on}: within the {call.margin * 100:g} pt margin not shown either way{more}"


def items_to_show(margin: float, alpha: float) -> int:
    """The fewest items whose answers, all identical, show non-inferiority: Z = sqrt(n m / (1 - m))."""
    critical = normal_quantile(1 - alpha)
    return math.ceil(critical * critical * (1 - margin) / margin)


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion, two-sided at ``confidence``: what one
    measurement's accuracy says on its own (a quality bar pairs items instead). Unlike the Wald
    interval it stays inside [0, 1] and is not empty at 0 or ``n`` successes."""
    if n <= 0:
        raise ValueError("an interval needs at least one item")
    z = normal_quantile(0.5 + confidence / 2)
    share, z2 = successes / n, z * z
    centre = (share + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # At 0 (or n) successes the end is exactly 0 (or 1); rounding would leave 1e-17 there.
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high
