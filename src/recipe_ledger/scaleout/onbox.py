"""What a box does with one experiment of a sweep: sync, ``ledger run``, sync again.

It runs in the box's own checkout (``$RECIPE_LEDGER_CHECKOUT`` on the box, else the path the driver
suggests), as that box's writer (``$RECIPE_LEDGER_WRITER`` or its host name), through the ``ledger``
command line in a subprocess: the box's run is exactly the run a person would start there. The first
sync brings the spec the driver pushed; the second shares the chain the run appended to.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from recipe_ledger.ledger import chain
from recipe_ledger.ledger.store import Ledger, default_writer

CHECKOUT_ENV = "RECIPE_LEDGER_CHECKOUT"
TAIL_LINES = 6


@dataclass(frozen=True)
class BoxJob:
    spec: str  # relative to the checkout, POSIX
    checkout: str  # the driver's suggestion; $RECIPE_LEDGER_CHECKOUT on the box wins
    remote: str | None = None  # None: the branch's upstream, else origin
    sync: bool = True


@dataclass(frozen=True)
class NewEntry:
    id: str
    kind: str


@dataclass(frozen=True)
class BoxReport:
    host: str
    writer: str
    checkout: str
    run_exit: int
    entries: tuple[NewEntry, ...]  # appended to this box's chain by the run
    sync_exit: int | None  # None: not synced (asked not to, or the run could not start)
    tail: str  # the last lines the run (and a failed sync) printed


def run_here(job: BoxJob) -> BoxReport:
    """Run ``job`` on this machine and say what it left in the ledger."""
    checkout = Path(os.environ.get(CHECKOUT_ENV) or job.checkout)
    writer = default_writer()
    tail: list[str] = []
    if job.sync:
        pulled = _ledger(checkout, "sync", *_remote(job))
        if pulled.returncode != 0:
            tail += _last_lines(pulled)  # run anyway: the spec may be here already
    before = _line_count(checkout, writer)
    run = _ledger(checkout, "run", job.spec, "--no-mlflow", "--writer", writer)
    tail += _last_lines(run)
    entries = _entries_since(checkout, writer, before)
    sync_exit = None
    if job.sync:
        pushed = _ledger(checkout, "sync", *_remote(job))
        sync_exit = pushed.returncode
        if pushed.returncode != 0:
            tail += _last_lines(pushed)
    return BoxReport(
        socket.gethostname(), writer, str(checkout), run.returncode, entries, sync_exit, "\n".join(tail)
    )


def _remote(job: BoxJob) -> tuple[str, ...]:
    return (job.remote,) if job.remote else ()


def _ledger(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The same interpreter that runs this task: the box's install of recipe-ledger.
    return subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", *args],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    )


def _last_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return (result.stdout + result.stderr).strip().splitlines()[-TAIL_LINES:]


def _line_count(checkout: Path, writer: str) -> int:
    path = Ledger(checkout).chain_path(writer)
    return len(chain.split_lines(path.read_bytes())[1]) if path.is_file() else 0


def _entries_since(checkout: Path, writer: str, before: int) -> tuple[NewEntry, ...]:
    ledger = Ledger(checkout)
    path = ledger.chain_path(writer)
    if not path.is_file():
        return ()
    return tuple(NewEntry(e["id"], e["kind"]) for e in ledger.read_chain(path)[before:])
