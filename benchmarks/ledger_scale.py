"""How the ledger scales: append latency, verify throughput and `log --status` time.

    .venv/bin/python benchmarks/ledger_scale.py [--sizes 10000 100000] [--appends 1000] [--dir DIR]

Prints, for this machine:
- append latency (median, p99) of the real append path: validation, redaction, flock, tail read,
  O_APPEND write and fsync, with a git snapshot taken once (as a runner does at launch); plus the
  cost of taking a fresh git snapshot per append (`git status`), which the CLI pays once per command;
- verify throughput (entries/s) over synthetic ledgers of each size (two writers, results with
  metrics, notes with refs, 2% retractions);
- `log --status retracted` time: the in-process query, and the whole command as a user runs it.
Goals on a 2-core box: verify >= 50,000 entries/s, append median <= 5 ms.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synthetic_ledger import write_chains

from recipe_ledger.ledger import gitinfo
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import verify
from recipe_ledger.ledger.views import query

REPO = Path(__file__).resolve().parents[1]
WRITERS = ("box-a", "box-b")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def bench_append(workdir: Path, count: int) -> None:
    ledger = Ledger.init(workdir)
    snapshot = gitinfo.snapshot(REPO)
    payload = {
        "subject": "sixty-k-agent v14",
        "metrics": {"output_tps_total": 85.0, "ttft_ms_p50": 412.5},
        "conditions": {"concurrency": 4, "arm": "candidate"},
    }
    timings = []
    for _ in range(count):
        start = time.perf_counter()
        ledger.append("result", payload, writer="bench", git=snapshot)
        timings.append(time.perf_counter() - start)
    timings.sort()
    p99 = timings[int(len(timings) * 0.99) - 1]
    print(f"append (fsync, {count} entries): median {_ms(statistics.median(timings))}, p99 {_ms(p99)}")
    git_times = sorted(_timed(lambda: gitinfo.snapshot(REPO)) for _ in range(20))
    print(
        "  + git snapshot per append (commit, dirty via `git status`):"
        f" median {_ms(statistics.median(git_times))}"
    )


def _timed(func) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def build_synthetic(root: Path, size: int, seed: int = 7) -> None:
    """A ledger of ``size`` entries written in bulk with the real line encoder (no fsync per line)."""
    rng = random.Random(seed)
    write_chains(
        root,
        WRITERS,
        size,
        lambda n, ids: _synthetic_entry(rng, n, ids),
        lambda n: f"2026-09-16T00:00:00.{n:06d}Z",
    )


def _synthetic_entry(rng: random.Random, n: int, ids: list[str]):
    own = ids[n % len(WRITERS) :: len(WRITERS)]  # a writer retracts its own entries (or a maintainer's)
    if own and rng.random() < 0.02:
        target = rng.choice(own)
        return (
            "retraction",
            {"schema_version": 1, "target": target, "reason": "not reproducible", "evidence": []},
            [{"rel": "retracts", "id": target}],
        )
    if ids and rng.random() < 0.1:
        other = rng.choice(ids)
        return (
            "note",
            {"schema_version": 1, "text": f"closed door {n}", "numbers": {"x": rng.random()}},
            [{"rel": "see", "id": other}],
        )
    metrics = {
        "output_tps_total": rng.uniform(50, 3000),
        "ttft_ms_p50": rng.uniform(50, 900),
        "tpot_ms_p50": rng.uniform(5, 40),
    }
    return (
        "result",
        {
            "schema_version": 1,
            "subject": f"lane-{n % 17}",
            "metrics": metrics,
            "conditions": {"concurrency": 2 ** (n % 7), "repeat": n % 3},
            "scripts": ["scripts/knee.sh"],
        },
        [],
    )


def bench_size(workdir: Path, size: int) -> None:
    root = workdir / f"ledger-{size}"
    root.mkdir()
    build_synthetic(root, size)
    megabytes = sum(p.stat().st_size for p in (root / "ledger").glob("*.jsonl")) / 1e6
    elapsed = _timed(lambda: _verify_ok(root))
    print(f"{size:>7} entries ({megabytes:.1f} MB): verify {size / elapsed:,.0f} entries/s ({elapsed:.2f} s)")
    in_process = _timed(lambda: query(Ledger.open(root), status="retracted"))
    command = [
        str(Path(sys.executable).with_name("ledger")),
        "log",
        "--status",
        "retracted",
        "--json",
        "--root",
        str(root),
    ]
    whole = _timed(lambda: subprocess.run(command, stdout=subprocess.DEVNULL, check=True))
    print(f"{'':>7} log --status retracted: query {in_process:.2f} s in process, {whole:.2f} s as a command")


def _verify_ok(root: Path) -> None:
    report = verify(Ledger.open(root))
    assert report.ok, report.findings[:3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None, help="Work in DIR (default: a temporary folder).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(f"ledger_scale on {os.cpu_count()} cores, work dir {tmp}")
        (Path(tmp) / "append").mkdir()
        bench_append(Path(tmp) / "append", args.appends)
        for size in args.sizes:
            bench_size(Path(tmp), size)


if __name__ == "__main__":
    main()
