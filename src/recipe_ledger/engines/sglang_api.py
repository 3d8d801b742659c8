"""SGLang's own HTTP endpoints around a launch: the real generate that proves readiness, the
prefix-cache flush between sweep points, and the accept length ``/server_info`` reports.

SGLang's ``/health`` answers 200 once the tokenizer manager is up; whether the model really
generates is a separate question (a broken kernel, a missing stub, an attention backend that
fails on first use all pass /health). So readiness is /health 200 *then* one real
``POST /generate`` of one token.

``/flush_cache`` empties the radix (prefix) cache, but only when no request is running or
waiting: otherwise it answers 400 ("the operation will not be performed"). Between sweep points
the last requests may still be draining, so a 400 is retried with a short backoff; when it never
clears, the point fails. Measuring the next point on a warm prefix cache would flatter it
silently, which is worse than a failed run.

``/server_info`` carries the speculative accept length SGLang itself measures (since launch): the
point's number where its counters have none.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable

from recipe_ledger.errors import StateError
from recipe_ledger.launch.health import post_json, request_status

GENERATE_PATH = "/generate"
FLUSH_PATH = "/flush_cache"
# One token, greedy: the cheapest request that still runs prefill, decode and detokenize.
PROBE_REQUEST = {"text": "hi", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
FLUSH_ATTEMPTS = 6
FLUSH_FIRST_DELAY_S = 0.25  # 0.25 + 0.5 + 1 + 2 + 4: ~8 s for the last requests to drain
FLUSH_STATUS_DRAINING = 400


class CacheFlushFailed(StateError):
    """SGLang would not empty its prefix cache: the point cannot be measured cold."""


def generate_problem(base_url: str, timeout_s: float) -> str | None:
    """None when one real generate succeeded; else what failed, in one line."""
    status, body = post_json(base_url + GENERATE_PATH, PROBE_REQUEST, timeout_s=timeout_s)
    if status is None:
        return f"no answer within {timeout_s:g} s ({body})"
    if status != 200:
        return f"HTTP {status}: {_one_line(body)}"
    try:
        answer = json.loads(body)
    except ValueError:
        return f"HTTP 200 but not JSON: {_one_line(body)}"
    if not isinstance(answer, dict) or "text" not in answer:
        return f"HTTP 200 without generated text: {_one_line(body)}"
    return None


def flush_cache(
    base_url: str,
    *,
    attempts: int = FLUSH_ATTEMPTS,
    first_delay_s: float = FLUSH_FIRST_DELAY_S,
    timeout_s: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """POST /flush_cache until 200, retrying while SGLang answers 400 (requests draining); returns
    the attempts it took. Raises ``CacheFlushFailed`` when it never says 200, at once for an answer
    that waiting cannot fix (404: a server without the endpoint; no answer: a dead server)."""
    url = base_url + FLUSH_PATH
    delay = first_delay_s
    status: int | None = None
    for attempt in range(1, attempts + 1):
        status = request_status(url, method="POST", timeout_s=timeout_s)
        if status == 200:
            return attempt
        if status != FLUSH_STATUS_DRAINING or attempt == attempts:
            break
        sleep(delay)
        delay *= 2
    answer = f"HTTP {status}" if status is not None else "no answer"
    waited = " (requests still running or waiting after every retry)" if status == 400 else ""
    raise CacheFlushFailed(
        f"SGLang did not flush its prefix cache: {answer} from POST {FLUSH_PATH}{waited}; the next "
        "point would be measured on a warm cache",
        where=url,
        hint=f"curl -s -X POST {url}; curl -s {base_url}/server_info  # running requests?",
    )


def server_info_accept_length(base_url: str, timeout_s: float = 5.0) -> float | None:
    """SGLang's ``/server_info`` ``internal_states[0].avg_spec_accept_length``: the speculative accept
    length the server itself reports (since launch, not per point), or None where it offers none
    (no speculation, no such endpoint, e.g. vLLM)."""
    try:
        with urllib.request.urlopen(f"{base_url}/server_info", timeout=timeout_s) as response:
            info = json.loads(response.read().decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None
    return accept_length_of(info)


def accept_length_of(info: object) -> float | None:
    """``internal_states[0].avg_spec_accept_length`` of a /server_info answer (decode role first)."""
    if isinstance(info, dict) and isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]
    states = info.get("internal_states") if isinstance(info, dict) else None
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        return None
    value = states[0].get("avg_spec_accept_length")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat[:limit] + ("..." if len(flat) > limit else "")
