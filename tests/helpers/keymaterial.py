"""The record's key material, which the redaction corpus tests leave out: a chain's key entries
(public keys and the tool's own signatures) and the signed heads under ``ledger/heads/``. The store
writes both unredacted by design: they are base64 that any entropy detector flags, and redacting
them would break the signatures."""

from __future__ import annotations

from pathlib import Path


def is_key_file(path: Path) -> bool:
    return path.parent.name == "heads" and path.parent.parent.name == "ledger"


def without_key_entries(path: Path, text: str) -> str:
    """``text`` of ``path`` without the lines of its chain's key entries (a .jsonl chain only)."""
    if path.suffix != ".jsonl":
        return text
    return "".join(line for line in text.splitlines(True) if '"kind":"key"' not in line)
