"""Sign errors, false calls and power of the verdict method: rl-verdict/1 (old) against rl-verdict/2 (new).

    .venv/bin/python benchmarks/verdict_power.py [--trials 300] [--planned-trials 1000] [--seed 1]

Each trial draws a fresh A/A calibration of the control (2-5 launches), then n = 2-6 control and n
candidate repeats with log-normal noise sigma (1%, 5%, 12%); the bar is 3 sigma (3%, 15%, 36%). The
replicate gate is the default 2% at 1% noise and the CPU examples' 20% at 5% and 12%. True effects:
0, +-0.5 bar, the bar, 5 sigma; both methods see the same draws (same seed).

Columns: sign = a true gain called a regression or a true loss called a win (over the four non-zero
effects); false = no true change called a win or regression; win@bar = a true effect at the bar
called a win (power); win@5sd = the same at 5 sigma. Then power at the bar with the repeats that
``plan_power`` recommends from each trial's calibration (trials it declares unreachable are not run),
and the issue's case: 12% noise, a 3-launch calibration, a true +8% against a 5% bar.
Targets: sign < 0.1%, false <= 5%, win@bar >= 80% at the recommended repeats.
"""

from __future__ import annotations

import argparse
import time

from verdict_sim import simulate_error_rates  # beside this script: its folder leads sys.path

from recipe_ledger.verdict import DEFAULT_AGREEMENT_THRESHOLD, METHOD, METHOD_V1

NOISES = ((0.01, DEFAULT_AGREEMENT_THRESHOLD), (0.05, 0.20), (0.12, 0.20))
CALIBRATIONS = (2, 3, 4, 5)
REPEATS = (2, 3, 4, 5, 6)
PLANNED_CALIBRATIONS = (2, 3, 4, 5, 6)


def _effects(bar_sigmas: float) -> tuple[float, ...]:
    return (0.0, 0.5 * bar_sigmas, -0.5 * bar_sigmas, bar_sigmas, 5.0)


def _rates(method: str, sigma: float, gate: float, calibration: int, n: int, args) -> dict[str, float]:
    effects = _effects(args.bar_sigmas)
    rates = simulate_error_rates(
        effects,
        n=n,
        trials=args.trials,
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


def _cells(rates: dict[str, float]) -> str:
    return f"{rates['sign']:>6.2%} {rates['false']:>6.1%} {rates['bar']:>7.1%} {rates['five']:>7.1%}"


def grid(args) -> None:
    print(f"cal  n | {'old: sign  false win@bar win@5sd':<31} | new: sign  false win@bar win@5sd")
    for sigma, gate in NOISES:
        print(f"-- noise {sigma:.0%}, bar {args.bar_sigmas * sigma:.0%}, gate {gate:.0%}")
        worst = {METHOD_V1: 0.0, METHOD: 0.0}
        for calibration in CALIBRATIONS:
            for n in REPEATS:
                old = _rates(METHOD_V1, sigma, gate, calibration, n, args)
                new = _rates(METHOD, sigma, gate, calibration, n, args)
                worst[METHOD_V1] += old["sign"]
                worst[METHOD] += new["sign"]
                print(f"{calibration:>3} {n:>2} | {_cells(old)}   | {_cells(new)}")
        cells = len(CALIBRATIONS) * len(REPEATS)
        print(
            f"   mean sign-error rate over {cells * 4 * args.trials} effect trials: "
            f"old {worst[METHOD_V1] / cells:.3%}, new {worst[METHOD] / cells:.3%}"
        )


def planned(args) -> None:
    print(f"\npower at the bar with the recommended repeats ({args.planned_trials} calibrations per row)")
    print("noise cal | win@bar  false  mean repeats  plan refused")
    for sigma, gate in NOISES:
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


def issue_case(args) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300, help="per grid cell and effect")
    parser.add_argument("--planned-trials", type=int, default=1000)
    parser.add_argument("--case-trials", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bar-sigmas", type=float, default=3.0)
    args = parser.parse_args()
    print(f"{METHOD_V1} (old) vs {METHOD} (new): seed {args.seed}, alpha 0.05, bar {args.bar_sigmas:g} sigma")
    started = time.perf_counter()
    grid(args)
    planned(args)
    issue_case(args)
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
