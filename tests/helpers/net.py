"""Network helpers shared by the integration tests."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it), for a server a test starts."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def nothing_listens_on(port: int, host: str = "127.0.0.1") -> bool:
    """True when a connection to ``host:port`` is refused: the server that held it is gone."""
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) != 0
