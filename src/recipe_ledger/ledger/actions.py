"""The ledger's user-facing operations (one function per CLI command that writes)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
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


def key_init(ledger: Ledger, *, writer: str, adopt: bool = False) -> tuple[signing.KeySetup, dict | None]:
    """Give ``writer`` a signing key on this box, its chain a key entry, and sign its head.

    A writer without a chain starts one with its key entry. An unsigned chain (entries, no key
    entry) is signed forward only with ``adopt``: a key entry appended now, every head signed from
    then on. A signed chain has its current head signed again (after an interrupted append), and
    allowed_signers is made to agree with the chain. Returns the set-up and the head it signed.
    """
    path = ledger.chain_path(writer)
    entries = ledger.read_chain(path) if path.exists() else []
    current = _chain_key(ledger, writer, entries)
    if current is None and entries and not adopt:
        raise StateError(
            f"{writer!r} has an unsigned chain of {len(entries)} entries; signing it is a decision to record",
            where=ledger.rel(path),
            hint=f"RECIPE_LEDGER_WRITER={writer} ledger key init --adopt (on {writer}'s own box)",
        )
    key_file = signing.key_path(writer)
    if current is not None and not key_file.exists():
        raise StateError(
            f"{writer!r} signs its chain ({signing.fingerprint(current)}) and this box has no key for it",
            where=str(key_file),
            hint="set RECIPE_LEDGER_WRITER to this box's own name (a lost key: ledger key rotate --grant)",
        )
    created = signing.ensure_key_file(key_file)
    key = signing.load_private(key_file)
    public = signing.public_text(key)
    if current is not None and current != public:
        raise StateError(
            f"the key in {key_file} is not {writer!r}'s key in its chain ({signing.fingerprint(current)})",
            where=str(key_file),
            hint="set RECIPE_LEDGER_WRITER to this box's own name (or rotate on the box holding the key)",
        )
    added = signing.list_signer(ledger.dir, writer, public, replace=True)
    setup = signing.KeySetup(key_file, public, created, added)
    if current is None:
        head = ledger.append_with_key(
            "key", signing.first_key_payload(writer, key), writer=writer, key=key, git=None
        )
        return setup, head
    signing.write_head(ledger.dir, writer, entries[-1], key)
    return setup, entries[-1]


def _chain_key(ledger: Ledger, writer: str, entries: list[dict]) -> str | None:
    """The writer's current key as its chain's key entries give it (None: an unsigned chain)."""
    from recipe_ledger.ledger import keyhistory

    keys = [(e["seq"] + 1, e["payload"]) for e in entries if e.get("kind") == "key"]
    if not keys:
        return None
    maintainer_keys = {k for ks in signing.root_of_trust(ledger.dir).values() for k in ks}
    history = keyhistory.replay(writer, keys, maintainer_keys)
    if history.current is None:
        line, problem = history.problems[0]
        raise StateError(
            problem, where=f"{ledger.rel(ledger.chain_path(writer))}:{line}", hint="ledger verify"
        )
    return history.current


def rotate_key(ledger: Ledger, *, writer: str, grant: tuple[str, str] | None = None) -> dict:
    """Replace ``writer``'s key by a new one made on this box, through a signed ``rotate`` entry.

    Signed by the old key (its file on this box), or, when it is lost, with ``grant``: a
    maintainer key of ledger/root_of_trust and the signature it gave (``ledger key grant``) for
    this box's next key (``ledger key rotate --request`` made it). The old key file is kept,
    renamed ``.retired``; allowed_signers lists the new key only. Returns the rotation entry.
    """
    path = ledger.chain_path(writer)
    current = _chain_key(ledger, writer, ledger.read_chain(path) if path.exists() else [])
    if current is None:
        raise StateError(
            f"{writer!r} has no key in its chain to rotate", where=ledger.rel(path), hint="ledger key init"
        )
    next_file = next_key_file(writer)
    signing.ensure_key_file(next_file)
    new = signing.load_private(next_file)
    new_public = signing.public_text(new)
    if grant is None:
        old = signing.signing_key(ledger.dir, writer)
        if old is None or signing.public_text(old) != current:
            raise StateError(
                f"this box does not hold {writer!r}'s current key ({signing.fingerprint(current)})",
                where=str(signing.key_path(writer)),
                hint=f"rotate on {writer}'s own box, or ask a maintainer: ledger key grant {writer} ...",
            )
        payload = signing.rotation_payload(writer, current, new_public, old)
    else:
        maintainer_key, signature = grant
        payload = {
            "schema_version": 1,
            "action": "rotate",
            "public_key": new_public,
            "previous_key": current,
            "signed_by": maintainer_key,
            "signature": signature,
        }
        if signing.key_entry_problem(writer, payload):
            raise InputError(
                "the grant's signature does not verify for this writer, old key and this box's next key",
                where="--grant",
                hint=f"ledger key grant {writer} '{new_public}' on the maintainer's box",
            )
    entry = ledger.append_with_key("key", payload, writer=writer, key=new, git=None)
    _retire(writer, next_file)
    signing.list_signer(ledger.dir, writer, new_public, replace=True)
    return entry


def next_key_file(writer: str) -> Path:
    """Where ``ledger key rotate`` keeps the key it rotates to until the rotation entry is written."""
    path = signing.key_path(writer)
    return path.with_name(path.name + ".next")


def _retire(writer: str, next_file: Path) -> None:
    current = signing.key_path(writer)
    if current.exists():
        current.replace(current.with_name(f"{current.name}.retired-{int(time.time())}"))
    next_file.replace(current)


def grant_rotation(ledger: Ledger, *, writer: str, new_key: str, maintainer: str) -> str:
    """A maintainer's signature for replacing ``writer``'s current key by ``new_key`` (its box lost)."""
    path = ledger.chain_path(writer)
    current = _chain_key(ledger, writer, ledger.read_chain(path) if path.exists() else [])
    if current is None:
        raise StateError(
            f"{writer!r} has no key in its chain", where=ledger.rel(path), hint="ledger key init"
        )
    listed = signing.root_of_trust(ledger.dir).get(maintainer, set())
    key = signing.load_private(signing.key_path(maintainer))
    if signing.public_text(key) not in listed:
        raise StateError(
            f"{maintainer!r}'s key on this box is not in ledger/{signing.ROOT_FILE}",
            where=str(signing.key_path(maintainer)),
            hint=f"grant from the box holding a maintainer key named in ledger/{signing.ROOT_FILE}",
        )
    return signing.rotation_grant(writer, current, new_key, key)
