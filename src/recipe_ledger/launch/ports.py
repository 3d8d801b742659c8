"""Is a TCP port free to listen on? Checked before a launch and confirmed after a teardown."""

from __future__ import annotations

import socket
import time

from recipe_ledger.errors import StateError

# Addresses a server listens on but a client cannot connect to.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def connect_host(host: str) -> str:
    """The address a client uses to reach a server that listens on ``host``."""
    return _WILDCARDS.get(host, host)


def port_is_free(host: str, port: int) -> bool:
    """True when a server could bind ``host:port`` now.

    Binding (not connecting) is the question a server asks. SO_REUSEADDR matches what servers
    set, so sockets of a stopped server lingering in TIME_WAIT do not count as "in use", while a
    live listener (on this address or the wildcard) still does.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def ensure_port_free(host: str, port: int) -> None:
    """Raise a ``StateError`` naming the port and the command that shows who holds it."""
    if not port_is_free(host, port):
        raise StateError(
            f"port {port} on {host} is already in use; another server (perhaps an earlier run) holds it",
            where=f"{host}:{port}",
            hint=f"ss -ltnp 'sport = :{port}'",
        )


def wait_port_free(host: str, port: int, timeout_s: float = 5.0) -> bool:
    """Poll until ``host:port`` is free or ``timeout_s`` passes; True when it became free."""
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        if port_is_free(host, port):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.25)
