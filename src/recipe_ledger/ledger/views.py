"""Read-side helpers for `ledger log` and `ledger show`: filtering by kind/status, one-line summaries."""

from __future__ import annotations

from typing import Any

from recipe_ledger.errors import InputError
from recipe_ledger.ledger.fold import STATUSES, fold_statuses, referrers
from recipe_ledger.ledger.kinds import KINDS
from recipe_ledger.ledger.store import Ledger

# The payload field that best says what an entry is about, per kind (first non-empty wins).
_SUMMARY_FIELDS = {
    "note": ("title", "text"),
    "failure": ("cause",),
    "retraction": ("reason",),
    "result": ("text", "subject"),
    "calibration": ("text", "instrument"),
    "reproduction": ("outcome", "text"),
}


def image_text(image: dict[str, Any] | None, absent: str = "") -> str:
    """A release's image pin on one line: the reference, with its digest when the reference does not
    already carry it, or "(unpinned)" when no digest was recorded."""
    if not image:
        return absent
    ref, digest = image.get("ref") or "", image.get("digest")
    if not digest:
        return f"{ref} (unpinned)"
    return ref if ref.endswith(digest) else f"{ref} @ {digest}"


def allowed_dirty_text(git: dict[str, Any] | None) -> str | None:
    """The one line for a git stamp of a run allowed from a dirty tree (``--allow-dirty``: the
    files that fed the measurement differed, and the diff's hash was recorded), else None."""
    if not git or not git.get("diff_sha256"):
        return None
    files = git.get("dirty_files") or []
    return (
        f"DIRTY TREE (allowed): {len(files)} file(s) differed from commit {str(git.get('commit'))[:12]}, "
        f"diff {git['diff_sha256']}"
    )


def dirty_flag(entry: dict[str, Any]) -> str | None:
    """Why an entry's numbers may not be exactly what its commit holds, or None when they are.

    A run allowed from a dirty tree records the changed files and the diff's hash. A stamp that only
    says ``dirty`` comes from before the clean-tree rule, or from a tree whose changes lay outside
    what feeds a measurement (checked clean at the time): either way no diff was recorded."""
    git = entry.get("git") or {}
    allowed = allowed_dirty_text(git)
    if allowed or not git.get("dirty"):
        return allowed
    return (
        f"dirty tree: written from uncommitted changes to {str(git.get('commit'))[:12]} (diff not recorded)"
    )


def query(ledger: Ledger, *, kind: str | None = None, status: str | None = None) -> list[tuple[dict, str]]:
    """``[(entry, status)]`` oldest first, filtered by kind and folded status."""
    if kind is not None and kind not in KINDS:
        raise InputError(f"unknown kind {kind!r}", where="--kind", hint=f"one of: {', '.join(KINDS)}")
    if status is not None and status not in STATUSES:
        raise InputError(
            f"unknown status {status!r}", where="--status", hint=f"one of: {', '.join(STATUSES)}"
        )
    entries = ledger.envelopes()  # envelopes only: a payload is read when a row is shown
    statuses = fold_statuses(entries)
    return [
        (entry, statuses[entry["id"]])
        for entry in entries
        if (kind is None or entry.get("kind") == kind) and (status is None or statuses[entry["id"]] == status)
    ]


def summarize(entry: dict[str, Any], width: int = 90) -> str:
    """One line saying what an entry is, from its payload (plain dict access, no models)."""
    payload = entry.get("payload", {})
    if entry.get("kind") == "release":
        text = f"{payload.get('lane', '?')} {payload.get('version', '?')}: " + "; ".join(
            payload.get("changes", [])
        )
    else:
        fields = _SUMMARY_FIELDS.get(entry.get("kind", ""), ("text",))
        text = next((str(payload[f]) for f in fields if payload.get(f)), "")
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def detail(ledger: Ledger, id_or_prefix: str) -> dict[str, Any]:
    """An entry, its folded status and everything that refers to it (for `ledger show`)."""
    entry = ledger.get(id_or_prefix)
    entries = ledger.envelopes()
    statuses = fold_statuses(entries)
    return {
        "entry": entry,
        "status": statuses[entry["id"]],
        "referred_by": [
            {
                "rel": rel,
                "id": other["id"],
                "kind": other["kind"],
                "status": statuses[other["id"]],
                "summary": summarize(other),
            }
            for rel, other in referrers(entries, entry["id"])
        ],
    }
