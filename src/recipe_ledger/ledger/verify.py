"""`ledger verify`: is every chain whole, and did git history only ever append?

Per chain file, line by line (1-based, as an editor shows them):

- the line starts with its id and ``sha256("{" + rest)`` equals it: otherwise a byte was changed;
- it parses, its format version is one this tool reads, and its ``writer`` is the file's name;
- ``seq`` counts 0, 1, 2...: a jump means lines were removed, a step back means lines were
  reordered or inserted; ``prev`` equals the id of the line before: otherwise the link is broken;
- every ``ref`` points at an entry present in some chain;
- the file ends with a newline: otherwise its last line is torn (an interrupted append), which
  ``repair`` moves to ``ledger/quarantine/<writer>.torn``.

The hot loop is hashlib over the stored bytes plus ``json.loads``; no pydantic. A hash chain proves
that nothing *inside* a chain changed; rewriting a chain's tail from some line on, ids and all, is
only caught against an earlier copy, which is what ``--history`` (every commit appended only) does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recipe_ledger.ledger import chain, gitinfo
from recipe_ledger.ledger.models import FORMAT_VERSION
from recipe_ledger.ledger.store import Ledger

MAX_FINDINGS_PER_FILE = 20  # after a splice every later line is "wrong"; the first few say it all


@dataclass(frozen=True)
class Finding:
    path: str
    line: int | None
    message: str
    torn: bool = False

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}" if self.line else f"{self.path}: {self.message}"


@dataclass
class Report:
    entries: int = 0
    chains: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def only_torn(self) -> bool:
        return bool(self.findings) and all(f.torn for f in self.findings)


@dataclass
class _ChainState:
    rel: str
    writer: str
    expected_seq: int = 0
    prev: str | None = None
    findings: list[Finding] = field(default_factory=list)

    def add(self, line: int | None, message: str, torn: bool = False) -> None:
        if len(self.findings) < MAX_FINDINGS_PER_FILE:
            self.findings.append(Finding(self.rel, line, message, torn))


def verify(ledger: Ledger) -> Report:
    """Check every chain under ``ledger/`` and every cross-reference between them."""
    ledger.check_format()
    report = Report()
    ids: set[str] = set()
    refs: list[tuple[str, int, str]] = []
    for path in ledger.chain_files():
        state = _ChainState(ledger.rel(path), path.stem)
        with chain.no_gc():
            report.entries += _verify_chain(path.read_bytes(), state, ids, refs)
        report.chains += 1
        report.findings.extend(state.findings)
    for rel, line_no, ref_id in refs:
        if ref_id not in ids:
            report.findings.append(
                Finding(rel, line_no, f"broken link: refers to {ref_id[:12]}, which no chain holds")
            )
    return report


def _verify_chain(data: bytes, state: _ChainState, ids: set[str], refs: list) -> int:
    lines, texts, torn = chain.split_lines(data)
    for number, (line, text) in enumerate(zip(lines, texts, strict=False), 1):
        entry = _check_line(line, text, number, state)
        if entry is None:
            continue
        ids.add(entry["id"])
        for ref in entry.get("refs", ()):
            refs.append((state.rel, number, ref.get("id")))
    if torn:
        state.add(
            len(lines) + 1,
            f"torn last line ({len(torn)} bytes, no newline): an append was "
            "interrupted; `ledger verify --repair` moves it to quarantine",
            torn=True,
        )
    return len(lines)


def _check_line(line: bytes, text: str, number: int, state: _ChainState) -> dict | None:
    try:
        entry = chain.parse_line(text)
    except ValueError:
        state.add(number, "not valid JSON (the line was edited or is garbage)")
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        state.add(number, "not an entry (no id)")
        return None
    if entry.get("v") != FORMAT_VERSION:
        _newer_format(entry, number, state)
        return entry
    problem = chain.line_hash_problem(line)
    if problem:
        state.add(number, problem)
    if entry.get("writer") != state.writer:
        state.add(number, f"entry of writer {entry.get('writer')!r} in the chain of {state.writer!r}")
    _check_link(entry, number, state)
    return entry


def _check_link(entry: dict, number: int, state: _ChainState) -> None:
    seq, prev = entry.get("seq"), entry.get("prev")
    if not isinstance(seq, int):
        state.add(number, "no integer seq")
        return
    if seq > state.expected_seq:
        state.add(
            number,
            f"line(s) removed or moved before this one (seq jumps from {state.expected_seq - 1} to {seq})",
        )
    elif seq < state.expected_seq:
        state.add(number, f"line out of order or inserted (seq {seq} after seq {state.expected_seq - 1})")
    elif prev != state.prev:
        state.add(
            number, f"broken link: prev is {str(prev)[:12]}, the line before has id {str(state.prev)[:12]}"
        )
    state.expected_seq, state.prev = seq + 1, entry["id"]


def _newer_format(entry: dict, number: int, state: _ChainState) -> None:
    version = entry.get("v")
    if isinstance(version, int) and version > FORMAT_VERSION:
        state.add(
            number,
            f"written in ledger format {version}, newer than this tool reads ({FORMAT_VERSION}); "
            "nothing was changed: upgrade recipe-ledger (pip install -U recipe-ledger)",
        )
    else:
        state.add(number, f"unknown ledger format version {version!r}")
    if isinstance(entry.get("seq"), int):
        state.expected_seq, state.prev = entry["seq"] + 1, entry["id"]


def repair(ledger: Ledger) -> list[tuple[str, int, str]]:
    """Move every torn tail to quarantine: ``[(chain, bytes moved, quarantine file)]``.

    Only torn tails are repaired: an edited, removed or reordered line is history to restore from
    git, not something a tool should guess at.
    """
    moved = []
    for path in ledger.chain_files():
        quarantine = ledger.quarantine_path(path)
        count = chain.repair_tail(path, quarantine)
        if count:
            moved.append((ledger.rel(path), count, ledger.rel(quarantine)))
    return moved


def verify_history(ledger: Ledger) -> list[Finding]:
    """Every commit (and the working tree against HEAD) may only append to files under ``ledger/``."""
    findings = []
    changes = list(gitinfo.ledger_changes(ledger.root)) + list(gitinfo.working_tree_changes(ledger.root))
    for change in changes:
        problem = _non_append(change.old, change.new)
        if problem:
            where = change.commit if change.commit == "working tree" else f"commit {change.commit[:12]}"
            findings.append(Finding(change.path, None, f"{where} (parent {change.parent[:12]}) {problem}"))
    return findings


def _non_append(old: bytes, new: bytes | None) -> str | None:
    if new is None:
        return "removed the file"
    if new.startswith(old):
        return None
    differ = next(
        (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new))
    )
    line = old.count(b"\n", 0, differ) + 1
    if len(new) < len(old) and old.startswith(new):
        return f"removed everything from line {line} on"
    return f"changed line {line} (history may only append)"
