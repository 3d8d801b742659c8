"""Launch a server in a docker container: the 000 seed's ``docker run`` shape, through the docker SDK.

``docker run -d --gpus all --ipc host --network host --ulimit memlock=-1 --cap-add IPC_LOCK \
-v ... IMAGE ARGV``

This is the only module of the package that talks to docker, and it imports the SDK lazily so that
``recipe_ledger`` imports (and the process launcher works) on a box without it.

A container is not this process's child: nothing the kernel does when ``ledger`` dies reaches it.
Each launch is labelled with its run, its launch id and its owner (host, pid and the pid's start
identity), and guarded by a watchdog (``launch.guard``) started before the container is created,
which removes the launch's containers by label once ``ledger`` is gone without having done so.
Readiness ends with the ownership check: on the host network the socket on the port must be held
by the container's processes (``launch.owner``, from the container's host pid); on another network
the port must be the one docker publishes for this container.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from recipe_ledger.errors import InputError
from recipe_ledger.launch import owner, procs
from recipe_ledger.launch.failures import BootFailure, classify_boot_failure, hint_for, redacted_tail
from recipe_ledger.launch.guard import Guard
from recipe_ledger.launch.ports import connect_host, ensure_port_free
from recipe_ledger.launch.server import RunningServer
from recipe_ledger.launch.spec import LaunchSpec
from recipe_ledger.redact import IdleFlushedLog, RedactedLog

if TYPE_CHECKING:
    from docker.models.containers import Container

    from docker import DockerClient

log = logging.getLogger(__name__)

LABEL_MANAGED = "recipe-ledger.managed"
LABEL_RUN = "recipe-ledger.run"
LABEL_LAUNCH = "recipe-ledger.launch"
LABEL_OWNER = "recipe-ledger.owner"  # "<host> <pid> <identity>" of the ledger process that made it
DEFAULT_STOP_TIMEOUT_S = 10
_LOG_PUMP_JOIN_S = 5.0
# What the watchdog runs (``python -c`` CODE LABEL) when ledger died: remove the launch's containers.
# A command, not an import: the watchdog stays free of the SDK and of this module.
_REMOVE_BY_LABEL = (
    "import sys, docker\n"
    "client = docker.from_env()\n"
    "for found in client.api.containers(all=True, filters={'label': [sys.argv[1]]}):\n"
    "    client.api.remove_container(found['Id'], force=True)\n"
)
_DOCKER_START_HINT = "dockerd >/var/log/dockerd.log 2>&1 &  (or: systemctl start docker), then: docker info"


class DockerServer(RunningServer):
    """A server in a container this process created; stopping it also removes the container."""

    def __init__(
        self,
        spec: LaunchSpec,
        container: Container,
        log_start_offset: int,
        stop_timeout_s: int,
        guard: Guard | None = None,
    ):
        self._container = container
        self.guard = guard
        # The SDK types both as optional, but a container from ContainerCollection.create/get is
        # built from `docker inspect`, which always carries Id and Name.
        self.container_id = cast(str, container.id)
        self.container_name = cast(str, container.name)
        self.pid = None  # the process is the container's business; container_id identifies it
        self._stop_timeout_s = stop_timeout_s
        self._pump = _LogPump(container, spec)
        super().__init__(spec, log_start_offset)

    def start_container(self) -> None:
        self._container.start()
        self._pump.start()

    def exit_code(self) -> int | None:
        from docker.errors import NotFound

        try:
            self._container.reload()
        except NotFound:
            return -1  # removed behind our back (docker rm -f): it is not running, status unknown
        state = self._container.attrs.get("State", {})
        if state.get("Status") not in ("exited", "dead"):
            return None
        # A container memory limit kills with SIGKILL; say so with the code the classifier knows.
        return 137 if state.get("OOMKilled") else int(state.get("ExitCode", -1))

    def ownership_problem(self) -> str | None:
        """On the host network: the socket on the port is held by the container's processes (found
        from its host pid). Elsewhere: docker publishes the port for this container."""
        attrs = self._container.attrs
        if self.spec.network != "host":
            return published_problem(attrs, self.spec.published_port, self.spec.port, self.container_name)
        root = (attrs.get("State") or {}).get("Pid")
        if not root:
            return f"container {self.container_name} has no running process, yet the port answered"
        return owner.ownership_problem(connect_host(self.spec.host), self.spec.port, [int(root)])

    def _terminate(self) -> None:
        try:
            self._stop_and_remove()
        finally:
            if self.guard is not None:
                self.guard.release()

    def _stop_and_remove(self) -> None:
        from docker.errors import NotFound

        try:
            # docker sends SIGTERM, then SIGKILL after the timeout.
            self._container.stop(timeout=self._stop_timeout_s)
        except NotFound:
            return
        self._pump.finish()
        try:
            self._container.remove(force=True)
        except NotFound:
            pass


class DockerLauncher:
    """Starts ``spec.image`` with ``spec.argv`` as its command; needs the image present locally."""

    def __init__(self, client: DockerClient | None = None, stop_timeout_s: int = DEFAULT_STOP_TIMEOUT_S):
        self._client = client
        self.stop_timeout_s = stop_timeout_s

    def start(self, spec: LaunchSpec) -> DockerServer:
        """A healthy server, or ``BootFailure`` (after teardown); never leaves a container behind."""
        image = spec.image
        if image is None:  # = not spec.is_docker, spelled out so that `image` narrows to str
            raise InputError(
                "the docker launcher needs an image",
                where="LaunchSpec.image",
                hint="set image= (repository@sha256:... preferred), or use ProcessLauncher",
            )
        ensure_port_free(spec.host, spec.port)
        client = self.client()
        _require_image(client, image)
        launch_id = uuid.uuid4().hex
        label = f"{LABEL_LAUNCH}={launch_id}"
        _remove_orphans_quietly(client)
        # Before the container exists: if this process dies from here on, the watchdog removes it.
        guard = Guard.start(None, cleanup=[sys.executable, "-c", _REMOVE_BY_LABEL, label])
        server: DockerServer | None = None
        try:
            server = self._create(client, spec, image, launch_id, guard)
            server.start_container()
            server.wait_until_ready()
            return server
        except BaseException as error:
            # Also on Ctrl-C mid-create, when there is no server object yet: the label finds it.
            if server is not None:
                server.stop_quietly()
            _remove_labelled_quietly(client, label)
            guard.release()
            translated = _docker_boot_failure(error, spec)
            if translated is not None:
                raise translated from error
            raise

    def client(self) -> DockerClient:
        """The docker client, connected on first use; ``BootFailure(docker_unavailable)`` without a daemon."""
        if self._client is None:
            self._client = connect()
        return self._client

    def _create(
        self, client: DockerClient, spec: LaunchSpec, image: str, launch_id: str, guard: Guard
    ) -> DockerServer:
        log_start_offset = _prepare_log(spec)
        container = client.containers.create(image, **container_options(spec, launch_id))
        return DockerServer(spec, container, log_start_offset, self.stop_timeout_s, guard)


def connect() -> DockerClient:
    """A client whose daemon answered a ping."""
    try:
        import docker
    except ImportError as error:
        raise BootFailure(
            "docker_unavailable", "the docker SDK is not installed", hint="pip install 'docker>=7.1'"
        ) from error
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as error:
        raise BootFailure(
            "docker_unavailable", f"the docker daemon does not answer ({error})", hint=_DOCKER_START_HINT
        ) from error
    return client


def container_options(spec: LaunchSpec, launch_id: str) -> dict[str, Any]:
    """Keyword arguments of ``containers.create`` for ``spec``: the seed's ``docker run`` flags."""
    from docker.types import DeviceRequest, Ulimit

    options = container_settings(spec, launch_id)
    options["ulimits"] = [Ulimit(**limit) for limit in options["ulimits"]]
    if "device_requests" in options:
        options["device_requests"] = [DeviceRequest(**request) for request in options["device_requests"]]
    return options


def container_settings(spec: LaunchSpec, launch_id: str) -> dict[str, Any]:
    """What the container is made with, as plain data (no SDK types): ``container_options`` gives
    it to the SDK, ``docker_run_argv`` renders it for people. One place decides the container."""
    options: dict[str, Any] = {
        "command": list(spec.argv),
        "detach": True,
        "environment": dict(spec.env),
        "ipc_mode": "host",  # NCCL and vLLM's shared-memory broadcast need the host's /dev/shm
        "ulimits": [{"name": "memlock", "soft": spec.ulimit_memlock, "hard": spec.ulimit_memlock}],
        "cap_add": ["IPC_LOCK"],
        "volumes": [f"{host}:{target}" for host, target in spec.volumes.items()],
        "labels": {
            LABEL_MANAGED: "1",
            LABEL_RUN: spec.run_id,
            LABEL_LAUNCH: launch_id,
            LABEL_OWNER: owner_label(),
        },
        "name": spec.name or f"rl-{spec.run_id}-{launch_id[:8]}",
        "init": spec.init,
    }
    if spec.network == "host":
        options["network_mode"] = "host"
    else:
        options["network"] = spec.network
        options["ports"] = {f"{spec.published_port}/tcp": (spec.host, spec.port)}
    if spec.gpus != "none" and spec.gpu_vendor == "amd":
        options.update(amd_gpu_options(spec.gpus))
        options["environment"] = {**amd_visible_devices(spec.gpus), **options["environment"]}
    elif spec.gpus != "none":
        count = -1 if spec.gpus == "all" else int(spec.gpus)
        options["device_requests"] = [{"count": count, "capabilities": [["gpu"]]}]
    if spec.shm_size is not None:
        options["shm_size"] = spec.shm_size
    return options


# Left out of the rendered command: the labels mark a container as one of this tool's launches,
# which a later ``ledger`` removes once their owner process is gone (a pasted command is the user's
# own container), and the name holds a launch id made per launch.
_NOT_RENDERED = ("labels", "name", "command")


def docker_run_argv(spec: LaunchSpec, hidden_env: Callable[[str, str], bool]) -> list[str]:
    """``docker run ...`` as the docker launcher would make ``spec``'s container (from
    ``container_settings``, so the two cannot drift), for a person to paste. A variable for which
    ``hidden_env(name, value)`` holds is passed as ``-e NAME``: docker takes its value from the
    caller's environment, and the value itself is never printed."""
    settings = container_settings(spec, "plan")
    argv = ["docker", "run"]
    for key, value in settings.items():
        if key == "environment":
            argv += [
                token
                for name, text in value.items()
                for token in ("-e", name if hidden_env(name, text) else f"{name}={text}")
            ]
        elif key not in _NOT_RENDERED:
            argv += _docker_run_flags(key, value)
    return [*argv, cast(str, spec.image), *settings["command"]]


def _docker_run_flags(key: str, value: Any) -> list[str]:
    """The ``docker run`` flags of one ``containers.create`` keyword (docker's CLI reference)."""
    listed = {"cap_add": "--cap-add", "volumes": "-v", "devices": "--device", "group_add": "--group-add"}
    listed["security_opt"] = "--security-opt"
    if key in listed:
        return [token for item in value for token in (listed[key], str(item))]
    if key in ("detach", "init"):
        return [f"--{key}"] if value else []
    if key == "ipc_mode" or key == "network_mode" or key == "network":
        return [f"--{key.split('_')[0]}", str(value)]
    if key == "shm_size":
        return ["--shm-size", str(value)]
    if key == "ulimits":
        return [t for u in value for t in ("--ulimit", f"{u['name']}={u['soft']}:{u['hard']}")]
    if key == "ports":
        return [t for inside, (host, port) in value.items() for t in ("-p", f"{host}:{port}:{inside}")]
    if key == "device_requests":
        return [t for r in value for t in ("--gpus", "all" if r["count"] == -1 else str(r["count"]))]
    raise ValueError(f"container setting {key!r} has no docker run flag here: add it to _docker_run_flags")


# What ROCm's containers need (ROCm's docker documentation; vLLM's and SGLang's ROCm images say the
# same): the kernel driver's compute interface, the render nodes, the video group that owns them,
# and the seccomp profile lifted (the HSA runtime's memory calls), besides the host IPC already set.
AMD_DEVICES = ("/dev/kfd", "/dev/dri")
AMD_GROUPS = ("video",)


def amd_gpu_options(gpus: object) -> dict[str, Any]:
    """``containers.create`` keywords that give a container the box's AMD GPUs."""
    return {
        "devices": [f"{device}:{device}:rwm" for device in AMD_DEVICES],
        "group_add": list(AMD_GROUPS),
        "security_opt": ["seccomp=unconfined"],
    }


def amd_visible_devices(gpus: object) -> dict[str, str]:
    """A number of GPUs, not all, is the first ones by ROCm's own variable (the devices are all
    passed: /dev/dri holds every render node)."""
    if gpus == "all":
        return {}
    return {"ROCR_VISIBLE_DEVICES": ",".join(str(i) for i in range(int(str(gpus))))}


def owner_label() -> str:
    """This process as a container label names it: host, pid and the pid's start identity."""
    return f"{socket.gethostname()} {os.getpid()} {procs.identity(os.getpid()) or '-'}"


def owner_is_gone(label: str) -> bool:
    """Whether the ledger process an owner label names is gone (judged on its own host only)."""
    host, _, rest = label.partition(" ")
    pid, _, identity = rest.partition(" ")
    if host != socket.gethostname() or not pid.isdigit() or identity in ("", "-"):
        return False
    return procs.is_same_process(int(pid), identity) is False


def published_problem(attrs: dict[str, Any], container_port: int, host_port: int, name: str) -> str | None:
    """None when the container's inspect data publishes ``container_port`` on ``host_port``."""
    bindings = ((attrs.get("NetworkSettings") or {}).get("Ports") or {}).get(f"{container_port}/tcp") or []
    if any(str(binding.get("HostPort")) == str(host_port) for binding in bindings):
        return None
    shown = ", ".join(f"{b.get('HostIp')}:{b.get('HostPort')}" for b in bindings) or "nothing"
    return f"container {name} publishes {container_port}/tcp on {shown}, not on port {host_port}"


def remove_orphans(client: DockerClient) -> list[str]:
    """Remove containers whose ledger process is gone (the watchdog's backstop: a watchdog killed
    with its ledger, as by a kill of the whole session). Returns their names."""
    from docker.errors import NotFound

    removed = []
    for summary in client.api.containers(all=True, filters={"label": [f"{LABEL_MANAGED}=1", LABEL_OWNER]}):
        if not owner_is_gone((summary.get("Labels") or {}).get(LABEL_OWNER, "")):
            continue
        try:
            client.api.remove_container(summary["Id"], force=True)
        except NotFound:
            continue
        removed.append(summary["Names"][0].lstrip("/") if summary.get("Names") else summary["Id"][:12])
    return removed


def _remove_orphans_quietly(client: DockerClient) -> None:
    try:
        for name in remove_orphans(client):
            log.warning("removed container %s: the ledger process that started it is gone", name)
    except Exception:  # a backstop must never stop a launch
        log.warning("could not look for orphaned containers", exc_info=True)


def cleanup_containers(run_id: str | None = None, client: DockerClient | None = None) -> list[str]:
    """Remove leftover containers this tool labelled (of one run, or all); returns their names."""
    return _remove_labelled(client or connect(), cleanup_label(run_id))


def cleanup_label(run_id: str | None) -> str:
    """The label that selects one run's containers, or every container this tool manages."""
    return f"{LABEL_RUN}={run_id}" if run_id is not None else f"{LABEL_MANAGED}=1"


def _remove_labelled(client: DockerClient, label: str) -> list[str]:
    from docker.errors import NotFound

    removed = []
    # The low-level list (no inspect per container): the SDK's containers.list() inspects each one
    # and raises NotFound when another process removes one in between.
    for summary in client.api.containers(all=True, filters={"label": [f"{LABEL_MANAGED}=1", label]}):
        try:
            client.api.remove_container(summary["Id"], force=True)
        except NotFound:
            continue
        removed.append(summary["Names"][0].lstrip("/") if summary.get("Names") else summary["Id"][:12])
    return removed


def _require_image(client: DockerClient, image: str) -> None:
    # Never pull: GPU boxes are often offline, and a pull would silently change what is measured.
    from docker.errors import ImageNotFound

    try:
        client.images.get(image)
    except ImageNotFound as error:
        repository = repository_of(image)
        raise BootFailure(
            "image_missing",
            f"image {image} is not on this machine",
            where=image,
            hint=f"docker images --digests {repository}  # or: docker pull {image}",
        ) from error


def repository_of(image: str) -> str:
    """``registry:5000/org/name`` from ``registry:5000/org/name:tag``, ``...@sha256:...`` or both (a
    port is not a tag)."""
    name = image.split("@", 1)[0]
    head, _, tail = name.rpartition(":")
    return head if head and "/" not in tail else name


def _remove_labelled_quietly(client: DockerClient, label: str) -> None:
    try:
        _remove_labelled(client, label)
    except Exception:  # cleanup on the way out must not hide why we are on the way out
        log.warning("could not remove containers labelled %s", label, exc_info=True)


def _docker_boot_failure(error: BaseException, spec: LaunchSpec) -> BootFailure | None:
    """The ``BootFailure`` for an error of the docker SDK during a launch; None for any other error."""
    if not isinstance(error, Exception) or isinstance(error, BootFailure):
        return None
    from docker.errors import APIError, DockerException
    from requests.exceptions import ConnectionError as DaemonConnectionError

    if isinstance(error, APIError):
        return _api_boot_failure(error, spec)
    if isinstance(error, (DockerException, DaemonConnectionError)):
        return BootFailure(
            "docker_unavailable",
            f"the docker daemon stopped answering ({error})",
            where=spec.image,
            hint=_DOCKER_START_HINT,
        )
    return None


def _api_boot_failure(error: Exception, spec: LaunchSpec) -> BootFailure:
    # The daemon refused to create or start the container (a port already allocated, no GPU
    # runtime, a bad volume): its explanation is the only log there is.
    text = str(getattr(error, "explanation", None) or error)
    cause = classify_boot_failure(text, None, False, spec.engine)
    return BootFailure(
        cause,
        f"docker refused the container: {text}",
        log_tail=redacted_tail(text, extra_env=spec.env),
        where=spec.image,
        hint=hint_for(cause, spec.log_path, spec.port, spec.engine),
    )


def _prepare_log(spec: LaunchSpec) -> int:
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(spec.log_path, "ab") as handle:  # append: a retried launch keeps the earlier log
        return handle.tell()


class _LogPump:
    """Copies the container's output into the log file as it comes, so ``log_tail`` is live."""

    def __init__(self, container: Container, spec: LaunchSpec):
        self._container = container
        self._path = spec.log_path
        self._env = dict(spec.env)  # its secret-named values are hunted in the log verbatim
        self._written = 0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"logs-{container.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        """Wait for the stream to end (the container stopped); fetch what a broken stream missed."""
        if self._thread.ident is None:
            return
        self._thread.join(_LOG_PUMP_JOIN_S)
        if self._error is not None and not self._thread.is_alive():
            self._fetch_rest()

    def _run(self) -> None:
        # Redacted as it is written (redact.stream): a run killed mid-launch leaves no raw secret.
        # The stream blocks until output comes: the held last line is written after a silence.
        handle = IdleFlushedLog(self._path, self._env)
        try:
            for chunk in self._container.logs(stream=True, follow=True, stdout=True, stderr=True):
                handle.write(chunk)
                self._written += len(chunk)
        except Exception as error:  # noqa: BLE001 - a thread must not die noisily; finish() fetches the rest
            self._error = error
        finally:
            handle.close()

    def _fetch_rest(self) -> None:
        try:
            everything = self._container.logs(stdout=True, stderr=True)
        except Exception:
            log.warning("could not fetch the logs of %s", self._container.name, exc_info=True)
            return
        handle = RedactedLog(self._path, self._env)
        try:
            handle.write(everything[self._written :])
        finally:
            handle.close()
