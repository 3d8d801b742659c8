"""Scenarios with a known truth through the real `ledger run` (the sequential default), not the simulation.

    nice -n 10 .venv/bin/python benchmarks/sequential_scenarios.py [--runs 12] [--seed 1]

A throwaway git repository holds a study experiment (no server): a control and a candidate whose
probe draws each launch's number log-normally around a known level with a known noise, seeded by the
experiment's seed, the arm and the repeat, so every run is a fresh draw and rerunning is exact. Bar
5%, higher is better; cells of noise 1%, 3% and 10% (0.2x, 0.6x and 2x the bar) by true effect 0, one
bar and two bars; each cell `--runs` experiments, each a `ledger run` through the CLI in a subprocess
(planning, the sequence, the run folder, the result entry, the calibration it records: all of it).
Per cell: the outcomes, the mean launches per run and per decided verdict, and the goal each cell
answers to (issue 24): false calls <= 1% (none expected in a few dozen runs), power >= 80% at the bar
for 0.2x and 0.6x, <= 7 / <= 18 launches per decided verdict there, no wins at 2x. Each run starts
from an empty ledger, so no calibration is lent: the 0-calibration case, the slowest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BAR = 0.05
NOISES = (0.01, 0.03, 0.10)
EFFECTS = (0.0, 1.0, 2.0)  # in bars

PROBE = textwrap.dedent("""\
    import json, math, random, sys
    level, sigma, seed = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    arm, repeat = sys.argv[4], int(sys.argv[5])
    rng = random.Random(f"{seed}:{arm}:{repeat}")
    print(json.dumps({"score": level * math.exp(rng.gauss(0.0, sigma))}))
    """)


def experiment(noise: float, effect_bars: float, seed: int) -> dict:
    candidate_level = 100.0 * (1.0 + effect_bars * BAR)
    return {
        "name": "scenario",
        "hypothesis": f"known truth: {effect_bars:g} bars at {noise:.0%} noise",
        "box": "cpu-only",
        "engine": "none",
        "server": {"needs_server": False},
        "control": {"params": {"level": "100.0", "noise": str(noise)}},
        "candidates": {"candidate": {"params": {"level": str(candidate_level), "noise": str(noise)}}},
        "instruments": [
            {
                "name": "probe",
                "kind": "command",
                "command": [sys.executable, "probe.py", "{level}", "{noise}", "{seed}", "{arm}", "{repeat}"],
            }
        ],
        "points": [1],
        "bars": [{"metric": "score", "point": 1, "direction": "higher", "min_effect": BAR}],
        "seed": seed,
    }


def fresh_repo(root: Path) -> None:
    """A git repository with the cpu-only box, the probe and an empty ledger."""
    if root.exists():
        shutil.rmtree(root)
    (root / "recipes" / "boxes").mkdir(parents=True)
    (root / "recipes" / "models").mkdir()
    (root / "experiments").mkdir()
    shutil.copy(REPO / "recipes" / "boxes" / "cpu-only.yaml", root / "recipes" / "boxes")
    (root / "probe.py").write_text(PROBE)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    cli(root, "init", "--root", str(root))


def commit(root: Path) -> None:
    git = ["git", "-C", str(root), "-c", "user.email=b@b", "-c", "user.name=b"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "scenario"], check=True)


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RECIPE_LEDGER_WRITER": "scenarios"}
    return subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", *args], cwd=root, capture_output=True, text=True, env=env
    )


def one_run(root: Path, noise: float, effect_bars: float, seed: int) -> tuple[str, int]:
    fresh_repo(root)
    (root / "experiments" / "x.yaml").write_text(json.dumps(experiment(noise, effect_bars, seed)))
    commit(root)
    result = cli(root, "run", "experiments/x.yaml", "--no-mlflow")
    if result.returncode != 0:
        raise SystemExit(f"ledger run failed ({result.returncode}): {result.stderr[-500:]}")
    log = cli(root, "log", "--json", "--root", str(root))
    entry = next(json.loads(line) for line in log.stdout.splitlines() if '"kind": "result"' in line)
    (bar,) = entry["payload"]["experiment"]["bars"]
    return bar["outcome"], int(bar["launches"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12, help="experiments per cell")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="scenarios-"))
    print(f"ledger run (the sequential default), bar {BAR:.0%} higher is better, {args.runs} runs a cell")
    print(
        f"{'noise':>6} {'effect':>7} | {'win':>5} {'regr':>5} {'same':>5} {'open':>5} | L/run  L/dec | goal"
    )
    try:
        for noise in NOISES:
            spent_at_noise, decided_at_noise = 0, 0
            for effect in EFFECTS:
                outcomes, launches = [], []
                for index in range(args.runs):
                    seed = args.seed * 100_000 + int(noise * 1000) * 100 + int(effect * 10) * 1000 + index
                    outcome, spent = one_run(work / "repo", noise, effect, seed)
                    outcomes.append(outcome)
                    launches.append(spent)
                print(row(noise, effect, outcomes, launches, args.runs))
                spent_at_noise += sum(launches)
                decided_at_noise += len(outcomes) - outcomes.count("inconclusive")
            print(pooled(noise, spent_at_noise, decided_at_noise))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"({time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.1f})")


def row(noise: float, effect: float, outcomes: list[str], launches: list[int], runs: int) -> str:
    share = {name: outcomes.count(name) / runs for name in ("win", "regression", "no-change", "inconclusive")}
    decided = runs - outcomes.count("inconclusive")
    per_decided = sum(launches) / decided if decided else float("nan")
    return (
        f"{noise:>6.0%} {effect:>6g}b | {share['win']:>5.0%} {share['regression']:>5.0%} "
        f"{share['no-change']:>5.0%} {share['inconclusive']:>5.0%} | {statistics.mean(launches):>6.1f} "
        f"{per_decided:>6.1f} | {goal(noise, effect, share, per_decided)}"
    )


def pooled(noise: float, spent: int, decided: int) -> str:
    """Launches per decided verdict over the cell's effects, as the issue's goal counts them."""
    per_decided = spent / decided if decided else float("nan")
    if noise >= 2 * BAR:
        return f"{'':>6} pooled | {per_decided:.1f} launches per decided verdict (no goal at 2x)"
    limit = 7 if noise <= 0.2 * BAR else 18
    verdict = "met" if per_decided <= limit else "MISSED"
    return f"{'':>6} pooled | {per_decided:.1f} launches per decided verdict: {verdict} (<= {limit})"


def goal(noise: float, effect: float, share: dict[str, float], per_decided: float) -> str:
    calls = share["win"] + share["regression"]
    if noise >= 2 * BAR:
        return "met: no win at 2x the bar" if share["win"] == 0 else f"MISSED: {share['win']:.0%} wins at 2x"
    if effect == 0:
        return "met: no false call" if calls == 0 else f"check: {calls:.0%} calls at no effect (goal <= 1%)"
    if effect == 1.0:
        return f"{'met' if share['win'] >= 0.8 else 'MISSED'}: power at the bar {share['win']:.0%} (>= 80%)"
    return f"two bars: {share['win']:.0%} wins"


if __name__ == "__main__":
    main()
