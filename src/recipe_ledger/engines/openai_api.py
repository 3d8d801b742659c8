"""The OpenAI HTTP API every OpenAI-compatible server shares: ``/v1/models`` and one real completion.

Readiness for a server the tool knows nothing else about: ``/v1/models`` answered 200 (the launch's
health path), then one small completion must come back with a choice in it. A server that answers
``/v1/models`` but cannot complete is up and wrong (``bad-output``), not still booting. Chat first:
current OpenAI-compatible servers serve ``/v1/chat/completions`` (a model without a chat template
may not, and some servers dropped the legacy ``/v1/completions``), so chat is asked and a 404 or 405
on it falls back to the legacy endpoint.
"""

from __future__ import annotations

import json
from typing import Any

from recipe_ledger.launch.health import get_text, post_json

MODELS_PATH = "/v1/models"
CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
_NOT_SERVED = frozenset({404, 405})
PROBE_PROMPT = "Say hello."
PROBE_TOKENS = 4


def served_model_ids(base_url: str, timeout_s: float) -> tuple[list[str], str | None]:
    """The ids ``/v1/models`` lists, and what went wrong reading them (None when nothing did)."""
    status, text = get_text(base_url + MODELS_PATH, timeout_s=timeout_s)
    if status != 200:
        answer = f"HTTP {status}" if status else "no answer"
        return [], f"GET {base_url}{MODELS_PATH} failed: {answer}: {_short(text)}"
    try:
        body = json.loads(text)
    except ValueError:
        return [], f"GET {base_url}{MODELS_PATH} answered with a body that is not JSON: {_short(text)}"
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return [], f"GET {base_url}{MODELS_PATH} answered without a 'data' list: {_short(body)}"
    return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item], None


def completion_problem(base_url: str, model: str | None, timeout_s: float) -> str | None:
    """None when one small completion of ``model`` came back with a choice; else what failed, in
    one line naming the request. ``model=None`` leaves the field out: a server pinned to one model
    (``transformers serve MODEL``) answers with it."""
    common: dict[str, object] = {"max_tokens": PROBE_TOKENS, "temperature": 0}
    if model is not None:
        common["model"] = model
    chat = {**common, "messages": [{"role": "user", "content": PROBE_PROMPT}], "stream": False}
    status, body = post_json(base_url + CHAT_PATH, chat, timeout_s=timeout_s)
    path = CHAT_PATH
    if status in _NOT_SERVED:
        legacy = {**common, "prompt": PROBE_PROMPT}
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
