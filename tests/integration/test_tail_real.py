"""The tail test against the real system: vLLM's CPU build serving the tiny model, its prefix-cache
counters read around each run. Cache busting leaves the cache nothing to serve; the flattered
harness (one shared prefix) is caught by the counters and refused.

Needs ``./dev serve-setup``: ``require("vllm")``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.instruments import server_metrics, tail
from recipe_ledger.instruments.base import MeasureContext
from recipe_ledger.launch.process import ProcessLauncher
from recipe_ledger.launch.server import RunningServer
from recipe_ledger.launch.spec import LaunchSpec
from recipe_ledger.pipeline.measure import client_env

from helpers.net import free_port
from helpers.resources import SERVE_VLLM, TINY_MODEL, require

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[RunningServer]:
    require("vllm")
    port, root = free_port(), tmp_path_factory.mktemp("tail-real")
    argv = [
        str(SERVE_VLLM),
        "serve",
        str(TINY_MODEL),
        "--served-model-name",
        "tiny",
        "--max-model-len",
        "1024",
    ]
    argv += ["--dtype", "bfloat16", "--enforce-eager", "--host", "127.0.0.1", "--port", str(port)]
    env = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    spec = LaunchSpec(
        argv=argv,
        env={**env, "VLLM_SERVER_DEV_MODE": "1", "VLLM_CACHE_ROOT": str(root / "vllm-cache")},
        host="127.0.0.1",
        port=port,
        health_path="/health",
        health_timeout_s=300,
        log_path=root / "server.log",
        run_id="tail-real",
        engine=VLLM,
    )
    with ProcessLauncher().start(spec) as running:
        yield running


def run_tail(server: RunningServer, tmp_path: Path, options: dict) -> tuple[dict, dict]:
    server.reset_prefix_cache()
    before = server_metrics.scrape(server.base_url)
    ctx = MeasureContext("control", 1, 1, 1001, tmp_path / "raw", server.base_url, "tiny", str(TINY_MODEL))
    m = tail.measure(str(SERVE_VLLM), options, ctx, env=client_env())
    return m.metrics, server_metrics.derive(before, server_metrics.scrape(server.base_url), VLLM)


def test_cache_busting_leaves_the_cache_nothing_and_reports_the_tail(server, tmp_path):
    options = {"requests": 8, "input_len": 512, "output_len": 8}
    metrics, counters = run_tail(server, tmp_path, options)
    assert metrics["completed"] == 8
    assert metrics["ttft_ms_p99"] >= metrics["ttft_ms_p90"] >= metrics["ttft_ms_p50"] > 0
    assert metrics["e2el_ms_p99"] > 0 and metrics["prefill_tps"] > 0 and metrics["decode_tps_per_stream"] > 0
    assert counters["prefix_cache_hit_rate"] <= 0.05
    assert tail.flattery(options, counters) is None


def test_a_shared_prefix_is_served_by_the_cache_and_the_point_is_refused(server, tmp_path):
    options = {"requests": 8, "input_len": 512, "output_len": 8, "cache_busting": False}
    _, counters = run_tail(server, tmp_path, options)
    assert counters["prefix_cache_hit_rate"] > 0.5
    assert "flattered" in (tail.flattery(options, counters) or "")
