"""An entry's status, folded from the entries written after it. The entry itself never changes.

Statuses, strongest first:

- ``retracted``: a retraction refs it (``rel: retracts``).
- ``superseded``: a later entry that is not itself retracted refs it with ``rel: supersedes``
  (release v13 supersedes v12).
- ``not-reproduced`` / ``reproduced``: the latest non-retracted reproduction with a definite
  outcome (``inconclusive`` changes nothing).
- ``active``: none of the above.

A retraction of a retraction is refused when written (see ``actions.retract``); if one arrives
anyway from another tool, it marks that retraction retracted but does *not* revive the original:
status never depends on chains of negations. To restore a number, publish new evidence
(a reproduction or a fresh result) instead.

Folding reads only the envelope's typed ``refs`` and, for reproductions, ``payload.outcome``, so it
runs on plain dicts at 100k entries without building a model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

STATUSES = ("active", "reproduced", "not-reproduced", "superseded", "retracted")
_RANK = {status: rank for rank, status in enumerate(STATUSES)}


def fold_statuses(entries: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """``{id: status}`` for every entry; ``entries`` oldest first."""
    changed = changed_statuses(entries)
    return {entry["id"]: changed.get(entry["id"], "active") for entry in entries}


def changed_statuses(entries: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """``{id: status}`` of the entries whose status is not ``active`` (the few that later entries
    retract, supersede or reproduce); ``entries`` oldest first. ``ledger log --status`` at 100k
    entries reads this instead of building a status for every entry."""
    # Most entries refer to nothing; only those that do are looked at twice (100k entries: ~2%).
    referring = [entry for entry in entries if entry.get("refs")]
    retracted = {ref["id"] for entry in referring for ref in entry["refs"] if ref.get("rel") == "retracts"}
    status: dict[str, str] = {}
    for entry in referring:
        if entry["id"] in retracted:
            continue  # a retracted entry's claims (supersedes, reproduces) count for nothing
        for ref in entry["refs"]:
            _apply(status, ref, entry)
    for entry_id in retracted:
        status[entry_id] = "retracted"
    return status


def _apply(status: dict[str, str], ref: Mapping[str, str], source: Mapping[str, Any]) -> None:
    target, rel = ref.get("id"), ref.get("rel")
    if target is None:
        return
    current = status.get(target, "active")
    if rel == "supersedes":
        status[target] = _stronger(current, "superseded")
    elif rel == "reproduces":
        outcome = source.get("payload", {}).get("outcome")
        if outcome in ("reproduced", "not-reproduced") and current != "superseded":
            status[target] = outcome  # entries come oldest first: the latest outcome wins


def _stronger(current: str, new: str) -> str:
    return new if _RANK[new] > _RANK[current] else current


def referrers(entries: Iterable[dict[str, Any]], entry_id: str) -> list[tuple[str, dict[str, Any]]]:
    """``[(relation, entry)]`` of every entry that refers to ``entry_id``, oldest first."""
    return [
        (ref["rel"], entry) for entry in entries for ref in entry.get("refs", ()) if ref.get("id") == entry_id
    ]
