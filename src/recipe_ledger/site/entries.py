"""How a page names and links a ledger entry: the verified entries indexed once per build (by id,
who retracts whom, who refers to whom, the timeline page each one is shown on), and the link every
page writes for an entry (its short id, status and retraction notice)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from recipe_ledger.ledger.published import LedgerView

TIMELINE_PAGE = 1000  # entries per ledger timeline page


def short(entry_id: str) -> str:
    return entry_id[:12]


@dataclass
class LedgerIndex:
    """The verified entries (as stored: redact what you show), their statuses and where each is shown."""

    entries: list[dict[str, Any]]
    statuses: dict[str, str]
    heads: list[tuple[str, int, str]]
    by_id: dict[str, dict[str, Any]]
    retracted_by: dict[str, str]  # target id -> the retraction's id
    page_of: dict[str, int]  # entry id -> timeline page number (1 = newest)
    referred_by: dict[str, list[tuple[str, str]]]  # entry id -> [(relation, referring entry id)]

    def href(self, entry_id: str, root: str) -> str:
        page = self.page_of.get(entry_id, 1)
        name = "index" if page == 1 else f"page-{page}"
        return f"{root}ledger/{name}.html#e-{short(entry_id)}"


def index_ledger(view: LedgerView) -> LedgerIndex:
    entries = view.entries  # redacted where shown (a row, a page): walking all 100k is the slow part
    retracted_by: dict[str, str] = {}
    referred_by: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for entry in entries:
        for ref in entry.get("refs", ()):
            referred_by[ref.get("id")].append((ref.get("rel"), entry["id"]))
            if ref.get("rel") == "retracts":
                retracted_by.setdefault(ref["id"], entry["id"])
    newest_first = [e["id"] for e in reversed(entries)]
    page_of = {entry_id: i // TIMELINE_PAGE + 1 for i, entry_id in enumerate(newest_first)}
    return LedgerIndex(
        entries,
        view.statuses,
        view.heads,
        {e["id"]: e for e in entries},
        retracted_by,
        page_of,
        dict(referred_by),
    )


def entry_ref(index: LedgerIndex, entry_id: str, root: str) -> dict[str, Any]:
    """How a page links to an entry: id, status, href, and its retraction notice if any."""
    notice = index.retracted_by.get(entry_id)
    return {
        "id": entry_id,
        "short": short(entry_id),
        "status": index.statuses.get(entry_id, "unknown"),
        "href": index.href(entry_id, root),
        "retracted_by": {"id": notice, "short": short(notice), "href": index.href(notice, root)}
        if notice
        else None,
    }
