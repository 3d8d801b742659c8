"""False-positive rate and power of the verdict method (rl-verdict/1), by repeats per arm.

    .venv/bin/python benchmarks/verdict_power.py [--trials 4000] [--seed 1] [--sigma 0.005]

Each trial draws a fresh A/A calibration of the control (6 launches), then n control and n candidate
repeats with log-normal noise sigma (default 0.5%: the seed's tight instrument, pairs within ~1%).
The candidate's true effect is k sigma; the bar's min_effect is 1 sigma so the table measures the
noise test rather than the bar. Columns: the fraction called a win or regression at 0 sigma (false
positives), then the fraction called a win at 1-4 sigma (power), and how often the replicate gate
blocked a call at 3 sigma. The default repeats are marked with *.
"""

from __future__ import annotations

import argparse
import time

from recipe_ledger.verdict import (
    DEFAULT_CALIBRATION_REPEATS,
    DEFAULT_REPEATS,
    METHOD,
    mde,
    simulate_error_rates,
)

EFFECT_SIGMAS = (0.0, 1.0, 2.0, 3.0, 4.0)
REPEATS = (2, 3, 4, 5)


def table_row(n: int, trials: int, seed: int, sigma: float) -> str:
    rates = simulate_error_rates(EFFECT_SIGMAS, n=n, trials=trials, seed=seed + n, sigma_rel=sigma)
    false_positive = rates[0.0]["win"] + rates[0.0]["regression"]
    power = "  ".join(f"{rates[k]['win']:>6.1%}" for k in EFFECT_SIGMAS[1:])
    mde_sigmas = mde(sigma, n, extra_df=DEFAULT_CALIBRATION_REPEATS - 1) / sigma
    marker = "*" if n == DEFAULT_REPEATS else " "
    return (
        f"{n:>2}{marker}  {mde_sigmas:>7.2f}  {false_positive:>6.1%}  {power}  "
        f"{rates[3.0]['gate_failed']:>6.1%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sigma", type=float, default=0.005, help="relative noise of one repeat")
    args = parser.parse_args()
    print(
        f"{METHOD}: {args.trials} trials per cell, sigma {args.sigma:.2%}, "
        f"calibration {DEFAULT_CALIBRATION_REPEATS} A/A runs, bar 1 sigma, alpha 0.05, agreement 2%"
    )
    print(" n   MDE(sd)  FP@0sd   win@1sd win@2sd win@3sd win@4sd  gate@3sd")
    started = time.perf_counter()
    for n in REPEATS:
        print(table_row(n, args.trials, args.seed, args.sigma))
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
