"""The ledger's user-facing operations (one function per CLI command that writes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.ledger import signing
from recipe_ledger.ledger.fold import fold_statuses
from recipe_ledger.ledger.models import NotePayload, RetractionPayload, WitnessedHead, WitnessPayload
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
    _check_may_retract(ledger, entry, writer)
    if fold_statuses(ledger.entries())[entry["id"]] == "retracted":
        raise StateError(f"{short} is already retracted", where=short, hint=f"ledger show {short}")
    if not reason.strip():
        raise InputError("a retraction needs a reason", where="--reason")
    evidence_ids = [ledger.get(e)["id"] for e in evidence]
    payload = RetractionPayload(target=entry["id"], reason=reason, evidence=evidence_ids)
    return ledger.append("retraction", payload, writer=writer, **append)


def _check_may_retract(ledger: Ledger, entry: dict, writer: str) -> None:
    """Only an entry's own writer or a listed maintainer retracts it (``ledger verify`` checks too)."""
    if entry["writer"] == writer or writer in signing.maintainers(ledger.dir):
        return
    raise InputError(
        f"{writer!r} may not retract {entry['writer']!r}'s entry {entry['id'][:12]}:"
        f" only its writer or a writer listed in ledger/{signing.MAINTAINERS_FILE} may",
        where=entry["id"][:12],
        hint=f"retract it from {entry['writer']}'s box, or list {writer} in ledger/{signing.MAINTAINERS_FILE}"
        " in a reviewed commit",
    )


def witness(ledger: Ledger, *, writer: str, others: Sequence[str] = (), **append: Any) -> dict:
    """Record other writers' chain heads in ``writer``'s chain (cross-signing); all others by default.

    Each head is taken from the chain as it is on disk now; a chain that does not verify should not
    be vouched for, so run ``ledger verify`` first (the CLI does).
    """
    heads = _current_heads(ledger)
    names = list(others) or sorted(name for name in heads if name != writer)
    unknown = [name for name in names if name not in heads]
    if unknown:
        raise InputError(f"no chain for writer(s) {', '.join(unknown)}", where="WRITER", hint="ledger log")
    if writer in names:
        raise InputError("a writer does not witness its own chain (its signed head does)", where=writer)
    if not names:
        raise StateError("no other writer's chain to witness", where=str(ledger.dir), hint="ledger sync")
    payload = WitnessPayload(heads={name: heads[name] for name in names})
    return ledger.append("witness", payload, writer=writer, **append)


def _current_heads(ledger: Ledger) -> dict[str, WitnessedHead]:
    heads = {}
    for path in ledger.chain_files():
        entries = ledger.read_chain(path)
        if entries:
            heads[path.stem] = WitnessedHead(seq=entries[-1]["seq"], id=entries[-1]["id"])
    return heads


def key_init(ledger: Ledger, *, writer: str) -> tuple[signing.KeySetup, dict | None]:
    """Give ``writer`` a signing key on this box, list it in ledger/allowed_signers, sign its head.

    Idempotent: run again, it signs the chain's current head again (after an interrupted append).
    Returns the set-up and the head it signed (None when the writer has no chain yet).
    """
    setup = signing.init_key(ledger.dir, writer)
    key = signing.signing_key(ledger.dir, writer)
    path = ledger.chain_path(writer)
    entries = ledger.read_chain(path) if path.exists() else []
    if not entries:
        return setup, None
    signing.write_head(ledger.dir, writer, entries[-1], key)
    return setup, entries[-1]
