"""``openai_bench``: the tool's own streaming client, for any OpenAI-compatible server.

One client process per point and repeat (``openai_bench_client``, standard library only), at the
point's concurrency, the repeat's seed shared by control and candidate. It exists for the servers
the engines' clients cannot measure as they are: ``transformers serve`` validates requests
against OpenAI's schema and answers 422 to SGLang's ``ignore_eos`` and vLLM's completions
``repetition_penalty``; and for boxes where neither client can be installed (the lent H200 has no
vLLM or SGLang, and carrying SGLang's 39 MB wheel for one module does not fit a call). It reports
the metrics under the names every speed instrument uses (``recipe_ledger.metrics``), computed here
from its raw per-request file by ``summarize``, which is pure:

- ``output_tps_total``: output tokens of the completed requests over the wall time from the first
  request sent to the last one done; ``total_tps`` with prompt tokens too; ``request_rps``;
- ``ttft_ms_*``: time to the first chunk with text; ``e2el_ms_*``: the whole request;
  ``itl_ms_*``: the gaps between text chunks; ``tpot_ms_*``: per request, the time after the first
  token over the tokens after it; ``decode_tps_per_stream`` = 1000 / ``tpot_ms_p50``;
- ``completed``, ``failed``; tokens are the server's ``usage`` counts (a chunk per token where a
  server sends no usage). A request that answered 200 with tokens in its usage but streamed no text
  (a few byte fragments a streamer held back) is completed: its tokens count, its latencies do not.

Percentiles are linear between order statistics (numpy's default). What differs from
``vllm bench serve``: no ``ignore_eos`` (outside the schema), so a request may stop early and its
tokens are counted as they came; prompts are words, not token ids (``usage.prompt_tokens`` says how
many tokens they made); no request rate (requests are sent as fast as the concurrency allows).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from recipe_ledger.instruments import base
from recipe_ledger.instruments.base import (
    InstrumentError,
    InstrumentKind,
    MeasureContext,
    Measurement,
    PointRun,
    run_client,
    sha256_file,
)

NAME = "openai_bench"
CLIENT_MODULE = "recipe_ledger.instruments.openai_bench_client"
# The client's identity in a result: its protocol and statistics, versioned by hand (it ships
# with the tool; a change in what it sends or how it counts is a new instrument version).
VERSION = "openai_bench 1"
OPTIONS_HINT = "docs/instruments.md lists openai_bench's options"
_STATS = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0))


class OpenAIBenchOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    endpoint: Literal["/v1/completions", "/v1/chat/completions"] = Field(
        default="/v1/completions", description="Which OpenAI endpoint the requests go to (streamed)."
    )
    num_prompts: int = Field(default=32, ge=1, le=100_000, description="Requests per point.")
    input_len: int = Field(default=128, ge=1, le=100_000, description="Words per prompt.")
    output_len: int = Field(default=64, ge=1, le=100_000, description="max_tokens of every request.")
    warmup_requests: int = Field(default=1, ge=0, le=100, description="Untimed requests first.")
    request_timeout_s: float = Field(default=600.0, gt=0, description="Per request.")
    send_model: bool = Field(
        default=True, description="Name the served model in each request (false: the server's own)."
    )


def parse_options(options: Mapping[str, Any], instrument: str = NAME) -> OpenAIBenchOptions:
    return base.parse_options(OpenAIBenchOptions, options, instrument, OPTIONS_HINT)


def build_argv(
    python_bin: str, options: OpenAIBenchOptions, ctx: MeasureContext, result_file: str
) -> list[str]:
    argv = [python_bin, "-m", CLIENT_MODULE, "--base-url", str(ctx.base_url), "--output", result_file]
    if options.send_model and ctx.model_name:
        argv += ["--model", ctx.model_name]
    return argv + [
        "--endpoint",
        options.endpoint,
        "--num-prompts",
        str(options.num_prompts),
        "--concurrency",
        str(ctx.client_concurrency),
        "--input-words",
        str(options.input_len),
        "--output-len",
        str(options.output_len),
        "--seed",
        str(ctx.seed),
        "--warmup-requests",
        str(options.warmup_requests),
        "--timeout-s",
        str(options.request_timeout_s),
    ]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default method)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _usage_tokens(record: Mapping[str, Any], key: str) -> int | None:
    usage = record.get("usage")
    value = usage.get(key) if isinstance(usage, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def output_tokens(record: Mapping[str, Any]) -> int:
    counted = _usage_tokens(record, "completion_tokens")
    return counted if counted is not None else len(record.get("chunk_times") or ())


def _latency_stats(name: str, values_ms: Sequence[float]) -> dict[str, float]:
    if not values_ms:
        return {}
    stats = {f"{name}_ms_{suffix}": percentile(values_ms, q) for suffix, q in _STATS}
    stats[f"{name}_ms_mean"] = sum(values_ms) / len(values_ms)
    return stats


def summarize(raw: Mapping[str, Any]) -> dict[str, float]:
    """The client's raw file -> normalized metrics (names and units: recipe_ledger.metrics)."""
    records = [r for r in raw.get("requests") or () if isinstance(r, Mapping)]
    # A request is done when it answered without error and generated tokens: streamed text, or a
    # usage count alone (a short answer of byte fragments the server's streamer held back).
    done = [r for r in records if "error" not in r and output_tokens(r) > 0]
    streamed = [r for r in done if r.get("chunk_times")]
    metrics: dict[str, float] = {
        "completed": float(len(done)),
        "failed": float(int(raw.get("num_prompts", len(records))) - len(done)),
    }
    if not done:
        return metrics
    duration = max(r["end"] for r in done) - min(r["start"] for r in done)
    out_tokens = sum(output_tokens(r) for r in done)
    prompt_tokens = sum(_usage_tokens(r, "prompt_tokens") or 0 for r in done)
    metrics.update(duration_s=duration, request_rps=len(done) / duration)
    metrics.update(output_tps_total=out_tokens / duration, total_tps=(out_tokens + prompt_tokens) / duration)
    ttft = [1000.0 * (r["chunk_times"][0] - r["start"]) for r in streamed]
    e2el = [1000.0 * (r["end"] - r["start"]) for r in done]
    itl = [
        1000.0 * (b - a) for r in done for a, b in zip(r["chunk_times"], r["chunk_times"][1:], strict=False)
    ]
    tpot = [
        1000.0 * (r["chunk_times"][-1] - r["chunk_times"][0]) / (output_tokens(r) - 1)
        for r in streamed
        if output_tokens(r) > 1
    ]
    for name, values in (("ttft", ttft), ("e2el", e2el), ("itl", itl), ("tpot", tpot)):
        metrics.update(_latency_stats(name, values))
    if metrics.get("tpot_ms_p50"):
        metrics["decode_tps_per_stream"] = 1000.0 / metrics["tpot_ms_p50"]
    return metrics


def first_error(raw: Mapping[str, Any]) -> str | None:
    for record in raw.get("requests") or ():
        if isinstance(record, Mapping) and record.get("error"):
            return str(record["error"])
    return None


def measure(options: OpenAIBenchOptions, ctx: MeasureContext, *, env: dict[str, str]) -> Measurement:
    """Run one point of the sweep through the client process and read its result file."""
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    result_file = ctx.out_dir / f"{ctx.stem}.json"
    result_file.unlink(missing_ok=True)
    argv = build_argv(sys.executable, options, ctx, str(result_file))
    timeout_s = options.request_timeout_s * (options.num_prompts + options.warmup_requests)
    wall = run_client(argv, env=env, log_path=ctx.out_dir / f"{ctx.stem}.client.log", timeout_s=timeout_s)
    if not result_file.is_file():
        raise InstrumentError("openai_bench's client wrote no result file", where=str(result_file))
    raw = json.loads(result_file.read_text())
    metrics = summarize(raw)
    if metrics["completed"] <= 0:
        raise InstrumentError(
            f"no request completed at concurrency {ctx.client_concurrency} "
            f"({metrics['failed']:g} failed; the first: {first_error(raw) or 'no text streamed'})",
            where=str(result_file),
            hint="read the server log of this launch",
        )
    return Measurement(NAME, VERSION, ctx, metrics, result_file, sha256_file(result_file), wall, argv)


class OpenAIBench(InstrumentKind):
    kind = NAME
    client = "openai_bench (the tool's own OpenAI client)"
    summary = "streamed OpenAI-schema requests from the tool's own client, one run per point"
    options_model = OpenAIBenchOptions
    options_hint = OPTIONS_HINT

    def measure(self, run: PointRun) -> Measurement:
        return measure(parse_options(run.spec.options, run.spec.name), run.ctx, env=run.client_env)


INSTRUMENT = OpenAIBench()
