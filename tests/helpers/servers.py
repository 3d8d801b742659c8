"""The tiny model served for real, as an integration test launches it: the launch spec of vLLM's CPU
build and of SGLang's CPU path, for ``ProcessLauncher().start(spec)`` (which waits for readiness,
SGLang's first /generate included, and stops the whole process group, also on failure).

    with ProcessLauncher().start(tiny_vllm_spec(tmp_path, "probes", *flags)) as server:
        server.base_url
"""

from __future__ import annotations

from pathlib import Path

from recipe_ledger.engines.sglang import ENGINE as SGLANG
from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.launch.spec import LaunchSpec

from helpers.net import free_port
from helpers.resources import SERVE_VLLM, SGLANG_PYTHON, TINY_MODEL

HOST = "127.0.0.1"
VLLM_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
# sglang-cpu.md's two workarounds: the CPU engine, and a KV pool the size of this box, not 15 GB.
SGLANG_FLAGS = ("--device", "cpu", "--attention-backend", "torch_native", "--max-total-tokens", "16384")
SGLANG_ENV = {"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"}


def _spec(root: Path, name: str, argv: list[str], env: dict[str, str], port: int, engine) -> LaunchSpec:
    return LaunchSpec(
        argv=argv,
        env=env,
        host=HOST,
        port=port,
        health_path="/health",
        health_timeout_s=300,
        log_path=root / f"server-{name}.log",
        run_id=name,
        engine=engine,
    )


def tiny_vllm_spec(root: Path, name: str, *flags: str, dtype: str = "bfloat16") -> LaunchSpec:
    """vLLM serving the tiny model as "tiny" on a free port, its log ``root/server-<name>.log``."""
    port = free_port()
    argv = [
        str(SERVE_VLLM),
        "serve",
        str(TINY_MODEL),
        "--served-model-name",
        "tiny",
        "--max-model-len",
        "1024",
    ]
    argv += ["--dtype", dtype, "--enforce-eager", "--host", HOST, "--port", str(port), *flags]
    env = {**VLLM_ENV, "VLLM_CACHE_ROOT": str(root / "vllm-cache")}
    return _spec(root, name, argv, env, port, VLLM)


def tiny_sglang_spec(root: Path, name: str, *flags: str) -> LaunchSpec:
    """SGLang serving the tiny model as "tiny" on a free port, its log ``root/server-<name>.log``."""
    port = free_port()
    argv = [str(SGLANG_PYTHON), "-m", "sglang.launch_server", "--model-path", str(TINY_MODEL)]
    argv += ["--served-model-name", "tiny", "--host", HOST, "--port", str(port), *SGLANG_FLAGS, *flags]
    return _spec(root, name, argv, SGLANG_ENV, port, SGLANG)
