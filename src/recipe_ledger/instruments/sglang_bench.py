"""``sglang.bench_serving``: SGLang's own client as an instrument, one process per point and repeat.

It mirrors ``vllm_bench``: the tool drives the sweep (one concurrency per process, the per-repeat
seed shared by control and candidate), and the client's result is normalized into the same
metric names, so that a bar compares the same quantity whichever client measured it.

What differs, read from SGLang 0.5.23's ``sglang/benchmark/serving.py``:

- the result file is JSON Lines and the client APPENDS one line per run: the last line is ours;
- there is no ``failed`` count: ``failed = num_prompts - completed`` (every prompt is sent once);
- the line embeds the server's ``/server_info`` (``None`` from a server without it, e.g. vLLM):
  its canonical hash and a few of its fields are kept as the record's facts;
- ``accept_length`` is the server's ``internal_states[0].avg_spec_accept_length`` after the run,
  fetched only by the ``sglang*`` backends, and absent without speculative decoding.

The client can measure either engine (the cross-engine rule wants one client for both arms): the
backend follows the measured server's engine (``sglang-oai`` or ``vllm``, both the streaming
``/v1/completions`` path), unless the instrument's options name one.
"""

from __future__ import annotations

import json
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
    sha256_json,
    venv_distribution_version,
)

NAME = "sglang_bench_serving"
MODULE = "sglang.bench_serving"

# The backend that measures each engine's OpenAI completions endpoint. Both stream from
# /v1/completions; only the sglang* ones read the accept length from /server_info.
BACKEND_FOR_ENGINE = {"sglang": "sglang-oai", "vllm": "vllm"}

# bench_serving's result keys -> normalized names (recipe_ledger.metrics).
_KEY_MAP = {
    "output_throughput": "output_tps_total",
    "total_throughput": "total_tps",
    "request_throughput": "request_rps",
    "completed": "completed",
    "duration": "duration_s",
    "accept_length": "spec_accept_len",
}
# normalized latency name -> bench_serving's ("e2el" is SGLang's "e2e_latency").
_LATENCIES = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e_latency"}
# What every OpenAI backend of bench_serving adds to OpenAI's schema: ``ignore_eos`` (True unless
# --disable-ignore-eos, and then False, never absent: benchmark/serving.py).
NON_SCHEMA_FIELDS = ("ignore_eos",)
_STATS = (("median", "p50"), ("mean", "mean"), ("p90", "p90"), ("p99", "p99"))

# The same workload as vllm_bench's defaults, so that a default spec measures the same thing with
# either client. ``random-ids`` draws token ids (``random`` wants a ShareGPT file or the hub);
# a range ratio of 1 fixes every length, as vllm's random dataset does by default; EOS is ignored
# by default (``--disable-ignore-eos`` would turn that off).
DEFAULT_OPTIONS: dict[str, Any] = {
    "dataset_name": "random-ids",
    "random_input_len": 128,
    "random_output_len": 64,
    "random_range_ratio": 1,
    "num_prompts": 32,
    "disable_tqdm": True,
}

# server_info fields the record keeps as strings (the whole snapshot is kept as its hash).
SERVER_INFO_FACTS = (
    "version",
    "model_path",
    "served_model_name",
    "tp_size",
    "dp_size",
    "speculative_algorithm",
)


def backend_for(engine: str, options: dict[str, Any]) -> str:
    if options.get("backend"):
        return str(options["backend"])
    try:
        return BACKEND_FOR_ENGINE[engine]
    except KeyError:
        raise InstrumentError(
            f"sglang.bench_serving has no backend for engine {engine!r}",
            hint=f"name one in the instrument's options (backend: {' | '.join(BACKEND_FOR_ENGINE.values())})",
        ) from None


def build_argv(
    python_bin: str, options: dict[str, Any], ctx: MeasureContext, result_file: Path, engine: str = "sglang"
) -> list[str]:
    """The client's argv: options become --flags (True -> bare switch), then the per-run ones."""
    merged = {**DEFAULT_OPTIONS, **options, "backend": backend_for(engine, options)}
    argv = [python_bin, "-m", MODULE, "--base-url", str(ctx.base_url)]
    # --model also names the tokenizer when --tokenizer is absent and is loaded to check for a chat
    # template: the model directory is the right value; the server knows the model by its served name.
    if ctx.tokenizer or ctx.model_name:
        argv += ["--model", str(ctx.tokenizer or ctx.model_name)]
    if ctx.model_name:
        argv += ["--served-model-name", ctx.model_name]
    if ctx.tokenizer:
        argv += ["--tokenizer", ctx.tokenizer]
    argv += option_flags(merged)
    return argv + [
        "--max-concurrency",
        str(ctx.client_concurrency),
        "--seed",
        str(ctx.seed),
        "--output-file",
        str(result_file),
    ]


def last_result(text: str, where: str) -> dict[str, Any]:
    """The last line of the JSON Lines result file (the client appends one line per run)."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            break  # a torn last line is not silently replaced by an older run's line
        if isinstance(value, dict):
            return value
        break
    raise InstrumentError(
        "sglang.bench_serving's result file has no JSON object on its last line", where=where
    )


def normalize(raw: dict[str, Any], num_prompts: int | None = None) -> dict[str, float]:
    """bench_serving's result line -> normalized metrics (names and units: recipe_ledger.metrics)."""
    metrics: dict[str, float] = {}
    for key, name in _KEY_MAP.items():
        value = raw.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            metrics[name] = float(value)
    if metrics.get("spec_accept_len") == 0.0:
        del metrics["spec_accept_len"]  # 0 means "not reported", never an acceptance length
    for lat, key in _LATENCIES.items():
        for stat, suffix in _STATS:
            value = raw.get(f"{stat}_{key}_ms")
            if isinstance(value, (int, float)):
                metrics[f"{lat}_ms_{suffix}"] = float(value)
    if num_prompts is not None and "completed" in metrics:
        metrics["failed"] = float(num_prompts) - metrics["completed"]
    if metrics.get("tpot_ms_p50"):
        metrics["decode_tps_per_stream"] = 1000.0 / metrics["tpot_ms_p50"]
    return metrics


def server_info_facts(raw: dict[str, Any]) -> dict[str, str]:
    """The embedded server_info as the record keeps it: its hash and a few fields, as strings."""
    info = raw.get("server_info")
    if not isinstance(info, dict):
        return {}
    if isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]  # a prefill/decode split reports per role; decode is what we time
    facts = {"server_info_sha256": sha256_json(raw["server_info"])}
    for key in SERVER_INFO_FACTS:
        if info.get(key) is not None:
            facts[f"server_info.{key}"] = str(info[key])
    return facts


@lru_cache(maxsize=4)
def client_version(python_bin: str) -> str:
    """``sglang <version>`` of the client's venv: part of the instrument's identity. Read from the
    venv's metadata (``python_bin`` is usually a symlink to the system python: the venv is the
    folder it sits in, not where it points); asking the interpreter is the fallback."""
    installed = venv_distribution_version(Path(python_bin).absolute(), "sglang")
    return f"sglang {installed or _version_by_running(python_bin)}"


def _version_by_running(python_bin: str) -> str:
    code = "import importlib.metadata as m; print(m.version('sglang'))"
    try:
        out = subprocess.run([python_bin, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise InstrumentError(
            f"no sglang client at {python_bin} ({type(exc).__name__})",
            where=python_bin,
            hint="scripts/setup_sglang_venv.sh builds .venv-sglang",
        ) from None
    return out.stdout.strip() or "unknown"


def measure(
    python_bin: str,
    options: dict[str, Any],
    ctx: MeasureContext,
    *,
    env: dict[str, str],
    engine: str = "sglang",
    timeout_s: float = 1800,
) -> Measurement:
    """Run one point of the sweep against a server of ``engine`` and read its result line."""
    version = client_version(python_bin)  # first: a missing venv is named before anything runs
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    result_file = ctx.out_dir / f"{ctx.stem}.jsonl"
    result_file.unlink(missing_ok=True)
    argv = build_argv(python_bin, options, ctx, result_file, engine)
    wall = run_client(argv, env=env, log_path=ctx.out_dir / f"{ctx.stem}.client.log", timeout_s=timeout_s)
    if not result_file.is_file():
        raise InstrumentError("sglang.bench_serving wrote no result file", where=str(result_file))
    raw = last_result(result_file.read_text(), str(result_file))
    metrics = normalize(raw, int({**DEFAULT_OPTIONS, **options}["num_prompts"]))
    if metrics.get("completed", 0) <= 0:
        raise InstrumentError(
            f"no request completed at concurrency {ctx.client_concurrency}",
            where=str(result_file),
            hint="read the server log of this launch",
        )
    return Measurement(
        NAME,
        version,
        ctx,
        metrics,
        result_file,
        sha256_file(result_file),
        wall,
        argv,
        facts={**server_info_facts(raw), "client_backend": str(raw.get("backend", ""))},
    )


class SglangBenchServing(InstrumentKind):
    kind = NAME
    client = MODULE
    summary = "the same sweep through SGLang's client"

    def check_arm(self, spec: InstrumentSpec, arm: str, engine: str, command: ServerCommand) -> None:
        refuse_schema_only_engine(spec, arm, engine, self.client, NON_SCHEMA_FIELDS)

    def measure(self, run: PointRun) -> Measurement:
        # The client runs from SGLang's venv, the one its servers run from (plan.find_sglang_python).
        return measure(
            run.clients.sglang_python, run.spec.options, run.ctx, env=run.client_env, engine=run.engine
        )


INSTRUMENT = SglangBenchServing()
