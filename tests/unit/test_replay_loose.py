"""Tight or loose, from the A/A calibration: a loose instrument cannot carry a win until repeats
bring its MDE under the bar, and the verdict says so in words (issue 13's 000 replay)."""

from __future__ import annotations

import math

import pytest

from recipe_ledger import verdict as v
from recipe_ledger.errors import InputError

BAR = v.Bar(metric="output_tps_total", point=2, direction="higher", min_effect=0.10)


def calibration_with_noise(sigma_rel: float, n: int = 3) -> v.Calibration:
    # A/A samples whose log spread is exactly sigma_rel: mean 100, symmetric in log space.
    offsets = [-1.0, 0.0, 1.0][:n] if n == 3 else [(-1) ** i for i in range(n)]
    scale = sigma_rel / _stdev(offsets)
    return v.calibrate({2: [100 * math.exp(scale * o) for o in offsets]}, metric=BAR.metric)


def _stdev(values):
    mean = sum(values) / len(values)
    return math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1))


@pytest.mark.parametrize("share", [0.5, 0.9, 1.1, 2.0])
def test_the_class_follows_the_noise_against_the_bar(share):
    # The class reads the calibration's upper bound, not its point estimate: scale the noise so the
    # bound lands at ``share`` of the tight limit.
    bound_factor = v.calibrated_sigma_ucb(calibration_with_noise(0.01).for_point(2)) / 0.01
    point = calibration_with_noise(share * v.TIGHT_NOISE_SHARE * BAR.min_effect / bound_factor).for_point(2)
    classification = v.classify_instrument(point, BAR.min_effect)
    assert classification.instrument_class == ("tight" if share <= 1 else "loose")
    assert classification.sigma_rel == pytest.approx(v.calibrated_sigma_ucb(point))
    assert classification.instrument_class in classification.text
    assert f"{BAR.min_effect * 100:g}% bar" in classification.text


def test_a_bar_outside_zero_to_one_is_refused():
    with pytest.raises(InputError):
        v.classify_instrument(calibration_with_noise(0.01).for_point(2), 0)


def _win(sigma_rel: float, repeats: int, effect: float = 2.0):
    """A control and a candidate whose repeats spread by sigma_rel around a large true effect."""
    calibration = calibration_with_noise(sigma_rel)
    spread = [math.exp(sigma_rel * ((-1) ** i) * 0.3) for i in range(repeats)]
    control = [100 * s for s in spread]
    candidate = [100 * (1 + effect) * s for s in spread]
    decided = v.decide(control, candidate, BAR, calibration, agreement_threshold=0.5)
    point = calibration.for_point(2)
    return decided, v.classify_instrument(point, BAR.min_effect), point


def test_a_loose_instrument_s_win_waits_for_its_mde_under_the_bar_and_says_why():
    decided, classification, point = _win(sigma_rel=0.12, repeats=2)
    assert classification.instrument_class == "loose"
    assert decided.outcome == "win" and decided.mde > BAR.min_effect  # what the plain verdict said
    gated = v.gate_loose_instrument(decided, classification, "replay", point.n)
    assert gated.outcome == "inconclusive"
    assert "replay is a loose instrument for output_tps_total" in gated.reason
    assert f"{decided.mde * 100:.1f}%" in gated.reason and "per arm needed" in gated.reason
    assert gated.repeats_suggested > 2 and gated.effect == decided.effect


def test_a_tight_instrument_s_win_and_a_loose_one_s_non_win_pass_unchanged():
    decided, classification, point = _win(sigma_rel=0.02, repeats=2)
    assert classification.instrument_class == "tight"
    assert v.gate_loose_instrument(decided, classification, "bench", point.n) == decided
    loose = v.InstrumentClassification(instrument_class="loose", sigma_rel=0.2, min_effect=0.1, text="loose")
    inconclusive = decided.model_copy(update={"outcome": "inconclusive"})
    assert v.gate_loose_instrument(inconclusive, loose, "replay", 3) == inconclusive


def test_a_loose_win_stands_once_repeats_bring_the_mde_under_the_bar():
    decided, classification, point = _win(sigma_rel=0.06, repeats=60, effect=0.5)
    assert classification.instrument_class == "loose" and decided.mde < BAR.min_effect
    assert v.gate_loose_instrument(decided, classification, "replay", point.n).outcome == decided.outcome
