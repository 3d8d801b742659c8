"""What each instrument adds to a run's wall time, read from finished run folders (issue 25's goal:
the agreement instrument adds at most 10% to a tiny-lane run).

    .venv/bin/python benchmarks/instrument_cost.py runs/<id> [runs/<id> ...]

Per run: the run's wall time as its own ``timings.json`` counted it (every step: boots, clients,
warm-ups, scrapes, teardowns, records), and per instrument the sum of its measurements' ``wall_s``
(``measurements.jsonl`` and ``calibration.jsonl``). "adds" is the instrument's seconds over the
run's seconds without them: what the run would have cost had the instrument not been there (its
launches would still boot, so the boots stay in the denominator). Prints a table, one row per run
and instrument, and the median "adds" per instrument over the runs given.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

RECORDS = ("measurements.jsonl", "calibration.jsonl")


def run_seconds(run_dir: Path) -> float:
    steps = json.loads((run_dir / "timings.json").read_text())["steps"]
    return sum(float(step["s"]) for step in steps.values())


def instrument_seconds(run_dir: Path) -> dict[str, float]:
    spent: dict[str, float] = defaultdict(float)
    for name in RECORDS:
        path = run_dir / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if isinstance(row, dict) and "instrument" in row and "wall_s" in row:
                spent[row["instrument"]] += float(row["wall_s"])
    return dict(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished run folders (runs/<id>)")
    args = parser.parse_args()
    adds: dict[str, list[float]] = defaultdict(list)
    print(f"{'run':44} {'instrument':12} {'seconds':>8} {'run s':>7} {'share':>7} {'adds':>7}")
    for run_dir in args.runs:
        total = run_seconds(run_dir)
        for instrument, seconds in sorted(instrument_seconds(run_dir).items()):
            added = seconds / (total - seconds)
            adds[instrument].append(added)
            print(
                f"{run_dir.name:44} {instrument:12} {seconds:8.1f} {total:7.1f} "
                f"{seconds / total:7.1%} {added:+7.1%}"
            )
    for instrument, values in sorted(adds.items()):
        print(f"median over {len(values)} run(s): {instrument} adds {statistics.median(values):+.1%}")


if __name__ == "__main__":
    main()
