"""Each writer's signing key as its own chain tells it: the first ``key`` entry, then rotations.

TUF's root rotation is the model: a client trusts the first root it was given, and root N+1 only
when root N's keys signed it. Here the first key entry of a chain names the writer's key (signed
by itself; the chain's later signed heads vouch for it), and a ``rotate`` entry replaces it only
when signed by the key it replaces, or by a maintainer key committed once in
``ledger/root_of_trust`` (the old key lost with its box). A key that was replaced never comes back,
so an old rotation cannot be replayed. ``verify`` (semantics.py) then holds the signed head and
``ledger/allowed_signers`` to the key this replay ends with.

Pure over what verify collected: no file is read here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipe_ledger.ledger import signing


@dataclass
class KeyHistory:
    current: str | None = None  # the writer's key after its last valid key entry
    line: int | None = None  # the line of the entry that made it current
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line, what is wrong)


def replay(writer: str, keys: list[tuple[int, dict[str, Any]]], maintainer_keys: set[str]) -> KeyHistory:
    """Walk a chain's key entries ``[(line, payload)]`` in order; an invalid one changes nothing."""
    history, retired = KeyHistory(), set[str]()
    for line, payload in keys:
        problem = _entry_problem(writer, payload, history.current, maintainer_keys, retired)
        if problem:
            history.problems.append((line, problem))
            continue
        if history.current is not None:
            retired.add(history.current)
        history.current, history.line = payload["public_key"], line
    return history


def _entry_problem(
    writer: str, payload: dict[str, Any], current: str | None, maintainers: set[str], retired: set[str]
) -> str | None:
    action, new = payload.get("action"), payload.get("public_key")
    if not isinstance(new, str) or action not in ("first", "rotate"):
        return "key entry without a valid public_key and action"
    if action == "first" and current is not None:
        return (
            f"a second first key for {writer!r} ({signing.fingerprint(new)}): a key changes only through"
            " a rotation signed by the old key (`ledger key rotate`)"
        )
    if action == "rotate":
        problem = _rotation_problem(payload, current, maintainers, retired)
        if problem:
            return problem
    bad = signing.key_entry_problem(writer, payload)
    return f"key entry {bad} under its signed_by key" if bad else None


def _rotation_problem(
    payload: dict[str, Any], current: str | None, maintainers: set[str], retired: set[str]
) -> str | None:
    previous, signer, new = payload.get("previous_key"), payload.get("signed_by"), payload["public_key"]
    if current is None:
        return "a key rotation before the chain's first key entry"
    if previous != current:
        return (
            f"a rotation replacing {signing.fingerprint(previous)}, but the writer's key is"
            f" {signing.fingerprint(current)}"
        )
    if signer != current and signer not in maintainers:
        return (
            f"a rotation signed by {signing.fingerprint(signer)}, neither the key it replaces nor a"
            f" maintainer key in ledger/{signing.ROOT_FILE}"
        )
    if new in retired or new == current:
        return f"a rotation back to a retired key ({signing.fingerprint(new)})"
    return None
