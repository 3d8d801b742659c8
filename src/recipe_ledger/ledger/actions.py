"""The ledger's user-facing operations (one function per CLI command that writes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.ledger.fold import fold_statuses
from recipe_ledger.ledger.models import NotePayload, RetractionPayload
from recipe_ledger.ledger.store import Ledger


def note(ledger: Ledger, text: str, *, writer: str, refs: Sequence[str] = (), **append: Any) -> dict:
    """Append a note (a closed door, an observation) that refers to ``refs``."""
    if not text.strip():
        raise InputError("a note needs text", where="TEXT")
    payload = NotePayload(text=text)
    return ledger.append("note", payload, writer=writer, refs=list(refs), **append)


def retract(
    ledger: Ledger, target: str, *, reason: str, evidence: Sequence[str] = (), writer: str, **append: Any
) -> dict:
    """Append a retraction of ``target``; the target stays, its status becomes ``retracted``.

    Refused: retracting a retraction (status would hinge on chains of negations; publish new
    evidence instead) and retracting an entry twice (the first notice stands; add a note to it).
    """
    entry = ledger.get(target)
    short = entry["id"][:12]
    if entry["kind"] == "retraction":
        raise InputError(
            f"{short} is a retraction; a retraction cannot be retracted",
            where=short,
            hint="publish new evidence instead: a reproduction or a result, then `ledger note ... --ref`",
        )
    if fold_statuses(ledger.entries())[entry["id"]] == "retracted":
        raise StateError(f"{short} is already retracted", where=short, hint=f"ledger show {short}")
    if not reason.strip():
        raise InputError("a retraction needs a reason", where="--reason")
    evidence_ids = [ledger.get(e)["id"] for e in evidence]
    payload = RetractionPayload(target=entry["id"], reason=reason, evidence=evidence_ids)
    return ledger.append("retraction", payload, writer=writer, **append)
