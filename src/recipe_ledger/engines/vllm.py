"""vLLM (``vllm serve MODEL ...``): the engine recipes are written for, and the default of every
experiment.

Its readiness is /health alone: it answers 200 only once the engine core has started, and an extra
request at every boot would change what the recorded vLLM runs measured. Its prefix cache is
emptied by ``POST /reset_prefix_cache`` (served only with ``VLLM_SERVER_DEV_MODE=1``), and a
server without it is not an error: the point runs, as it always has.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from recipe_ledger.engines.base import (
    SEEN_FILE,
    Command,
    Engine,
    ForeignClient,
    Samples,
    ServerCommand,
    counter_delta,
)
from recipe_ledger.launch.health import request_status
from recipe_ledger.metrics import SERVER_COUNTER_METRICS

log = logging.getLogger(__name__)

PROGRAM = "vllm"
RESET_PATH = "/reset_prefix_cache"


def find_vllm_bin(repo: Path) -> str:
    """vLLM's CLI: ``$RECIPE_LEDGER_VLLM``, else the project's serving venv
    (scripts/setup_serve_venv.sh), else PATH. It also runs the ``vllm bench serve`` client."""
    override = os.environ.get("RECIPE_LEDGER_VLLM")
    if override:
        return override
    local = repo / ".venv-serve" / "bin" / PROGRAM
    if local.is_file():
        return str(local)
    return shutil.which(PROGRAM) or PROGRAM


def autotune_cache_dir(env: Mapping[str, str]) -> Path:
    """Where vLLM keeps its compiled kernels: the server's ``VLLM_CACHE_ROOT``, else this one's,
    else ``~/.cache/vllm``."""
    return Path(
        env.get("VLLM_CACHE_ROOT") or os.environ.get("VLLM_CACHE_ROOT") or Path.home() / ".cache" / "vllm"
    )


def check_autotune_cache(arm: str, env: Mapping[str, str], flagset: str) -> str | None:
    """Announce a long first boot when this flag set has never booted against this cache."""
    seen_file = autotune_cache_dir(env) / SEEN_FILE
    seen = set(json.loads(seen_file.read_text())) if seen_file.is_file() else set()
    if flagset in seen:
        return None
    return (
        f"arm {arm!r}: flag set {flagset} is new to the kernel cache {seen_file.parent}; the first "
        "boot may autotune for a long time (seed 000: 74 minutes on a GB300)"
    )


def counter_metrics(before: Samples, after: Samples) -> dict[str, float]:
    """vLLM's counters (``vllm:*``) into the normalized names: also what any server gives that
    exposes vLLM's counter names."""
    out: dict[str, float] = {}
    hits = counter_delta(before, after, "vllm:prefix_cache_hits_total")
    queries = counter_delta(before, after, "vllm:prefix_cache_queries_total")
    if hits is not None and queries:
        out["prefix_cache_hit_rate"] = hits / queries
    drafts = counter_delta(before, after, "vllm:spec_decode_num_drafts_total")
    draft_tokens = counter_delta(before, after, "vllm:spec_decode_num_draft_tokens_total")
    accepted = counter_delta(before, after, "vllm:spec_decode_num_accepted_tokens_total")
    if accepted is not None and drafts:
        out["spec_accept_len"] = 1.0 + accepted / drafts  # tokens per step, the bonus token included
    if accepted is not None and draft_tokens:
        out["spec_accept_rate"] = accepted / draft_tokens
    step_tokens = counter_delta(before, after, "vllm:iteration_tokens_total_sum")
    steps = counter_delta(before, after, "vllm:iteration_tokens_total_count")
    if step_tokens is not None and steps:
        out["tokens_per_step"] = step_tokens / steps
    return out


DEFAULT_MAX_LOGPROBS = 20  # vllm 0.32's ModelConfig.max_logprobs


class VllmEngine(Engine):
    name = "vllm"
    recipe_engine = "vllm"
    # Recipes are vLLM's commands: sources from before engines were an axis name no engine.
    shown_in_source = False
    setup_hint = "scripts/setup_serve_venv.sh"
    oom_patterns = (
        r"No available memory for the cache blocks",
        r"Available KV cache memory: -",  # the budget went negative before the cache
        r"larger than the available KV cache memory",  # max-model-len does not fit
    )
    memory_hint = "lower --gpu-memory-utilization/--max-model-len or offload more"
    # sglang.bench_serving's default backend posts to SGLang's native /generate, which vLLM does
    # not have; these post to /v1/completions or /v1/chat/completions.
    foreign_clients = MappingProxyType(
        {
            "sglang_bench_serving": ForeignClient(
                "sglang", frozenset({"vllm", "vllm-chat", "sglang-oai", "sglang-oai-chat"})
            )
        }
    )
    logprobs_option = "logprobs"
    counter_metric_names = frozenset(SERVER_COUNTER_METRICS)  # counter_metrics gives every one

    def model_of(self, command: ServerCommand) -> str | None:
        return command.word(2) if command.render()[:2] == [PROGRAM, "serve"] else None

    def max_logprobs(self, command: ServerCommand) -> int | None:
        # vLLM refuses a request for more than --max-logprobs (default 20; -1: the whole vocabulary).
        value = command.first_value("--max-logprobs")
        if value is None:
            return DEFAULT_MAX_LOGPROBS
        number = int(value) if value.lstrip("-").isdigit() else DEFAULT_MAX_LOGPROBS
        return None if number < 0 else number

    def served_model(self, command: ServerCommand) -> str:
        return command.first_value("--served-model-name") or command.word(2) or "model"

    def with_model(self, command: Command, model_dir: str) -> Command:
        return command.with_word(2, model_dir)  # vllm serve MODEL

    def with_local_program(self, command: Command, repo: Path) -> Command:
        if command.program[:1] == (PROGRAM,):
            return command.with_word(0, find_vllm_bin(repo))
        return command

    def reset_prefix_cache(self, base_url: str, timeout_s: float) -> bool:
        try:
            return request_status(base_url + RESET_PATH, method="POST", timeout_s=timeout_s) == 200
        except Exception:  # a helper between measurements must not end an experiment
            log.debug("reset_prefix_cache failed", exc_info=True)
            return False

    def counter_metrics(self, before: Samples, after: Samples) -> dict[str, float]:
        return counter_metrics(before, after)

    def boot_cache_notice(
        self, arm: str, env: Mapping[str, str], flagset: str, container_volumes: Mapping[str, str] | None
    ) -> str | None:
        # The kernel cache read is this host's, also for a container (as it always was).
        return check_autotune_cache(arm, env, flagset)

    def flagset_seen_file(self, env: Mapping[str, str]) -> Path | None:
        return autotune_cache_dir(env) / SEEN_FILE


ENGINE = VllmEngine()
