"""``aiperf profile`` replaying agent sessions (kind ``aiperf_replay``): the workload users care about.

A trace (a user's file, or one the seeded generator in ``replay_trace`` writes per repeat) is
replayed through AIPerf's multi-turn mooncake loader against the server's chat endpoint, with a
number of sessions in flight (the point's concurrency) or on the trace's own fixed schedule. Or,
instead of a trace, one of AIPerf's public datasets (``aiperf_datasets``: found on this box before
any launch); a run bounded by a benchmark duration rather than its requests; AIPerf's agentic
replay (its ``inferencex-agentx-mvp`` scenario over a Weka trajectory corpus).

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

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from recipe_ledger.engines import vllm as vllm_engine
from recipe_ledger.errors import InputError
from recipe_ledger.instruments import aiperf_datasets, base, server_metrics
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


# AIPerf 0.13.0's one agentic scenario (aiperf/common/scenario/inferencex_agentx_mvp.py): its lock
# (aiperf/common/scenario/validator.py) refuses at start-up, after the server's boot, what the
# rules below refuse when the experiment is loaded. tests/unit/test_replay_aiperf_options.py reads
# the installed file and fails when these drift from it.
AGENTX: Literal["inferencex-agentx-mvp"] = "inferencex-agentx-mvp"
AGENTX_MIN_DURATION_S = 900  # min_benchmark_duration_seconds: "to reach steady state"
AGENTX_DEFAULT_DURATION_S = 1800  # default_benchmark_duration_seconds: what it fills in when unset
# Its require_loader, less weka_trace (a local directory, not a public dataset) and weka_hf (needs
# --hf-weka-dataset, which the replay does not pass: semianalysis_cc_traces_weka_062126 is the
# same corpus by name).
AGENTX_DATASETS = (
    "semianalysis_cc_traces_weka_with_subagents",
    "semianalysis_cc_traces_weka_with_subagents_256k",
    "semianalysis_cc_traces_weka_with_subagents_060226",
    "semianalysis_cc_traces_weka_with_subagents_060226_256k",
    "semianalysis_cc_traces_weka_with_subagents_060526",
    "semianalysis_cc_traces_weka_with_subagents_060526_256k",
    "semianalysis_cc_traces_weka_with_subagents_060826",
    "semianalysis_cc_traces_weka_with_subagents_060826_256k",
    "semianalysis_cc_traces_weka_061326",
    "semianalysis_cc_traces_weka_061326_256k",
    "semianalysis_cc_traces_weka_061526",
    "semianalysis_cc_traces_weka_061526_256k",
    "semianalysis_cc_traces_weka_062126",
    "semianalysis_cc_traces_weka_062126_256k",
)
AIPERF_GRACE_S = 30.0  # --benchmark-grace-period's default in AIPerf 0.13.0


def _refuse(kind: str, message: str) -> PydanticCustomError:
    return PydanticCustomError(kind, message)


class AgenticOptions(_Closed):
    """AIPerf's agentic replay: ``--scenario inferencex-agentx-mvp`` locks its AGENTIC_REPLAY
    timing (each trajectory of a Weka corpus replayed from a random start, its recorded delays
    kept, a synthesized warm-up before profiling) and its invariants (streaming, ignore_eos, a
    cache-bust marker per trajectory, at least 900 s). Only AIPerf's flags that this scenario reads."""

    scenario: Literal["inferencex-agentx-mvp"] = Field(
        default=AGENTX, description="AIPerf's scenario (--scenario); AIPerf 0.13.0 has this one."
    )
    trajectory_start_min_ratio: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="--trajectory-start-min-ratio: the earliest start in a trajectory, as a share of "
        "its turns (the scenario's default 0).",
    )
    trajectory_start_max_ratio: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="--trajectory-start-max-ratio: the latest start (the scenario's default 1).",
    )
    burst_phase_starts: bool = Field(
        default=False,
        description="--burst-phase-starts: each phase's first requests together, not spread by "
        "their recorded offsets.",
    )
    cache_warmup_duration_s: float | None = Field(
        default=None,
        gt=0,
        description="--agentic-cache-warmup-duration: more warm-up after the trajectory warm-up "
        "(no idle delays, one-token answers), added to a launch's cost.",
    )
    warmup_grace_period_s: float | None = Field(
        default=None,
        ge=0,
        description="--agentic-warmup-grace-period: how long the warm-up waits for its priming "
        "requests (AIPerf: until all return).",
    )
    allow_dataset_wrap: bool = Field(
        default=False,
        description="--allow-dataset-wrap: reuse trajectories when the concurrency exceeds the corpus.",
    )

    @field_validator("trajectory_start_max_ratio")
    @classmethod
    def _start_range(cls, value: float | None, info: ValidationInfo) -> float | None:
        low = info.data.get("trajectory_start_min_ratio")
        if value is not None and low is not None and low > value:
            raise _refuse("start_range", f"{value} is below trajectory_start_min_ratio {low}")
        return value


class ReplayOptions(_Closed):
    """An ``aiperf_replay`` instrument's options (experiment YAML ``options:``).

    What is replayed is one of: ``trace`` (a file), ``generate`` (the default: sessions from the
    repeat's seed) or ``public_dataset``; the rules between fields are checked at load, each
    refused at its field (the fields are validated in order, so a rule sits on the later one)."""

    trace: str | None = Field(default=None, description="A trace file (repo-relative); default: generate.")
    generate: GenerateOptions | None = Field(
        default=None,
        description="The generated sessions' shape (the default when neither trace nor public_dataset "
        "is given): sessions 4, turns 24, system_tokens 256, user_tokens 48, tool_result_tokens "
        "[16, 96], output_tokens [8, 48], think_ms [50, 400].",
    )
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
    request_count: int | None = Field(
        default=None,
        ge=1,
        description="--request-count: the requests the run sends (default: a trace's run sends its "
        "trace); not with benchmark_duration_s.",
    )
    benchmark_duration_s: float | None = Field(
        default=None,
        gt=0,
        description="--benchmark-duration: the run stops issuing requests after this many seconds "
        "(a time-bounded run: the trace is cut or repeated); not with request_count.",
    )
    benchmark_grace_period_s: float | None = Field(
        default=None,
        ge=0,
        description="--benchmark-grace-period: how long answers are waited for after the duration "
        "(AIPerf's default 30); only with benchmark_duration_s.",
    )
    public_dataset: str | None = Field(
        default=None,
        description="One of AIPerf's public datasets (--public-dataset; `aiperf plugins "
        "public_dataset_loader` lists this AIPerf's), instead of a trace: not with trace, generate "
        "or block_size. It must be on this box before launch (Hugging Face ones prepared under "
        "HF_DATASETS_CACHE, HTTP ones at .cache/aiperf/datasets/<file>); needs request_count or "
        "benchmark_duration_s (a bound known before launch).",
    )
    agentic: AgenticOptions | None = Field(
        default=None,
        description="AIPerf's agentic replay (--scenario inferencex-agentx-mvp): needs a Weka "
        "public_dataset (semianalysis_cc_traces_weka_*), benchmark_duration_s >= 900 (AIPerf's "
        "default 1800, written out here: a launch's cost is in the experiment), schedule sessions, "
        "ignore_eos, the chat endpoint.",
    )
    extra_args: list[str] = Field(default_factory=list, description="More aiperf profile flags.")

    @field_validator("benchmark_duration_s")
    @classmethod
    def _one_bound(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("request_count") is not None:
            raise _refuse("two_bounds", "not with request_count: a run is bounded by one of them")
        if value is not None and info.data.get("schedule") == "fixed":
            raise _refuse(
                "duration_fixed", "not with schedule: fixed (the trace's timestamps say when it ends)"
            )
        return value

    @field_validator("benchmark_grace_period_s")
    @classmethod
    def _grace_needs_duration(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("benchmark_duration_s") is None:
            raise _refuse(
                "grace_without_duration", "only with benchmark_duration_s (AIPerf ignores it otherwise)"
            )
        return value

    @field_validator("public_dataset")
    @classmethod
    def _one_source(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        for other in ("trace", "generate", "block_size"):
            if info.data.get(other) is not None:
                raise _refuse(
                    "one_source",
                    f"a public dataset replaces the trace: leave out {other} (AIPerf builds the "
                    "prompts, and their hash-id blocks, from the dataset)",
                )
        if not value.strip():
            raise _refuse("empty", "names no dataset")
        if info.data.get("request_count") is None and info.data.get("benchmark_duration_s") is None:
            raise _refuse(
                "unbounded",
                "needs request_count or benchmark_duration_s: what a launch costs must be known before it",
            )
        return value

    @field_validator("agentic")
    @classmethod
    def _agentic_rules(cls, value: AgenticOptions | None, info: ValidationInfo) -> AgenticOptions | None:
        if value is None:
            return value
        data = info.data
        dataset = (data.get("public_dataset") or "").replace("-", "_")
        if dataset not in AGENTX_DATASETS:
            got = (
                f"public_dataset {data['public_dataset']!r}"
                if data.get("public_dataset")
                else "no public_dataset"
            )
            raise _refuse(
                "agentx_dataset",
                f"{AGENTX} replays a Weka trajectory corpus, and this has {got} (AIPerf's scenario lock "
                f"refuses it at start-up): public_dataset one of {', '.join(AGENTX_DATASETS)}",
            )
        duration = data.get("benchmark_duration_s")
        if duration is None or duration < AGENTX_MIN_DURATION_S:
            got = "none" if duration is None else f"{duration:g}"
            raise _refuse(
                "agentx_duration",
                f"{AGENTX} needs benchmark_duration_s >= {AGENTX_MIN_DURATION_S} (AIPerf's lock: to reach "
                f"steady state; its default {AGENTX_DEFAULT_DURATION_S}), got {got}",
            )
        for name, wrong, why in (
            ("schedule", "fixed", "its timing is the scenario's, not --fixed-schedule"),
            ("ignore_eos", False, "the scenario requires ignore_eos"),
            ("endpoint_type", "completions", "trajectories are multi-turn chats"),
        ):
            if data.get(name) == wrong:
                raise _refuse("agentx_" + name, f"{AGENTX} refuses {name}: {wrong} ({why})")
        return value

    @property
    def grace_s(self) -> float:
        """How long AIPerf waits for answers after the duration: the stated grace, else its default."""
        return AIPERF_GRACE_S if self.benchmark_grace_period_s is None else self.benchmark_grace_period_s

    def launch_cost_s(self) -> float | None:
        """What a duration-bounded run costs per point: duration, grace, the agentic extra warm-up
        (the trajectory warm-up before it has no fixed length); None when not duration-bounded."""
        if self.benchmark_duration_s is None:
            return None
        warmup = (self.agentic.cache_warmup_duration_s or 0.0) if self.agentic else 0.0
        return self.benchmark_duration_s + self.grace_s + warmup


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


def check_before_launch(
    options: Mapping[str, Any],
    repo: Path,
    max_model_len: int | None,
    name: str,
    aiperf_bin: str | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """What can be refused before any launch: the options; for a trace, its lines and its size
    against the model's context (when the arm's command names one); for a public dataset, that this
    AIPerf has it and that it is on this box (``env``: the client's, default this process's)."""
    parsed = parse_options(options, name)
    if parsed.public_dataset is not None:
        public_dataset(
            parsed, aiperf_bin or find_aiperf(repo), repo, os.environ if env is None else env, name
        )
        return
    trace = user_trace(parsed, repo)
    if trace is None:
        path = Path(f"<generated by instrument {name}>")
        summary = summarize(list(generate_sessions(_shape(parsed), 0)), _shape(parsed).block_size)
    else:
        path, summary = trace
    if max_model_len is not None:
        check_fits_context(path, summary, max_model_len)


def public_dataset(
    options: ReplayOptions, aiperf_bin: str, repo: Path, env: Mapping[str, str], name: str = NAME
) -> tuple[aiperf_datasets.PublicDataset, Path]:
    """The public dataset the options name, from the installed AIPerf's registry, and where it lies
    on this box; an InputError when this AIPerf has no such dataset or the box does not hold it."""
    assert options.public_dataset is not None
    where = f"instrument {name!r}: options.public_dataset"
    require_aiperf(aiperf_bin)
    registry = aiperf_datasets.registry_path(aiperf_bin)
    if registry is None:
        raise InputError(
            f"cannot find AIPerf's dataset registry ({aiperf_datasets.REGISTRY}) in the venv of {aiperf_bin}",
            where=where,
            hint=SETUP_HINT,
        )
    dataset = aiperf_datasets.lookup(aiperf_datasets.read_registry(registry), options.public_dataset, where)
    return dataset, aiperf_datasets.require_offline(dataset, repo, env, where)


def skipped_checks(options: ReplayOptions) -> str | None:
    """The trace checks this run does not make, and why, in words; None when it makes them all."""
    if options.public_dataset is not None:
        return (
            "block size against hash ids, fit in the model's context, expected prefix reuse and its "
            f"floor, every trace request completed: trace-only checks, skipped (AIPerf builds the "
            f"prompts from public dataset {options.public_dataset})"
        )
    if options.benchmark_duration_s is not None:
        return (
            "every trace request completed and the reuse floor: skipped (a duration cuts or repeats "
            "the trace)"
        )
    if options.request_count is not None:
        return "the reuse floor: skipped (request_count cuts or repeats the trace)"
    return None


def launch_note(options: ReplayOptions) -> str | None:
    """What a duration-bounded launch costs per point, for --plan."""
    cost = options.launch_cost_s()
    if cost is None or options.benchmark_duration_s is None:  # the second, for the type checker
        return None
    parts = f"benchmark_duration_s {options.benchmark_duration_s:g} + grace {options.grace_s:g}"
    if options.agentic is not None:
        warmup = options.agentic.cache_warmup_duration_s
        parts += (f" + cache warm-up {warmup:g}" if warmup else "") + ", after AIPerf's trajectory warm-up"
    return f"time-bounded: a launch costs {cost:,.0f} s per point ({parts}), plus AIPerf's start-up"


def _shape(options: ReplayOptions) -> SessionShape:
    generate = options.generate or GenerateOptions()
    return SessionShape(**generate.model_dump(), block_size=options.block_size or 64)


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
    trace: Path | None,
    summary: TraceSummary | None,
    artifact_dir: Path,
) -> list[str]:
    """``aiperf profile``'s argv: the trace (``trace``, ``summary``) or the public dataset, the
    point's load, the run's bound and the agentic scenario. Paths absolute: AIPerf runs in the
    repository (its HTTP dataset cache is relative to where it runs)."""
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
    ]
    if options.public_dataset is not None:
        argv += ["--public-dataset", options.public_dataset]  # no --input-file: AIPerf reads its own copy
    else:
        assert trace is not None and summary is not None
        argv += ["--input-file", str(trace.resolve()), "--custom-dataset-type", "mooncake_trace"]
        argv += ["--isl-block-size", str(summary.block_size), "--num-sessions", str(summary.sessions)]
    argv += [
        "--random-seed",
        str(ctx.seed),
        "--artifact-dir",
        str(artifact_dir.resolve()),
        "--ui",
        "none",
        "--no-server-metrics",  # the runner reads the server's counters itself, around the point
        "--no-gpu-telemetry",
    ]
    if options.schedule == "fixed":
        argv.append("--fixed-schedule")
    else:
        argv += ["--concurrency", str(ctx.client_concurrency)]
    if options.request_count is not None:
        argv += ["--request-count", str(options.request_count)]
    if options.benchmark_duration_s is not None:
        argv += ["--benchmark-duration", f"{options.benchmark_duration_s:g}"]
    if options.benchmark_grace_period_s is not None:
        argv += ["--benchmark-grace-period", f"{options.benchmark_grace_period_s:g}"]
    if options.agentic is not None:
        argv += agentic_args(options.agentic)
    if options.ignore_eos:
        argv += ["--extra-inputs", "ignore_eos:true"]
    return argv + list(options.extra_args)


def agentic_args(agentic: AgenticOptions) -> list[str]:
    argv = ["--scenario", agentic.scenario]
    for flag, value in (
        ("--trajectory-start-min-ratio", agentic.trajectory_start_min_ratio),
        ("--trajectory-start-max-ratio", agentic.trajectory_start_max_ratio),
        ("--agentic-cache-warmup-duration", agentic.cache_warmup_duration_s),
        ("--agentic-warmup-grace-period", agentic.warmup_grace_period_s),
    ):
        if value is not None:
            argv += [flag, f"{value:g}"]
    if agentic.burst_phase_starts:
        argv.append("--burst-phase-starts")
    if agentic.allow_dataset_wrap:
        argv.append("--allow-dataset-wrap")
    return argv


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


def expected_requests(options: ReplayOptions, summary: TraceSummary | None) -> int | None:
    """How many requests the run must complete: request_count, else the whole trace; None for a
    duration-bounded run (it sends what the time allows) or a public dataset without a count."""
    if options.benchmark_duration_s is not None:
        return None
    if options.request_count is not None:
        return options.request_count
    return summary.requests if summary is not None else None


def validity_problems(
    raw: dict[str, Any],
    metrics: dict[str, float],
    summary: TraceSummary | None,
    achieved_reuse: float | None,
    options: ReplayOptions,
) -> list[str]:
    """Why this replay is not the intended workload, in words; empty when it is. ``summary`` is the
    trace's (None for a public dataset: the checks on the trace are skipped, ``skipped_checks``)."""
    problems = []
    if raw.get("was_cancelled") or raw.get("is_complete") is False:
        problems.append("AIPerf did not complete the benchmark")
    errors = [
        f"{e.get('count')} x {(e.get('error_details') or {}).get('message')}"
        for e in raw.get("error_summary") or []
    ]
    expected = expected_requests(options, summary)
    # AIPerf's completed count includes the requests that failed: the run's size is the total.
    total = float(expected or 0) or metrics.get("completed", 0.0)
    if total and metrics["failed"] / total > options.max_error_rate:
        problems.append(f"{metrics['failed']:g} of {total:g} requests failed ({'; '.join(errors)[:300]})")
    if metrics.get("context_overflows", 0.0) > 0:
        problems.append(f"{metrics['context_overflows']:g} requests overflowed the model's context")
    completed = metrics.get("completed", 0.0)
    if expected is not None and completed < expected and not problems:
        what = "the trace's" if options.request_count is None else "request_count's"
        problems.append(f"{completed:g} of {what} {expected} requests completed")
    if summary is None or skipped_checks(options) is not None:
        return problems  # the reuse floor is the whole trace's: a cut or repeated trace has another
    ceiling = summary.expected_cache_reuse
    if achieved_reuse is not None and ceiling > 0 and achieved_reuse < options.min_cache_reuse * ceiling:
        problems.append(
            f"the prefix cache served {achieved_reuse * 100:.0f}% of prompt tokens where the trace allows "
            f"{ceiling * 100:.0f}% (below the {options.min_cache_reuse:.0%} of it this replay requires)"
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
    timeout_s: float | None = None,
) -> Measurement:
    """Replay one point; its numbers only when AIPerf's validity signals say it was the workload.
    ``timeout_s``: default 1800 s past what a duration-bounded run costs (AIPerf's start-up and
    warm-up come on top of it)."""
    require_aiperf(aiperf_bin)
    parsed = parse_options(options)
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    trace: Path | None = None
    summary: TraceSummary | None = None
    facts: dict[str, str] = {}
    client_env = dict(env)
    if parsed.public_dataset is not None:
        dataset, place = public_dataset(parsed, aiperf_bin, repo, env)
        facts = {
            "public_dataset": dataset.name,
            "dataset_source": dataset.hf_dataset or dataset.url or "",
            "dataset_place": str(place),
        }
        if dataset.hf_dataset:  # the prepared copy the check found, and no attempt at the hub
            client_env |= {"HF_DATASETS_CACHE": str(place.parent), "HF_HUB_OFFLINE": "1"}
    else:
        trace, summary = prepare_trace(parsed, ctx, repo)
        context = server_max_model_len(ctx.base_url)
        if context is not None:
            check_fits_context(trace, summary, context)
    artifact_dir = ctx.out_dir / f"{ctx.stem}.aiperf"
    shutil.rmtree(artifact_dir, ignore_errors=True)
    argv = build_argv(aiperf_bin, parsed, ctx, trace, summary, artifact_dir)
    before = server_metrics.scrape(ctx.base_url) if ctx.base_url else None
    log = ctx.out_dir / f"{ctx.stem}.client.log"
    limit = timeout_s if timeout_s is not None else 1800 + (parsed.launch_cost_s() or 0.0)
    with tempfile.TemporaryDirectory(prefix="aiperf-hub-") as hub:
        extra_argv, extra_env = tokenizer_args(ctx.tokenizer, Path(hub))
        wall = run_client(
            argv + extra_argv, env={**client_env, **extra_env}, log_path=log, timeout_s=limit, cwd=repo
        )
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
    if summary is not None:
        metrics["cache_reuse_expected"] = summary.expected_cache_reuse
    if achieved is not None:
        metrics["cache_reuse_achieved"] = achieved
    if trace is not None and summary is not None:
        facts = {
            "trace_sha256": sha256_file(trace),
            "trace": str(trace.relative_to(repo)) if trace.is_relative_to(repo) else trace.name,
            "trace_requests": str(summary.requests),
            "trace_sessions": str(summary.sessions),
        }
    skipped = skipped_checks(parsed)
    if skipped:
        facts["skipped_checks"] = skipped
    facts["aiperf_options"] = " ".join(argv[2:])
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
    summary = "a multi-turn trace (or one of AIPerf's public datasets) replayed through AIPerf"
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
        """The options, the trace against the smallest context (or the public dataset in this
        AIPerf's registry and on this box), and AIPerf installed: all before any launch (a missing
        client found after the first boot costs a boot)."""
        aiperf_bin = find_aiperf(repo)
        check_before_launch(spec.options, repo, max_model_len, spec.name, aiperf_bin)
        require_aiperf(aiperf_bin)

    def plan_notes(self, spec: InstrumentSpec, repo: Path) -> list[str]:
        parsed = parse_options(spec.options, spec.name)
        notes = [f"instrument {spec.name}: {self._workload(parsed, repo)}"]
        for extra in (launch_note(parsed), skipped_checks(parsed)):
            if extra:
                notes.append(f"instrument {spec.name}: {extra}")
        return notes

    @staticmethod
    def _workload(parsed: ReplayOptions, repo: Path) -> str:
        if parsed.public_dataset is not None:
            scenario = f", AIPerf's agentic scenario {parsed.agentic.scenario}" if parsed.agentic else ""
            count = f", {parsed.request_count} requests" if parsed.request_count else ""
            return f"public dataset {parsed.public_dataset} (AIPerf's registry{scenario}{count})"
        trace = user_trace(parsed, repo)
        if trace is None:
            shape = _shape(parsed)
            summary = summarize(list(generate_sessions(shape, 0)), shape.block_size)
            return f"a generated trace per repeat: {summary.for_people()}"
        path, summary = trace
        shown = path.relative_to(repo) if path.is_relative_to(repo) else path
        return f"trace {shown}: {summary.for_people()}"

    def measure(self, run: PointRun) -> Measurement:
        return measure(run.clients.aiperf_bin, run.spec.options, run.ctx, env=run.client_env, repo=run.repo)


INSTRUMENT = AiperfReplay()
