"""The HTTP side the probes share (routing_probe.py, profile_probe.py): seeded prompts, the served
model's name, JSON POSTs to a server on loopback. Standard library only: the probes run in an engine's
own venv, without the tool's dependencies."""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request

# Lab boxes often export http_proxy; a server on loopback must not be asked through it.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
WORDS = "the of and to in is that for it as with was on be by at this from or an are which".split()


def post(url: str, payload: dict | None = None, timeout: float = 600) -> bytes:
    data = json.dumps(payload).encode() if payload is not None else b""
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    with _OPENER.open(request, timeout=timeout) as response:
        return response.read()


def served_model(base: str) -> str:
    """The first model the server lists (SGLang answers for any name, vLLM does not)."""
    try:
        with _OPENER.open(f"{base}/v1/models", timeout=30) as response:
            return json.loads(response.read())["data"][0]["id"]
    except (urllib.error.URLError, KeyError, IndexError, ValueError):
        return "default"


def prompts(n: int, seed: int) -> list[str]:
    """``n`` seeded prompts of growing length (24, 32, 40... words)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(24 + 8 * i)) for i in range(n)]
