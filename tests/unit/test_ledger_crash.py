"""Crash safety and concurrency of appends.

Kills are deterministic, not timed: the appender (a forked child, or a fresh interpreter) sets the
chain's test hook, writes its line in small chunks and SIGKILLs itself after a random number of
bytes, so every byte offset of a line (0 .. the whole line before fsync) gets exercised.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys

from recipe_ledger.ledger import chain
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import repair, verify

KILLS = 150


def _child_append(root, chunk, fraction, text):
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            chain._fault = (chunk, fraction)
            Ledger(root).append("note", {"text": text}, writer="box", git=None)
        finally:
            os._exit(7)
    _, status = os.waitpid(pid, 0)
    return status


def _size(ledger):
    path = ledger.dir / "box.jsonl"
    return path.stat().st_size if path.exists() else 0


def test_appenders_killed_at_random_offsets_leave_whole_entries_or_a_torn_tail(tmp_path):
    rng = random.Random(20260916)
    ledger = Ledger.init(tmp_path)
    whole, quarantined_bytes = 0, 0
    for i in range(KILLS):
        before = _size(ledger)
        fraction = rng.choice([0.0, 1.0]) if i % 10 == 0 else rng.random()
        status = _child_append(
            tmp_path, rng.randint(1, 64), fraction, f"entry {i} " + "x" * rng.randint(0, 300)
        )
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        report = verify(Ledger(tmp_path))
        grown = _size(ledger) - before
        if report.ok:
            whole += grown > 0  # killed before the first byte, or after the whole line
            continue
        assert report.only_torn and len(report.findings) == 1, report.findings
        moved = repair(ledger)
        assert moved and moved[0][1] == grown  # exactly the torn bytes moved, none lost
        quarantined_bytes += grown
        assert _size(ledger) == before and verify(ledger).ok
        if i % 7 == 0:  # the chain keeps going after a repair
            Ledger(tmp_path).append("note", {"text": f"survivor {i}"}, writer="box", git=None)
            whole += 1
    quarantine = (ledger.dir / "quarantine" / "box.torn").read_bytes()
    headers = [line for line in quarantine.split(b"\n") if line.startswith(b"# ")]
    assert len(quarantine) - sum(len(h) + 1 for h in headers) - len(headers) == quarantined_bytes
    final = verify(Ledger(tmp_path))
    assert final.ok and final.entries == whole
    assert whole > 0 and quarantined_bytes > 0


def test_a_fresh_interpreter_killed_mid_line_leaves_a_repairable_torn_tail(tmp_path):
    Ledger.init(tmp_path).append("note", {"text": "first"}, writer="box", git=None)
    script = (
        "import sys; from recipe_ledger.ledger import chain; from recipe_ledger.ledger.store import Ledger\n"
        "chain._fault = (3, float(sys.argv[2]))\n"
        "Ledger(sys.argv[1]).append('note', {'text': 'killed'}, writer='box', git=None)\n"
    )
    for fraction in ("0.1", "0.5", "0.99"):
        proc = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path), fraction], capture_output=True, check=False
        )
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        report = verify(Ledger(tmp_path))
        assert report.only_torn
        assert repair(Ledger(tmp_path))
        assert verify(Ledger(tmp_path)).ok


def _worker(root, writer, count, barrier, worker):
    barrier.wait()
    ledger = Ledger(root)
    for i in range(count):
        ledger.append("note", {"text": f"{worker}:{i}"}, writer=writer, git=None)


def test_concurrent_appenders_never_corrupt_or_fork_a_chain(tmp_path):
    Ledger.init(tmp_path)
    ctx = multiprocessing.get_context("fork")
    plan = [("box", 40)] * 5 + [("other-box", 40)] * 2
    barrier = ctx.Barrier(len(plan))
    procs = [ctx.Process(target=_worker, args=(tmp_path, w, n, barrier, k)) for k, (w, n) in enumerate(plan)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    report = verify(Ledger(tmp_path))
    assert report.ok, report.findings
    assert report.entries == 280 and report.chains == 2
    entries = [json.loads(line) for line in (tmp_path / "ledger" / "box.jsonl").read_bytes().splitlines()]
    assert [e["seq"] for e in entries] == list(range(200))
    for worker in range(5):  # each worker's own entries stay in its own order
        mine = [
            int(e["payload"]["text"].split(":")[1])
            for e in entries
            if e["payload"]["text"].startswith(f"{worker}:")
        ]
        assert mine == list(range(40))
