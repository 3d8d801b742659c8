"""scripts/profile_probe.py against the real systems under test: vLLM's CPU build serving the tiny model
with its torch profiler enabled (one boot shared by two tests), vLLM without it, and SGLang's CPU engine.

Needs the serving venv and the tiny model (``./dev serve-setup``): ``require("vllm")`` (and
``require("sglang")`` for the SGLang test), skipped without them unless required (CI).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.net import free_port
from helpers.resources import SERVE_VLLM, SGLANG_PYTHON, TINY_MODEL, require
from helpers.waiting import wait_for

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "scripts" / "profile_probe.py"
SERVE_PYTHON = SERVE_VLLM.parent / "python"


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


VLLM_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
}


def vllm_argv(port: int, profiler_config: dict | None) -> list[str]:
    argv = [
        str(SERVE_VLLM), "serve", str(TINY_MODEL), "--host", "127.0.0.1", "--port", str(port),
        "--served-model-name", "tiny", "--max-model-len", "2048", "--dtype", "bfloat16", "--enforce-eager",
    ]  # fmt: skip
    return argv + (["--profiler-config", json.dumps(profiler_config)] if profiler_config else [])


@contextlib.contextmanager
def serving(argv: list[str], env: dict[str, str], port: int, log_path: Path) -> Iterator[str]:
    """A server in its own process group, healthy on ``port``; stopped (the group) on exit."""
    with log_path.open("w") as log:
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for(lambda: healthy(url) or process.poll() is not None, timeout_s=900, interval_s=1)
        assert process.poll() is None, log_path.read_text()[-3000:]
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """vLLM with the profiler on, lean: no Python stacks, no text tables (docs/instruments-profile.md)."""
    require("vllm")
    root = tmp_path_factory.mktemp("profile")
    traces = root / "traces"
    config = {
        "profiler": "torch",
        "torch_profiler_dir": str(traces),
        "torch_profiler_with_stack": False,
        "torch_profiler_dump_cuda_time_total": False,
    }
    port = free_port()
    env = {**VLLM_ENV, "VLLM_CACHE_ROOT": str(root / "vllm-cache")}
    with serving(vllm_argv(port, config), env, port, root / "server.log") as url:
        yield url, traces


def probe(url: str, traces: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    argv = [str(SERVE_PYTHON), str(PROBE), "--url", url, "--trace-dir", str(traces), "--out", str(out)]
    argv += ["--requests", "2", "--max-tokens", "8", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)


def test_the_probe_reads_where_vllm_spends_its_time_from_a_real_trace(server, tmp_path):
    url, traces = server
    out = tmp_path / "run" / "control.p1.r0.out.json"
    result = probe(url, traces, out)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    metrics = json.loads(result.stdout.strip().splitlines()[-1])
    shares = {k: v for k, v in metrics.items() if k.startswith("profile_share_")}
    assert len(shares) == 7 and sum(shares.values()) == pytest.approx(1.0)
    # The tiny dense model runs its projections through oneDNN and its attention through vLLM's CPU
    # kernel: both must be found by name in a real trace; it has no experts and one process.
    assert shares["profile_share_gemm"] > 0 and shares["profile_share_attention"] > 0
    assert shares["profile_share_moe"] == 0 and shares["profile_share_communication"] == 0
    assert metrics["profile_window_s"] > 0 and metrics["profile_overhead"] > 0
    record = json.loads(out.read_text())
    names = [trace["name"] for trace in record["traces"]]
    assert len(names) == 1 and "async_llm" not in names[0]  # the worker's trace, not the front end's
    kept = out.parent / record["kept"]
    assert json.loads(gzip.decompress(kept.read_bytes()))["traceEvents"]


def test_a_trace_over_the_cap_leaves_the_metrics_and_no_copy(server, tmp_path):
    url, traces = server
    out = tmp_path / "run" / "control.p1.r0.out.json"
    result = probe(url, traces, out, "--max-trace-mb", "0.001")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "not kept" in result.stderr
    assert json.loads(out.read_text())["kept"] is None
    assert sorted(path.name for path in out.parent.iterdir()) == [out.name]


def test_vllm_without_the_profiler_gets_one_line_and_exit_2(tmp_path):
    require("vllm")
    port = free_port()
    env = {**VLLM_ENV, "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache")}
    with serving(vllm_argv(port, None), env, port, tmp_path / "server.log") as url:
        out = tmp_path / "run" / "control.p1.r0.out.json"
        result = probe(url, tmp_path / "traces", out)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no profiler" in lines[0] and "404" in lines[0]
    assert not out.exists()


def test_sglang_profiles_on_cpu_behind_the_engine_flag(tmp_path):
    """SGLang needs no server flag: the probe names the folder and CPU activity per request."""
    require("sglang")
    port = free_port()
    argv = [
        str(SGLANG_PYTHON), "-m", "sglang.launch_server", "--model-path", str(TINY_MODEL), "--device", "cpu",
        "--host", "127.0.0.1", "--port", str(port), "--attention-backend", "torch_native",
        "--max-total-tokens", "16384", "--served-model-name", "tiny",
    ]  # fmt: skip
    env = {"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"}
    with serving(argv, env, port, tmp_path / "server.log") as url:
        out = tmp_path / "run" / "sglang.p1.r0.out.json"
        result = probe(url, tmp_path / "traces", out, "--engine", "sglang")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    metrics = json.loads(result.stdout.strip().splitlines()[-1])
    assert sum(v for k, v in metrics.items() if k.startswith("profile_share_")) == pytest.approx(1.0)
    assert metrics["profile_share_gemm"] > 0 and metrics["profile_share_attention"] > 0
    record = json.loads(out.read_text())
    assert record["engine"] == "sglang" and record["traces"][0]["name"].endswith("-TP-0.trace.json.gz")
