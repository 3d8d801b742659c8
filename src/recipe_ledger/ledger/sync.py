"""`ledger sync`: share this box's chain through a git remote and take everyone else's.

One round is: commit what changed under ``ledger/``, fetch, merge the remote's branch, verify the
merged ledger (``verify`` and ``verify --history``, as tables and site do), push. A merge may only
extend this box's chains: one that would replace a local chain with a rewrite of it (another box's
consistent rewrite of an unsigned chain) is undone and refused, naming the first differing entry.
Per-writer chain files are what make the merge conflict-free (each box only
appends to its own file); a merge that conflicts anyway is aborted and refused, never resolved here.
A merged ledger that does not verify is undone (HEAD goes back to this box's own commit) before
anything is pushed. A push the remote rejects because it moved on since the fetch starts a new round;
nothing is ever force-pushed.

The git side is an object with the ``Checkout`` shape (gitremote.GitCheckout in real use, a fake in
unit tests); the verification is ledger.verify's, called as it is, not reimplemented.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from recipe_ledger.errors import StateError
from recipe_ledger.ledger import chain, gitremote
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import whole
from recipe_ledger.ledger.verify_report import Report

MAX_ROUNDS = 5  # pushes rejected as stale before giving up: each round is a fresh fetch and merge


class Checkout(Protocol):
    remote_name: str
    branch: str

    @property
    def tracking_ref(self) -> str: ...

    def head(self) -> str | None: ...
    def commit_ledger(self) -> bool: ...
    def fetch(self) -> str | None: ...
    def merge(self, commit: str) -> bool: ...
    def undo_merge(self, to: str | None) -> None: ...
    def push(self) -> gitremote.PushOutcome: ...


@dataclass(frozen=True)
class SyncResult:
    remote: str
    branch: str
    committed: bool  # this box's new entries were committed by this sync
    merged: bool  # the remote brought commits this clone lacked
    rounds: int  # fetch-merge-push rounds (more than 1: the remote moved on under us)
    entries_before: int
    entries_after: int
    chains: int


def sync(
    root: Path,
    remote: str | None = None,
    *,
    checkout: Checkout | None = None,
    max_rounds: int = MAX_ROUNDS,
    pause: Callable[[float], None] = time.sleep,
) -> SyncResult:
    """Commit, fetch, merge, verify and push the ledger of the clone at ``root``."""
    ledger = Ledger.open(root)
    report = _whole(ledger, "before syncing")  # never push a ledger that is not whole
    before = report.entries
    repo = checkout or gitremote.open_checkout(root, remote)
    committed = repo.commit_ledger()
    merged = False
    for attempt in range(1, max_rounds + 1):
        merged_report = _fetch_merge_verify(repo, ledger)
        if merged_report is not None:
            report, merged = merged_report, True
        outcome = repo.push()
        if outcome.pushed:  # ``report`` is the verified ledger that was pushed
            return SyncResult(
                repo.remote_name,
                repo.branch,
                committed,
                merged,
                attempt,
                before,
                report.entries,
                report.chains,
            )
        if not outcome.stale:
            raise StateError(
                f"{repo.remote_name} refused the push ({outcome.reason}); the merge stays local,"
                " nothing was forced",
                where=f"{repo.remote_name}/{repo.branch}",
                hint="ask the remote's owner for push rights (or fix the hook), then ledger sync again",
            )
        pause(min(0.2 * attempt, 1.0))  # another box pushed between our fetch and push
    raise StateError(
        f"the remote moved on during each of {max_rounds} push attempts; everything is merged locally",
        where=f"{repo.remote_name}/{repo.branch}",
        hint=f"ledger sync {repo.remote_name} again in a moment",
    )


def _fetch_merge_verify(repo: Checkout, ledger: Ledger) -> Report | None:
    """The verification of the merged ledger; None when the fetch brought nothing to merge."""
    theirs = repo.fetch()
    if theirs is None:  # the remote has no such branch yet: the push creates it
        return None
    ours = repo.head()
    before = {path.name: path.read_bytes() for path in ledger.chain_files()}
    if not repo.merge(theirs):
        return None
    ledger.refresh()
    try:
        _refuse_rewrites(before, ledger, repo.tracking_ref)
        return _whole(ledger, f"after merging {repo.tracking_ref} (the merge was undone)")
    except StateError:
        repo.undo_merge(ours)
        ledger.refresh()
        raise


def _refuse_rewrites(before: dict[str, bytes], ledger: Ledger, ref: str) -> None:
    """Refuse a merge that changed or cut a local chain instead of appending to it."""
    for name, old in sorted(before.items()):
        path = ledger.dir / name
        new = path.read_bytes() if path.is_file() else b""
        if new.startswith(old):
            continue
        raise StateError(
            f"merging {ref} would replace {ledger.rel(path)} with a rewrite of it:"
            f" {_first_difference(old, new)}; the merge was undone and nothing was pushed",
            where=ledger.rel(path),
            hint=f"ask the box that pushed {ref} to restore the chain as this box has it"
            f" (git log -p -- {ledger.rel(path)})",
        )


def _first_difference(old: bytes, new: bytes) -> str:
    """The first entry of ``old`` that ``new`` does not hold byte for byte, as file line, seq and id."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    for number, line in enumerate(old_lines, 1):
        if number > len(new_lines) or new_lines[number - 1] != line:
            entry_id = line[chain.ID_START : chain.ID_END].decode("ascii", "replace")
            state = "is gone" if number > len(new_lines) else "differs"
            return f"line {number} (seq {number - 1}, {entry_id[:12]}) {state}"
    return "the file was cut"


def _whole(ledger: Ledger, when: str) -> Report:
    report, findings, unchecked = whole(ledger)
    if findings or unchecked:
        first = findings[0] if findings else f"could not check {unchecked}"
        more = f" and {len(findings) - 1} more" if len(findings) > 1 else ""
        raise StateError(
            f"the ledger is not whole {when}: {first}{more}; nothing was pushed",
            where=ledger.rel(ledger.dir),
            hint="ledger verify --history" + (" --fetch" if unchecked and not findings else ""),
        )
    return report
