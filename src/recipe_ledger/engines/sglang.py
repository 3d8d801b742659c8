"""SGLang (``python -m sglang.launch_server --model-path MODEL ...``), from its own venv.

SGLang and vLLM pin different torch builds, so SGLang runs from ``.venv-sglang`` (``./dev
serve-setup``) and a recipe arm renders SGLang's command (``recipes.sglang``). It serves /metrics
only with ``--enable-metrics``; its readiness and cache flush are its own HTTP endpoints
(``sglang_api``); a first boot on a GPU fills JIT compile caches that preflight looks at.
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from recipe_ledger.engines import sglang_api
from recipe_ledger.engines.base import (
    SEEN_FILE,
    Command,
    Engine,
    ForeignClient,
    Samples,
    ServerCommand,
    counter_delta,
)

LAUNCH_MODULE = "sglang.launch_server"
METRICS_FLAG = "--enable-metrics"
MODEL_FLAG = "--model-path"


def find_sglang_python(repo: Path) -> str:
    """The SGLang venv's python (``./dev serve-setup`` builds it; SGLang and vLLM pin different
    torch builds, so each engine has its own venv). Returned even when missing: preflight refuses
    a run that needs it, with the command that builds it."""
    return os.environ.get("RECIPE_LEDGER_SGLANG_PYTHON") or str(repo / ".venv-sglang" / "bin" / "python")


def is_sglang_launch(command: ServerCommand) -> bool:
    """``python[3] -m sglang.launch_server ...`` (any python): the form whose python is swappable."""
    program = command.render()[:3]
    return (
        len(program) == 3
        and Path(program[0]).name.startswith("python")
        and program[1:] == ["-m", LAUNCH_MODULE]
    )


# ------------------------------------------------------------------------------ compile caches


@dataclass(frozen=True)
class CompileCache:
    """One persistent JIT cache SGLang fills at boot: its name, the variable that moves it, its root."""

    name: str
    env: str
    path: Path


def compile_caches(env: Mapping[str, str], home: Path, user: str) -> list[CompileCache]:
    """Where SGLang's kernels land, given the server's environment (pure). Seed 004: with the
    TileLang and Triton caches at their real roots, a 110 s prewarm became 5 s."""
    return [
        CompileCache(
            "Triton", "TRITON_CACHE_DIR", Path(env.get("TRITON_CACHE_DIR") or home / ".triton" / "cache")
        ),
        CompileCache(
            "TileLang",
            "TILELANG_CACHE_DIR",
            Path(env.get("TILELANG_CACHE_DIR") or home / ".tilelang" / "cache"),
        ),
        CompileCache(
            "torch inductor",
            "TORCHINDUCTOR_CACHE_DIR",
            Path(env.get("TORCHINDUCTOR_CACHE_DIR") or f"/tmp/torchinductor_{user}"),
        ),
    ]


def local_compile_caches(env: Mapping[str, str]) -> list[CompileCache]:
    """The caches of a local process: this environment under the server's own."""
    return compile_caches({**os.environ, **env}, Path.home(), getpass.getuser())


def _has_entries(path: Path) -> bool:
    try:
        return any(child.name != SEEN_FILE for child in path.iterdir())
    except OSError:
        return False


def _read_seen(seen_file: Path) -> set[str]:
    try:
        return set(json.loads(seen_file.read_text())) if seen_file.is_file() else set()
    except (OSError, ValueError):
        return set()


def check_compile_caches(arm: str, flagset: str, caches: list[CompileCache]) -> str | None:
    """Announce a cold compile: a cache that is empty (or missing), or a flag set these caches have
    never booted. A notice, never a refusal: a cold boot is slow, not wrong."""
    cold = [c for c in caches if not _has_entries(c.path)]
    if cold:
        listed = ", ".join(f"{c.name} at {c.path} (${c.env})" for c in cold)
        return (
            f"arm {arm!r}: SGLang's compile caches are empty: {listed}; the first boot compiles "
            "cold (seed 004: a 110 s prewarm, 5 s with the caches kept at their real roots)"
        )
    if flagset in _read_seen(caches[0].path / SEEN_FILE):
        return None
    return (
        f"arm {arm!r}: flag set {flagset} is new to SGLang's compile caches "
        f"({', '.join(str(c.path) for c in caches)}); the first boot may compile kernels for a while"
    )


def unpersisted_container_caches(env: Mapping[str, str], volumes: Mapping[str, str]) -> list[CompileCache]:
    """The caches an SGLang container would write inside itself (lost with it at every launch): none
    of ``volumes``' targets holds their root. The container runs as root with the arm's env."""
    targets = [Path(target.rsplit(":", 1)[0]) for target in volumes.values()]
    return [
        cache
        for cache in compile_caches(env, Path("/root"), "root")
        if not any(cache.path == t or t in cache.path.parents for t in targets)
    ]


def _container_cache_notice(arm: str, env: Mapping[str, str], volumes: Mapping[str, str]) -> str | None:
    lost = unpersisted_container_caches(env, volumes)
    if not lost:
        return None
    return (
        f"arm {arm!r}: SGLang's compile caches live inside the container and die with it: "
        + ", ".join(f"{c.name} ({c.path})" for c in lost)
        + "; every launch compiles cold (seed 004: 110 s against 5 s): mount a host directory "
        "at each under server.volumes"
    )


# ------------------------------------------------------------------------------ the engine


class SglangEngine(Engine):
    name = "sglang"
    recipe_engine = "sglang"
    program_label = "SGLang's venv python"
    setup_hint = "./dev serve-setup  # builds .venv-sglang"
    # The model runner / memory pool configurator when the KV pool comes out at <= 0 tokens.
    oom_patterns = (r"Not enough memory\. Please try to increase --mem-fraction-static",)
    # SGLang's fraction is of the static pool (weights + KV): too low leaves no KV cache at all.
    memory_hint = (
        "adjust --mem-fraction-static (its log says which way), lower --context-length or --max-total-tokens"
    )
    logprobs_option = "logprobs"  # /v1/completions; no server-side cap on the top-k
    # No counter of proposed draft tokens or of tokens per step (counter_metrics says why).
    counter_metric_names = frozenset({"prefix_cache_hit_rate", "spec_accept_len"})
    # vllm bench serve reaches SGLang's OpenAI API on the same port; its vllm backend would not.
    foreign_clients = MappingProxyType(
        {"vllm_bench_serve": ForeignClient("openai", frozenset({"openai", "openai-chat"}))}
    )

    def parallel_flags(self, command: ServerCommand) -> tuple[tuple[str, ...], ...]:
        # With --enable-dp-attention the data-parallel attention ranks live inside the tensor-parallel
        # GPUs (SGLang's server_args: dp_size <= tp_size); without it each replica has its own.
        tensor = ("--tp-size", "--tensor-parallel-size", "--tp")
        pipeline = ("--pp-size", "--pipeline-parallel-size")
        if command.has("--enable-dp-attention"):
            return (tensor, pipeline)
        return (tensor, ("--dp-size", "--data-parallel-size", "--dp"), pipeline)

    def model_of(self, command: ServerCommand) -> str | None:
        return command.first_value(MODEL_FLAG)

    def served_model(self, command: ServerCommand) -> str:
        # SGLang serves a model under its path unless told otherwise.
        return command.first_value("--served-model-name") or command.first_value(MODEL_FLAG) or "model"

    def with_model(self, command: Command, model_dir: str) -> Command:
        return command.with_value(MODEL_FLAG, model_dir)

    def with_metrics(self, command: Command) -> Command:
        # The instruments read /metrics (cache hits, queue depth); a command that says so already
        # is left as written.
        return command if command.has(METRICS_FLAG) else command.extended([METRICS_FLAG])

    def with_local_program(self, command: Command, repo: Path) -> Command:
        return command.with_word(0, find_sglang_python(repo)) if is_sglang_launch(command) else command

    def readiness_problem(self, base_url: str, timeout_s: float) -> str | None:
        problem = sglang_api.generate_problem(base_url, timeout_s)
        return f"POST {base_url}{sglang_api.GENERATE_PATH} failed: {problem}" if problem else None

    def reset_prefix_cache(self, base_url: str, timeout_s: float) -> bool:
        # Raises CacheFlushFailed when the cache will not empty: the point fails rather than run warm.
        sglang_api.flush_cache(base_url, timeout_s=timeout_s)
        return True

    def counter_metrics(self, before: Samples, after: Samples) -> dict[str, float]:
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
        cached = counter_delta(before, after, "sglang:cached_tokens_total")
        prompt = counter_delta(before, after, "sglang:prompt_tokens_total")
        if prompt:
            out["prefix_cache_hit_rate"] = (cached or 0.0) / prompt  # no cached series yet: nothing hit
        generated = counter_delta(before, after, "sglang:generation_tokens_total")
        verify_calls = counter_delta(before, after, "sglang:spec_verify_calls_total")
        if generated is not None and verify_calls:
            out["spec_accept_len"] = generated / verify_calls
        return out

    def reported_metrics(self, base_url: str, derived: Mapping[str, float]) -> dict[str, float]:
        # /server_info averages since launch, and a launch serves one arm and repeat.
        if "spec_accept_len" in derived:
            return {}
        reported = sglang_api.server_info_accept_length(base_url)
        return {"spec_accept_len": reported} if reported is not None else {}

    def boot_cache_notice(
        self, arm: str, env: Mapping[str, str], flagset: str, container_volumes: Mapping[str, str] | None
    ) -> str | None:
        if container_volumes is not None:
            return _container_cache_notice(arm, env, container_volumes)
        return check_compile_caches(arm, flagset, local_compile_caches(env))

    def flagset_seen_file(self, env: Mapping[str, str]) -> Path | None:
        return local_compile_caches(env)[0].path / SEEN_FILE


ENGINE = SglangEngine()
