"""The server's own counters (Prometheus ``/metrics``), read before and after a sweep point.

Counters only ever grow, so the difference between two scrapes is what that point did: how many
prompt tokens hit the prefix cache, how many draft tokens speculation proposed and how many were
accepted, how many tokens each engine step processed.
"""

from __future__ import annotations

import json
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


def derive(before: Samples | None, after: Samples | None, engine: str = "vllm") -> dict[str, float]:
    """Normalized server-side metrics for the interval between two scrapes, the engine's way."""
    if before is None or after is None:
        return {}
    if engine == "sglang":
        return _derive_sglang(before, after)
    return _derive_vllm(before, after)


def _derive_vllm(before: Samples, after: Samples) -> dict[str, float]:
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


def _derive_sglang(before: Samples, after: Samples) -> dict[str, float]:
    """SGLang's counters (``sglang:*``, with ``--enable-metrics``) into the vLLM names.

    ``prompt_tokens_total`` counts every prompt token of a finished request, cached or not, and
    ``cached_tokens_total`` (summed over its cache_source labels) those served from the radix
    cache: their ratio is vLLM's hits / queries. Each verification step of speculative decoding
    emits the accepted drafts plus the bonus token, so generated tokens / verify calls is vLLM's
    ``1 + accepted / drafts`` (up to the first token of each request, which prefill makes: SGLang's
    own per-request accept length counts it the same way). SGLang has no counter of proposed draft
    tokens or of tokens per step: ``spec_accept_rate`` and ``tokens_per_step`` stay absent (its
    ``spec_accept_rate`` gauge is the last batch's, not the point's).
    """
    out: dict[str, float] = {}
    cached = _delta(before, after, "sglang:cached_tokens_total")
    prompt = _delta(before, after, "sglang:prompt_tokens_total")
    if prompt:
        out["prefix_cache_hit_rate"] = (cached or 0.0) / prompt  # no cached series yet: nothing hit
    generated = _delta(before, after, "sglang:generation_tokens_total")
    verify_calls = _delta(before, after, "sglang:spec_verify_calls_total")
    if generated is not None and verify_calls:
        out["spec_accept_len"] = generated / verify_calls
    return out


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


def point_metrics(
    before: Samples | None, after: Samples | None, base_url: str | None, engine: str = "vllm"
) -> dict[str, float]:
    """What the server says about one point: the counters' differences, and for SGLang the accept
    length of its /server_info where the counters have none (it averages since launch, and a
    launch serves one arm and repeat)."""
    out = derive(before, after, engine)
    if engine == "sglang" and base_url and "spec_accept_len" not in out:
        reported = server_info_accept_length(base_url)
        if reported is not None:
            out["spec_accept_len"] = reported
    return out
