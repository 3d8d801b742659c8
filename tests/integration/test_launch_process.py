"""The process launcher against real processes: a stdlib stand-in server (tests/helpers/fake_server.py).

Nothing here sleeps on luck: every wait polls a condition with a deadline.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.errors import InputError, StateError
from recipe_ledger.launch import (
    BootFailure,
    LaunchSpec,
    ProcessLauncher,
    ProcessServer,
    ensure_port_free,
    live_servers,
    port_is_free,
    stop_all,
)
from recipe_ledger.launch.process import group_is_gone

from helpers import FAKE_SERVER
from helpers.launching import no_server_left_behind  # noqa: F401  (autouse)
from helpers.net import free_port
from helpers.waiting import wait_for

HOST = "127.0.0.1"


def read_pids(pid_file: Path) -> tuple[int, int]:
    assert wait_for(lambda: pid_file.exists() and pid_file.read_text().endswith("\n"))
    leader, child = pid_file.read_text().split()
    return int(leader), int(child)


def pid_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def make_spec(tmp_path: Path) -> Callable[..., LaunchSpec]:
    def build(
        *server_flags: str,
        port: int | None = None,
        timeout_s: float = 20.0,
        server_port: int | None = None,
        env: dict[str, str] | None = None,
    ) -> LaunchSpec:
        port = port or free_port()
        argv = [sys.executable, str(FAKE_SERVER), "--port", str(server_port or port), *server_flags]
        return LaunchSpec(
            argv=argv,
            env=env or {},
            host=HOST,
            port=port,
            health_path="/health",
            health_timeout_s=timeout_s,
            log_path=tmp_path / "runs" / "server-control-r1.log",
            run_id="test-control-r1",
            engine=VLLM,
        )

    return build


def group_has_no_process(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def assert_torn_down(pgid: int, port: int) -> None:
    # What stop() guarantees on return: no live member (a zombie is dead) and the port free.
    assert group_is_gone(pgid), f"process group {pgid} still has live members"
    assert port_is_free(HOST, port)
    # Orphaned workers' zombies are reaped by PID 1, which on some machines (this sandbox's init)
    # only does so every couple of seconds: wait for it, with a deadline.
    assert wait_for(lambda: group_has_no_process(pgid), timeout_s=30), f"process group {pgid} remains"
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def test_start_returns_a_healthy_server_and_the_block_tears_it_down(make_spec, tmp_path) -> None:
    pid_file = tmp_path / "pids"
    spec = make_spec("--delay", "0.5", "--spawn-child", "--pid-file", str(pid_file), env={"RL_MARK": "x"})
    with ProcessLauncher().start(spec) as server:
        assert server.is_alive()
        assert server.base_url == f"http://{HOST}:{spec.port}"
        assert server.pgid == server.pid
        assert not port_is_free(HOST, spec.port)
        leader, child = read_pids(pid_file)
        assert leader == server.pid and not pid_is_gone(child)
        assert "Application startup complete." in server.log_tail(80)
        assert "GET /health" in server.log_tail(80)  # it answered 200 only after --delay
    assert_torn_down(server.pgid, spec.port)
    assert pid_is_gone(child), "the worker in the group must go with the leader"
    assert not server.is_alive()
    assert server not in live_servers()


def test_boot_crash_is_classified_from_its_log_and_leaves_nothing(make_spec, tmp_path) -> None:
    pid_file = tmp_path / "pids"
    spec = make_spec("--never-healthy", "--oom-after", "0.3", "--pid-file", str(pid_file))
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(spec)
    failure = caught.value
    assert failure.cause == "out_of_memory"
    assert failure.server_exit_code == 1
    assert "CUDA out of memory" in failure.log_tail
    assert str(spec.log_path) in str(failure)
    # Failing fast is the exit being noticed, not the health timeout running out.
    assert "server exited with status 1 before" in str(failure), "an exited server must fail fast"
    leader, _ = read_pids(pid_file)
    assert_torn_down(leader, spec.port)


def test_rejected_flag_is_classified(make_spec) -> None:
    spec = make_spec("--no-such-flag")
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(spec)
    assert caught.value.cause == "rejected_flag"
    assert "unrecognized arguments: --no-such-flag" in caught.value.log_tail


def test_health_timeout_is_classified_and_the_server_stopped(make_spec, tmp_path) -> None:
    pid_file = tmp_path / "pids"
    spec = make_spec("--never-healthy", "--pid-file", str(pid_file), timeout_s=1.5)
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(spec)
    assert caught.value.cause == "timeout"
    assert caught.value.server_exit_code is None
    assert "within 1.5 s" in str(caught.value)
    leader, _ = read_pids(pid_file)
    assert_torn_down(leader, spec.port)


def test_a_server_ignoring_sigterm_is_killed_with_its_group(make_spec, tmp_path) -> None:
    pid_file = tmp_path / "pids"
    spec = make_spec("--ignore-sigterm", "--spawn-child", "--pid-file", str(pid_file))
    grace_s = 1.0
    with ProcessLauncher(stop_grace_s=grace_s).start(spec) as server:
        _, child = read_pids(pid_file)
    assert_torn_down(server.pgid, spec.port)
    assert pid_is_gone(child)
    # SIGTERM first (the server logs it and carries on), SIGKILL after the grace period.
    assert "SIGTERM received and ignored" in spec.log_path.read_text()
    assert server.exit_code() == -signal.SIGKILL


def test_keyboard_interrupt_inside_the_block_still_tears_down(make_spec) -> None:
    spec = make_spec()
    with pytest.raises(KeyboardInterrupt), ProcessLauncher().start(spec) as server:
        raise KeyboardInterrupt
    assert_torn_down(server.pgid, spec.port)
    assert server not in live_servers()


def test_keyboard_interrupt_during_start_leaves_no_process(make_spec, tmp_path, monkeypatch) -> None:
    pid_file = tmp_path / "pids"
    spec = make_spec("--never-healthy", "--pid-file", str(pid_file))

    def interrupted(*_args: object, **_kwargs: object) -> None:
        # Ctrl-C while the readiness loop waits, once the server process really exists.
        read_pids(pid_file)
        raise KeyboardInterrupt

    monkeypatch.setattr("recipe_ledger.launch.server.wait_until_healthy", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ProcessLauncher().start(spec)
    leader, _ = read_pids(pid_file)
    assert_torn_down(leader, spec.port)
    assert live_servers() == []


def test_stop_all_stops_every_live_server_for_a_signal_handler(make_spec) -> None:
    servers = [ProcessLauncher().start(make_spec()) for _ in range(2)]
    assert set(map(id, live_servers())) >= set(map(id, servers))
    assert stop_all() == 2
    for server in servers:
        assert_torn_down(server.pgid, server.spec.port)
    assert live_servers() == []
    servers[0].stop()  # idempotent: stopping again is harmless


def test_preflight_refuses_a_port_in_use_and_names_the_next_command(make_spec) -> None:
    with socket.socket() as holder:
        holder.bind((HOST, 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert not port_is_free(HOST, port)
        with pytest.raises(StateError) as caught:
            ensure_port_free(HOST, port)
        assert str(port) in str(caught.value) and f"ss -ltnp 'sport = :{port}'" in str(caught.value)
        with pytest.raises(StateError):
            ProcessLauncher().start(make_spec(port=port))
    assert port_is_free(HOST, port)


def test_a_server_that_reports_its_port_taken_is_classified_port_in_use(make_spec) -> None:
    # Health is probed on a free port while the server binds one that is taken (a race the
    # preflight cannot see): the server's own "Address already in use" decides the cause.
    with socket.socket() as holder:
        holder.bind((HOST, 0))
        holder.listen()
        spec = make_spec(server_port=holder.getsockname()[1])
        with pytest.raises(BootFailure) as caught:
            ProcessLauncher().start(spec)
    assert caught.value.cause == "port_in_use"
    assert "ss -ltnp" in str(caught.value)


def test_reset_prefix_cache_reports_whether_the_server_has_it(make_spec) -> None:
    with ProcessLauncher().start(make_spec("--prefix-cache")) as server:
        assert server.reset_prefix_cache() is True
    with ProcessLauncher().start(make_spec()) as server:
        assert server.reset_prefix_cache() is False
    assert server.reset_prefix_cache() is False  # a stopped server: False, never an exception


def test_log_is_appended_so_a_retry_keeps_the_earlier_attempt(make_spec) -> None:
    failing = make_spec("--no-such-flag")
    with pytest.raises(BootFailure):
        ProcessLauncher().start(failing)
    retry = make_spec(port=failing.port)
    with ProcessLauncher().start(retry) as server:
        assert "unrecognized arguments" not in server.log_tail()  # judged on its own output
    assert "unrecognized arguments" in retry.log_path.read_text()


def test_process_launcher_refuses_a_docker_spec(make_spec) -> None:
    import dataclasses

    with pytest.raises(InputError, match="docker launcher"):
        ProcessLauncher().start(dataclasses.replace(make_spec(), image="vllm/vllm-openai:latest"))


def test_secrets_in_the_launch_env_do_not_reach_the_tail(make_spec, monkeypatch) -> None:
    secret = "abcd1234efgh5678-not-public"
    spec = make_spec("--never-healthy", timeout_s=1.0, env={"SERVICE_API_KEY": secret})
    original_spawn = ProcessLauncher._spawn

    def spawn_and_leak(self: ProcessLauncher, spec_: LaunchSpec, *rest: object) -> ProcessServer:
        # The way a server might print a credential it was given: into its own log.
        server = original_spawn(self, spec_, *rest)
        with open(spec_.log_path, "a") as handle:
            handle.write(f"connecting with key {secret}\n")
        return server

    monkeypatch.setattr(ProcessLauncher, "_spawn", spawn_and_leak)
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(spec)
    assert secret not in caught.value.log_tail and "[REDACTED]" in caught.value.log_tail
