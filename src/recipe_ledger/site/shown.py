"""What a page shows of an entry or a recipe: its text redacted against the secret-named
environment (snapshotted once per build by ``refresh_secret_env``: ``redact_text`` would rescan the
environment on every call), and payload objects with every key a template reads."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from recipe_ledger.ledger.published import secret_environ
from recipe_ledger.redact import redact_lines, redact_obj

_secret_env: dict[str, str] = {}


def refresh_secret_env() -> None:
    """Snapshot the secret-named environment once per build (redact_text rescans it per call)."""
    _secret_env.clear()
    _secret_env.update(secret_environ())


def redact(text: str) -> str:
    # A line at a time through the cache: the builder's ~70 commands per recipe share most lines.
    return redact_lines(text, environ=_secret_env)


def redact_all(obj: Any) -> Any:
    return redact_obj(obj, environ=_secret_env)


def cached_redact() -> Callable[[str], str]:
    """``redact`` of a shown string, cached: writers, kinds and subjects repeat on every page."""
    return lru_cache(maxsize=1 << 16)(redact)


def with_keys(value: Any, keys: tuple[str, ...]) -> dict[str, Any] | None:
    """``keys_filled`` of a payload sub-object that may be absent (None then)."""
    if not isinstance(value, dict):
        return None
    return keys_filled(value, keys)


def keys_filled(value: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """A payload sub-object with every key a template reads (stored payloads omit None)."""
    return {**{k: None for k in keys}, **value}
