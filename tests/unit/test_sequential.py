"""The sequential verdict (rl-sequential/1): its boundaries, its error rates at small seeded trial
counts, the high-noise rule, a calibration's lending, resuming from a written state, within-launch
repeats, bad input, the cap, the planner, and the ledger's own A/A calibrations replayed.

Deterministic throughout: fixed samples, or a seeded ``random.Random``.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from pydantic import ValidationError

from recipe_ledger import sequential as sq
from recipe_ledger.errors import InputError, StateError
from recipe_ledger.stats import chi2_cdf, sigma_upper_bound
from recipe_ledger.verdict import Bar, calibrate

REPO = Path(__file__).resolve().parents[2]

TPS = Bar(metric="output_tps_total", point=4, direction="higher", min_effect=0.05)
TTFT = Bar(metric="ttft_ms_p50", point=4, direction="lower", min_effect=0.05)


def run_sequence(
    bar: Bar,
    control_level: float,
    candidate_level: float,
    sigma: float,
    seed: int,
    *,
    state: sq.SequenceState | None = None,
    stop_after_looks: int | None = None,
    rng: random.Random | None = None,
) -> sq.SequenceState:
    """Alternate control and candidate launches (one sample each), looking whenever a look is due."""
    rng = rng or random.Random(seed)
    state = state or sq.start(bar)
    while state.decision is None:
        if stop_after_looks is not None and len(state.looks) >= stop_after_looks:
            return state
        state = sq.add_launch(state, "control", [control_level * math.exp(rng.gauss(0, sigma))])
        state = sq.add_launch(state, "candidate", [candidate_level * math.exp(rng.gauss(0, sigma))])
        if sq.is_due(state):
            state = sq.look(state)
    return state


# ---------------------------------------------------------------------------------------- boundaries


def test_a_single_look_boundary_is_the_normal_quantile() -> None:
    (bound,) = sq.one_sided_boundaries([3.0], [0.025])
    assert bound == pytest.approx(1.959964, abs=1e-6)


def test_two_looks_reproduce_pococks_constant() -> None:
    # Pocock (1977): two equally spaced looks at one-sided 2.5% share the boundary 2.178.
    first = 0.5 * math.erfc(2.178 / math.sqrt(2))
    bounds = sq.one_sided_boundaries([1.0, 2.0], [first, 0.025])
    assert bounds[0] == pytest.approx(2.178, abs=1e-6)
    assert bounds[1] == pytest.approx(2.178, abs=2e-3)


def test_a_look_that_spends_nothing_cannot_stop() -> None:
    bounds = sq.one_sided_boundaries([1.0, 2.0, 3.0], [0.0, 0.0, 0.05])
    assert bounds[:2] == [math.inf, math.inf]
    assert bounds[2] == pytest.approx(1.6449, abs=1e-3)


def test_the_call_levels_add_up_to_alpha_and_the_schedule_ends_at_the_cap() -> None:
    design = sq.Design(cap=10, pairs_per_look=3)
    assert design.schedule == (2, 5, 8, 10)
    assert design.call_level * len(design.schedule) == pytest.approx(design.alpha)
    levels = sq.equivalence_levels(sq.Design())
    assert len(levels) == len(sq.Design().schedule) and all(0 < level < 0.15 for level in levels)


# -------------------------------------------------------------------------------- always-valid spot checks


def test_a_and_a_sequences_make_at_most_alpha_false_calls_however_long_they_peek() -> None:
    # A bar far inside the noise keeps most sequences running to the cap: every look is a chance to
    # peek, and the union bound still holds the calls to 1% (10 of 1000 would be the limit).
    bar = Bar(metric="m", point=1, direction="higher", min_effect=0.001)
    rates = sq.simulate(bar, 0.03, 0.0, design=sq.Design(loose_noise_share=100), trials=1000, seed=5)
    assert rates.inconclusive > 0.95
    assert rates.win + rates.regression <= 0.01


def test_a_calibration_at_the_sequences_noise_keeps_false_calls_within_alpha() -> None:
    # The guarantee: a calibration lends its degrees of freedom, and sigma never falls below the pooled
    # estimate, so each look calls only where the exact pooled t-test would.
    bar = Bar(metric="m", point=1, direction="higher", min_effect=0.001)
    design = sq.Design(loose_noise_share=100)  # the loose rule off: every look may call
    rates = sq.simulate(bar, 0.03, 0.0, design=design, trials=1000, seed=12, calibration_launches=3)
    assert rates.inconclusive > 0.95
    assert rates.win + rates.regression <= 0.01


def test_a_calibration_from_a_quieter_day_keeps_false_calls_within_alpha() -> None:
    # Outside the guarantee: the calibration saw half the sequence's noise. The sequence's own sigma is
    # the floor, so the pooled one cannot pull the noise far below the truth for long (measured 0.88%
    # in 4,000 sequences at 3% noise and 6 launches: benchmarks/README.md).
    rates = sq.simulate(TPS, 0.03, 0.0, trials=600, seed=11, calibration_launches=6, calibration_sigma=0.015)
    assert rates.win + rates.regression <= 0.01


def test_a_tight_instrument_decides_a_bar_sized_effect_and_an_a_and_a_run_stops_as_no_change() -> None:
    at_bar = sq.simulate(TPS, 0.01, 0.05, trials=300, seed=2)
    assert at_bar.win >= 0.8 and at_bar.regression == 0
    same = sq.simulate(TPS, 0.01, 0.0, trials=300, seed=3)
    assert same.no_change >= 0.99 and same.mean_launches <= 7


def test_two_bars_are_decided_in_four_launches_beyond_a_calibration() -> None:
    # A calibration lends its degrees of freedom at once, so the first look (two launches per arm) calls.
    six = sq.simulate(TPS, 0.005, 0.10, trials=200, seed=4, calibration_launches=6)
    assert six.win == 1.0 and six.quantile(0.5) == 4 and six.quantile(0.9) == 4
    three = sq.simulate(TPS, 0.005, 0.10, trials=200, seed=4, calibration_launches=3)
    assert three.win == 1.0 and three.quantile(0.5) == 4
    alone = sq.simulate(TPS, 0.005, 0.10, trials=200, seed=4)
    assert alone.win == 1.0 and alone.quantile(0.5) == 6  # no calibration: calls wait for 4 df


def test_a_loose_instrument_carries_no_win_even_at_two_bars() -> None:
    # 10% and 17% noise against a 5% bar, true gains of one and two bars, with and without a
    # calibration: 1,200 sequences and no call (the 95% bound alone let about 1 in 700 through).
    rates = [
        sq.simulate(TPS, sigma, effect, trials=150, seed=seed, calibration_launches=cal)
        for sigma, seed in ((0.10, 6), (0.17, 7))
        for effect in (0.05, 0.10)
        for cal in (0, 3)
    ]
    assert sum(rate.win + rate.regression for rate in rates) == 0


def test_a_lucky_tight_spread_at_high_noise_does_not_win() -> None:
    # Three launches per arm 2% apart and a 25% gain: the look the 95% bound alone would let call
    # (its bound 4.7% is under the 5% bar, t 13.7 over the critical 10.7), as a 10%-noise instrument's
    # launches happen to agree once in a few hundred sequences. On 4 degrees of freedom the high-noise
    # bound is 14.6x the estimate: this cannot yet be told from an instrument at twice the bar.
    state = sq.start(TPS)
    for control, candidate in ((100.0, 125.0), (102.0, 127.5), (98.0, 122.5)):
        state = sq.add_launch(state, "control", [control])
        state = sq.add_launch(state, "candidate", [candidate])
        if sq.is_due(state):
            state = sq.look(state)
    last = state.looks[-1]
    assert last.noise.df == 4 and sigma_upper_bound(last.noise.sigma, 4, sq.LOOSE_CONFIDENCE) < 0.05
    assert last.call_low > 0 and abs(last.t_statistic) > last.call_critical
    assert last.loose and last.outcome == "continue" and state.decision is None
    assert "cannot yet be told from a loose instrument's" in last.reason


@pytest.mark.parametrize("df", [4, 6, 7, 8, 12, 20, 46])
def test_at_twice_the_bar_a_look_passes_the_high_noise_bound_at_most_its_share_of_the_error(df: int) -> None:
    # The guarantee behind "no wins at 2x": the largest noise estimate that is not loose, and the chance
    # that a look at a true noise of twice the bar shows an estimate that small (chi-square, exact):
    # at most 0.1% / K, so at most 0.1% of such sequences carry any call (the union bound).
    design = sq.Design()
    share = design.loose_noise_share * TPS.min_effect

    def loose(sigma: float) -> bool:
        noise = sq.LookNoise(
            sigma=sigma,
            df=df,
            source="sequence",
            sequence_sigma=sigma,
            calibration_sigma=None,
            within_launch_sigma=None,
            between_launch_sigma=None,
        )
        return sq._loose(noise, design, TPS)

    low, high = 1e-6, share
    while high - low > 1e-9:
        middle = 0.5 * (low + high)
        low, high = (low, middle) if loose(middle) else (middle, high)
    passes = chi2_cdf(df * (low / (2.0 * share)) ** 2, df)  # the true noise twice the bar
    assert passes <= 0.001 / len(design.schedule) * (1 + 1e-6)  # 0.1% over the whole sequence


def test_the_loose_share_is_where_the_largest_cap_loses_power_at_the_bar() -> None:
    design = sq.Design(cap=sq.MAX_CAP, loose_noise_share=100)  # the gate off: measure the design itself
    at_share = sq.simulate(TPS, sq.LOOSE_NOISE_SHARE * 0.05, 0.05, design=design, trials=300, seed=3)
    beyond = sq.simulate(TPS, 1.25 * sq.LOOSE_NOISE_SHARE * 0.05, 0.05, design=design, trials=300, seed=3)
    assert at_share.win >= 0.8 > beyond.win


# ------------------------------------------------------------------------------------------- outcomes


def test_a_clear_win_stops_early_and_says_so_in_words() -> None:
    state = run_sequence(TPS, 100.0, 110.0, 0.01, seed=1)
    assert state.decision is not None and state.decision.outcome == "win"
    assert state.decision.stopped == "decided"
    assert state.decision.summary == f"decided after {state.decision.launches} launches: win"
    assert state.decision.launches <= 8
    last = state.looks[-1]
    assert last.call_low > 0 and last.equivalence_high > 0.05
    assert last.call_spent == pytest.approx(last.call_level * len(state.looks))


def test_two_launches_per_arm_alone_never_call_but_a_calibration_lets_them() -> None:
    # With 2 degrees of freedom a call would need t above ~48: only a lucky-tight spread gets there,
    # so calls wait for MIN_CALL_DF; a pooled calibration supplies the degrees of freedom at once.
    def two_pairs(calibration: sq.CalibrationNoise | None) -> sq.SequenceState:
        state = sq.start(TPS, calibration=calibration)
        for control, candidate in ((100.0, 150.0), (100.1, 150.2)):
            state = sq.add_launch(state, "control", [control])
            state = sq.add_launch(state, "candidate", [candidate])
        return sq.look(state)

    alone = two_pairs(None).looks[-1]
    assert alone.noise.df == 2 < sq.MIN_CALL_DF and alone.call_low > 0 and alone.outcome == "continue"
    calibrated = two_pairs(sq.CalibrationNoise(launches=6, sigma_log=0.002)).looks[-1]
    assert calibrated.noise.df == 7 and calibrated.outcome == "win"


def test_lower_is_better_calls_a_faster_candidate_a_win() -> None:
    state = run_sequence(TTFT, 200.0, 180.0, 0.01, seed=2)
    assert state.decision is not None and state.decision.outcome == "win"
    assert state.decision.effect < 0


def test_a_slower_candidate_is_a_regression() -> None:
    state = run_sequence(TPS, 100.0, 90.0, 0.01, seed=3)
    assert state.decision is not None and state.decision.outcome == "regression"


def test_a_noiseless_instrument_decides_at_the_first_look_and_its_state_reads_back() -> None:
    state = sq.start(TPS)
    for _ in range(2):
        state = sq.add_launch(state, "control", [100.0])
        state = sq.add_launch(state, "candidate", [100.0])
    state = sq.look(state)
    assert state.decision is not None and state.decision.outcome == "no-change"
    again = sq.SequenceState.model_validate_json(state.model_dump_json())
    assert again == state


def test_at_the_cap_the_decision_says_what_would_decide() -> None:
    design = sq.Design(cap=4)
    state = run_sequence(TPS, 100.0, 103.0, 0.03, seed=8, state=sq.start(TPS, design))
    decision = state.decision
    assert decision is not None and decision.outcome == "inconclusive" and decision.stopped == "cap"
    assert decision.launches == 8 and decision.summary.startswith("not decided after 8 launches")
    assert decision.launches_needed_per_arm is not None and decision.launches_needed_per_arm > 4
    assert f"cap of about {decision.launches_needed_per_arm} launches per arm" in decision.reason


def test_a_loose_instrument_at_the_cap_names_the_bar_it_could_decide() -> None:
    state = run_sequence(TPS, 100.0, 125.0, 0.17, seed=9, state=sq.start(TPS, sq.Design(cap=6)))
    decision = state.decision
    assert decision is not None and decision.outcome == "inconclusive"
    assert decision.launches_needed_per_arm is None
    assert "no cap decides a win here" in decision.reason
    assert all(record.loose for record in state.looks)


# --------------------------------------------------------------------------------------------- resume


def test_a_sequence_stopped_after_two_looks_resumes_from_json_to_the_same_decision() -> None:
    whole = run_sequence(TPS, 100.0, 103.0, 0.02, seed=21)
    rng = random.Random(21)
    part = run_sequence(TPS, 100.0, 103.0, 0.02, seed=21, stop_after_looks=2, rng=rng)
    assert part.decision is None and len(part.looks) == 2
    written = part.model_dump_json()
    resumed = sq.check_replay(sq.SequenceState.model_validate_json(written))
    finished = run_sequence(TPS, 100.0, 103.0, 0.02, seed=21, state=resumed, rng=rng)
    assert finished == whole
    assert len(whole.looks) > 2  # the test resumed a sequence that was really still running


def test_replaying_recorded_looks_gives_the_same_looks() -> None:
    state = run_sequence(TPS, 100.0, 104.0, 0.02, seed=22)
    assert sq.replay(state) == state


def test_an_edited_state_does_not_replay() -> None:
    state = run_sequence(TPS, 100.0, 104.0, 0.02, seed=23)
    data = json.loads(state.model_dump_json())
    data["launches"][0]["samples"] = [data["launches"][0]["samples"][0] * 1.5]
    with pytest.raises(StateError, match="look 1 does not replay"):
        sq.check_replay(sq.SequenceState.model_validate(data))


def test_looks_and_launches_are_refused_out_of_turn() -> None:
    state = sq.add_launch(sq.start(TPS), "control", [100.0])
    with pytest.raises(StateError, match="no look is due"):
        sq.look(state)
    decided = run_sequence(TPS, 100.0, 110.0, 0.01, seed=1)
    with pytest.raises(StateError, match="is decided"):
        sq.add_launch(decided, "control", [100.0])
    full = sq.start(TPS, sq.Design(cap=2))
    for _ in range(2):
        full = sq.add_launch(full, "control", [100.0])
    with pytest.raises(StateError, match="already has the cap's 2 launches"):
        sq.add_launch(full, "control", [100.0])


# ---------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0.0, -3.0])
def test_a_bad_measurement_names_the_launch_and_the_file_and_is_not_absorbed(bad: float) -> None:
    state = sq.add_launch(sq.start(TPS), "control", [100.0])
    with pytest.raises(InputError) as caught:
        sq.add_launch(state, "control", [101.0, bad], where="scripts/bench.py:12")
    text = str(caught.value)
    assert text.startswith("scripts/bench.py:12: output_tps_total@4: launch 2 of the control arm")
    assert "positive and finite" in text and "does not absorb it" in text
    assert state.count("control") == 1


def test_an_empty_launch_is_refused() -> None:
    with pytest.raises(InputError, match="got none"):
        sq.add_launch(sq.start(TPS), "candidate", [])


def test_a_written_state_with_a_bad_sample_does_not_load() -> None:
    data = json.loads(sq.add_launch(sq.start(TPS), "control", [100.0]).model_dump_json())
    data["launches"][0]["samples"] = [-1.0]
    with pytest.raises(ValidationError, match="positive and finite"):
        sq.SequenceState.model_validate(data)


# ------------------------------------------------------------------------------ within-launch repeats


def test_repeats_inside_a_launch_are_not_mistaken_for_launch_to_launch_evidence() -> None:
    # Three samples per launch agreeing within ~0.1%, launches 3% apart, no true effect: the samples
    # alone would make a tight instrument of it; the launches are what the sequence counts.
    rng = random.Random(31)
    state = sq.start(TPS)
    while state.decision is None and state.pairs < 12:
        for arm in ("control", "candidate"):
            level = 100.0 * math.exp(rng.gauss(0, 0.03))
            state = sq.add_launch(state, arm, [level * math.exp(rng.gauss(0, 0.001)) for _ in range(3)])
        if sq.is_due(state):
            state = sq.look(state)
    noise = state.looks[-1].noise
    assert noise.within_launch_sigma is not None and noise.within_launch_sigma < 0.002
    assert noise.between_launch_sigma is not None and 0.015 < noise.between_launch_sigma < 0.05
    assert noise.sigma == pytest.approx(noise.sequence_sigma) and noise.sigma > 0.015
    assert all(record.outcome in ("continue", "no-change") for record in state.looks)


def test_a_calibration_point_lends_its_launches_but_never_a_sigma_below_the_sequences() -> None:
    noisy = sq.CalibrationNoise.from_point(
        calibrate({4: [100.0, 106.0, 94.0, 103.0, 97.0, 100.0]}).points["4"]
    )
    assert noisy.launches == 6 and noisy.df == 5
    state = sq.start(TPS, calibration=noisy)
    for control, candidate in ((100.0, 101.0), (100.5, 100.0)):
        state = sq.add_launch(state, "control", [control])
        state = sq.add_launch(state, "candidate", [candidate])
    record = sq.look(state).looks[-1]
    assert record.noise.source == "sequence+calibration" and record.noise.df == 2 + 5
    assert record.noise.sigma > record.noise.sequence_sigma  # the pooled estimate, the larger here
    quiet = sq.CalibrationNoise(launches=6, sigma_log=0.0001)
    record = sq.look(state.model_copy(update={"calibration": quiet})).looks[-1]
    # Two launches a side say too little to refuse it (lent), and it cannot shrink the sequence's noise.
    assert record.noise.source == "sequence+calibration" and record.noise.df == 2 + 5
    assert record.noise.sigma == record.noise.sequence_sigma


def test_a_calibration_whose_noise_differs_from_the_sequences_is_not_lent() -> None:
    # The demo's case: a calibration recorded while the box's load drifted (27%) against a quiet run
    # (about 3%, 8 launches a side): lent, it would hold the sequence at 24% noise; F says they differ.
    rng = random.Random(5)
    state = sq.start(TPS, calibration=sq.CalibrationNoise(launches=8, sigma_log=0.27))
    for _ in range(8):
        state = sq.add_launch(state, "control", [100.0 * math.exp(rng.gauss(0, 0.03))])
        state = sq.add_launch(state, "candidate", [300.0 * math.exp(rng.gauss(0, 0.03))])
    while sq.is_due(state) and state.decision is None:
        state = sq.look(state)
    assert state.looks[-1].noise.source == "sequence" and state.looks[-1].noise.sigma < 0.06
    assert state.decision is not None and state.decision.outcome == "win"
    # On the first 8 launches (6 df, so the F check runs; 4 launches had 2 and were lent whatever
    # their noise) a calibration at the sequence's own noise is lent, the drifting one is not.
    first_eight = {"launches": state.launches[:8]}
    same = sq.CalibrationNoise(launches=8, sigma_log=0.035)
    lent = sq.look(sq.start(TPS, calibration=same).model_copy(update=first_eight)).looks[-1]
    assert lent.noise.df == 6 + 7 and lent.noise.source == "sequence+calibration"
    drifting = sq.CalibrationNoise(launches=8, sigma_log=0.27)
    refused = sq.look(sq.start(TPS, calibration=drifting).model_copy(update=first_eight)).looks[-1]
    assert refused.noise.df == 6 and refused.noise.source == "sequence"


def test_a_short_sequence_with_no_spread_still_borrows_the_calibrations_noise() -> None:
    state = sq.start(TPS, calibration=sq.CalibrationNoise(launches=6, sigma_log=0.02))
    for _ in range(2):
        state = sq.add_launch(state, "control", [100.0])
        state = sq.add_launch(state, "candidate", [101.0])
    record = sq.look(state).looks[-1]
    assert record.noise.sequence_sigma == 0.0 and record.noise.source == "sequence+calibration"
    assert record.noise.sigma > 0  # a noiseless pair of launches is not a noiseless instrument


# ------------------------------------------------------------------------------------------- planning


def test_the_plan_says_a_loose_instrument_never_carries_a_win_before_any_launch() -> None:
    planned = sq.plan(TPS, 0.17, noise_source="A/A of the replay")
    assert planned.loose and planned.cap_too_small
    assert "never carries a win or regression" in planned.lines[0]
    assert "a bar of at least 17%" in planned.lines[0]


def test_the_plan_names_the_cap_to_set_when_the_cap_is_too_small() -> None:
    planned = sq.plan(TPS, 0.03, sq.Design(cap=6), trials=200)
    assert planned.cap_too_small and planned.cap_needed is not None and planned.cap_needed > 6
    assert any(f"set the cap to {planned.cap_needed}" in line for line in planned.lines)


def test_the_plan_gives_expected_launches_their_spread_and_box_hours() -> None:
    planned = sq.plan(TPS, 0.01, launch_seconds=480, trials=200)
    assert not planned.loose and not planned.cap_too_small
    nothing, at_bar, two = planned.outcomes
    assert at_bar.win >= 0.8 and nothing.no_change >= 0.95
    assert two.mean_launches <= at_bar.mean_launches and at_bar.launches_p50 <= at_bar.launches_p90
    assert planned.box_hours == pytest.approx(at_bar.mean_launches * 480 / 3600)
    assert "box-hours" in planned.lines[-1]


@pytest.mark.parametrize(("sigma", "seconds"), [(0.0, None), (math.nan, None), (0.01, 0.0)])
def test_the_plan_refuses_a_noise_or_launch_time_it_cannot_use(sigma: float, seconds: float | None) -> None:
    with pytest.raises(InputError):
        sq.plan(TPS, sigma, launch_seconds=seconds, trials=10)


def test_a_budget_buys_a_cap_or_says_it_is_too_small() -> None:
    assert sq.cap_for_budget(3.0, 480) == 11  # 22 launches of 8 minutes, alternating arms
    assert sq.cap_for_budget(100.0, 60) == sq.MAX_CAP
    with pytest.raises(InputError, match="fewer than the 2 a decision needs"):
        sq.cap_for_budget(0.5, 480)


# ------------------------------------------------------------------------------- the ledger's A/A runs


def _ledger_calibration_points() -> list[tuple[str, list[float]]]:
    """Every calibration point in ledger/*.jsonl with at least 4 samples: its launches' numbers."""
    points = []
    for path in sorted((REPO / "ledger").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry["kind"] != "calibration":
                continue
            payload = entry["payload"]
            for point, values in payload.get("points", {}).items():
                samples = values.get("samples") or []
                if len(samples) >= 2 * sq.MIN_PAIRS:
                    points.append((f"{path.name}:{entry['seq']}:{payload['metric']}@{point}", samples))
    return points


def test_the_ledgers_own_a_and_a_calibrations_make_no_call() -> None:
    # Their spread is real noise: each calibration's launches alternated into control and candidate
    # and judged as a sequence at bars of 2%, 5% and 10% must stop without a win or regression.
    points = _ledger_calibration_points()
    assert len(points) >= 5  # the test is about something
    looked = 0
    for name, samples in points:
        for min_effect in (0.02, 0.05, 0.10):
            bar = Bar(metric="m", point=1, direction="higher", min_effect=min_effect)
            state = sq.start(bar)
            for index, value in enumerate(samples[: 2 * (len(samples) // 2)]):
                state = sq.add_launch(state, "control" if index % 2 == 0 else "candidate", [value])
                if sq.is_due(state):
                    state = sq.look(state)
                if state.decision is not None:
                    break
            looked += len(state.looks)
            outcomes = [record.outcome for record in state.looks]
            assert not {"win", "regression"} & set(outcomes), (name, min_effect, outcomes)
    assert looked >= len(points) * 3


# ------------------------------------------------------------------------------- claims beyond the bar


DEMO_TTFT = Bar(metric="ttft_ms_p50", point=4, direction="lower", min_effect=0.25)


def test_a_change_many_times_the_noise_is_called_on_an_instrument_as_noisy_as_its_bar(monkeypatch) -> None:
    # The README's demo: TTFT 94% lower at about the bar's own noise (25% against a 25% bar). The
    # bar-only loose rule held this back at every cap; measured against what the call establishes
    # it is decided in a few pairs, and an A/A sequence on the same instrument still calls nothing.
    rates = sq.simulate(DEMO_TTFT, 0.25, 0.94, trials=300, seed=11)
    assert rates.win >= 0.95 and rates.regression == 0 and rates.mean_launches <= 10
    a_and_a = sq.simulate(DEMO_TTFT, 0.25, 0.0, trials=300, seed=12)
    assert a_and_a.win + a_and_a.regression == 0
    monkeypatch.setattr(sq, "CLAIM_RESOLUTION", math.inf)  # the bar-only rule: a win only on luck
    assert sq.simulate(DEMO_TTFT, 0.25, 0.94, trials=100, seed=11).win < 0.25


def test_the_claim_counts_only_beyond_two_bars_so_effects_near_the_bar_read_as_before(monkeypatch) -> None:
    # Effects of one and two bars at 0.6x noise: the same outcomes, launch for launch, with and
    # without the claim rule (every benchmark cell is at two bars or less).
    for effect in (0.05, 0.10):
        with_claims = sq.simulate(TPS, 0.03, effect, trials=200, seed=13)
        monkeypatch.setattr(sq, "CLAIM_RESOLUTION", math.inf)
        bar_only = sq.simulate(TPS, 0.03, effect, trials=200, seed=13)
        monkeypatch.undo()
        assert abs(with_claims.win - bar_only.win) <= 0.02
        assert abs(with_claims.mean_launches - bar_only.mean_launches) <= 0.5


def test_a_lower_is_better_bar_is_planned_at_its_own_band() -> None:
    # "25% better" for TTFT is a ratio of 0.75, the edge of the no-change band ln(0.75)..ln(1.25);
    # simulated as 1/1.25 = 0.8 it sat inside the band and the plan saw no power at any cap.
    at_bar = sq.simulate(DEMO_TTFT, 0.05, 0.25, trials=300, seed=14)
    assert at_bar.win >= 0.8 and at_bar.no_change <= 0.2
    plan = sq.plan(DEMO_TTFT, 0.05)
    assert not plan.cap_too_small and plan.cap_needed is not None
