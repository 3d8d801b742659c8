"""The tail and prefill test (kind ``tail``): N sequential requests that no cache can flatter.

Issue 13's 004 story: a prefill harness that reused one prompt reported 25K-80K tok/s, all of it
from the prefix cache; and a tail test (100 sequential requests) found an 11.5 s p99 TTFT that a
throughput sweep hid. This instrument sends ``requests`` prompts one at a time (concurrency 1), a
fixed size, greedy, through the engine-neutral OpenAI client ``vllm bench serve``. Its random
dataset draws every prompt's tokens afresh, so each prompt differs from the others from its first
token: the nonce sits in the first cache block. ``cache_busting: false`` instead gives every prompt
one shared prefix (all but its last tokens): the flattered harness, kept to show the refusal.

The runner reads the server's prefix-cache counters before and after (``server_metrics``); when the
cache served more than ``max_cache_hit_rate`` of the prompt tokens the point is flattered and
``flattery`` says so: it is recorded as a refused point, never as a number a verdict can use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from recipe_ledger.engines.base import ServerCommand
from recipe_ledger.instruments import base, vllm_bench
from recipe_ledger.instruments.base import (
    InstrumentKind,
    InstrumentSpec,
    MeasureContext,
    Measurement,
    PointRun,
)

NAME = "tail"
OPTIONS_HINT = "docs/instruments.md lists the tail test's options"


class TailOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    requests: int = Field(default=100, ge=2, description="Sequential requests (004: 100).")
    # Long enough for whole cache blocks: vLLM's CPU build caches in blocks of 128 tokens, and a
    # shorter prompt would leave even the flattered harness nothing to hit.
    input_len: int = Field(default=512, ge=2, description="Prompt tokens, the same for every request.")
    output_len: int = Field(default=32, ge=2, description="Generated tokens (ignore_eos: exactly these).")
    cache_busting: bool = Field(default=True, description="false: one shared prefix, to be refused.")
    max_cache_hit_rate: float = Field(
        default=0.05,
        ge=0,
        lt=1,
        description="Prefix-cache share of prompt tokens above which it is flattered.",
    )


def parse_options(options: Mapping[str, Any], instrument: str = NAME) -> TailOptions:
    return base.parse_options(TailOptions, options, instrument, OPTIONS_HINT)


def bench_options(options: TailOptions) -> dict[str, Any]:
    """The client's options: sequential, fixed size, greedy; cache busting or its deliberate absence."""
    shared_prefix = 0 if options.cache_busting else options.input_len - 1
    return {
        "backend": "openai",
        "endpoint": "/v1/completions",
        "dataset_name": "random",
        "random_input_len": options.input_len - shared_prefix,
        "random_prefix_len": shared_prefix,
        "random_range_ratio": 0.0,  # every prompt exactly input_len tokens
        "random_output_len": options.output_len,
        "num_prompts": options.requests,
        "ignore_eos": True,
        "temperature": 0,
        "request_rate": "inf",
        "metric_percentiles": "50,90,99",
        "percentile_metrics": "ttft,tpot,itl,e2el",
    }


def derived(metrics: dict[str, float], options: TailOptions) -> dict[str, float]:
    """Decode-only and prefill speeds of one stream: 1000 / TPOT, and prompt tokens / TTFT (the
    median request's, so a compile stall at the tail does not hide in the mean)."""
    out = {}
    if metrics.get("tpot_ms_p50"):
        out["decode_tps_per_stream"] = 1000.0 / metrics["tpot_ms_p50"]
    if metrics.get("ttft_ms_p50"):
        out["prefill_tps"] = options.input_len / (metrics["ttft_ms_p50"] / 1000.0)
    return out


def measure(
    vllm_bin: str,
    options: Mapping[str, Any],
    ctx: MeasureContext,
    *,
    env: dict[str, str],
    timeout_s: float = 1800,
) -> Measurement:
    """One tail test: ``requests`` prompts at concurrency 1, whatever the point says."""
    parsed = parse_options(options)
    sequential = dataclasses.replace(ctx, concurrency=1)
    measurement = vllm_bench.measure(
        vllm_bin, bench_options(parsed), sequential, env=env, timeout_s=timeout_s
    )
    measurement.metrics.update(derived(measurement.metrics, parsed))
    measurement.instrument = NAME
    measurement.context = ctx
    measurement.facts["cache_busting"] = "on" if parsed.cache_busting else "off"
    return measurement


def allowed_hit_rate(options: TailOptions) -> float:
    """The hit rate a cache-busted point may show. ``vllm bench serve`` sends its first prompt once
    before measuring ("initial single prompt test run"), so the first measured request finds its
    own prompt cached: up to one prompt in ``requests + 1`` is the client's doing, not flattery."""
    return options.max_cache_hit_rate + 1.0 / (options.requests + 1)


def flattery(options: Mapping[str, Any], server: Mapping[str, float]) -> str | None:
    """Why a point is flattered by the prefix cache (the counters' hit rate over the point), or None.
    Without counters nothing can be said, and the point stands on the cache busting alone."""
    parsed = parse_options(options)
    hit_rate = server.get("prefix_cache_hit_rate")
    allowed = allowed_hit_rate(parsed)
    if hit_rate is None or hit_rate <= allowed:
        return None
    return (
        f"flattered: the prefix cache served {hit_rate * 100:.0f}% of prompt tokens (more than "
        f"{allowed * 100:.1f}%); cache busting {'on' if parsed.cache_busting else 'off'}: "
        "its prefill and TTFT are not comparable"
    )


class Tail(InstrumentKind):
    kind = NAME
    client = "vllm bench serve"  # sequential, through the OpenAI completions backend: either engine
    summary = "sequential cache-busted requests: TTFT tail and prefill rate"
    options_model = TailOptions
    options_hint = OPTIONS_HINT
    extra_summary_metrics = ("ttft_ms_p90", "ttft_ms_p99", "e2el_ms_p99", "prefill_tps")

    def check_arm(self, spec: InstrumentSpec, arm: str, engine: str, command: ServerCommand) -> None:
        base.refuse_schema_only_engine(spec, arm, engine, self.client, vllm_bench.NON_SCHEMA_FIELDS)

    def measure(self, run: PointRun) -> Measurement:
        return measure(run.clients.vllm_bin, run.spec.options, run.ctx, env=run.client_env)

    def refusals(self, options: Mapping[str, Any], server_side: Mapping[str, float]) -> str | None:
        return flattery(options, server_side)


INSTRUMENT = Tail()
