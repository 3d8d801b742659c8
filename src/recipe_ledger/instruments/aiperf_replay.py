"""``aiperf profile`` replaying agent sessions (kind ``aiperf_replay``): the workload users care about.

A trace (a user's file, or one the seeded generator in ``replay_trace`` writes per repeat) is
replayed through AIPerf's multi-turn mooncake loader against the server's chat endpoint, with a
number of sessions in flight (the point's concurrency) or on the trace's own fixed schedule.

A replay is a loose instrument (issue 13's 000 story: an overnight replay "won" and three reruns
took it back), so besides its numbers it reports whether the run was the one intended: AIPerf's
errors and context overflows, every request of the trace completed, and the prefix cache's
achieved reuse against what the trace could give. A run that fails them is a failed point
(an InstrumentError), never a number.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from recipe_ledger.engines import vllm as vllm_engine
from recipe_ledger.errors import InputError
from recipe_ledger.instruments import base, server_metrics
from recipe_ledger.instruments.base import (
    InstrumentError,
    InstrumentKind,
    InstrumentSpec,
    InvalidPoint,
    MeasureContext,
    Measurement,
    PointRun,
    run_client,
    sha256_file,
    venv_distribution_version,
)
from recipe_ledger.instruments.replay_trace import (
    SessionShape,
    TraceSummary,
    block_size_for,
    check_fits_context,
    generate_sessions,
    read_trace,
    summarize,
    write_trace,
)

NAME = "aiperf_replay"
SETUP_HINT = "scripts/setup_aiperf_venv.sh  (or ./dev serve-setup)"
OPTIONS_HINT = "docs/instruments.md lists the replay's options"


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class GenerateOptions(BaseModel):
    """The synthetic sessions' shape (``replay_trace.SessionShape``); the seed is the repeat's.
    Not strict: YAML has no tuples, and its two-item lists are the ranges."""

    model_config = ConfigDict(extra="forbid")

    sessions: int = Field(default=4, ge=1)
    turns: int = Field(default=24, ge=1)
    system_tokens: int = Field(default=256, ge=1)
    user_tokens: int = Field(default=48, ge=1)
    tool_result_tokens: tuple[int, int] = (16, 96)
    output_tokens: tuple[int, int] = (8, 48)
    think_ms: tuple[int, int] = (50, 400)


class ReplayOptions(_Closed):
    """An ``aiperf_replay`` instrument's options (experiment YAML ``options:``)."""

    trace: str | None = Field(default=None, description="A trace file (repo-relative); default: generate.")
    generate: GenerateOptions = Field(default_factory=GenerateOptions)
    block_size: int | None = Field(
        default=None,
        ge=1,
        description="Tokens per hash id (AIPerf --isl-block-size); default: the trace's own (the one "
        "size at which its hash ids tile every input), else 64.",
    )
    schedule: Literal["sessions", "fixed"] = Field(
        default="sessions",
        description="sessions: the point's concurrency in flight, think times honoured; "
        "fixed: the trace's own timestamps (--fixed-schedule).",
    )
    endpoint_type: Literal["chat", "completions"] = "chat"  # multi-turn sessions need chat
    ignore_eos: bool = True  # answers as long as the trace says, not as the random model stops
    max_error_rate: float = Field(default=0.0, ge=0, lt=1, description="Failed requests allowed.")
    min_cache_reuse: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="The prefix cache's achieved reuse must be at least this share of what the "
        "trace could give; a replay whose sessions did not share is not the workload.",
    )
    extra_args: list[str] = Field(default_factory=list, description="More aiperf profile flags.")


def parse_options(options: Mapping[str, Any], instrument: str = NAME) -> ReplayOptions:
    return base.parse_options(ReplayOptions, options, instrument, OPTIONS_HINT)


def find_aiperf(repo: Path) -> str:
    """AIPerf's CLI: $RECIPE_LEDGER_AIPERF, the project's .venv-aiperf, then PATH."""
    override = os.environ.get("RECIPE_LEDGER_AIPERF")
    if override:
        return override
    local = repo / ".venv-aiperf" / "bin" / "aiperf"
    if local.is_file():
        return str(local)
    return shutil.which("aiperf") or str(local)


def require_aiperf(aiperf_bin: str) -> None:
    if not (Path(aiperf_bin).is_file() and os.access(aiperf_bin, os.X_OK)) and not shutil.which(aiperf_bin):
        raise InputError(f"AIPerf is not installed (no {aiperf_bin})", hint=SETUP_HINT)


def client_version(aiperf_bin: str) -> str:
    found = venv_distribution_version(Path(aiperf_bin).resolve(), "aiperf")
    return f"aiperf {found or 'unknown'}"


def user_trace(options: ReplayOptions, repo: Path) -> tuple[Path, TraceSummary] | None:
    """The user's trace, read and summarized (a bad line is an InputError naming file:line)."""
    if options.trace is None:
        return None
    path = (repo / options.trace).resolve()
    requests = read_trace(path)
    block_size = block_size_for(path, requests, options.block_size)
    if options.schedule == "fixed":
        missing = next((i for i, r in enumerate(requests, 1) if r.timestamp_ms is None), None)
        if missing is not None:
            raise InputError(
                "schedule: fixed needs a timestamp on every line",
                where=f"{path}:{missing}",
                hint="add timestamps or use schedule: sessions",
            )
    return path, summarize(requests, block_size)


def check_before_launch(options: Mapping[str, Any], repo: Path, max_model_len: int | None, name: str) -> None:
    """What can be refused before any launch: the options, the trace's lines, its size against the
    model's context (when the arm's command names one)."""
    parsed = parse_options(options, name)
    trace = user_trace(parsed, repo)
    if trace is None:
        path = Path(f"<generated by instrument {name}>")
        summary = summarize(list(generate_sessions(_shape(parsed), 0)), _shape(parsed).block_size)
    else:
        path, summary = trace
    if max_model_len is not None:
        check_fits_context(path, summary, max_model_len)


def _shape(options: ReplayOptions) -> SessionShape:
    return SessionShape(**options.generate.model_dump(), block_size=options.block_size or 64)


def prepare_trace(options: ReplayOptions, ctx: MeasureContext, repo: Path) -> tuple[Path, TraceSummary]:
    """The trace this point replays: the user's file, or sessions generated from the repeat's seed
    (the same for every arm at a repeat: paired; different across repeats: no cache carried over)."""
    given = user_trace(options, repo)
    if given is not None:
        return given
    path = ctx.out_dir / f"{ctx.stem}.trace.jsonl"
    write_trace(path, generate_sessions(_shape(options), ctx.seed))
    return path, summarize(read_trace(path), _shape(options).block_size)


def server_max_model_len(base_url: str | None, timeout_s: float = 5.0) -> int | None:
    """The served model's context from the OpenAI /v1/models answer (vLLM's ``max_model_len``)."""
    if not base_url:
        return None
    try:
        with urllib.request.urlopen(f"{base_url}/v1/models", timeout=timeout_s) as response:
            models = json.loads(response.read().decode("utf-8", "replace")).get("data") or []
    except (OSError, ValueError, AttributeError):
        return None
    lengths = [m.get("max_model_len") for m in models if isinstance(m, dict)]
    return next((int(n) for n in lengths if isinstance(n, int) and n > 0), None)


def build_argv(
    aiperf_bin: str,
    options: ReplayOptions,
    ctx: MeasureContext,
    trace: Path,
    summary: TraceSummary,
    artifact_dir: Path,
) -> list[str]:
    argv = [
        aiperf_bin,
        "profile",
        "--model",
        str(ctx.model_name),
        "--url",
        str(ctx.base_url),
        "--endpoint-type",
        options.endpoint_type,
        "--streaming",
        "--input-file",
        str(trace),
        "--custom-dataset-type",
        "mooncake_trace",
        "--isl-block-size",
        str(summary.block_size),
        "--num-sessions",
        str(summary.sessions),
        "--random-seed",
        str(ctx.seed),
        "--artifact-dir",
        str(artifact_dir),
        "--ui",
        "none",
        "--no-server-metrics",  # the runner reads the server's counters itself, around the point
        "--no-gpu-telemetry",
    ]
    if options.schedule == "fixed":
        argv.append("--fixed-schedule")
    else:
        argv += ["--concurrency", str(ctx.client_concurrency)]
    if options.ignore_eos:
        argv += ["--extra-inputs", "ignore_eos:true"]
    return argv + list(options.extra_args)


# AIPerf's profile_export_aiperf.json -> normalized names (recipe_ledger.metrics).
_LATENCIES = {"time_to_first_token": "ttft", "inter_token_latency": "tpot", "request_latency": "e2el"}
_STATS = {"p50": "p50", "p90": "p90", "p99": "p99", "avg": "mean"}
_TOTALS = {
    "output_token_throughput": "output_tps_total",
    "total_token_throughput": "total_tps",
    "request_throughput": "request_rps",
    "completed_request_count": "completed",
    "error_request_count": "failed",
    "benchmark_duration": "duration_s",
    "context_overflow_count": "context_overflows",
}


def normalize(raw: dict[str, Any]) -> dict[str, float]:
    metrics: dict[str, float] = {}
    for key, name in _LATENCIES.items():
        for stat, suffix in _STATS.items():
            value = (raw.get(key) or {}).get(stat)
            if isinstance(value, (int, float)):
                metrics[f"{name}_ms_{suffix}"] = float(value)
    for key, name in _TOTALS.items():
        value = (raw.get(key) or {}).get("avg")
        if isinstance(value, (int, float)):
            metrics[name] = float(value)
    metrics.setdefault("failed", 0.0)  # AIPerf leaves the count out when nothing failed
    metrics.setdefault("context_overflows", 0.0)
    if metrics.get("tpot_ms_p50"):
        metrics["decode_tps_per_stream"] = 1000.0 / metrics["tpot_ms_p50"]
    return metrics


def validity_problems(
    raw: dict[str, Any],
    metrics: dict[str, float],
    summary: TraceSummary,
    achieved_reuse: float | None,
    options: ReplayOptions,
) -> list[str]:
    """Why this replay is not the intended workload, in words; empty when it is."""
    problems = []
    if raw.get("was_cancelled") or raw.get("is_complete") is False:
        problems.append("AIPerf did not complete the benchmark")
    errors = [
        f"{e.get('count')} x {(e.get('error_details') or {}).get('message')}"
        for e in raw.get("error_summary") or []
    ]
    # AIPerf's completed count includes the requests that failed: the trace's size is the total.
    total = float(summary.requests) or metrics.get("completed", 0.0)
    if total and metrics["failed"] / total > options.max_error_rate:
        problems.append(f"{metrics['failed']:g} of {total:g} requests failed ({'; '.join(errors)[:300]})")
    if metrics.get("context_overflows", 0.0) > 0:
        problems.append(f"{metrics['context_overflows']:g} requests overflowed the model's context")
    if metrics.get("completed", 0.0) < summary.requests and not problems:
        completed = metrics.get("completed", 0.0)
        problems.append(f"{completed:g} of the trace's {summary.requests} requests completed")
    expected = summary.expected_cache_reuse
    if achieved_reuse is not None and expected > 0 and achieved_reuse < options.min_cache_reuse * expected:
        problems.append(
            f"the prefix cache served {achieved_reuse * 100:.0f}% of prompt tokens where the trace allows "
            f"{expected * 100:.0f}% (below the {options.min_cache_reuse:.0%} of it this replay requires)"
        )
    return problems


HUB_NAME = "recipe-ledger/local-tokenizer"
_SNAPSHOT = "0" * 40


def hub_view(tokenizer_dir: Path, cache_root: Path) -> str:
    """A Hugging Face cache under ``cache_root`` whose one model is ``tokenizer_dir``; its hub name.

    AIPerf 0.13 decodes prompts in worker processes that force HF_HUB_OFFLINE=1, and in offline
    mode it resolves a tokenizer only as a hub id in the cache (a local directory fails with
    HFValidationError: seen here on the first tiny-replay runs, failure entries d30f3d364976 and
    8bc35569d648). Links into the directory under a cache layout make the same files a cached hub
    model, loadable offline by every AIPerf process."""
    model = cache_root / ("models--" + HUB_NAME.replace("/", "--"))
    snapshot = model / "snapshots" / _SNAPSHOT
    snapshot.mkdir(parents=True, exist_ok=True)
    (model / "refs").mkdir(exist_ok=True)
    (model / "refs" / "main").write_text(_SNAPSHOT)
    for file in tokenizer_dir.resolve().iterdir():
        link = snapshot / file.name
        if file.is_file() and not link.exists():
            link.symlink_to(file)
    return HUB_NAME


def tokenizer_args(tokenizer: str | None, cache_root: Path) -> tuple[list[str], dict[str, str]]:
    """``--tokenizer`` and the environment AIPerf needs to load it offline in every process."""
    if not tokenizer:
        return [], {}
    if Path(tokenizer).is_dir():
        name = hub_view(Path(tokenizer), cache_root)
        return ["--tokenizer", name], {"HF_HUB_CACHE": str(cache_root), "HF_HUB_OFFLINE": "1"}
    return ["--tokenizer", tokenizer], {}


def measure(
    aiperf_bin: str,
    options: Mapping[str, Any],
    ctx: MeasureContext,
    *,
    env: dict[str, str],
    repo: Path,
    timeout_s: float = 1800,
) -> Measurement:
    """Replay one point; its numbers only when AIPerf's validity signals say it was the workload."""
    require_aiperf(aiperf_bin)
    parsed = parse_options(options)
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    trace, summary = prepare_trace(parsed, ctx, repo)
    context = server_max_model_len(ctx.base_url)
    if context is not None:
        check_fits_context(trace, summary, context)
    artifact_dir = ctx.out_dir / f"{ctx.stem}.aiperf"
    shutil.rmtree(artifact_dir, ignore_errors=True)
    argv = build_argv(aiperf_bin, parsed, ctx, trace, summary, artifact_dir)
    before = server_metrics.scrape(ctx.base_url) if ctx.base_url else None
    log = ctx.out_dir / f"{ctx.stem}.client.log"
    with tempfile.TemporaryDirectory(prefix="aiperf-hub-") as hub:
        extra_argv, extra_env = tokenizer_args(ctx.tokenizer, Path(hub))
        wall = run_client(argv + extra_argv, env={**env, **extra_env}, log_path=log, timeout_s=timeout_s)
    after = server_metrics.scrape(ctx.base_url) if ctx.base_url else None
    result_file = artifact_dir / "profile_export_aiperf.json"
    if not result_file.is_file():
        raise InstrumentError("aiperf wrote no profile_export_aiperf.json", where=str(artifact_dir))
    raw = json.loads(result_file.read_text())
    metrics = normalize(raw)
    # vLLM's counters whatever the arm's engine, as before engines were objects: the measure
    # context does not name the engine (an SGLang arm's achieved reuse reads as absent).
    achieved = server_metrics.derive(before, after, vllm_engine.ENGINE).get("prefix_cache_hit_rate")
    problems = validity_problems(raw, metrics, summary, achieved, parsed)
    if problems:
        raise InvalidPoint(
            f"replay at concurrency {ctx.client_concurrency} is not valid: " + "; ".join(problems),
            where=str(result_file),
            hint=f"read {artifact_dir}/logs/aiperf.log",
        )
    metrics["cache_reuse_expected"] = summary.expected_cache_reuse
    if achieved is not None:
        metrics["cache_reuse_achieved"] = achieved
    facts = {
        "trace_sha256": sha256_file(trace),
        "trace": str(trace.relative_to(repo)) if trace.is_relative_to(repo) else trace.name,
        "trace_requests": str(summary.requests),
        "trace_sessions": str(summary.sessions),
        "aiperf_options": " ".join(argv[2:]),
    }
    return Measurement(
        NAME,
        client_version(aiperf_bin),
        ctx,
        metrics,
        result_file,
        sha256_file(result_file),
        wall,
        argv,
        facts,
    )


class AiperfReplay(InstrumentKind):
    kind = NAME
    client = "aiperf"
    summary = "a multi-turn trace replayed through AIPerf"
    options_model = ReplayOptions
    options_hint = OPTIONS_HINT
    extra_summary_metrics = (
        "ttft_ms_p90",
        "ttft_ms_p99",
        "e2el_ms_p99",
        "cache_reuse_expected",
        "cache_reuse_achieved",
    )

    def check_before_launch(self, spec: InstrumentSpec, repo: Path, max_model_len: int | None) -> None:
        """The options, the trace against the smallest context, and AIPerf installed: all before
        any launch (a missing client found after the first boot costs a boot)."""
        check_before_launch(spec.options, repo, max_model_len, spec.name)
        require_aiperf(find_aiperf(repo))

    def plan_notes(self, spec: InstrumentSpec, repo: Path) -> list[str]:
        parsed = parse_options(spec.options, spec.name)
        trace = user_trace(parsed, repo)
        if trace is None:
            shape = _shape(parsed)
            summary = summarize(list(generate_sessions(shape, 0)), shape.block_size)
            return [f"instrument {spec.name}: a generated trace per repeat: {summary.for_people()}"]
        path, summary = trace
        shown = path.relative_to(repo) if path.is_relative_to(repo) else path
        return [f"instrument {spec.name}: trace {shown}: {summary.for_people()}"]

    def measure(self, run: PointRun) -> Measurement:
        return measure(run.clients.aiperf_bin, run.spec.options, run.ctx, env=run.client_env, repo=run.repo)


INSTRUMENT = AiperfReplay()
