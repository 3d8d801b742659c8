"""The launchers against an SGLang stand-in (tests/helpers/fake_server.py --engine sglang): readiness
is /health then a real /generate, /flush_cache is retried while it answers 400, and every failure
leaves nothing running."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from recipe_ledger import engines
from recipe_ledger.engines.sglang_api import CacheFlushFailed, flush_cache, generate_problem
from recipe_ledger.launch import BootFailure, LaunchSpec, ProcessLauncher, live_servers
from recipe_ledger.launch.ports import port_is_free

from helpers import FAKE_SERVER
from helpers.launching import log_when, no_server_left_behind  # noqa: F401  (autouse)
from helpers.net import free_port
from helpers.waiting import wait_for

HOST = "127.0.0.1"


@pytest.fixture
def make_spec(tmp_path: Path) -> Callable[..., LaunchSpec]:
    def build(*server_flags: str, engine: str = "sglang") -> LaunchSpec:
        port = free_port()
        argv = [sys.executable, str(FAKE_SERVER), "--port", str(port), "--engine", "sglang", *server_flags]
        return LaunchSpec(
            argv=argv,
            env={},
            host=HOST,
            port=port,
            health_path="/health",
            health_timeout_s=20.0,
            log_path=tmp_path / "runs" / "server-sglang-r1.log",
            run_id="test-sglang-r1",
            engine=engines.get(engine),
        )

    return build


def test_a_healthy_sglang_is_ready_after_a_real_generate(make_spec) -> None:
    spec = make_spec("--enable-metrics")
    with ProcessLauncher().start(spec) as server:
        assert server.is_alive()
        assert generate_problem(server.base_url, 5) is None
        # Readiness sent one before returning; the log pump writes its line a moment later.
        assert wait_for(lambda: "POST /generate" in server.log_text())
    assert port_is_free(HOST, spec.port)


def test_health_without_generation_is_a_boot_failure_and_nothing_is_left(make_spec) -> None:
    spec = make_spec("--fail-generate")
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(spec)
    failure = caught.value
    assert failure.cause == "generate_failed"
    assert "answered 200 but POST" in str(failure) and "HTTP 500" in str(failure)
    assert "attention backend failed" in failure.log_tail
    assert port_is_free(HOST, spec.port) and not live_servers()


def test_the_vllm_engine_keeps_health_alone_as_readiness(make_spec) -> None:
    # The same server that cannot generate boots as "vllm": /health is vLLM's whole readiness.
    with ProcessLauncher().start(make_spec("--fail-generate", engine="vllm")) as server:
        assert "POST /generate" not in server.log_text()


def test_an_sglang_oom_at_boot_is_out_of_memory(make_spec) -> None:
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(make_spec("--oom-after", "0"))
    assert caught.value.cause == "out_of_memory" and "--mem-fraction-static" in caught.value.hint


def test_a_flag_sglang_does_not_know_is_a_rejected_flag(make_spec) -> None:
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(make_spec("--gpu-memory-utilization", "0.9"))
    assert caught.value.cause == "rejected_flag"


def test_flush_cache_waits_out_draining_requests(make_spec) -> None:
    waits: list[float] = []
    with ProcessLauncher().start(make_spec("--flush-busy", "2")) as server:
        assert flush_cache(server.base_url, sleep=waits.append) == 3
        assert waits == [0.25, 0.5]  # a short backoff, doubling
        assert server.reset_prefix_cache() is True  # the launcher's own call: 200 at once now
        log_when(server, lambda log: "Cache flushed successfully!" in log)


def test_a_cache_that_never_flushes_fails_the_point_instead_of_skipping_it(make_spec) -> None:
    with ProcessLauncher().start(make_spec("--flush-busy", "100")) as server:
        with pytest.raises(CacheFlushFailed) as caught:
            flush_cache(server.base_url, attempts=3, sleep=lambda _: None)
        assert caught.value.exit_code == 3 and "HTTP 400" in str(caught.value)
        assert "warm cache" in str(caught.value)
        busy = "Cache not flushed because there are pending requests"
        assert log_when(server, lambda log: log.count(busy) >= 3).count(busy) == 3


def test_a_server_without_flush_cache_fails_at_once(make_spec) -> None:
    with ProcessLauncher().start(make_spec()) as server:
        slept: list[float] = []
        with pytest.raises(CacheFlushFailed, match="HTTP 404"):
            flush_cache(server.base_url + "/nowhere", sleep=slept.append)
        assert slept == []
