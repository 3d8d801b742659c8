"""Every server this process started and has not yet stopped, so a signal handler can stop them all.

A plain dict and no lock on purpose: ``stop_all`` is meant to run from a signal handler, which runs
in the main thread between bytecodes; a lock held by the interrupted code would deadlock it, while
single dict operations are atomic under the GIL.
"""

from __future__ import annotations

import logging
from typing import Protocol

log = logging.getLogger(__name__)


class Stoppable(Protocol):
    def stop(self) -> None: ...


_LIVE: dict[int, Stoppable] = {}


def register(server: Stoppable) -> None:
    _LIVE[id(server)] = server


def unregister(server: Stoppable) -> None:
    _LIVE.pop(id(server), None)


def live_servers() -> list[Stoppable]:
    return list(_LIVE.values())


def stop_all() -> int:
    """Stop every live server, newest first; returns how many were stopped. Never raises."""
    servers = live_servers()
    for server in reversed(servers):
        try:
            server.stop()
        except Exception:  # one stuck server must not keep the others running
            log.exception("could not stop %r", server)
    return len(servers)
