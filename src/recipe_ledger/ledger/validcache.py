"""Which payloads were already found valid, so ``ledger verify`` validates each line once.

An entry's id is the sha256 of its whole line, kind and payload included, and a line never
changes: once a payload validated under a given set of models, it validates under them forever. The
ids that did are kept per models fingerprint (the sha256 of models.py, where the payload models and
their upgrades live, plus the pydantic version) in ``~/.cache/recipe-ledger/valid-payloads/`` (or
``$RECIPE_LEDGER_CACHE_DIR``), one hex id a line, appended. A verify of an unchanged ledger then
skips pydantic entirely, and does not even build the models (~0.1 s of start-up). Changing
models.py or pydantic starts a new file. A torn or foreign line in the file matches no id: the cache
can make verify skip work, never pass a line it would fail (the line's bytes are still hashed).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

CACHE_ENV = "RECIPE_LEDGER_CACHE_DIR"
_MODELS_SOURCE = Path(__file__).with_name("models.py")


def _cache_file() -> Path | None:
    try:
        source = _MODELS_SOURCE.read_bytes()
        pydantic_version = metadata.version("pydantic")
    except (OSError, metadata.PackageNotFoundError):
        return None  # no source to fingerprint (a frozen build): validate everything
    fingerprint = hashlib.sha256(source + b"\0" + pydantic_version.encode()).hexdigest()[:24]
    base = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "recipe-ledger"
    return Path(base) / "valid-payloads" / f"{fingerprint}.ids"


def known_valid() -> set[str]:
    """Ids of entries whose payload validated under the current models (empty when none or unreadable)."""
    path = _cache_file()
    try:
        text = path.read_text(encoding="ascii", errors="replace") if path else ""
    except OSError:
        return set()
    return {line for line in text.split("\n") if len(line) == 64}


def remember_valid(ids: Iterable[str]) -> None:
    """Add ``ids`` to the cache; a cache that cannot be written is simply not used."""
    path = _cache_file()
    data = "".join(f"{entry_id}\n" for entry_id in ids).encode("ascii")
    if path is None or not data:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError:
        return
