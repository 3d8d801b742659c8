"""Quality bars (``recipe_ledger.quality``): Tango's paired score test on items, its interval and
the three calls, checked against hand-derived values and McNemar's test."""

from __future__ import annotations

import math
import random

import pytest

from recipe_ledger import quality


def launches(outcomes: list[float], times: int = 1) -> list[dict[str, float]]:
    return [{str(i): value for i, value in enumerate(outcomes)} for _ in range(times)]


def test_no_item_differing_gives_the_closed_form():
    # b = c = 0: Z = sqrt(n margin / (1 - margin)), the research note's example.
    assert quality.tango_z(0, 0, 500, -0.02) == pytest.approx(math.sqrt(500 * 0.02 / 0.98))
    assert quality.tango_z(0, 0, 500, -0.02) == pytest.approx(3.194, abs=1e-3)


def test_at_zero_margin_the_statistic_is_mcnemars():
    for b, c in ((10, 4), (3, 9), (1, 0)):
        assert quality.tango_z(b, c, 100, 0.0) == pytest.approx((b - c) / math.sqrt(b + c))


def test_the_statistic_falls_as_the_tested_difference_rises():
    values = [quality.tango_z(6, 14, 120, d / 100) for d in range(-60, 61, 5)]
    assert values == sorted(values, reverse=True)


def test_the_interval_holds_the_estimate_and_its_ends_hit_the_critical_value():
    low, high = quality.score_interval(6, 14, 120, 1.96)
    assert low < (6 - 14) / 120 < high
    assert quality.tango_z(6, 14, 120, low) == pytest.approx(1.96, abs=1e-6)
    assert quality.tango_z(6, 14, 120, high) == pytest.approx(-1.96, abs=1e-6)


def test_normal_quantile_matches_known_values():
    assert quality.normal_quantile(0.975) == pytest.approx(1.959963985, abs=1e-9)
    assert quality.normal_quantile(0.995) == pytest.approx(2.575829304, abs=1e-9)
    assert quality.normal_quantile(0.001) == pytest.approx(-3.090232306, abs=1e-9)
    with pytest.raises(ValueError):
        quality.normal_quantile(1.0)


def test_identical_answers_on_enough_items_are_non_inferior():
    same = launches([1.0] * 200, times=2)
    call = quality.decide(same, same, margin=0.05, alpha=0.005)
    assert call.outcome == "non-inferior" and call.difference == 0.0 and call.items == 200
    assert call.low is not None and -0.05 < call.low < 0
    assert "not worse than the control by 5 pt" in call.reason


def test_identical_answers_on_too_few_items_show_nothing_and_say_how_many_would():
    same = launches([1.0] * 32)
    call = quality.decide(same, same, margin=0.05, alpha=0.005)
    assert call.outcome == "not-shown"
    assert f"at least {quality.items_to_show(0.05, 0.005)} items" in call.reason
    # The fewest items is exactly where the closed form crosses the critical value.
    fewest = quality.items_to_show(0.05, 0.005)
    critical = quality.normal_quantile(0.995)
    assert quality.tango_z(0, 0, fewest, -0.05) >= critical > quality.tango_z(0, 0, fewest - 1, -0.05)


def test_answers_lost_on_most_items_are_worse():
    control = launches([1.0] * 200, times=2)
    damaged = launches([1.0 if i % 10 == 0 else 0.0 for i in range(200)], times=2)
    call = quality.decide(control, damaged, margin=0.05, alpha=0.005)
    assert call.outcome == "worse"
    assert call.difference == pytest.approx(-0.9) and call.high is not None and call.high < -0.05
    assert call.kept_only_by_control == pytest.approx(180)


def test_a_small_loss_inside_the_margin_is_non_inferior_and_one_near_it_is_not_shown():
    control = launches([1.0] * 400)
    small = launches([0.0 if i < 4 else 1.0 for i in range(400)])  # -1 pt
    near = launches([0.0 if i < 20 else 1.0 for i in range(400)])  # -5 pt, on the margin
    assert quality.decide(control, small, margin=0.05, alpha=0.005).outcome == "non-inferior"
    assert quality.decide(control, near, margin=0.05, alpha=0.005).outcome == "not-shown"


def test_items_are_the_unit_so_repeating_a_launch_adds_no_evidence():
    one = quality.decide(launches([1.0] * 60), launches([1.0] * 60), margin=0.05, alpha=0.005)
    many = quality.decide(launches([1.0] * 60, 10), launches([1.0] * 60, 10), margin=0.05, alpha=0.005)
    assert one.outcome == many.outcome == "not-shown" and one.z == many.z


def test_an_item_that_flips_between_launches_counts_by_its_share():
    control = [{"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 0.0}]  # b kept in half of the launches
    candidate = [{"a": 1.0, "b": 1.0}]
    shares = quality.item_shares(control)
    assert shares == {"a": 1.0, "b": 0.5}
    assert quality.discordance(shares, quality.item_shares(candidate)) == (0.5, 0.0, 2)


def test_only_items_both_arms_scored_are_paired():
    call = quality.decide([{"a": 1.0, "b": 0.0}], [{"b": 1.0, "c": 0.0}], margin=0.05, alpha=0.05)
    assert call.items == 1 and call.difference == 1.0


def test_no_shared_item_or_no_launch_is_not_comparable():
    assert quality.decide([{"a": 1.0}], [{"b": 1.0}], alpha=0.05).outcome == "not-comparable"
    call = quality.decide([], [{"b": 1.0}], alpha=0.05)
    assert call.outcome == "not-comparable" and "control has no launch" in call.reason


def test_an_outcome_outside_zero_and_one_is_refused():
    with pytest.raises(ValueError, match="outcomes lie in"):
        quality.item_shares([{"a": 1.5}])


def test_a_true_loss_at_the_margin_is_called_non_inferior_at_most_alpha_of_the_time():
    # The error rate the docs state: items lost at exactly the margin, drawn many times.
    rng = random.Random(7)
    alpha, margin, items, trials = 0.025, 0.05, 300, 2000
    false_calls = 0
    for _ in range(trials):
        control = [{str(i): 1.0 for i in range(items)}]
        candidate = [{str(i): 0.0 if rng.random() < margin else 1.0 for i in range(items)}]
        false_calls += (
            quality.decide(control, candidate, margin=margin, alpha=alpha).outcome == "non-inferior"
        )
    assert false_calls / trials <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)
