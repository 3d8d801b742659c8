"""scripts/profile_probe.py against the real system under test: vLLM's CPU build serving the tiny model
with its torch profiler enabled. One server boot for the module (a boot takes minutes on a busy box).

Needs the serving venv and the tiny model (``./dev serve-setup``): ``require("vllm")``, skipped without
them unless required (CI).
"""

from __future__ import annotations

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
from helpers.resources import SERVE_VLLM, TINY_MODEL, require
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


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    require("vllm")
    root = tmp_path_factory.mktemp("profile")
    traces = root / "traces"
    port = free_port()
    config = {
        "profiler": "torch",
        "torch_profiler_dir": str(traces),
        "torch_profiler_with_stack": False,
        "torch_profiler_dump_cuda_time_total": False,
    }
    argv = [
        str(SERVE_VLLM), "serve", str(TINY_MODEL), "--host", "127.0.0.1", "--port", str(port),
        "--served-model-name", "tiny", "--max-model-len", "2048", "--dtype", "bfloat16", "--enforce-eager",
        "--profiler-config", json.dumps(config),
    ]  # fmt: skip
    env = {
        **os.environ,
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_CACHE_ROOT": str(root / "vllm-cache"),
    }
    with (root / "server.log").open("w") as log:
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for(lambda: healthy(url) or process.poll() is not None, timeout_s=900, interval_s=1)
        assert process.poll() is None, (root / "server.log").read_text()[-3000:]
        yield url, traces
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


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
