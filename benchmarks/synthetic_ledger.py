"""Synthetic ledgers for the benchmarks: many entries written in bulk with the real line encoder.

`Ledger.append` fsyncs and checks the tail per line; a benchmark that needs 100,000 entries writes
them the way a long-lived ledger would look (valid chains that verify) without paying that per line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from recipe_ledger.ledger import chain
from recipe_ledger.ledger.store import Ledger

# (n, ids of the entries written so far) -> (kind, payload, refs)
MakeEntry = Callable[[int, list[str]], tuple[str, dict[str, Any], list[dict[str, str]]]]


def write_chains(
    root: Path, writers: tuple[str, ...], count: int, make_entry: MakeEntry, timestamp: Callable[[int], str]
) -> None:
    """``count`` entries, round-robin over ``writers``' chains, each linked to its writer's head."""
    Ledger.init(root)
    heads: dict[str, tuple[int, str | None]] = {w: (-1, None) for w in writers}
    files = {w: (root / "ledger" / f"{w}.jsonl").open("wb") for w in writers}
    ids: list[str] = []
    try:
        for n in range(count):
            writer = writers[n % len(writers)]
            kind, payload, refs = make_entry(n, ids)
            seq, prev = heads[writer]
            body = {
                "v": 1,
                "seq": seq + 1,
                "prev": prev,
                "writer": writer,
                "kind": kind,
                "refs": refs,
                "ts": timestamp(n),
                "payload": payload,
                "git": {"commit": "f" * 40, "dirty": False, "scripts": {"scripts/knee.sh": "e" * 40}},
                "box": f"stated:{writer}",  # every entry names its box (fingerprint.py)
            }
            entry_id, line = chain.encode_line(body)
            files[writer].write(line)
            heads[writer] = (seq + 1, entry_id)
            ids.append(entry_id)
    finally:
        for handle in files.values():
            handle.close()
