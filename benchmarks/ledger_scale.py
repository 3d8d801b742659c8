"""How the ledger scales: append latency, verify throughput and `log --status/--kind` time.

    .venv/bin/python benchmarks/ledger_scale.py [--sizes 10000 100000] [--appends 1000] [--dir DIR]

Prints, for this machine (with its load average, since these boxes are shared):
- append latency (median, p99) of the real append path: validation, redaction, box fingerprint,
  flock, tail read, O_APPEND write and fsync, with a git snapshot taken once (as a runner does at
  launch); unsigned and signed (Ed25519 head written under the lock), each with and without fsync,
  so the disk's share is visible; plus a fresh git snapshot per append (`git status`), which the
  CLI pays once per command and is not part of the append;
- verify throughput in entries per CPU second (every payload validated: no cache) over synthetic
  ledgers of each size (two writers,
  results with metrics, notes with refs, 2% retractions of the writer's own entries, one signed
  head per chain), next to two floors measured in the same run: sha256 of every line alone, and
  sha256 plus orjson parsing (what any check of meaning must at least do); then once more with
  the payloads validated before skipped, as a second `ledger verify` on the same ledger runs;
- `log --status retracted` and `log --kind retraction`: CPU of the in-process query, and the wall
  time of the whole command as a user runs it.
Goals (issue 18.3): verify >= 100,000 entries/s of CPU, log filters < 0.5 s, append median <= 2 ms.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synthetic_ledger import write_chains

from recipe_ledger.ledger import actions, chain, gitinfo, seenheads, signing, validcache
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import verify
from recipe_ledger.ledger.views import query

REPO = Path(__file__).resolve().parents[1]
WRITERS = ("box-a", "box-b")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def bench_append(workdir: Path, count: int) -> None:
    snapshot = gitinfo.snapshot(REPO)
    os.environ[signing.KEY_DIR_ENV] = str(workdir / "keys")  # a throw-away key, never the user's
    for signed in (False, True):
        for durable in (True, False):
            root = workdir / f"{'signed' if signed else 'unsigned'}-{'fsync' if durable else 'nofsync'}"
            root.mkdir()
            timings = _append_timings(Ledger.init(root), count, snapshot, signed, durable)
            label = f"append {'signed' if signed else 'unsigned'}, {'fsync' if durable else 'no fsync'}"
            p99 = timings[int(len(timings) * 0.99) - 1]
            print(f"{label:<28} ({count}): median {_ms(statistics.median(timings))}, p99 {_ms(p99)}")
    floor = sorted(_bare_fsync(workdir / "bare.jsonl") for _ in range(count))
    label = "floor: bare write + fsync"
    print(f"{label:<28} ({count}): median {_ms(statistics.median(floor))} (the disk's share)")
    git_times = sorted(_timed(lambda: gitinfo.snapshot(REPO)) for _ in range(20))
    median = _ms(statistics.median(git_times))
    print(f"  + git snapshot (`git status`), once per command, not per append: {median}")


def _bare_fsync(path: Path) -> float:
    """One O_APPEND write of an entry-sized line and its fsync: what any durable append pays."""
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"x" * 400 + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def _append_timings(ledger: Ledger, count: int, snapshot, signed: bool, durable: bool) -> list[float]:
    payload = {
        "subject": "sixty-k-agent v14",
        "metrics": {"output_tps_total": 85.0, "ttft_ms_p50": 412.5},
        "conditions": {"concurrency": 4, "arm": "candidate"},
    }
    ledger.append("result", payload, writer="bench", git=snapshot)
    if signed:
        actions.key_init(ledger, writer="bench", adopt=True)
    timings = []
    for _ in range(count):
        start = time.perf_counter()
        ledger.append("result", payload, writer="bench", git=snapshot, durable=durable)
        timings.append(time.perf_counter() - start)
    return sorted(timings)


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
    _sign_heads(root)
    megabytes = sum(p.stat().st_size for p in (root / "ledger").glob("*.jsonl")) / 1e6
    print(f"{size:>7} entries ({megabytes:.1f} MB), load average {os.getloadavg()[0]:.1f}:")
    for _ in range(3):  # paired in one run: the floors and verify see the same machine
        hashed, parsed, verified = (
            _cpu(lambda: _floor(root, False)),
            _cpu(lambda: _floor(root, True)),
            _cpu(lambda: _verify_ok(root)),
        )
        print(
            f"  verify {size / verified:,.0f} entries/s CPU ({verified:.2f} s);"
            f" floors: sha256 only {size / hashed:,.0f}/s, sha256+parse {size / parsed:,.0f}/s;"
            f" verify costs {verified / hashed:.1f}x hashing, {verified / parsed:.1f}x hash+parse"
        )
    _verify_ok(root, cache=True)  # validates every payload once and remembers the ids
    warm = _cpu(functools.partial(_verify_ok, root, True))
    print(
        f"  verify again, payloads validated before skipped (validcache.py): {size / warm:,.0f} entries/s CPU"
    )
    for flag, value in (("--status", "retracted"), ("--kind", "retraction")):
        in_process = min(_cpu(functools.partial(_query, root, flag, value)) for _ in range(3))
        command = [
            str(Path(sys.executable).with_name("ledger")),
            "log",
            flag,
            value,
            "--json",
            "--root",
            str(root),
        ]
        whole = min(_child_cpu(command) for _ in range(3))
        print(
            f"  log {flag} {value}: query {in_process:.2f} s CPU in process, {whole:.2f} s CPU as a command"
        )


def _query(root: Path, flag: str, value: str) -> None:
    query(Ledger.open(root), **{flag.lstrip("-"): value})


def _child_cpu(command: list[str]) -> float:
    """CPU seconds (user + system) of one run of ``command``: wall time on a shared box says little."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _sign_heads(root: Path) -> None:
    ledger = Ledger.open(root)
    for writer in WRITERS:
        os.environ["RECIPE_LEDGER_BOX_ID"] = writer  # the key entry comes from the chain's own box
        actions.key_init(ledger, writer=writer, adopt=True)
    os.environ.pop("RECIPE_LEDGER_BOX_ID")


def _floor(root: Path, parse: bool) -> None:
    for path in sorted((root / "ledger").glob("*.jsonl")):
        lines, _ = chain.split_lines(path.read_bytes())
        for line in lines:
            hashlib.sha256(b"{" + line[chain.BODY_START :]).digest()
            if parse:
                chain.parse_line(line)


def _cpu(func) -> float:
    start = time.process_time()
    func()
    return time.process_time() - start


def _verify_ok(root: Path, cache: bool = False) -> None:
    report = verify(Ledger.open(root), cache=cache)
    assert report.ok and report.signed == list(WRITERS), (report.findings[:3], report.signed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None, help="Work in DIR (default: a temporary folder).")
    args = parser.parse_args()
    # Unsigned appends are measured as such (a new writer would sign from its first entry), and
    # the heads each verify has seen are kept in the work folder, never the user's state.
    os.environ[signing.SIGNING_ENV] = "off"
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        os.environ[seenheads.STATE_DIR_ENV] = str(Path(tmp) / "state")
        print(f"ledger_scale on {os.cpu_count()} cores, work dir {tmp}")
        print(f"load average {os.getloadavg()[0]:.1f} at start")
        (Path(tmp) / "append").mkdir()
        bench_append(Path(tmp) / "append", args.appends)
        os.environ[signing.KEY_DIR_ENV] = str(Path(tmp) / "keys")
        os.environ[validcache.CACHE_ENV] = str(Path(tmp) / "cache")  # never the user's cache
        for size in args.sizes:
            bench_size(Path(tmp), size)


if __name__ == "__main__":
    main()
