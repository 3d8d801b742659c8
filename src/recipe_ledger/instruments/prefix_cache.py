"""Emptying the server's prefix cache between sweep points, each engine its own way.

A point measured on a warm prefix cache flatters whichever arm happened to run the same prompts
before (004 saw 25K-80K "prefill tok/s" from identical prompts), so the cache is emptied before
every point:

- vLLM: ``POST /reset_prefix_cache``, best effort (``RunningServer.reset_prefix_cache``: not
  every build exposes it, and its counters show a hit rate if it did not happen);
- SGLang: ``POST /flush_cache``. It refuses with 400 while requests are still running or waiting
  (the previous point's last requests draining); that is retried, and a cache that still cannot
  be flushed fails the point: a point silently measured on a warm cache is worse than no point.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable

from recipe_ledger.instruments.base import InstrumentError

FLUSH_ATTEMPTS = 10
FLUSH_WAIT_S = 1.0
# The server may itself wait this long for running requests to finish before it answers (SGLang's
# ``timeout`` query parameter); the retries cover a server that ignores it.
SERVER_WAIT_S = 5.0

Post = Callable[[str, float], tuple[int, str]]  # (url, timeout) -> (status, body)


def http_post(url: str, timeout_s: float) -> tuple[int, str]:
    request = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


def flush_sglang(
    base_url: str,
    *,
    attempts: int = FLUSH_ATTEMPTS,
    wait_s: float = FLUSH_WAIT_S,
    post: Post = http_post,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """POST /flush_cache until SGLang says 200; return how many attempts it took.

    400 (requests still draining) and an unreachable server are retried ``attempts`` times, then
    raise InstrumentError naming the last answer."""
    url = f"{base_url}/flush_cache?timeout={SERVER_WAIT_S:g}"
    last = ""
    for attempt in range(1, attempts + 1):
        try:
            status, body = post(url, SERVER_WAIT_S + 10.0)
        except OSError as error:
            status, body = 0, str(error)
        if status == 200:
            return attempt
        last = f"{status or 'no answer'}: {body.strip().splitlines()[0] if body.strip() else ''}".rstrip(": ")
        if attempt < attempts:
            sleep(wait_s)
    raise InstrumentError(
        f"SGLang did not flush its prefix cache after {attempts} attempts (last answer {last})",
        where=f"{base_url}/flush_cache",
        hint="read the server log of this launch (requests still running after a point, a wedged scheduler)",
    )
