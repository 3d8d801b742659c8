"""The ledger as it is published: verified, each entry's folded status beside it, and the redaction
every published string passes. The tables and the site both read the ledger through this module,
so they publish from the same view by the same rules:

- the ledger must pass ``ledger verify --history`` (``verify.require_whole``, the check ``sync`` and
  ``release publish`` make too); ``load_verified`` refuses it otherwise;
- a retracted entry feeds no published number (``LedgerView.published``), though it stays in the
  ledger and, struck through, on the site;
- shown text is redacted against the secret-named environment, snapshotted once per build
  (``secret_environ``): ``redact_text`` would otherwise scan the whole environment for every cell.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from recipe_ledger.ledger.fold import fold_statuses
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import require_whole
from recipe_ledger.redact import is_secret_env_name, redact_text


@dataclass(frozen=True)
class LedgerView:
    """What the tables and the site read: entries oldest first, their folded status, chain heads."""

    entries: list[dict[str, Any]]
    statuses: dict[str, str]
    heads: list[tuple[str, int, str]]  # (writer, entries in its chain, id of its last entry)

    def published(self, kind: str) -> list[dict[str, Any]]:
        """Entries of ``kind`` that may feed a published number: not retracted."""
        return [e for e in self.entries if e.get("kind") == kind and self.statuses[e["id"]] != "retracted"]


def load_verified(root: Path) -> LedgerView:
    """The ledger under ``root``, refused unless it passes ``ledger verify --history``."""
    ledger = Ledger.open(root)
    require_whole(ledger, "published from it")
    return view_of(ledger.entries())


def view_of(entries: list[dict[str, Any]]) -> LedgerView:
    return LedgerView(entries, fold_statuses(entries), chain_heads(entries))


def chain_heads(entries: Iterable[dict[str, Any]]) -> list[tuple[str, int, str]]:
    last: dict[str, dict[str, Any]] = {}
    for entry in entries:
        writer = entry.get("writer", "")
        if writer not in last or entry.get("seq", 0) >= last[writer].get("seq", 0):
            last[writer] = entry
    return [(w, e.get("seq", 0) + 1, e["id"]) for w, e in sorted(last.items())]


def secret_environ() -> dict[str, str]:
    """The secret-named variables of this process, snapshotted once per build: redact_text would
    otherwise scan the whole environment for every cell."""
    return {k: v for k, v in os.environ.items() if is_secret_env_name(k)}


def text_cleaner(environ: dict[str, str] | None = None) -> Callable[[Any], str]:
    """Redacted, whitespace-folded text of a cell; cached, since subjects repeat on every row."""
    env = secret_environ() if environ is None else environ

    @lru_cache(maxsize=1 << 16)
    def clean(text: str) -> str:
        return " ".join(redact_text(text, environ=env).split())

    return lambda value: clean(str(value)) if value is not None else ""
