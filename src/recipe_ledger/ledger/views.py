"""Read-side helpers for `ledger log` and `ledger show`: filtering by kind/status, one-line summaries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from recipe_ledger.errors import InputError
from recipe_ledger.ledger import chain
from recipe_ledger.ledger.fold import STATUSES, changed_statuses, fold_statuses, referrers
from recipe_ledger.ledger.kinds import KINDS
from recipe_ledger.ledger.store import Ledger, envelope_problem

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
    if kind is None and status in (None, "active"):  # (nearly) every entry is shown: read them all
        entries = ledger.envelopes()
        changed = changed_statuses(entries)
    else:
        entries, changed = _selected(ledger, kind)
    rows = [(entry, changed.get(entry["id"], "active")) for entry in entries]
    return rows if status is None else [row for row in rows if row[1] == status]


def _selected(ledger: Ledger, kind: str | None) -> tuple[list[dict], dict[str, str]]:
    """The entries a filter can select, parsing only lines that can matter, and the changed statuses.

    A status other than ``active`` comes only from an entry that refers to others, so the lines
    with refs are parsed first (a few percent); then only the lines of the kind asked for, or whose
    status changed. Both are found in the bytes of a canonical line: the top-level ``refs`` is the
    last ``,"refs":`` of a line (only seq, ts, v and writer follow it), and the kind is the one key
    before ``payload``. A byte match is a candidate only, confirmed on the parsed entry; a line
    that is not canonical is one `ledger verify` fails, whatever `log` shows of it.
    """
    lines = [line for path in ledger.chain_files() for line in chain.split_lines(path.read_bytes())[0]]
    with chain.no_gc():
        referring = _parsed(line for line in lines if _has_refs(line))
        changed = changed_statuses(referring)
        wanted = b'"kind":"%s","payload":' % kind.encode("ascii") if kind else None
        keys = {key.encode("ascii") for key in changed}
        picked = _parsed(
            line
            for line in lines
            if (wanted in line if wanted else line[chain.ID_START : chain.ID_END] in keys)
        )
    found = [entry for entry in picked if kind is None or entry["kind"] == kind]
    found.sort(key=lambda e: (e["ts"], e["writer"], e["seq"]))
    return found, changed


def _has_refs(line: bytes) -> bool:
    at = line.rfind(b',"refs":')
    return at < 0 or line[at + 8 : at + 10] != b"[]"


def _parsed(lines: Iterable[bytes]) -> list[dict]:
    entries = []
    for line in lines:
        try:
            entry = chain.parse_line(line)
        except ValueError:
            continue  # `ledger verify` names it; a listing shows what can be read
        if isinstance(entry, dict) and envelope_problem(entry) is None:
            entries.append(entry)
    return entries


def summarize(entry: dict[str, Any], width: int = 90) -> str:
    """One line saying what an entry is, from its payload (plain dict access, no models)."""
    payload = entry.get("payload", {})
    if entry.get("kind") == "witness":
        heads = payload.get("heads") if isinstance(payload.get("heads"), dict) else {}
        text = "witnessed " + ", ".join(
            f"{name}@{(head or {}).get('seq')}" for name, head in sorted(heads.items())
        )
    elif entry.get("kind") == "release":
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
