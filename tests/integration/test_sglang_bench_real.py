"""SGLang's instruments against a real SGLang 0.5.23 serving the tiny model on this CPU.

The server is started here directly (the launcher's own SGLang tests live with the launcher): one
server for the module, flushed, measured by both clients at two points and by the tail test (busted
and flattered), scraped, stopped.
Needs ``.venv-sglang`` and the tiny model: the resource ``sglang``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from recipe_ledger.engines import sglang_api
from recipe_ledger.engines.sglang import ENGINE as SGLANG
from recipe_ledger.instruments import server_metrics, sglang_bench, tail, vllm_bench
from recipe_ledger.instruments.base import MeasureContext
from recipe_ledger.pipeline.measure import client_env

from helpers import resources
from helpers.net import free_port, nothing_listens_on

pytestmark = pytest.mark.slow

REPO = resources.REPO
SGLANG_PYTHON = REPO / ".venv-sglang" / "bin" / "python"
MODEL = resources.TINY_MODEL
BOOT_TIMEOUT_S = 240
OPTIONS = {"num_prompts": 4, "random_input_len": 32, "random_output_len": 8}


def healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def sglang_server(tmp_path_factory):
    resources.require("sglang")
    port = free_port()
    log = tmp_path_factory.mktemp("sglang") / "server.log"
    argv = [str(SGLANG_PYTHON), "-m", "sglang.launch_server", "--model-path", str(MODEL), "--device", "cpu"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--attention-backend", "torch_native"]
    argv += ["--max-total-tokens", "16384", "--enable-metrics"]
    env = {**os.environ, "SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while not healthy(base_url):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"SGLang did not come up:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(1)
        yield base_url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        assert nothing_listens_on(port)


def context(tmp_path: Path, base_url: str, point: int) -> MeasureContext:
    return MeasureContext("candidate", point, 1, 1000 + point, tmp_path, base_url, str(MODEL), str(MODEL))


def test_bench_serving_measures_sglang_point_by_point(sglang_server, tmp_path):
    for point in (1, 2):
        assert sglang_api.flush_cache(sglang_server) >= 1
        before = server_metrics.scrape(sglang_server)
        m = sglang_bench.measure(
            str(SGLANG_PYTHON), OPTIONS, context(tmp_path, sglang_server, point), env=client_env()
        )
        server = server_metrics.point_metrics(
            before, server_metrics.scrape(sglang_server), sglang_server, SGLANG
        )
        assert m.instrument_version.startswith("sglang ")
        assert m.metrics["completed"] == OPTIONS["num_prompts"] and m.metrics["failed"] == 0
        assert m.metrics["output_tps_total"] > 0 and m.metrics["tpot_ms_p50"] > 0
        assert m.facts["server_info.version"] in m.instrument_version
        assert m.facts["server_info_sha256"].startswith("sha256:")
        assert 0 <= server["prefix_cache_hit_rate"] < 1


def test_vllm_bench_serve_measures_sglang_under_the_same_names(sglang_server, tmp_path):
    resources.require("vllm", "vllm bench serve is the other client")
    ctx = context(tmp_path, sglang_server, 2)
    m = vllm_bench.measure(str(resources.SERVE_VLLM), OPTIONS, ctx, env=client_env())
    assert m.metrics["completed"] == OPTIONS["num_prompts"]
    shared = {"output_tps_total", "request_rps", "ttft_ms_p50", "tpot_ms_p99", "itl_ms_p90", "e2el_ms_mean"}
    assert shared | {"failed", "duration_s", "decode_tps_per_stream"} <= set(m.metrics)


@pytest.mark.parametrize("cache_busting", [True, False])
def test_the_tail_test_busts_sglangs_radix_cache_and_refuses_a_shared_prefix(
    sglang_server, tmp_path, cache_busting
):
    """Issue 13's tail test works for both engines: SGLang's cached-token counter says how much of
    the prompts its radix cache served; busted prompts leave it nothing, one shared prefix is refused."""
    resources.require("vllm", "the tail test's client is vllm bench serve")
    options = {"requests": 6, "input_len": 256, "output_len": 8, "cache_busting": cache_busting}
    assert sglang_api.flush_cache(sglang_server) >= 1
    before = server_metrics.scrape(sglang_server)
    m = tail.measure(
        str(resources.SERVE_VLLM), options, context(tmp_path, sglang_server, 1), env=client_env()
    )
    counters = server_metrics.point_metrics(
        before, server_metrics.scrape(sglang_server), sglang_server, SGLANG
    )
    assert m.metrics["completed"] == 6 and m.metrics["prefill_tps"] > 0
    assert m.metrics["ttft_ms_p99"] >= m.metrics["ttft_ms_p50"] > 0
    refused = tail.flattery(options, counters)
    if cache_busting:
        assert counters["prefix_cache_hit_rate"] <= tail.allowed_hit_rate(tail.parse_options(options))
        assert refused is None
    else:
        assert counters["prefix_cache_hit_rate"] > 0.5 and "flattered" in (refused or "")
