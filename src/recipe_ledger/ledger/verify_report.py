"""What one ``ledger verify`` pass collects and reports, shared by verify.py (which reads every
chain once) and semantics.py (which checks across chains what verify.py saw).

Kept apart from both so that neither imports the other: verify.py calls semantics.check, and
semantics.py only needs these shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    notices: list[str] = field(default_factory=list)  # true, worth saying, not a failure
    warnings: list[str] = field(default_factory=list)  # not a failure, but a risk: an unsigned chain
    signed: list[str] = field(default_factory=list)  # writers whose head signature verified

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def only_torn(self) -> bool:
        return bool(self.findings) and all(f.torn for f in self.findings)


@dataclass
class ChainState:
    """What one chain's pass collects; semantics.py reads it after every chain was read."""

    rel: str
    writer: str
    expected_seq: int = 0
    prev: str | None = None
    ts: str = ""
    box: str | None = None
    newer: int = 0  # payloads of a newer schema version than this tool reads: not checked
    known: set[str] = field(default_factory=set)  # ids whose payload validated before (validcache.py)
    validated: list[str] = field(default_factory=list)  # ids whose payload validated now
    ids: list[str] = field(default_factory=list)  # by seq, for signed heads and witnesses
    head: dict | None = None  # the signed head record read with the chain (signing.read_head)
    keys: list[tuple[int, dict]] = field(default_factory=list)  # (line, payload) of its key entries
    findings: list[Finding] = field(default_factory=list)

    def add(self, line: int | None, message: str, torn: bool = False) -> None:
        if len(self.findings) < MAX_FINDINGS_PER_FILE:
            self.findings.append(Finding(self.rel, line, message, torn))


@dataclass
class Seen:
    """Every chain's entries as the cross-chain checks need them."""

    writer_of: dict[str, str] = field(default_factory=dict)  # id -> writer
    refs: list[tuple[str, int, str]] = field(default_factory=list)  # (chain, line, id referred to)
    retractions: list[tuple[str, int, str, str]] = field(default_factory=list)  # chain, line, writer, target
    witnesses: list[tuple[str, int, str, dict]] = field(default_factory=list)  # chain, line, writer, heads
    chains: dict[str, ChainState] = field(default_factory=dict)  # writer -> its state
