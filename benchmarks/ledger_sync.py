"""`ledger sync` of two clones with N entries each (default 10,000) through a bare git remote.

Two boxes, each a clone of one bare remote, each with its own chain of N entries written in bulk
(synthetic_ledger.py, valid chains). Printed, wall time of each sync in process:

1. box A's first sync: commit its chain, fetch (the remote has only the empty ledger), push;
2. box B's first sync: commit, fetch A's chain, merge, verify 2N entries, push;
3. box A again: fetch B's chain, fast-forward, verify 2N, nothing of its own to push;
4. steady state: each box appends K more entries and syncs (one round each, best of three).

Then `ledger sync` once as a whole command (process start and imports included).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synthetic_ledger import write_chains

from recipe_ledger.ledger import actions
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.sync import sync


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def make_boxes(work: Path) -> tuple[Path, Path]:
    seed = work / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
    Ledger.init(seed)
    git(seed, "add", "-A")
    git(seed, "-c", "user.name=s", "-c", "user.email=s@s", "commit", "-q", "-m", "start")
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(work / "origin.git")], check=True)
    boxes = []
    for name in ("a", "b"):
        box = work / name
        subprocess.run(["git", "clone", "-q", str(work / "origin.git"), str(box)], check=True)
        git(box, "config", "user.name", name)
        git(box, "config", "user.email", f"{name}@example.com")
        boxes.append(box)
    return boxes[0], boxes[1]


def fill(box: Path, writer: str, count: int) -> None:
    def entry(n: int, ids: list[str]):
        payload = {
            "schema_version": 1,
            "subject": f"lane-{n % 17}",
            "metrics": {"output_tps_total": 100.0 + n % 97, "ttft_ms_p50": 50.0 + n % 13},
            "conditions": {"concurrency": 2 ** (n % 7)},
        }
        return "result", payload, []

    write_chains(box, (writer,), count, entry, lambda n: f"2026-12-01T00:00:00.{n:06d}Z")


def timed_sync(label: str, box: Path) -> float:
    start = time.perf_counter()
    result = sync(box)
    elapsed = time.perf_counter() - start
    print(
        f"{label:<44} {elapsed:6.2f} s  ({result.entries_after:,} entries in {result.chains} chains,"
        f" committed={result.committed}, merged={result.merged}, rounds={result.rounds})"
    )
    return elapsed


def steady_state(a: Path, b: Path, more: int) -> None:
    best = float("inf")
    for _ in range(3):
        for box, writer in ((a, "box-a"), (b, "box-b")):
            ledger = Ledger.open(box)
            for n in range(more):
                actions.note(ledger, f"more {n}", writer=writer, git=None, durable=False)
        start = time.perf_counter()
        sync(a)
        sync(b)
        best = min(best, (time.perf_counter() - start) / 2)
    print(f"{f'steady state: +{more} entries per box, one sync':<44} {best:6.2f} s  (best of 3, per box)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000, help="Entries per box (default 10,000).")
    parser.add_argument("--more", type=int, default=100, help="Entries per box in the steady state.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ledger-sync-bench-") as tmp:
        a, b = make_boxes(Path(tmp))
        fill(a, "box-a", args.entries)
        fill(b, "box-b", args.entries)
        size = (a / "ledger" / "box-a.jsonl").stat().st_size / 1e6
        print(f"two clones, {args.entries:,} entries each ({size:.1f} MB per chain), one bare remote")
        timed_sync("1. box A: commit + push (remote had none)", a)
        timed_sync("2. box B: commit + fetch + merge + verify + push", b)
        timed_sync("3. box A: fetch + fast-forward + verify", a)
        steady_state(a, b, args.more)
        command = [sys.executable, "-m", "recipe_ledger.cli", "sync"]
        start = time.perf_counter()
        subprocess.run(command, cwd=a, check=True, capture_output=True, env=os.environ)
        print(f"{'`ledger sync` as a command, nothing new':<44} {time.perf_counter() - start:6.2f} s")


if __name__ == "__main__":
    main()
