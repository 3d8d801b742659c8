"""The last head of each chain this box has seen: a head may not move backwards.

A chain cut back *together with* its older signed head (both restored from git) is a valid, signed,
shorter chain: its own files cannot show what it lost. So every ``ledger verify`` that passes
remembers, per ledger folder on this box, each chain's head ``(seq, id)`` in a state file outside
the repository, and the next verify fails a chain that no longer holds that head (cut back below
it, or rewritten at it). Witness entries do the same across boxes, in the ledger itself.

The file is ``$RECIPE_LEDGER_STATE_DIR/heads.json`` (default ``$XDG_STATE_HOME/recipe-ledger`` or
``~/.local/state/recipe-ledger``): ``{"<ledger dir>": {"<writer>": {"seq": N, "id": "..."}}}``,
replaced through a temporary file and a rename under a lock. A head only moves forward in it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STATE_DIR_ENV = "RECIPE_LEDGER_STATE_DIR"
STATE_FILE = "heads.json"

Head = tuple[int, str]  # (seq, id) of a chain's last entry


def state_file() -> Path:
    stated = os.environ.get(STATE_DIR_ENV)
    if stated:
        return Path(stated) / STATE_FILE
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "recipe-ledger" / STATE_FILE


def _key(ledger_dir: Path) -> str:
    return str(ledger_dir.resolve())


def remembered(ledger_dir: Path) -> dict[str, Head]:
    """The heads this box saw last in this ledger folder (none: an empty mapping)."""
    seen = _read(state_file()).get(_key(ledger_dir), {})
    heads = {}
    for writer, head in seen.items() if isinstance(seen, dict) else ():
        if isinstance(head, dict) and isinstance(head.get("seq"), int) and isinstance(head.get("id"), str):
            heads[writer] = (head["seq"], head["id"])
    return heads


def went_back(seen: Head, ids: list[str]) -> str | None:
    """Why a chain whose ids by seq are ``ids`` no longer holds the head ``seen``, or None."""
    seq, entry_id = seen
    if seq >= len(ids):
        return (
            f"this box saw this chain at seq {seq} ({entry_id[:12]}); it now ends at seq {len(ids) - 1}:"
            " it was rolled back"
        )
    if ids[seq] != entry_id:
        return (
            f"this box saw {entry_id[:12]} at seq {seq}; the chain now holds {ids[seq][:12]}:"
            " it was rewritten"
        )
    return None


def remember(ledger_dir: Path, heads: dict[str, Head]) -> None:
    """Record ``heads`` for this ledger folder, each only if it is further on than the one recorded."""
    path = state_file()
    try:
        with _locked(path):
            state = _read(path)
            folder = state.setdefault(_key(ledger_dir), {})
            changed = False
            for writer, (seq, entry_id) in heads.items():
                old = folder.get(writer)
                if not isinstance(old, dict) or not isinstance(old.get("seq"), int) or old["seq"] < seq:
                    folder[writer] = {"seq": seq, "id": entry_id}
                    changed = True
            if changed:
                _write(path, state)
    except OSError:
        return  # a read-only home: the check is a second line of defence, not a reason to fail


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path.with_name(STATE_FILE + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, state: dict[str, Any]) -> None:
    temporary = path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(state, sort_keys=True, indent=1), encoding="utf-8")
    temporary.replace(path)
