"""The box a writer's chain is bound to: a stable, non-secret fingerprint of this machine.

A writer name is only a convention (``$RECIPE_LEDGER_WRITER`` or the host name): two lent machines
that are both called ``vm`` would otherwise append to one chain from two clones and fork it. Every
entry therefore carries ``box``, this machine's fingerprint, and an append under a writer whose
chain already carries another box's fingerprint is refused (verify flags it after a merge).

Which identity: ``/etc/machine-id`` (systemd's per-installation id, stable across reboots and
host-name changes, distinct for every installed or cloned-then-reset system), hashed with an
application salt as machine-id(5) asks, so the raw id never reaches a committed file. Without it
(a minimal container), the host name, hashed the same way. ``$RECIPE_LEDGER_BOX_ID`` overrides both:
for containers that share one image's machine-id, and for tests that play two boxes. This guards
against accidents, not attackers: signed chain heads (``signing.py``) are what an attacker without
the key cannot forge.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket
from pathlib import Path

BOX_ENV = "RECIPE_LEDGER_BOX_ID"
MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
_SALT = b"recipe-ledger box v1\0"


def box_fingerprint() -> str:
    """``machine-id:<16 hex>``, ``host:<16 hex>`` or ``stated:<value>`` (from $RECIPE_LEDGER_BOX_ID)."""
    return _fingerprint(os.environ.get(BOX_ENV, "").strip())


@functools.lru_cache(maxsize=4)
def _fingerprint(stated: str) -> str:
    if stated:
        return f"stated:{stated}"
    machine_id = _machine_id()
    if machine_id:
        return "machine-id:" + _salted(machine_id)
    return "host:" + _salted(socket.gethostname())


def _machine_id() -> str | None:
    for path in MACHINE_ID_FILES:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text:
            return text
    return None


def _salted(value: str) -> str:
    return hashlib.sha256(_SALT + value.encode("utf-8", "replace")).hexdigest()[:16]
