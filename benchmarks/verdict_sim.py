"""Simulated experiments through the verdict's rules: how often each outcome comes out.

Only benchmarks/verdict_power.py (the figures in docs/verdicts.md) and tests/unit/test_verdict.py
use it, so it lives here beside the benchmark rather than in the package: the runner never
simulates. It draws log-normal samples with a seeded ``random.Random`` and hands them to
``recipe_ledger.verdict`` exactly as a run would (``calibrate``, ``plan_power``, ``decide``).

Tests import it by file path (it is not a package module); the benchmark imports it from its own
folder, which Python puts first on ``sys.path`` when the script runs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from recipe_ledger.verdict import (
    DEFAULT_AGREEMENT_THRESHOLD,
    DEFAULT_CALIBRATION_REPEATS,
    DEFAULT_MAX_PLANNED_REPEATS,
    DEFAULT_REPEATS,
    METHOD,
    OUTCOMES,
    Bar,
    CalibrationPoint,
    calibrate,
    decide,
    plan_power,
)


def _draw(rng: random.Random, level: float, sigma_rel: float, count: int) -> list[float]:
    """``count`` launches' numbers around a true ``level`` with log-normal noise ``sigma_rel``."""
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
    method: str = METHOD,
    planned: bool = False,
    max_repeats: int = DEFAULT_MAX_PLANNED_REPEATS,
) -> dict[float, dict[str, float]]:
    """Fraction of each outcome over simulated experiments, per true effect (in units of sigma_rel).

    Each trial draws a fresh A/A calibration of the control (``calibration_repeats`` launches), then
    ``n`` control and ``n`` candidate repeats with log-normal noise ``sigma_rel`` (0.5%: the seed's
    tight instrument, pairs within ~1%); the candidate's true level is ``(1 + k * sigma_rel)`` times
    the control's. The bar is ``min_effect_sigmas * sigma_rel``. With ``planned`` each trial runs the
    repeats ``plan_power`` recommends from that trial's calibration (``max_repeats`` where none reach
    the bar) instead of ``n``. At k = 0, ``win + regression`` is the false-call rate; at k > 0, ``win``
    is power and ``regression`` a sign error (the reverse at k < 0). Planned trials whose plan finds no
    repeats within ``max_repeats`` are not run: the rates are over the trials run, and ``unplanned``
    is the fraction of all trials the plan turned away.
    Returns ``{k: {outcome: fraction, ..., "gate_failed": ..., "repeats": mean per arm, "unplanned": ...}}``.
    """
    rng = random.Random(seed)
    bar = Bar(metric="simulated", point=1, direction="higher", min_effect=min_effect_sigmas * sigma_rel)
    rates: dict[float, dict[str, float]] = {}
    for k in effect_sigmas:
        counts = dict.fromkeys((*OUTCOMES, "gate_failed", "repeats", "unplanned"), 0)
        for _ in range(trials):
            calibration = calibrate({1: _draw(rng, 100.0, sigma_rel, calibration_repeats)})
            repeats = _planned_repeats(calibration.points["1"], bar, max_repeats) if planned else n
            if repeats is None:  # the plan said "unreachable" before any launch: nothing is run
                counts["unplanned"] += 1
                continue
            control = _draw(rng, 100.0, sigma_rel, repeats)
            candidate = _draw(rng, 100.0 * (1.0 + k * sigma_rel), sigma_rel, repeats)
            verdict = decide(
                control, candidate, bar, calibration, agreement_threshold=agreement_threshold, method=method
            )
            counts[verdict.outcome] += 1
            counts["gate_failed"] += verdict.agreement is not None and not verdict.agreement.passed
            counts["repeats"] += repeats
        run = trials - counts["unplanned"]
        rates[float(k)] = {key: count / max(run, 1) for key, count in counts.items() if key != "unplanned"}
        rates[float(k)]["unplanned"] = counts["unplanned"] / trials
    return rates


def _planned_repeats(point: CalibrationPoint, bar: Bar, max_repeats: int) -> int | None:
    """The repeats ``plan_power`` recommends from this calibration; None where none reach the bar."""
    return plan_power(point, bar, 2, max_repeats=max_repeats).repeats_needed
