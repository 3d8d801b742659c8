"""Readiness: poll a server's health URL until it answers 200, the server exits, or time runs out."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

# Lab boxes often export http_proxy; a health check of 127.0.0.1 through a proxy answers for the proxy.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_FIRST_DELAY_S = 0.05
_MAX_DELAY_S = 1.0
_MAX_REQUEST_S = 2.0


@dataclass(frozen=True)
class HealthOutcome:
    ready: bool
    exit_code: int | None  # set when the server exited before it became healthy
    timed_out: bool
    waited_s: float
    # The health URL itself answered (a 503 while loading; not a 404, which says the server has no
    # such path): a timeout without it is a server that never came up, not one that hung after.
    answered: bool = False


def request_status(url: str, *, method: str = "GET", timeout_s: float = _MAX_REQUEST_S) -> int | None:
    """The HTTP status of one request, or None when nothing answered (refused, reset, timed out)."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (OSError, http.client.HTTPException):
        # URLError is an OSError; a server still binding resets or drops connections.
        return None


def get_text(url: str, *, timeout_s: float) -> tuple[int | None, str]:
    """GET ``url``: the HTTP status (None when nothing answered) and the body, or what went wrong
    on the way, as text."""
    return _exchange(urllib.request.Request(url), timeout_s)


def post_json(url: str, payload: object, *, timeout_s: float) -> tuple[int | None, str]:
    """POST ``payload`` as JSON: the HTTP status (None when nothing answered) and the body, or
    what went wrong on the way, as text."""
    request = urllib.request.Request(
        url, method="POST", data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    return _exchange(request, timeout_s)


def _exchange(request: urllib.request.Request, timeout_s: float) -> tuple[int | None, str]:
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            return response.status, response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", errors="replace")
    except (OSError, http.client.HTTPException) as error:
        return None, f"{type(error).__name__}: {error}"


def wait_until_healthy(
    url: str, timeout_s: float, exit_code_of_server: Callable[[], int | None]
) -> HealthOutcome:
    """Poll ``url`` with exponential backoff (capped at 1 s) until 200, an exit, or ``timeout_s``.

    ``exit_code_of_server`` returns None while the server runs: checking it every round is what
    makes a crashed boot fail in seconds instead of after the whole health timeout.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    delay = _FIRST_DELAY_S
    answered = False
    while True:
        exit_code = exit_code_of_server()
        if exit_code is not None:
            return HealthOutcome(False, exit_code, False, time.monotonic() - started, answered)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return HealthOutcome(False, None, True, time.monotonic() - started, answered)
        status = request_status(url, timeout_s=min(_MAX_REQUEST_S, max(remaining, 0.05)))
        answered = answered or status not in (None, 404)  # 404: it serves no such path
        if status == 200:
            return HealthOutcome(True, None, False, time.monotonic() - started, True)
        time.sleep(min(delay, max(deadline - time.monotonic(), 0)))
        delay = min(delay * 2, _MAX_DELAY_S)
