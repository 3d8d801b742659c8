"""The OpenAI HTTP API every OpenAI-compatible server shares: ``/v1/models`` and one real completion.

Readiness for a server the tool knows nothing else about: ``/v1/models`` answered 200 (the launch's
health path), then one small completion must come back with a choice in it. A server that answers
``/v1/models`` but cannot complete is up and wrong (``bad-output``), not still booting. Chat first:
every current OpenAI-compatible server serves ``/v1/chat/completions``; some (``transformers serve``)
serve no ``/v1/completions``, others (older llama.cpp builds) only that, so a 404 or 405 on chat
falls back to the legacy endpoint.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from recipe_ledger.launch.health import post_json

MODELS_PATH = "/v1/models"
CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
_NOT_SERVED = frozenset({404, 405})
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
PROBE_PROMPT = "Say hello."
PROBE_TOKENS = 4


def served_model_ids(base_url: str, timeout_s: float) -> tuple[list[str], str | None]:
    """The ids ``/v1/models`` lists, and what went wrong reading them (None when nothing did)."""
    try:
        with _OPENER.open(base_url + MODELS_PATH, timeout=timeout_s) as response:
            body = json.loads(response.read().decode("utf-8", errors="replace"))
    except (OSError, ValueError) as error:
        return [], f"GET {base_url}{MODELS_PATH} failed: {type(error).__name__}: {error}"
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return [], f"GET {base_url}{MODELS_PATH} answered without a 'data' list: {_short(body)}"
    return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item], None


def completion_problem(base_url: str, model: str, timeout_s: float) -> str | None:
    """None when one small completion of ``model`` came back with a choice; else what failed, in
    one line naming the request."""
    chat = {
        "model": model,
        "messages": [{"role": "user", "content": PROBE_PROMPT}],
        "max_tokens": PROBE_TOKENS,
        "temperature": 0,
        "stream": False,
    }
    status, body = post_json(base_url + CHAT_PATH, chat, timeout_s=timeout_s)
    path = CHAT_PATH
    if status in _NOT_SERVED:
        legacy = {"model": model, "prompt": PROBE_PROMPT, "max_tokens": PROBE_TOKENS, "temperature": 0}
        status, body = post_json(base_url + COMPLETIONS_PATH, legacy, timeout_s=timeout_s)
        path = COMPLETIONS_PATH
    problem = _choice_problem(status, body)
    return f"POST {base_url}{path} failed: {problem}" if problem else None


def _choice_problem(status: int | None, body: str) -> str | None:
    if status is None:
        return f"no answer ({_short(body)})"
    if not 200 <= status < 300:
        return f"HTTP {status}: {_short(body)}"
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return f"HTTP {status} with a body that is not JSON: {_short(body)}"
    choices = parsed.get("choices") if isinstance(parsed, dict) else None
    if not isinstance(choices, list) or not choices:
        return f"HTTP {status} with no completion in it (no choices): {_short(body)}"
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    text = first.get("text") if isinstance(first, dict) else None
    if not isinstance(text, str) and not (isinstance(message, dict) and "content" in message):
        return f"HTTP {status} with a choice that holds neither text nor a message: {_short(body)}"
    return None


def _short(value: object, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value)[:limit]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
