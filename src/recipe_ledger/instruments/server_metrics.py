"""The server's own counters (Prometheus ``/metrics``), read before and after a sweep point.

Counters only ever grow, so the difference between two scrapes is what that point did: how many
prompt tokens hit the prefix cache, how many draft tokens speculation proposed and how many were
accepted, how many tokens each engine step processed. Which counter means what is the engine's
to say (``Engine.counter_metrics``); this module reads and subtracts.
"""

from __future__ import annotations

import re
import urllib.request

from recipe_ledger.engines.base import Engine, Samples

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEnaNinf]+)")


def parse_prometheus(text: str) -> Samples:
    """Sum every sample of each metric name over its labels (we need totals, not series)."""
    totals: Samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        totals[match.group(1)] = totals.get(match.group(1), 0.0) + value
    return totals


def scrape(base_url: str, timeout_s: float = 5.0) -> Samples | None:
    """The server's counters, or None when it has no /metrics (never fails a run)."""
    try:
        with urllib.request.urlopen(f"{base_url}/metrics", timeout=timeout_s) as response:
            return parse_prometheus(response.read().decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None


def derive(before: Samples | None, after: Samples | None, engine: Engine) -> dict[str, float]:
    """Normalized server-side metrics for the interval between two scrapes, the engine's way."""
    if before is None or after is None:
        return {}
    return engine.counter_metrics(before, after)


def point_metrics(
    before: Samples | None, after: Samples | None, base_url: str | None, engine: Engine
) -> dict[str, float]:
    """What the server says about one point: the counters' differences, and what the engine
    reports elsewhere where the counters have nothing (SGLang's /server_info accept length: it
    averages since launch, and a launch serves one arm and repeat)."""
    out = derive(before, after, engine)
    if base_url:
        out.update(engine.reported_metrics(base_url, out))
    return out
