"""Verdict designs and methods side by side: the fixed verdict, the users' practice and the sequential one
(issue 24), then rl-verdict/1 against rl-verdict/2 (issue 11).

    nice -n 10 .venv/bin/python benchmarks/verdict_power.py [--trials 2000] [--seed 1] [--part all]

**Part 1, designs** (``--part designs``). Simulated experiments on one bar (5%, higher is better) with
log-normal launch-to-launch noise of 0.5, 1, 3, 10 and 17% of the level (0.1x, 0.2x, 0.6x, 2x and 3.4x
the bar), true effects of 0, half a bar, one bar and two bars, and a same-box A/A calibration of 0, 3
or 6 launches drawn per trial. Four ways to decide, on the same kind of draws:

- fixed, defaults: ``verdict.DEFAULT_REPEATS`` per arm and the ``verdict.DEFAULT_AGREEMENT_THRESHOLD``
  gate (the spec's defaults follow these constants), ``decide`` with the calibration, and the loose
  gate, as ``ledger run`` does (``pipeline.run.decide_point``);
- fixed, plan: the repeats ``plan_power`` recommends from the calibration (it refuses to plan from
  fewer than 5 launches, or when no repeats within 20 reach the bar: those trials spend their
  calibration and decide nothing);
- practice: the users' own rule, two runs of each arm, called by the point estimate against the bar
  when both arms' runs agree within 1%, two more runs each otherwise, up to 20 per arm;
- sequential: ``recipe_ledger.sequential`` with its defaults (a look after each pair, cap 24 per arm).

Columns: false = a win or regression at no true effect; sign = a regression at a true gain (the mean
over half, one and two bars); w@half = a win at half a bar; power = a win at the bar; nc@1 = no-change
at the bar (the power the no-change rule costs); w@2 = a win at two bars; L/dec = every launch
(calibration included) per decided verdict (win, regression or no-change), pooled over the four
effects; beyond = the same without the calibration (a calibration reused from the ledger costs no
new launch); 2-bar med/p90 = the median and 90th percentile of the launches beyond the calibration at
two bars. Then, for the sequential design, a calibration from a quieter day (outside its guarantee),
repeats inside a launch, the ledger's own A/A calibrations replayed, and one line per issue-24 goal,
met or missed with the number:

- false calls <= 1% and sign errors < 0.1% in every cell (sign errors here: the worst single effect);
- 0.2x noise: <= 7 launches per decided verdict and >= 80% power; 0.6x: <= 18 and >= 80% (launches:
  every launch without a calibration, the launches beyond it with one; power: the lowest of the three);
- noise >= 2x the bar: no wins (half, one and two bars, every calibration);
- two bars decided in <= 4 launches beyond a 3- or 6-launch calibration (the median; the 90th
  percentile and no calibration printed beside it), on the instruments tight enough for it (0.1x and
  0.2x: at 0.6x two pairs carry a two-bar effect at about 3 standard errors, short of any 1% call);
- fewer launches per decided verdict than the practice and each fixed design in every cell up to 0.6x
  noise, at power no lower and false calls and sign errors no higher than theirs or within the goals;
- the ledger's A/A calibrations: no call.

**Part 2, methods** (``--part methods``): the verdict's own rules, rl-verdict/1 (old) against
rl-verdict/2 (new), at fixed repeats. Each trial draws a fresh A/A calibration of the control (2-5
launches), then n = 2-6 control and n candidate repeats with log-normal noise sigma (1%, 5%, 12%); the
bar is 3 sigma (3%, 15%, 36%). The replicate gate is the default 2% at 1% noise and the CPU examples'
20% at 5% and 12%. True effects: 0, +-0.5 bar, the bar, 5 sigma; both methods see the same draws (same
seed). Columns: sign = a true gain called a regression or a true loss called a win (over the four
non-zero effects); false = no true change called a win or regression; win@bar = a true effect at the
bar called a win (power); win@5sd = the same at 5 sigma. Then power at the bar with the repeats that
``plan_power`` recommends from each trial's calibration (trials it declares unreachable are not run),
and the issue-11 case: 12% noise, a 3-launch calibration, a true +8% against a 5% bar. Targets: sign <
0.1%, false <= 5%, win@bar >= 80% at the recommended repeats. The simulation is ``verdict_sim.py``
beside this script (tests/unit/test_verdict.py loads it too).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from verdict_sim import simulate_error_rates  # beside this script: its folder leads sys.path

from recipe_ledger import sequential
from recipe_ledger.ledger import Ledger
from recipe_ledger.verdict import (
    DEFAULT_AGREEMENT_THRESHOLD,
    DEFAULT_REPEATS,
    METHOD,
    METHOD_V1,
    Bar,
    calibrate,
    classify_instrument,
    decide,
    gate_loose_instrument,
    plan_power,
)

ROOT = Path(__file__).resolve().parent.parent

# ------------------------------------------------------------------------------- part 1: designs

BAR = Bar(metric="simulated", point=1, direction="higher", min_effect=0.05)
NOISES = (0.005, 0.01, 0.03, 0.10, 0.17)
CALIBRATIONS = (0, 3, 6)
EFFECT_BARS = (0.0, 0.5, 1.0, 2.0)
PRACTICE_AGREEMENT = 0.01
PRACTICE_CAP = 20
GOAL_FALSE = 0.01
GOAL_SIGN = 0.001
GOAL_POWER = 0.8
GOAL_LAUNCHES = {0.01: 7.0, 0.03: 18.0}  # noise -> launches per decided verdict
GOAL_TWO_BARS = 4  # launches beyond the calibration
TWO_BAR_NOISES = (0.005, 0.01)  # the instruments tight enough to decide two bars in two pairs
QUIETER_SHARE = 0.5  # the quieter day's noise, as a share of the sequence's
BEAT_UP_TO = 0.03  # the noises (up to 0.6x) where the designs' launches are compared


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


@dataclass(frozen=True)
class Row:
    """What the table and the goals read from one tally."""

    false: float
    sign: float  # mean over the three true gains
    worst_sign: float  # the worst of them
    half: float
    power: float
    same_at_bar: float  # no-change at a true effect at the bar: the power the no-change rule costs
    two: float
    wins: int  # wins at half, one and two bars together
    refused: float
    per_decided: float | None
    beyond: float | None
    two_bar_median: float | None
    two_bar_p90: float | None

    @classmethod
    def of(cls, tally: Tally, trials: int) -> Row:
        signs = [tally.share(k, "regression", trials) for k in EFFECT_BARS[1:]]
        two = sorted(tally.two_bar_launches)
        return cls(
            false=tally.share(0.0, "win", trials) + tally.share(0.0, "regression", trials),
            sign=sum(signs) / len(signs),
            worst_sign=max(signs),
            half=tally.share(0.5, "win", trials),
            power=tally.share(1.0, "win", trials),
            same_at_bar=tally.share(1.0, "no-change", trials),
            two=tally.share(2.0, "win", trials),
            wins=sum(tally.counts.get((k, "win"), 0) for k in EFFECT_BARS[1:]),
            refused=sum(tally.share(k, "refused", trials) for k in EFFECT_BARS) / len(EFFECT_BARS),
            per_decided=tally.launches / tally.decided if tally.decided else None,
            beyond=tally.beyond / tally.decided if tally.decided else None,
            two_bar_median=statistics.median(two) if two else None,
            two_bar_p90=two[min(len(two) - 1, math.ceil(0.9 * len(two)) - 1)] if two else None,
        )

    def launches_for_goal(self, calibration: int) -> float | None:
        """Every launch without a calibration; the launches beyond it with one (reused: no new launch)."""
        return self.beyond if calibration else self.per_decided


def _draw(rng: random.Random, level: float, sigma: float, count: int) -> list[float]:
    return [level * math.exp(rng.gauss(0.0, sigma)) for _ in range(count)]


def _candidate_level(k: float) -> float:
    return 100.0 * (1.0 + k * BAR.min_effect)


def _fixed_outcome(control: list[float], candidate: list[float], calibration_samples: list[float]) -> str:
    """rl-verdict/2 as ``ledger run`` applies it (pipeline.run.decide_point): the loose gate included."""
    calibration = calibrate({1: calibration_samples}) if len(calibration_samples) >= 2 else None
    verdict = decide(control, candidate, BAR, calibration, agreement_threshold=DEFAULT_AGREEMENT_THRESHOLD)
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
                point = calibrate({1: calibration}).points["1"]
                repeats = plan_power(point, BAR, DEFAULT_REPEATS).repeats_needed
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


SEQUENTIAL = "sequential"
DESIGNS: tuple[tuple[str, Callable[[float, int, int, int], Tally]], ...] = (
    ("fixed, defaults", fixed_defaults),
    ("fixed, plan", fixed_plan),
    ("practice", practice),
    (SEQUENTIAL, sequential_design),
)
Grid = dict[tuple[str, float, int], Row]


def _cell(value: float | None, width: int, digits: int = 1) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else " " * (width - 1) + "-"


def _row_text(name: str, row: Row) -> str:
    note = f"  (plan refused {row.refused:.0%})" if row.refused else ""
    return (
        f"{name:<16}| {row.false:6.2%} {row.sign:6.2%} {row.half:7.1%} {row.power:6.1%} "
        f"{row.same_at_bar:6.1%} {row.two:6.1%} "
        f"| {_cell(row.per_decided, 7)} {_cell(row.beyond, 7)} {_cell(row.two_bar_median, 5, 0)} "
        f"{_cell(row.two_bar_p90, 4, 0)}{note}"
    )


def designs_grid(trials: int, seed: int) -> Grid:
    print(
        f"{'':<16}| {'false':>6} {'sign':>6} {'w@half':>7} {'power':>6} {'nc@1':>6} {'w@2':>6} "
        "|   L/dec  beyond 2-bar med p90"
    )
    grid: Grid = {}
    for sigma in NOISES:
        for cal in CALIBRATIONS:
            print(f"-- noise {sigma:.1%} ({sigma / BAR.min_effect:.1f}x the bar), calibration {cal} launches")
            for offset, (name, run) in enumerate(DESIGNS):
                cell_seed = seed + 1000 * offset + int(10000 * sigma) + cal
                row = Row.of(run(sigma, cal, trials, cell_seed), trials)
                grid[(name, sigma, cal)] = row
                print(_row_text(name, row), flush=True)
    return grid


def quieter_calibration(trials: int, seed: int) -> float:
    print(
        f"\na calibration from a quieter day (its noise {QUIETER_SHARE:g}x the sequence's), sequential "
        f"design, A/A, {trials} sequences each:"
    )
    worst = 0.0
    for sigma in (0.01, 0.03):
        for cal in (3, 6):
            rates = sequential.simulate(
                BAR,
                sigma,
                0.0,
                trials=trials,
                seed=seed,
                calibration_launches=cal,
                calibration_sigma=sigma * QUIETER_SHARE,
            )
            calls = rates.win + rates.regression
            worst = max(worst, calls)
            print(f"  noise {sigma:.0%}, {cal} launches: false calls {calls:.2%}")
    return worst


def within_launch(trials: int, seed: int) -> None:
    """The seeds' 'twice per point': two samples inside each launch agree within ~0.3%, launches 3%."""
    trials, rng = max(trials // 4, 100), random.Random(seed)
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


def ledger_replay() -> tuple[int, int, int]:
    """Each A/A calibration in the ledger, its launches alternated into two arms, at bars of 2/5/10%."""
    points, looked, calls = 0, 0, 0
    for entry in Ledger.open(ROOT).entries():
        if entry["kind"] != "calibration":
            continue
        for point in entry["payload"].get("points", {}).values():
            samples = point.get("samples") or []
            if len(samples) < 2 * sequential.MIN_PAIRS:
                continue
            points += 1
            for bar in (0.02, 0.05, 0.10):
                outcomes = _replay_one(samples, bar)
                looked += len(outcomes)
                calls += any(outcome in ("win", "regression") for outcome in outcomes)
    print(
        f"\nthe ledger's A/A calibrations replayed ({points} points with at least "
        f"{2 * sequential.MIN_PAIRS} launches, alternated into two arms, bars of 2/5/10%): "
        f"{looked} looks, {calls} calls"
    )
    return points, looked, calls


def _replay_one(samples: list[float], min_effect: float) -> list[str]:
    bar = BAR.model_copy(update={"min_effect": min_effect})
    state = sequential.start(bar)
    for index, value in enumerate(samples[: 2 * (len(samples) // 2)]):
        state = sequential.add_launch(state, "control" if index % 2 == 0 else "candidate", [value])
        if sequential.is_due(state):
            state = sequential.look(state)
        if state.decision is not None:
            break
    return [record.outcome for record in state.looks]


# ----------------------------------------------------------------------------------- the goals


def _verdict(met: bool) -> str:
    return "met   " if met else "MISSED"


def _x(sigma: float) -> str:
    return f"{sigma:.1%} ({sigma / BAR.min_effect:.1f}x)"


def goal_lines(grid: Grid, trials: int, quieter: float, replay: tuple[int, int, int]) -> None:
    seq = {(sigma, cal): grid[(SEQUENTIAL, sigma, cal)] for sigma in NOISES for cal in CALIBRATIONS}
    print("\nthe issue-24 goals, for the sequential design:")
    false_cell = max(seq, key=lambda key: seq[key].false)
    worst_false = seq[false_cell].false
    print(
        f"  {_verdict(worst_false <= GOAL_FALSE)} false calls <= 1% in every cell: at most "
        f"{worst_false:.2%} (noise {_x(false_cell[0])}, calibration {false_cell[1]})"
    )
    sign_cell = max(seq, key=lambda key: seq[key].worst_sign)
    worst_sign = seq[sign_cell].worst_sign
    where = f" (noise {_x(sign_cell[0])}, calibration {sign_cell[1]})" if worst_sign else ""
    print(
        f"  {_verdict(worst_sign < GOAL_SIGN)} sign errors < 0.1% in every cell: at most {worst_sign:.2%} "
        f"at one effect{where}"
    )
    for sigma, limit in GOAL_LAUNCHES.items():
        launches = {cal: seq[(sigma, cal)].launches_for_goal(cal) for cal in CALIBRATIONS}
        with_cal = {cal: seq[(sigma, cal)].per_decided for cal in CALIBRATIONS[1:]}
        power = min(seq[(sigma, cal)].power for cal in CALIBRATIONS)
        worst = max((value for value in launches.values() if value is not None), default=math.inf)
        text = ", ".join(f"{_cell(launches[cal], 1)} at {cal}" for cal in CALIBRATIONS)
        counted = ", ".join(f"{_cell(value, 1)} at {cal}" for cal, value in with_cal.items())
        print(
            f"  {_verdict(worst <= limit)} noise {_x(sigma)}: <= {limit:g} launches per decided verdict: "
            f"{text} (calibration launches counted: {counted})"
        )
        print(
            f"  {_verdict(power >= GOAL_POWER)} noise {_x(sigma)}: power at the bar >= 80%: at least "
            f"{power:.1%}"
        )
    loose = [(sigma, cal) for sigma in NOISES for cal in CALIBRATIONS if sigma >= 2 * BAR.min_effect]
    wins = sum(seq[key].wins for key in loose)
    sequences = len(loose) * (len(EFFECT_BARS) - 1) * trials
    where = ", ".join(f"{seq[key].wins} at {key[0]:.0%}/{key[1]}" for key in loose if seq[key].wins)
    print(
        f"  {_verdict(wins == 0)} noise >= 2x the bar: no wins: {wins} in {sequences:,} sequences at a true "
        f"gain ({wins / sequences:.3%}){f': {where}' if where else ''}; at most 0.1% by the design's bound"
    )
    medians = {(s, c): seq[(s, c)].two_bar_median for s in TWO_BAR_NOISES for c in CALIBRATIONS}
    p90s = {(s, c): seq[(s, c)].two_bar_p90 for s in TWO_BAR_NOISES for c in CALIBRATIONS}
    calibrated = [medians[(s, c)] for s in TWO_BAR_NOISES for c in CALIBRATIONS[1:]]
    met = all(value is not None and value <= GOAL_TWO_BARS for value in calibrated)
    text = "; ".join(
        f"{s:.1%}: "
        + ", ".join(
            f"{_cell(medians[(s, c)], 1, 0)}/{_cell(p90s[(s, c)], 1, 0)} at {c}" for c in CALIBRATIONS
        )
        for s in TWO_BAR_NOISES
    )
    print(
        f"  {_verdict(met)} two bars in <= 4 launches beyond a 3- or 6-launch calibration (median/p90 by "
        f"calibration): {text}"
    )
    for name, _ in DESIGNS[:-1]:
        _beat_line(grid, name)
    points, looked, calls = replay
    print(
        f"  {_verdict(calls == 0)} the ledger's A/A calibrations replayed: no false call: {calls} calls "
        f"in {looked} looks ({points} points x 3 bars)"
    )
    print(f"  (outside the guarantee: a calibration from a quieter day, at worst {quieter:.2%} false calls)")


def _beat_line(grid: Grid, name: str) -> None:
    """Fewer launches per decided verdict, power no lower, errors no higher or within the goals."""
    misses, cells, skipped = [], 0, 0
    for sigma in (s for s in NOISES if s <= BEAT_UP_TO):
        for cal in CALIBRATIONS:
            seq, other = grid[(SEQUENTIAL, sigma, cal)], grid[(name, sigma, cal)]
            cells += 1
            if other.per_decided is None:
                skipped += 1  # it decides nothing here; the sequential design does
                continue
            why = []
            if seq.per_decided is None or seq.per_decided >= other.per_decided:
                why.append(f"launches {_cell(seq.per_decided, 1)} vs {other.per_decided:.1f}")
            if seq.power < other.power:
                why.append(f"power {seq.power:.1%} vs {other.power:.1%}")
            if seq.false > other.false and seq.false > GOAL_FALSE:
                why.append(f"false {seq.false:.2%} vs {other.false:.2%}")
            if seq.worst_sign > other.worst_sign and seq.worst_sign >= GOAL_SIGN:
                why.append(f"sign {seq.worst_sign:.2%} vs {other.worst_sign:.2%}")
            if why:
                misses.append(f"{sigma:.1%}/{cal}: " + ", ".join(why))
    tail = f" ({skipped} where it decides nothing)" if skipped else ""
    detail = f": {'; '.join(misses)}" if misses else ""
    print(
        f"  {_verdict(not misses)} beats {name} up to 0.6x noise (fewer launches per decided verdict, "
        f"power no lower, errors no higher or within the goals): {cells - len(misses)} of {cells} "
        f"cells{tail}{detail}"
    )


def designs(args: argparse.Namespace) -> None:
    print(
        f"part 1, designs: bar {BAR.min_effect:.0%}; fixed defaults: {DEFAULT_REPEATS} repeats per arm "
        f"(verdict.DEFAULT_REPEATS), gate {DEFAULT_AGREEMENT_THRESHOLD:.0%}; sequential: "
        f"{sequential.METHOD}, cap {sequential.DEFAULT_CAP} per arm; {args.trials} trials per cell and "
        f"effect, seed {args.seed}"
    )
    grid = designs_grid(args.trials, args.seed)
    quieter = quieter_calibration(2 * args.trials, args.seed)
    within_launch(args.trials, args.seed)
    replay = ledger_replay()
    goal_lines(grid, args.trials, quieter, replay)


# ------------------------------------------------------------------------------- part 2: methods

METHOD_NOISES = ((0.01, DEFAULT_AGREEMENT_THRESHOLD), (0.05, 0.20), (0.12, 0.20))
METHOD_CALIBRATIONS = (2, 3, 4, 5)
METHOD_REPEATS = (2, 3, 4, 5, 6)
PLANNED_CALIBRATIONS = (2, 3, 4, 5, 6)


def _effects(bar_sigmas: float) -> tuple[float, ...]:
    return (0.0, 0.5 * bar_sigmas, -0.5 * bar_sigmas, bar_sigmas, 5.0)


def _rates(
    method: str, sigma: float, gate: float, calibration: int, n: int, args: argparse.Namespace
) -> dict[str, float]:
    effects = _effects(args.bar_sigmas)
    rates = simulate_error_rates(
        effects,
        n=n,
        trials=args.method_trials,
        seed=args.seed + 100 * calibration + n,
        sigma_rel=sigma,
        min_effect_sigmas=args.bar_sigmas,
        calibration_repeats=calibration,
        agreement_threshold=gate,
        method=method,
    )
    zero, half, minus_half, bar, five = (rates[float(k)] for k in effects)
    sign = (half["regression"] + minus_half["win"] + bar["regression"] + five["regression"]) / 4
    return {
        "sign": sign,
        "false": zero["win"] + zero["regression"],
        "bar": bar["win"],
        "five": five["win"],
    }


def _method_cells(rates: dict[str, float]) -> str:
    return f"{rates['sign']:>6.2%} {rates['false']:>6.1%} {rates['bar']:>7.1%} {rates['five']:>7.1%}"


def methods_grid(args: argparse.Namespace) -> None:
    print(f"cal  n | {'old: sign  false win@bar win@5sd':<31} | new: sign  false win@bar win@5sd")
    for sigma, gate in METHOD_NOISES:
        print(f"-- noise {sigma:.0%}, bar {args.bar_sigmas * sigma:.0%}, gate {gate:.0%}")
        worst = {METHOD_V1: 0.0, METHOD: 0.0}
        for calibration in METHOD_CALIBRATIONS:
            for n in METHOD_REPEATS:
                old = _rates(METHOD_V1, sigma, gate, calibration, n, args)
                new = _rates(METHOD, sigma, gate, calibration, n, args)
                worst[METHOD_V1] += old["sign"]
                worst[METHOD] += new["sign"]
                print(f"{calibration:>3} {n:>2} | {_method_cells(old)}   | {_method_cells(new)}")
        cells = len(METHOD_CALIBRATIONS) * len(METHOD_REPEATS)
        print(
            f"   mean sign-error rate over {cells * 4 * args.method_trials} effect trials: "
            f"old {worst[METHOD_V1] / cells:.3%}, new {worst[METHOD] / cells:.3%}"
        )


def planned(args: argparse.Namespace) -> None:
    print(f"\npower at the bar with the recommended repeats ({args.planned_trials} calibrations per row)")
    print("noise cal | win@bar  false  mean repeats  plan refused")
    for sigma, gate in METHOD_NOISES:
        for calibration in PLANNED_CALIBRATIONS:
            rates = simulate_error_rates(
                (0.0, args.bar_sigmas),
                trials=args.planned_trials,
                seed=args.seed + calibration,
                sigma_rel=sigma,
                min_effect_sigmas=args.bar_sigmas,
                calibration_repeats=calibration,
                agreement_threshold=gate,
                planned=True,
            )
            zero, bar = rates[0.0], rates[float(args.bar_sigmas)]
            win = f"{bar['win']:>7.1%}" if bar["unplanned"] < 1 else "      -"
            print(
                f"{sigma:>5.0%} {calibration:>3} | {win} {zero['win'] + zero['regression']:>6.1%} "
                f"{bar['repeats']:>13.1f} {bar['unplanned']:>13.1%}"
            )


def issue_case(args: argparse.Namespace) -> None:
    print(
        f"\nthe issue's case: noise 12%, 3-launch calibration, bar 5%, true +8% ({args.case_trials} trials)"
    )
    for n in (2, 3):
        line = []
        for method in (METHOD_V1, METHOD):
            rates = simulate_error_rates(
                (0.08 / 0.12,),
                n=n,
                trials=args.case_trials,
                seed=args.seed,
                sigma_rel=0.12,
                min_effect_sigmas=0.05 / 0.12,
                calibration_repeats=3,
                agreement_threshold=0.20,
                method=method,
            )
            only = next(iter(rates.values()))
            line.append(f"{method}: regression {only['regression']:.3%}, win {only['win']:.1%}")
        print(f"  n={n}: " + "; ".join(line))


def methods(args: argparse.Namespace) -> None:
    print(
        f"part 2, methods: {METHOD_V1} (old) vs {METHOD} (new): seed {args.seed}, alpha 0.05, bar "
        f"{args.bar_sigmas:g} sigma, {args.method_trials} trials per cell and effect"
    )
    methods_grid(args)
    planned(args)
    issue_case(args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("designs", "methods", "all"), default="all")
    parser.add_argument("--trials", type=int, default=2000, help="designs: per cell and effect")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--method-trials", type=int, default=300, help="methods: per cell and effect")
    parser.add_argument("--planned-trials", type=int, default=1000)
    parser.add_argument("--case-trials", type=int, default=10000)
    parser.add_argument("--bar-sigmas", type=float, default=3.0, help="methods: the bar in sigmas")
    args = parser.parse_args()
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} cores, load {load}, "
        f"Python {platform.python_version()}, nice {os.nice(0)}"
    )
    started = time.perf_counter()
    if args.part in ("designs", "all"):
        designs(args)
        print(f"(part 1: {time.perf_counter() - started:.1f} s)\n")
    if args.part in ("methods", "all"):
        begun = time.perf_counter()
        methods(args)
        print(f"(part 2: {time.perf_counter() - begun:.1f} s)")
    print(f"({time.perf_counter() - started:.1f} s in all)")


if __name__ == "__main__":
    main()
