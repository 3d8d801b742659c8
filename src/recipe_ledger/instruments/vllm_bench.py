"""``vllm bench serve``: the default tight instrument, one client process per point and repeat.

The tool drives the sweep: one concurrency per process, a seed that differs per repeat (the
random dataset repeats for a given seed, and the prefix cache would flatter a repeated prompt
set) and is shared by control and candidate at the same repeat (paired comparisons).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

from recipe_ledger.engines.base import ServerCommand
from recipe_ledger.instruments.base import (
    InstrumentError,
    InstrumentKind,
    InstrumentSpec,
    MeasureContext,
    Measurement,
    PointRun,
    option_flags,
    refuse_schema_only_engine,
    run_client,
    sha256_file,
    venv_distribution_version,
)

NAME = "vllm_bench_serve"

# vllm bench serve's JSON keys -> normalized names.
_KEY_MAP = {
    "output_throughput": "output_tps_total",
    "total_token_throughput": "total_tps",
    "request_throughput": "request_rps",
    "completed": "completed",
    "failed": "failed",
    "duration": "duration_s",
}
_LATENCIES = ("ttft", "tpot", "itl", "e2el")
# What vllm bench serve (0.32) adds to OpenAI's schema in its requests, whatever the options say:
# its completions backends always send ``repetition_penalty``, and every OpenAI backend sets
# ``ignore_eos`` on the random datasets (benchmarks/serve.py). A server that refuses fields
# outside the schema (``Engine.openai_schema_only``) answers all of them 422.
NON_SCHEMA_FIELDS = ("repetition_penalty", "ignore_eos")
CHAT_BACKENDS = frozenset({"openai-chat"})


def non_schema_fields(options: dict[str, Any]) -> tuple[str, ...]:
    """The fields outside OpenAI's schema this client's requests carry with these options."""
    backend = str({**DEFAULT_OPTIONS, **options}["backend"])
    return ("ignore_eos",) if backend in CHAT_BACKENDS else NON_SCHEMA_FIELDS


DEFAULT_OPTIONS: dict[str, Any] = {
    "backend": "openai",
    "endpoint": "/v1/completions",
    "dataset_name": "random",
    "random_input_len": 128,
    "random_output_len": 64,
    "num_prompts": 32,
    "ignore_eos": True,
    "metric_percentiles": "50,90,99",
    "percentile_metrics": "ttft,tpot,itl,e2el",
}


def build_argv(vllm_bin: str, options: dict[str, Any], ctx: MeasureContext, result_file: Path) -> list[str]:
    """The client's argv: options become --flags (True -> bare switch), then the per-run ones."""
    merged = {**DEFAULT_OPTIONS, **options}
    argv = [vllm_bin, "bench", "serve", "--base-url", str(ctx.base_url)]
    if ctx.model_name:
        argv += ["--model", ctx.model_name]
    if ctx.tokenizer:
        argv += ["--tokenizer", ctx.tokenizer]
    return (
        argv
        + option_flags(merged)
        + [
            "--max-concurrency",
            str(ctx.client_concurrency),
            "--seed",
            str(ctx.seed),
            "--save-result",
            "--result-dir",
            str(result_file.parent),
            "--result-filename",
            result_file.name,
        ]
    )


def normalize(raw: dict[str, Any]) -> dict[str, float]:
    """vllm bench serve's result JSON -> normalized metrics (names and units: recipe_ledger.metrics)."""
    metrics: dict[str, float] = {}
    for key, name in _KEY_MAP.items():
        if isinstance(raw.get(key), (int, float)):
            metrics[name] = float(raw[key])
    for lat in _LATENCIES:
        for stat, suffix in (("median", "p50"), ("mean", "mean"), ("p90", "p90"), ("p99", "p99")):
            value = raw.get(f"{stat}_{lat}_ms")
            if isinstance(value, (int, float)):
                metrics[f"{lat}_ms_{suffix}"] = float(value)
    if metrics.get("tpot_ms_p50"):
        metrics["decode_tps_per_stream"] = 1000.0 / metrics["tpot_ms_p50"]
    return metrics


@lru_cache(maxsize=4)
def client_version(vllm_bin: str) -> str:
    """The client's version string, part of the instrument's identity (a different version is
    a different instrument: verdicts across versions are not comparable).

    ``vllm --version`` prints ``importlib.metadata.version("vllm")``; reading that metadata from the
    client's own environment gives the same string without the ~10 s of imports the command costs
    (measured on the CPU box: 6% of a four-launch run). The command stays the fallback for a client
    outside a virtual environment."""
    return (
        f"vllm {installed_version(Path(shutil.which(vllm_bin) or vllm_bin)) or _version_by_running(vllm_bin)}"
    )


def installed_version(vllm_bin: Path) -> str | None:
    """The ``vllm`` distribution's version in the virtual environment ``vllm_bin`` belongs to."""
    return venv_distribution_version(vllm_bin.resolve(), "vllm")


def _version_by_running(vllm_bin: str) -> str:
    try:
        out = subprocess.run(
            [vllm_bin, "--version"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "VLLM_TARGET_DEVICE": os.environ.get("VLLM_TARGET_DEVICE", "cpu")},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstrumentError(
            f"cannot run {vllm_bin} --version: {exc}", where=vllm_bin, hint="scripts/setup_serve_venv.sh"
        ) from None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[-1].strip() if text else "unknown"


def measure(
    vllm_bin: str,
    options: dict[str, Any],
    ctx: MeasureContext,
    *,
    env: dict[str, str],
    timeout_s: float = 1800,
) -> Measurement:
    """Run one point of the sweep and read its result file."""
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    result_file = ctx.out_dir / f"{ctx.stem}.json"
    result_file.unlink(missing_ok=True)
    argv = build_argv(vllm_bin, options, ctx, result_file)
    wall = run_client(argv, env=env, log_path=ctx.out_dir / f"{ctx.stem}.client.log", timeout_s=timeout_s)
    if not result_file.is_file():
        raise InstrumentError("vllm bench serve wrote no result file", where=str(result_file))
    raw = json.loads(result_file.read_text())
    metrics = normalize(raw)
    if metrics.get("completed", 0) <= 0:
        raise InstrumentError(
            f"no request completed at concurrency {ctx.client_concurrency} "
            f"({metrics.get('failed', 0):g} failed)",
            where=str(result_file),
            hint="read the server log of this launch",
        )
    return Measurement(
        NAME, client_version(vllm_bin), ctx, metrics, result_file, sha256_file(result_file), wall, argv
    )


class VllmBenchServe(InstrumentKind):
    kind = NAME
    client = "vllm bench serve"
    summary = "a tight serving sweep through vLLM's client, one run per point"

    def check_arm(self, spec: InstrumentSpec, arm: str, engine: str, command: ServerCommand) -> None:
        refuse_schema_only_engine(spec, arm, engine, self.client, non_schema_fields(spec.options))

    def measure(self, run: PointRun) -> Measurement:
        # The OpenAI completions client measures an SGLang server as it is: no option changes.
        return measure(run.clients.vllm_bin, run.spec.options, run.ctx, env=run.client_env)


INSTRUMENT = VllmBenchServe()
