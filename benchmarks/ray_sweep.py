"""A Ray sweep of N study experiments over 3 labelled nodes against running them one after another.

The experiments are the integration tests' study (a plain-command instrument, no server: 2 A/A
calibration runs and 2 ABBA repeats of two arms, each a short Python process), spread round-robin
over boxes box-a, box-b and box-c. Each box is a `ray start --block --labels box=NAME` node on this
machine with its own clone of one bare git remote, as in tests/integration/test_ray_sweep.py.

Printed: the cluster's start-up; `ledger sweep` of all N from the driver's clone (each box runs
`ledger sync`, `ledger run`, `ledger sync`; the driver syncs at the end); then the same N run one
after another with `ledger run` in a single clone plus one `ledger sync`. On a machine with fewer
cores than nodes the nodes share them: the ratio says what fan-out gives on this hardware.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The same local cluster and shared project the integration tests use (tests/helpers).
sys.path.insert(0, str(REPO / "tests"))

from helpers.ray_nodes import local_cluster  # noqa: E402
from helpers.sweep_project import ledger_lines, study_spec, sweep_project  # noqa: E402

BOXES = ["box-a", "box-b", "box-c"]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


def ledger(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=20)
    args = parser.parse_args()
    names = [f"study-{n:02d}" for n in range(args.experiments)]
    specs = {name: study_spec(name, BOXES[n % len(BOXES)]) for n, name in enumerate(names)}
    paths = [f"experiments/{name}.yaml" for name in names]
    with tempfile.TemporaryDirectory(prefix="ray-sweep-bench-") as tmp:
        project = sweep_project(Path(tmp), BOXES, specs)
        nodes = {
            box: {
                "RECIPE_LEDGER_WRITER": f"{box}-chain",
                "RECIPE_LEDGER_CHECKOUT": str(project.clones[box]),
                **ENV,
            }
            for box in BOXES
        }
        start = time.perf_counter()
        with local_cluster(nodes) as cluster:
            print(f"cluster: head + 2 nodes labelled {BOXES} up in {time.perf_counter() - start:.1f} s")
            start = time.perf_counter()
            swept = ledger(
                project.driver, "sweep", *paths, "--cluster", cluster.address, "--writer", "driver"
            )
            fanned = time.perf_counter() - start
        results = sum(e["kind"] == "result" for e in ledger_lines(project.driver))
        print(
            f"ledger sweep, {len(paths)} experiments over 3 nodes: {fanned:.1f} s"
            f" (exit {swept.returncode}, {results} results in the driver's clone after its sync)"
        )
        alone = project.clones["box-a"]
        start = time.perf_counter()
        exits = [ledger(alone, "run", path, "--no-mlflow", "--writer", "alone").returncode for path in paths]
        ledger(alone, "sync")
        serial = time.perf_counter() - start
        print(
            f"one after another, {len(paths)} x `ledger run` + one `ledger sync`: {serial:.1f} s"
            f" (exits {sorted(set(exits))})"
        )
        print(f"ratio sweep / serial: {fanned / serial:.2f} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
