"""The docker launcher against a real daemon and a tiny image built here (no registry pull).

The image is ``FROM scratch`` plus Debian's static busybox, serving /www/health with ``busybox httpd``.
Needs the docker daemon (``require("docker")``: ``scripts/ci/start_docker.sh`` starts it).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.launch import BootFailure, DockerLauncher, LaunchSpec, cleanup_containers, port_is_free
from recipe_ledger.launch.containers import LABEL_MANAGED, LABEL_RUN, container_options
from recipe_ledger.launch.spec import grantable_memlock

from helpers.images import build_busybox_image
from helpers.net import free_port
from helpers.waiting import wait_for

HOST = "127.0.0.1"
TEST_IMAGE_TAG = "recipe-ledger-test/busybox-httpd:1"

MEMLOCK = grantable_memlock()  # what this host can grant (runc refuses unlimited without CAP_SYS_RESOURCE)


@pytest.fixture(scope="session")
def test_image(docker_client):  # type: ignore[no-untyped-def]
    image = build_busybox_image(docker_client, TEST_IMAGE_TAG, {"www/health": b"ok\n"})
    # Kept, not removed: the build is deterministic (same content, same id), and another test
    # session sharing this daemon may be using it right now.
    return image


@pytest.fixture
def run_id() -> str:
    """A run id of this test alone: the daemon is shared with other sessions running these tests."""
    return f"dockertest-{uuid.uuid4().hex[:12]}"


@pytest.fixture(autouse=True)
def no_container_left_behind(docker_client, run_id: str) -> Iterator[None]:  # type: ignore[no-untyped-def]
    yield
    # Only this test's containers: cleaning up every managed container would kill other sessions'.
    leftovers = cleanup_containers(run_id=run_id, client=docker_client)
    assert not leftovers, f"a test left containers behind: {leftovers}"


def containers_of(client, run_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Ids of the containers labelled with ``run_id`` (the list endpoint only: no inspect race)."""
    return [c["Id"] for c in client.api.containers(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})]


@pytest.fixture
def make_spec(tmp_path: Path, test_image, run_id: str) -> Callable[..., LaunchSpec]:  # type: ignore[no-untyped-def]
    def build(argv: list[str] | None = None, *, port: int | None = None, **changes: object) -> LaunchSpec:
        port = port or free_port()
        fields: dict[str, object] = {
            "argv": argv or httpd_argv(f"{HOST}:{port}"),
            "env": {"RL_TEST": "1"},
            "host": HOST,
            "port": port,
            "health_path": "/health",
            "health_timeout_s": 20,
            "log_path": tmp_path / "runs" / "server-control-r1.log",
            "run_id": run_id,
            "image": test_image.id,  # by content id, the local stand-in for a pinned digest
            "init": True,  # busybox httpd as PID 1 would ignore SIGTERM; docker-init forwards it
            "ulimit_memlock": MEMLOCK,
            "engine": VLLM,
        }
        fields.update(changes)
        return LaunchSpec(**fields)  # type: ignore[arg-type]

    return build


def httpd_argv(listen: str) -> list[str]:
    boot = f"echo booting with RL_TEST=$RL_TEST; exec /bin/busybox httpd -f -v -p {listen} -h /www"
    return ["/bin/busybox", "sh", "-c", boot]


def container_exists(client, container_id: str) -> bool:  # type: ignore[no-untyped-def]
    from docker.errors import NotFound

    try:
        client.containers.get(container_id)
    except NotFound:
        return False
    return True


def stop_record(client, container_id: str, since: int) -> tuple[list[str], str]:  # type: ignore[no-untyped-def]
    """What the daemon recorded of a container's end: the signals it sent and the exit code.

    ``docker stop -t N`` sends SIGTERM ("15"), then SIGKILL ("9") only if the container is still
    running N seconds later: the signals say whether SIGTERM was honoured, without timing anything.
    """
    until = int(time.time()) + 1  # the daemon's clock bounds the event window, nothing is asserted on it
    events = client.events(since=since, until=until, filters={"container": container_id}, decode=True)
    signals, exit_code = [], ""
    for event in events:
        attributes = event.get("Actor", {}).get("Attributes", {})
        if event.get("Action") == "kill":
            signals.append(attributes.get("signal", ""))
        elif event.get("Action") == "die":
            exit_code = attributes.get("exitCode", "")
    return signals, exit_code


def test_readiness_logs_and_teardown(docker_client, make_spec) -> None:  # type: ignore[no-untyped-def]
    spec = make_spec()
    since = int(time.time()) - 1
    stop_timeout_s = 30  # long on purpose: a stop that honours SIGTERM is far quicker
    with DockerLauncher(client=docker_client, stop_timeout_s=stop_timeout_s).start(spec) as server:
        assert server.is_alive() and server.base_url == f"http://{HOST}:{spec.port}"
        container = docker_client.containers.get(server.container_id)
        assert container.labels[LABEL_RUN] == spec.run_id and container.labels[LABEL_MANAGED] == "1"
        host_config = container.attrs["HostConfig"]
        assert host_config["NetworkMode"] == "host" and host_config["IpcMode"] == "host"
        assert host_config["CapAdd"] == ["IPC_LOCK"]
        assert host_config["Ulimits"] == [{"Name": "memlock", "Soft": MEMLOCK, "Hard": MEMLOCK}]
        assert wait_for(lambda: "response:200" in server.log_tail())  # the health check, logged live
    assert not container_exists(docker_client, server.container_id)
    assert port_is_free(HOST, spec.port)
    log_text = spec.log_path.read_text()
    assert "booting with RL_TEST=1" in log_text and "response:200" in log_text
    signals, exit_code = stop_record(docker_client, server.container_id, since)
    assert signals == ["15"], f"with --init SIGTERM alone must stop it (signals sent: {signals})"
    assert exit_code != "137", "SIGKILLed: docker-init did not forward SIGTERM"


def test_a_server_ignoring_sigterm_is_killed_after_the_stop_timeout(docker_client, make_spec) -> None:  # type: ignore[no-untyped-def]
    spec = make_spec(init=False)  # busybox httpd as PID 1: SIGTERM does nothing
    since = int(time.time()) - 1
    with DockerLauncher(client=docker_client, stop_timeout_s=1).start(spec) as server:
        pass
    assert not container_exists(docker_client, server.container_id)
    signals, exit_code = stop_record(docker_client, server.container_id, since)
    assert signals == ["15", "9"], f"SIGTERM first, SIGKILL after the stop timeout (sent: {signals})"
    assert exit_code == "137"


def test_published_port_on_a_bridge_network(docker_client, make_spec) -> None:  # type: ignore[no-untyped-def]
    spec = make_spec(argv=httpd_argv("8080"), network="bridge", container_port=8080)
    with DockerLauncher(client=docker_client).start(spec) as server:
        assert server.reset_prefix_cache() is False  # httpd has no such endpoint: False, no exception
        ports = docker_client.containers.get(server.container_id).attrs["NetworkSettings"]["Ports"]
        assert ports["8080/tcp"][0]["HostPort"] == str(spec.port)
    assert port_is_free(HOST, spec.port)


def test_boot_crash_in_a_container_is_classified_and_removed(docker_client, make_spec) -> None:  # type: ignore[no-untyped-def]
    oom = "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'; exit 1"
    spec = make_spec(argv=["/bin/busybox", "sh", "-c", oom])
    with pytest.raises(BootFailure) as caught:
        DockerLauncher(client=docker_client).start(spec)
    assert caught.value.cause == "out_of_memory" and caught.value.server_exit_code == 1
    assert "CUDA out of memory" in caught.value.log_tail
    assert containers_of(docker_client, spec.run_id) == []


def test_health_timeout_in_a_container(docker_client, make_spec) -> None:  # type: ignore[no-untyped-def]
    spec = make_spec(
        argv=["/bin/busybox", "sh", "-c", "echo loading weights; exec /bin/busybox sleep 600"],
        health_timeout_s=1.0,
    )
    with pytest.raises(BootFailure) as caught:
        DockerLauncher(client=docker_client).start(spec)
    # Nothing listens on the port: the server never answered, so it did not boot (not a hang).
    assert caught.value.cause == "no_answer" and "loading weights" in caught.value.log_tail
    assert containers_of(docker_client, spec.run_id) == []


def test_keyboard_interrupt_inside_the_block_removes_the_container(docker_client, make_spec) -> None:  # type: ignore[no-untyped-def]
    spec = make_spec()
    with pytest.raises(KeyboardInterrupt), DockerLauncher(client=docker_client).start(spec) as server:
        raise KeyboardInterrupt
    assert not container_exists(docker_client, server.container_id)
    assert port_is_free(HOST, spec.port)


def test_missing_image_names_the_image_and_the_next_command(docker_client, make_spec) -> None:  # type: ignore[no-untyped-def]
    image = "recipe-ledger-test/absent@sha256:" + "0" * 64
    with pytest.raises(BootFailure) as caught:
        DockerLauncher(client=docker_client).start(make_spec(image=image))
    assert caught.value.cause == "image_missing"
    assert image in str(caught.value) and f"docker pull {image}" in str(caught.value)
    assert "docker images" in str(caught.value)


def test_cleanup_removes_leftover_labelled_containers(docker_client, make_spec, run_id) -> None:  # type: ignore[no-untyped-def]
    # Containers a crashed runner left behind: created with the launcher's own options, never stopped.
    mine = make_spec(run_id=f"{run_id}-crashed", name=f"{run_id}-leftover-mine")
    other = make_spec(run_id=f"{run_id}-other", name=f"{run_id}-leftover-other")
    for spec in (mine, other):
        docker_client.containers.create(spec.image, **container_options(spec, launch_id="lost"))
    assert cleanup_containers(run_id=mine.run_id, client=docker_client) == [mine.name]
    assert containers_of(docker_client, mine.run_id) == []
    assert len(containers_of(docker_client, other.run_id)) == 1, "another run's containers are not touched"
    assert cleanup_containers(run_id=other.run_id, client=docker_client) == [other.name]
    assert containers_of(docker_client, other.run_id) == []
