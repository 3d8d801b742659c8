"""A real SGLang server on this CPU, started by the process launcher, serving the tiny model.

Needs SGLang's venv and the tiny model (scripts/setup_sglang_venv.sh, scripts/make_tiny_model.py;
`./dev serve-setup` makes both): ``require("sglang")``, skipped without them unless required (CI).
One module-scoped server answers the endpoint and client checks; two more launches check teardown
on an exception inside the ``with`` block and a flag SGLang rejects (a boot is ~15-30 s here).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.launch import BootFailure, LaunchSpec, ProcessLauncher, ProcessServer, port_is_free
from recipe_ledger.launch.process import group_is_gone

from helpers.launching import group_members
from helpers.net import free_port, http
from helpers.resources import SGLANG_PYTHON, TINY_MODEL, require
from helpers.waiting import wait_for

pytestmark = pytest.mark.slow

HOST = "127.0.0.1"
BOOT_TIMEOUT_S = 300.0  # ~15-30 s on this 2-core box; the margin is for a loaded CI run
# Always bound the KV cache on CPU: SGLang's default memory fraction reserves ~15 GB here.
CPU_SERVER_FLAGS = ("--device", "cpu", "--attention-backend", "torch_native", "--max-total-tokens", "16384")
CPU_ENV = {"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module", autouse=True)
def serving_environment() -> None:
    require("sglang")


def sglang_spec(log_dir: Path, *extra_flags: str, run_id: str = "sglang-control-r1") -> LaunchSpec:
    port = free_port()
    argv = [
        str(SGLANG_PYTHON),
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(TINY_MODEL),
        "--host",
        HOST,
        "--port",
        str(port),
        *CPU_SERVER_FLAGS,
        "--enable-metrics",
        *extra_flags,
    ]
    return LaunchSpec(
        argv=argv,
        env=CPU_ENV,
        host=HOST,
        port=port,
        health_path="/health",
        health_timeout_s=BOOT_TIMEOUT_S,
        log_path=log_dir / f"server-{run_id}.log",
        run_id=run_id,
        engine=VLLM,  # readiness by /health alone, as these tests always launched it
    )


def pid_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def assert_nothing_left(pgid: int, port: int, workers: set[int]) -> None:
    assert group_is_gone(pgid), f"process group {pgid} still has live members"
    assert port_is_free(HOST, port), f"something still listens on {port}"
    assert all(pid_is_gone(pid) for pid in workers), f"workers outlived the server: {workers}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessServer]:
    spec = sglang_spec(tmp_path_factory.mktemp("sglang"))
    with ProcessLauncher().start(spec) as running:
        workers = group_members(running.pgid) - {running.pid}
        yield running
    assert_nothing_left(running.pgid, spec.port, workers)


def test_the_server_boots_and_its_workers_are_in_its_process_group(server) -> None:
    assert server.is_alive()
    status, _ = http("GET", server.health_url)
    assert status == 200
    # SGLang runs its scheduler and detokenizer as child processes: teardown must reach them too.
    assert len(group_members(server.pgid) - {server.pid}) >= 2, server.log_tail(40)


def test_a_real_generate_answers_after_health(server) -> None:
    status, body = http(
        "POST", server.base_url + "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 3}}
    )
    assert status == 200, body[:500]
    answer = json.loads(body)
    assert answer["meta_info"]["completion_tokens"] == 3 and isinstance(answer["text"], str)


def test_the_openai_endpoint_answers_for_a_cross_engine_client(server) -> None:
    # `vllm bench serve` measures SGLang through this endpoint in a cross-engine experiment.
    request = {"model": str(TINY_MODEL), "prompt": "hello", "max_tokens": 2, "temperature": 0}
    status, body = http("POST", server.base_url + "/v1/completions", request)
    assert status == 200, body[:500]
    assert json.loads(body)["usage"]["completion_tokens"] == 2


def test_metrics_hold_sglang_series_that_count_the_served_tokens(server) -> None:
    http(
        "POST", server.base_url + "/generate", {"text": "count me", "sampling_params": {"max_new_tokens": 1}}
    )
    status, body = http("GET", server.base_url + "/metrics")
    assert status == 200
    series = [line for line in body.decode().splitlines() if line.startswith("sglang:")]
    assert series, "no sglang: series: was --enable-metrics passed?"
    prompt_tokens = [line for line in series if line.startswith("sglang:prompt_tokens_total")]
    assert prompt_tokens and float(prompt_tokens[0].rsplit(" ", 1)[1]) > 0


def test_flush_cache_answers_on_an_idle_server(server) -> None:
    status, body = http("POST", server.base_url + "/flush_cache")
    assert status == 200, body[:500]


def test_server_info_carries_the_internal_states_the_instrument_reads(server) -> None:
    status, body = http("GET", server.base_url + "/server_info")
    assert status == 200
    info = json.loads(body)
    assert isinstance(info["internal_states"], list) and info["internal_states"]
    assert info["model_path"] == str(TINY_MODEL)


def test_bench_serving_writes_one_json_line_with_throughput_and_latencies(server, tmp_path) -> None:
    output = tmp_path / "bench.jsonl"
    num_prompts = 4
    argv = [
        str(SGLANG_PYTHON),
        "-m",
        "sglang.bench_serving",
        "--backend",
        "sglang-oai",
        "--host",
        HOST,
        "--port",
        str(server.spec.port),
        "--model",
        str(TINY_MODEL),
        "--tokenizer",
        str(TINY_MODEL),
        "--dataset-name",
        "random-ids",  # needs no dataset file ("random" wants ShareGPT and tries a hub download)
        "--random-input-len",
        "32",
        "--random-output-len",
        "8",
        "--random-range-ratio",
        "1",
        "--num-prompts",
        str(num_prompts),
        "--max-concurrency",
        "2",
        "--output-file",
        str(output),
        "--disable-tqdm",
    ]
    env = {**os.environ, **CPU_ENV}
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = output.read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["completed"] == num_prompts
    assert record["output_throughput"] > 0
    for metric in ("ttft", "tpot", "itl", "e2e_latency"):
        for stat in ("mean", "median", "p90", "p99"):
            assert f"{stat}_{metric}_ms" in record, f"{stat}_{metric}_ms"
    assert "accept_length" in record and "server_info" in record


def test_an_exception_inside_the_block_still_tears_everything_down(tmp_path) -> None:
    # KeyboardInterrupt is what Ctrl-C raises; it is not an Exception, the harder case for __exit__.
    spec = sglang_spec(tmp_path, run_id="sglang-interrupted-r1")
    with pytest.raises(KeyboardInterrupt), ProcessLauncher().start(spec) as running:
        workers = group_members(running.pgid) - {running.pid}
        assert workers
        raise KeyboardInterrupt
    assert_nothing_left(running.pgid, spec.port, workers)
    assert wait_for(lambda: not group_members(running.pgid), timeout_s=30)


def test_a_flag_sglang_rejects_fails_the_boot_and_leaves_nothing(tmp_path) -> None:
    spec = sglang_spec(tmp_path, "--no-such-flag-here", run_id="sglang-rejected-r1")
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(spec)
    assert "server exited with status" in str(caught.value)  # the exit was noticed, not the timeout
    assert "--no-such-flag-here" in caught.value.log_tail
    assert port_is_free(HOST, spec.port)
