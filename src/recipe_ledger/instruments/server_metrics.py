"""The server's own counters (Prometheus ``/metrics``), read before and after a sweep point.

Counters only ever grow, so the difference between two scrapes is what that point did: how many
prompt tokens hit the prefix cache, how many draft tokens speculation proposed and how many were
accepted, how many tokens each engine step processed.
"""

from __future__ import annotations

import re
import urllib.request

Samples = dict[str, float]

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


def _delta(before: Samples, after: Samples, name: str) -> float | None:
    if name not in after:
        return None
    return after[name] - before.get(name, 0.0)


def derive(before: Samples | None, after: Samples | None) -> dict[str, float]:
    """Normalized server-side metrics for the interval between two scrapes."""
    if before is None or after is None:
        return {}
    out: dict[str, float] = {}
    hits = _delta(before, after, "vllm:prefix_cache_hits_total")
    queries = _delta(before, after, "vllm:prefix_cache_queries_total")
    if hits is not None and queries:
        out["prefix_cache_hit_rate"] = hits / queries
    drafts = _delta(before, after, "vllm:spec_decode_num_drafts_total")
    draft_tokens = _delta(before, after, "vllm:spec_decode_num_draft_tokens_total")
    accepted = _delta(before, after, "vllm:spec_decode_num_accepted_tokens_total")
    if accepted is not None and drafts:
        out["spec_accept_len"] = 1.0 + accepted / drafts  # tokens per step, the bonus token included
    if accepted is not None and draft_tokens:
        out["spec_accept_rate"] = accepted / draft_tokens
    step_tokens = _delta(before, after, "vllm:iteration_tokens_total_sum")
    steps = _delta(before, after, "vllm:iteration_tokens_total_count")
    if step_tokens is not None and steps:
        out["tokens_per_step"] = step_tokens / steps
    return out
