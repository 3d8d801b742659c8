"""Every seed's import, entry by entry, against tests/golden/seed-entries.json.

The golden file was written from the seeds as Python (commit 66c1ef4, before they became the data
files of ledger/seeds/) so that the data files are proved to give the very same entries: kind,
refs and every payload byte. Entry ids depend on the clock, the box and git, so an id inside an
entry is written as the item it names.
Set UPDATE_GOLDEN=1 to write it again (and say in the commit why the entries changed).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from recipe_ledger.ledger import seed_campaigns, seed_import
from recipe_ledger.ledger.store import Ledger

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "seed-entries.json"


def _named(value: Any, items: dict[str, str]) -> Any:
    """``value`` with every entry id replaced by ``item:<key>`` of the item it is."""
    if isinstance(value, str):
        return f"item:{items[value]}" if value in items else value
    if isinstance(value, dict):
        return {k: _named(v, items) for k, v in value.items()}
    if isinstance(value, list):
        return [_named(v, items) for v in value]
    return value


def _named_refs(entry: dict[str, Any], items: dict[str, str]) -> list[dict[str, str]]:
    """The entry's refs by item; a release's evidence refs (one per result its numbers cite) are
    stored sorted by entry id, an order the clock decides, so they are compared sorted by item."""
    refs = _named(entry["refs"], items)
    if entry["kind"] != "release":
        return refs
    evidence = sorted((r for r in refs if r["rel"] == "evidence"), key=lambda r: r["id"])
    return [r for r in refs if r["rel"] != "evidence"] + evidence


def imported_entries(root: Path) -> dict[str, Any]:
    """Each seed as imported into a fresh ledger at ``root``: its identity and its entries."""
    ledger = Ledger.init(root)
    seeds: dict[str, Any] = {}
    for name, seed in seed_campaigns.all_seeds().items():
        result = seed_import.import_seed(ledger, seed=seed)
        items = {entry_id: key for key, entry_id in result.added}
        stored = {e["id"]: e for e in Ledger.open(root).entries() if e["writer"] == seed.writer}
        seeds[name] = {
            "source": seed.source,
            "writer": seed.writer,
            "as_of": seed.as_of,
            "title": seed.title,
            "entries": [
                {
                    "item": key,
                    "kind": stored[entry_id]["kind"],
                    "refs": _named_refs(stored[entry_id], items),
                    "payload": _named(stored[entry_id]["payload"], items),
                }
                for key, entry_id in result.added
            ],
        }
    return seeds


def _as_text(seeds: dict[str, Any]) -> str:
    return json.dumps(seeds, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def test_every_seed_imports_the_entries_of_the_golden_file(tmp_path):
    text = _as_text(imported_entries(tmp_path))
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert GOLDEN.exists(), f"golden file {GOLDEN} is missing: run with UPDATE_GOLDEN=1"
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = json.loads(text)
    assert list(got) == list(golden) == ["000", "004"]
    for name in golden:
        want, have = golden[name], got[name]
        assert [e["item"] for e in have["entries"]] == [e["item"] for e in want["entries"]], name
        for mine, theirs in zip(have["entries"], want["entries"], strict=True):
            assert mine == theirs, f"seed {name}, item {theirs['item']} differs from {GOLDEN.name}"
        assert have == want, name
    assert text == GOLDEN.read_text(encoding="utf-8")  # byte for byte: every number as it was typed
