"""`ledger import-seed`: a seed campaign (seed_campaigns.py reads them) appended to the ledger.

Every payload says ``origin.how = "imported"`` with the document as its source, and ``origin.item``
is the item's key: that key makes the import idempotent (re-running appends only what is missing,
in order, so an import killed half-way is finished by running it again). Refs between items
(``Item("key")``) are resolved to the ids of the entries already appended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipe_ledger.ledger import gitinfo
from recipe_ledger.ledger.seed_campaigns import Item, Seed, SeedEntry
from recipe_ledger.ledger.store import Ledger


@dataclass
class ImportResult:
    added: list[tuple[str, str]] = field(default_factory=list)  # (item key, entry id)
    present: list[tuple[str, str]] = field(default_factory=list)


def import_seed(
    ledger: Ledger,
    *,
    seed: Seed,
    writer: str | None = None,
    items: list[SeedEntry] | None = None,
) -> ImportResult:
    """Append every item of ``seed`` not yet in ``writer``'s chain (default: the seed's own writer);
    return what was added and what was there."""
    writer = seed.writer if writer is None else writer
    items = seed.items if items is None else items
    ids = _imported_items(ledger, writer, seed.source)
    result = ImportResult(present=[(i.key, ids[i.key]) for i in items if i.key in ids])
    git = gitinfo.snapshot(ledger.root)  # one snapshot: the whole import is one act
    for item in items:
        if item.key in ids:
            continue
        payload = {**_resolve(item.payload, ids), "origin": _origin(seed, item.key)}
        refs = [(rel, ids[ref.key]) for rel, ref in item.refs]
        entry = ledger.append(item.kind, payload, writer=writer, refs=refs, git=git)
        ids[item.key] = entry["id"]
        result.added.append((item.key, entry["id"]))
    return result


def _origin(seed: Seed, key: str) -> dict[str, str]:
    origin = {"how": "imported", "source": seed.source, "item": key}
    return {**origin, "as_of": seed.as_of} if seed.as_of else origin


def _imported_items(ledger: Ledger, writer: str, source: str) -> dict[str, str]:
    found = {}
    for entry in ledger.entries():
        origin = entry.get("payload", {}).get("origin", {})
        if entry.get("writer") == writer and origin.get("source") == source and origin.get("item"):
            found[origin["item"]] = entry["id"]
    return found


def _resolve(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, Item):
        return ids[value.key]
    if isinstance(value, dict):
        return {k: _resolve(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, ids) for v in value]
    return value
