"""The fixed verdict against the sequential one (rl-verdict/2 vs rl-sequential/1), with the users' practice.

    nice -n 10 .venv/bin/python benchmarks/verdict_sequential.py [--trials 2000] [--seed 1]

Simulated experiments on one bar (5%, higher is better) with log-normal launch-to-launch noise of
0.5, 1, 3, 10 and 17% of the level (0.1x, 0.2x, 0.6x, 2x and 3.4x the bar), true effects of 0, half
a bar, one bar and two bars, and a same-box A/A calibration of 0, 3 or 6 launches drawn per trial.
Four ways to decide, on the same kind of draws:

- fixed, defaults: the spec's default repeats per arm (read from experiment.spec) and agreement
  gate, ``decide`` with the calibration, and the loose gate, as ``ledger run`` does today;
- fixed, plan: the repeats ``plan_power`` recommends from the calibration (it refuses to plan from
  fewer than 5 launches, or when no repeats within 20 reach the bar: those trials spend their
  calibration and decide nothing);
- practice: the users' own rule, two runs of each arm, called by the point estimate against the bar
  when both arms' runs agree within 1%, two more runs each otherwise, up to 20 per arm;
- sequential: ``recipe_ledger.sequential`` with its defaults (a look after each pair, cap 24 per arm).

Columns: false = a win or regression at no true effect; sign = a regression at a true gain (half,
one or two bars); w@half = a win at half a bar; power = a win at the bar; w@2 = a win at two bars;
L/dec = every launch (calibration included) per decided verdict, pooled over the four effects;
beyond = the same without the calibration (a reused calibration costs no new launch); 2-bar med =
the median launches beyond the calibration at two bars.
Goals (issue 24): false <= 1% and sign < 0.1% everywhere; at 0.2x noise L/dec <= 7 and power >= 80%;
at 0.6x L/dec <= 18 and power >= 80%; at 2x and more no wins; two bars in <= 4 launches beyond the
calibration. Then a calibration from a quieter day, repeats inside a launch, and the ledger's own
A/A calibrations replayed through the sequential rule.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from recipe_ledger import sequential
from recipe_ledger.experiment.spec import Bar as SpecBar
from recipe_ledger.experiment.spec import Experiment
from recipe_ledger.ledger import Ledger
from recipe_ledger.verdict import (
    Bar,
    calibrate,
    classify_instrument,
    decide,
    gate_loose_instrument,
    plan_power,
)

BAR = Bar(metric="simulated", point=1, direction="higher", min_effect=0.05)
NOISES = (0.005, 0.01, 0.03, 0.10, 0.17)
CALIBRATIONS = (0, 3, 6)
EFFECT_BARS = (0.0, 0.5, 1.0, 2.0)
DEFAULT_REPEATS = Experiment.model_fields["repeats"].default
DEFAULT_GATE = SpecBar.model_fields["agreement_threshold"].default
PRACTICE_AGREEMENT = 0.01
PRACTICE_CAP = 20
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Tally:
    """Outcomes and launches over the trials of one (design, noise, calibration) row."""

    counts: dict[tuple[float, str], int] = field(default_factory=dict)
    launches: int = 0
    beyond: int = 0  # launches beyond the calibration
    decided: int = 0
    two_bar_launches: list[int] = field(default_factory=list)

    def add(self, k: float, outcome: str, launches: int, calibration: int) -> None:
        self.counts[(k, outcome)] = self.counts.get((k, outcome), 0) + 1
        self.launches += launches
        self.beyond += launches - calibration
        if outcome in ("win", "regression", "no-change"):
            self.decided += 1
        if k == 2.0 and outcome != "refused":
            self.two_bar_launches.append(launches - calibration)

    def share(self, k: float, outcome: str, trials: int) -> float:
        return self.counts.get((k, outcome), 0) / trials


def _draw(rng: random.Random, level: float, sigma: float, count: int) -> list[float]:
    return [level * math.exp(rng.gauss(0.0, sigma)) for _ in range(count)]


def _candidate_level(k: float) -> float:
    return 100.0 * (1.0 + k * BAR.min_effect)


def _fixed_outcome(control: list[float], candidate: list[float], calibration_samples: list[float]) -> str:
    """rl-verdict/2 as ``ledger run`` applies it (pipeline.run.decide_point): the loose gate included."""
    calibration = calibrate({1: calibration_samples}) if len(calibration_samples) >= 2 else None
    verdict = decide(control, candidate, BAR, calibration, agreement_threshold=DEFAULT_GATE)
    if calibration is not None:
        point = calibration.points["1"]
        verdict = gate_loose_instrument(
            verdict, classify_instrument(point, BAR.min_effect), "simulated", point.n
        )
    return verdict.outcome


def fixed_defaults(sigma: float, cal: int, trials: int, seed: int) -> Tally:
    rng, tally = random.Random(seed), Tally()
    for k in EFFECT_BARS:
        for _ in range(trials):
            calibration = _draw(rng, 100.0, sigma, cal) if cal else []
            control = _draw(rng, 100.0, sigma, DEFAULT_REPEATS)
            candidate = _draw(rng, _candidate_level(k), sigma, DEFAULT_REPEATS)
            outcome = _fixed_outcome(control, candidate, calibration)
            tally.add(k, outcome, cal + 2 * DEFAULT_REPEATS, cal)
    return tally


def fixed_plan(sigma: float, cal: int, trials: int, seed: int) -> Tally:
    rng, tally = random.Random(seed), Tally()
    for k in EFFECT_BARS:
        for _ in range(trials):
            calibration = _draw(rng, 100.0, sigma, cal) if cal else []
            repeats = None
            if cal >= 2:
                repeats = plan_power(calibrate({1: calibration}).points["1"], BAR, 2).repeats_needed
            if repeats is None:  # the plan refused before any launch of the arms
                tally.add(k, "refused", cal, cal)
                continue
            control = _draw(rng, 100.0, sigma, repeats)
            candidate = _draw(rng, _candidate_level(k), sigma, repeats)
            tally.add(k, _fixed_outcome(control, candidate, calibration), cal + 2 * repeats, cal)
    return tally


def practice(sigma: float, cal: int, trials: int, seed: int) -> Tally:
    """Two runs of each arm; call it by the estimate once both arms' last two runs agree within 1%."""
    rng, tally = random.Random(seed), Tally()
    for k in EFFECT_BARS:
        for _ in range(trials):
            control: list[float] = []
            candidate: list[float] = []
            outcome = "inconclusive"
            while len(control) < PRACTICE_CAP:
                control += _draw(rng, 100.0, sigma, 2)
                candidate += _draw(rng, _candidate_level(k), sigma, 2)
                if _agree(control[-2:]) and _agree(candidate[-2:]):
                    outcome = _by_estimate(control[-2:], candidate[-2:])
                    break
            tally.add(k, outcome, cal + len(control) + len(candidate), cal)
    return tally


def _agree(pair: list[float]) -> bool:
    return (max(pair) - min(pair)) / statistics.fmean(pair) <= PRACTICE_AGREEMENT


def _by_estimate(control: list[float], candidate: list[float]) -> str:
    effect = statistics.fmean(candidate) / statistics.fmean(control) - 1.0
    if effect >= BAR.min_effect:
        return "win"
    if effect <= -BAR.min_effect:
        return "regression"
    return "no-change"


def sequential_design(sigma: float, cal: int, trials: int, seed: int) -> Tally:
    tally = Tally()
    for k in EFFECT_BARS:
        rates = sequential.simulate(
            BAR, sigma, k * BAR.min_effect, trials=trials, seed=seed + int(10 * k), calibration_launches=cal
        )
        for outcome, share in (
            ("win", rates.win),
            ("regression", rates.regression),
            ("no-change", rates.no_change),
            ("inconclusive", rates.inconclusive),
        ):
            tally.counts[(k, outcome)] = round(share * trials)
        tally.launches += round(rates.mean_launches * trials) + cal * trials
        tally.beyond += round(rates.mean_launches * trials)
        tally.decided += round((1.0 - rates.inconclusive) * trials)
        if k == 2.0:
            tally.two_bar_launches = [n for n, count in rates.distribution.items() for _ in range(count)]
    return tally


DESIGNS = (
    ("fixed, defaults", fixed_defaults),
    ("fixed, plan", fixed_plan),
    ("practice", practice),
    ("sequential", sequential_design),
)


def _row(name: str, tally: Tally, trials: int) -> str:
    false = tally.share(0.0, "win", trials) + tally.share(0.0, "regression", trials)
    sign = sum(tally.share(k, "regression", trials) for k in EFFECT_BARS[1:]) / 3
    refused = sum(tally.share(k, "refused", trials) for k in EFFECT_BARS) / len(EFFECT_BARS)
    per = f"{tally.launches / tally.decided:7.1f}" if tally.decided else "      -"
    beyond = f"{tally.beyond / tally.decided:7.1f}" if tally.decided else "      -"
    median = f"{statistics.median(tally.two_bar_launches):5.0f}" if tally.two_bar_launches else "    -"
    note = f"  (plan refused {refused:.0%})" if refused else ""
    return (
        f"{name:<16}| {false:6.2%} {sign:6.2%} {tally.share(0.5, 'win', trials):7.1%} "
        f"{tally.share(1.0, 'win', trials):6.1%} {tally.share(2.0, 'win', trials):6.1%} "
        f"| {per} {beyond} {median}{note}"
    )


def grid(args: argparse.Namespace) -> None:
    print(
        f"{'':<16}| {'false':>6} {'sign':>6} {'w@half':>7} {'power':>6} {'w@2':>6} "
        "|   L/dec  beyond 2-bar med"
    )
    for sigma in NOISES:
        for cal in CALIBRATIONS:
            print(f"-- noise {sigma:.1%} ({sigma / BAR.min_effect:.1f}x the bar), calibration {cal} launches")
            for offset, (name, run) in enumerate(DESIGNS):
                seed = args.seed + 1000 * offset + int(10000 * sigma) + cal
                print(_row(name, run(sigma, cal, args.trials, seed), args.trials), flush=True)


def quieter_calibration(args: argparse.Namespace) -> None:
    print("\na calibration from a quieter day (its noise half the sequence's), sequential design, A/A:")
    for sigma in (0.01, 0.03):
        for cal in (3, 6):
            rates = sequential.simulate(
                BAR,
                sigma,
                0.0,
                trials=args.trials,
                seed=args.seed,
                calibration_launches=cal,
                calibration_sigma=sigma / 2,
            )
            print(f"  noise {sigma:.0%}, {cal} launches: false calls {rates.win + rates.regression:.2%}")


def within_launch(args: argparse.Namespace) -> None:
    """The seeds' 'twice per point': two samples inside each launch agree within ~0.3%, launches 3%."""
    trials, rng = max(args.trials // 4, 100), random.Random(args.seed)
    seen_as_repeats, sequence_calls = 0, 0
    for _ in range(trials):
        control, candidate = (100.0 * math.exp(rng.gauss(0, 0.03)) for _ in range(2))
        pairs = [_draw(rng, level, 0.003, 2) for level in (control, candidate)]
        if _agree(pairs[0]) and _agree(pairs[1]):
            seen_as_repeats += _by_estimate(pairs[0], pairs[1]) in ("win", "regression")
        sequence_calls += _sequence_with_samples(rng) in ("win", "regression")
    print(
        f"\nrepeats inside a launch (A/A, launch-to-launch 3%, two samples 0.3% apart; {trials} "
        "trials): the practice on one launch per arm, its two samples taken as the repeats: "
        f"{seen_as_repeats / trials:.1%} false calls; the sequential design counting launches: "
        f"{sequence_calls / trials:.1%}"
    )


def _sequence_with_samples(rng: random.Random) -> str:
    state = sequential.start(BAR)
    while state.decision is None:
        for arm in ("control", "candidate"):
            level = 100.0 * math.exp(rng.gauss(0, 0.03))
            state = sequential.add_launch(state, arm, _draw(rng, level, 0.003, 2))
        if sequential.is_due(state):
            state = sequential.look(state)
    return state.decision.outcome


def ledger_replay() -> None:
    """Each A/A calibration in the ledger, its launches alternated into two arms, at bars of 2/5/10%."""
    looked, calls = 0, 0
    for entry in Ledger.open(ROOT).entries():
        if entry["kind"] != "calibration":
            continue
        for point in entry["payload"].get("points", {}).values():
            samples = point.get("samples") or []
            if len(samples) < 2 * sequential.MIN_PAIRS:
                continue
            for bar in (0.02, 0.05, 0.10):
                outcome = _replay_one(samples, bar)
                looked += outcome is not None
                calls += outcome in ("win", "regression")
    print(
        "\nthe ledger's A/A calibrations replayed (launches alternated into two arms): "
        f"{looked} looks, {calls} calls"
    )


def _replay_one(samples: list[float], min_effect: float) -> str | None:
    bar = BAR.model_copy(update={"min_effect": min_effect})
    state = sequential.start(bar)
    outcome = None
    for index, value in enumerate(samples[: 2 * (len(samples) // 2)]):
        state = sequential.add_launch(state, "control" if index % 2 == 0 else "candidate", [value])
        if sequential.is_due(state):
            state = sequential.look(state)
            outcome = state.looks[-1].outcome
        if state.decision is not None:
            break
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000, help="per cell and effect")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(
        f"bar {BAR.min_effect:.0%}; fixed defaults: {DEFAULT_REPEATS} repeats per arm, "
        f"gate {DEFAULT_GATE:.0%}; "
        f"sequential: {sequential.METHOD}, cap {sequential.DEFAULT_CAP} per arm; {args.trials} trials per "
        f"cell and effect, seed {args.seed}"
    )
    started = time.perf_counter()
    grid(args)
    quieter_calibration(args)
    within_launch(args)
    ledger_replay()
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
