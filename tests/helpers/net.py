"""Network helpers shared by the integration tests."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

# Lab boxes often export http_proxy; requests to 127.0.0.1 must not go through it.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it), for a server a test starts."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def nothing_listens_on(port: int, host: str = "127.0.0.1") -> bool:
    """True when a connection to ``host:port`` is refused: the server that held it is gone."""
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) != 0


def http(method: str, url: str, body: dict | None = None, timeout_s: float = 120.0) -> tuple[int, bytes]:
    """One JSON request to a local server, past any proxy: (status, body), an HTTP error's too.
    A POST without a body sends an empty one (SGLang's /flush_cache wants a Content-Length)."""
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
