"""What to launch: one immutable description shared by the process and the docker launcher.

The runner builds one ``LaunchSpec`` per arm x repeat. Fields after ``run_id`` only matter to the
docker launcher; the process launcher refuses a spec that names an image, because that is a
planning mistake (the plan picked docker and the runner picked a process), not a preference.
"""

from __future__ import annotations

import contextlib
import re
import resource
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NoReturn, Protocol, runtime_checkable

from recipe_ledger.errors import InputError

GpuRequest = Literal["none", "all"] | int


@runtime_checkable
class ServedEngine(Protocol):
    """What a launch needs from the engine it serves: how readiness ends after /health, how the
    prefix cache is emptied, which log lines mean out of memory and what to change then.
    ``recipe_ledger.engines`` provides it; launch never imports that package (it sits above)."""

    @property
    def oom_patterns(self) -> tuple[str, ...]: ...

    @property
    def memory_hint(self) -> str: ...

    def readiness_problem(self, base_url: str, timeout_s: float) -> str | None: ...

    def reset_prefix_cache(self, base_url: str, timeout_s: float) -> bool: ...


class FrozenMap(dict[str, str]):
    """A read-only dict: unlike MappingProxyType it survives ``dataclasses.asdict``, copies and hashing."""

    def _read_only(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("LaunchSpec mappings are read-only; build a new spec with dataclasses.replace")

    # NoReturn fits every mutator's signature: each one raises instead of returning.
    __setitem__ = __delitem__ = _read_only
    clear = pop = popitem = setdefault = update = __ior__ = _read_only

    def __hash__(self) -> int:  # type: ignore[override]  # dict's is None (mutable); this one is read-only
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[type, tuple[dict[str, str]]]:
        return (FrozenMap, (dict(self),))

    def __deepcopy__(self, memo: dict[int, object]) -> FrozenMap:
        return self  # immutable: sharing is copying


# Docker label values and container names accept this; the run id ends up in both.
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
# Only what execve cannot carry: a real environment may hold names like BASH_FUNC_f%% or a.b.
_ENV_NAME = re.compile(r"^[^=\x00]+$")


@dataclass(frozen=True)
class LaunchSpec:
    argv: Sequence[str]
    env: Mapping[str, str]
    host: str
    port: int
    health_path: str
    health_timeout_s: float
    log_path: Path
    run_id: str
    engine: ServedEngine  # recipe_ledger.engines.get(name)
    # docker only
    image: str | None = None
    volumes: Mapping[str, str] = field(default_factory=dict)  # host path -> "container path[:ro]"
    gpus: GpuRequest = "none"
    # Whose GPUs the box has (its profile's gpu.vendor): NVIDIA's device requests or ROCm's devices.
    gpu_vendor: str = "nvidia"
    shm_size: str | None = None
    name: str | None = None
    network: str = "host"  # "host": the server's own --port is the port; otherwise it is published
    container_port: int | None = None  # the port inside the container when not on the host network
    init: bool = False  # docker --init: a PID 1 that forwards SIGTERM, for servers that ignore it as PID 1
    # --ulimit memlock in bytes, -1 for unlimited (the seed's value: pinned host memory for offload).
    # A host without CAP_SYS_RESOURCE (some CI sandboxes) cannot grant more than its own hard limit.
    ulimit_memlock: int = -1

    def __post_init__(self) -> None:
        # Frozen means frozen all the way down: copies as tuple / read-only mappings, so a spec
        # recorded in the ledger is the spec that ran.
        object.__setattr__(self, "argv", tuple(_checked_argv(self.argv)))
        object.__setattr__(self, "env", FrozenMap(_checked_env(self.env)))
        object.__setattr__(self, "volumes", FrozenMap(_checked_volumes(self.volumes)))
        object.__setattr__(self, "log_path", Path(self.log_path))
        _check_endpoint(self.host, self.port, self.health_path, self.health_timeout_s)
        _check_docker_fields(self)
        if not isinstance(self.engine, ServedEngine):
            _bad("engine", f"{self.engine!r} is not an engine (recipe_ledger.engines.get(name) gives one)")
        if not isinstance(self.run_id, str) or not _RUN_ID.match(self.run_id):
            _bad("run_id", f"{self.run_id!r} must be 1-128 characters of letters, digits, '_', '.', '-'")

    @property
    def is_docker(self) -> bool:
        return self.image is not None

    @property
    def published_port(self) -> int:
        """The port inside the container that maps to ``port`` (equal to it on the host network)."""
        return self.container_port if self.container_port is not None else self.port


def _bad(field_name: str, message: str) -> None:
    raise InputError(message, where=f"LaunchSpec.{field_name}")


def _checked_argv(argv: Sequence[str]) -> list[str]:
    if isinstance(argv, str) or not isinstance(argv, Sequence):
        _bad("argv", "must be a list of strings (a shell string would be split differently by each launcher)")
    items = list(argv)
    if not items or not all(isinstance(a, str) for a in items):
        _bad("argv", "must be a non-empty list of strings")
    return items


def _checked_env(env: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(env, Mapping):
        _bad("env", "must be a mapping of variable names to strings")
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            _bad("env", f"{name!r} cannot be an environment variable name (empty, '=' or NUL)")
        if not isinstance(value, str) or "\x00" in value:
            _bad("env", f"{name}: value must be a string, got {type(value).__name__}")
    return dict(env)


def _checked_volumes(volumes: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(volumes, Mapping):
        _bad("volumes", "must map host paths to 'container path[:ro|:rw]'")
    for host_path, target in volumes.items():
        if not str(host_path).startswith("/") or not isinstance(target, str) or not target.startswith("/"):
            _bad("volumes", f"{host_path!r} -> {target!r}: both sides must be absolute paths")
        mode = target.rsplit(":", 1)[1] if ":" in target else "rw"
        if mode not in ("ro", "rw"):
            _bad("volumes", f"{target!r}: mode must be ro or rw")
    return {str(k): v for k, v in volumes.items()}


def _check_endpoint(host: str, port: int, health_path: str, timeout_s: float) -> None:
    if not isinstance(host, str) or not host:
        _bad("host", "must be a non-empty host name or address")
    if not _is_port(port):
        _bad("port", f"{port!r} is not a TCP port (1-65535)")
    if not isinstance(health_path, str) or not health_path.startswith("/"):
        _bad("health_path", f"{health_path!r} must start with '/'")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        _bad("health_timeout_s", f"{timeout_s!r} must be a positive number of seconds")


def _check_docker_fields(spec: LaunchSpec) -> None:
    if spec.image is not None and (not isinstance(spec.image, str) or not spec.image.strip()):
        _bad("image", "must be an image reference (repository@sha256:... preferred) or None")
    if not _is_gpu_request(spec.gpus):
        _bad("gpus", f"{spec.gpus!r} must be 'none', 'all' or a positive number of GPUs")
    if spec.gpu_vendor not in ("nvidia", "amd"):
        _bad("gpu_vendor", f"{spec.gpu_vendor!r} must be 'nvidia' or 'amd' (a box profile's gpu.vendor)")
    if spec.container_port is not None and not _is_port(spec.container_port):
        _bad("container_port", f"{spec.container_port!r} is not a TCP port (1-65535)")
    if spec.network == "host" and spec.container_port not in (None, spec.port):
        _bad("container_port", "on the host network nothing is published: the server's --port is the port")
    if (
        isinstance(spec.ulimit_memlock, bool)
        or not isinstance(spec.ulimit_memlock, int)
        or spec.ulimit_memlock < -1
    ):
        _bad("ulimit_memlock", f"{spec.ulimit_memlock!r} must be a number of bytes, or -1 for unlimited")
    if not isinstance(spec.network, str) or not spec.network:
        _bad("network", "must name a docker network ('host', 'bridge', ...)")


def _is_port(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def _is_gpu_request(value: object) -> bool:
    if value in ("none", "all"):
        return True
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def grantable_memlock() -> int:
    """-1 (unlimited: the seed's `--ulimit memlock=-1`) where this host may grant it, else its own
    hard limit. runc refuses a limit above the daemon's hard limit without CAP_SYS_RESOURCE
    ("error setting rlimit type 8"), as in this project's CI sandbox; pinned-memory offload on a
    GPU box wants unlimited, and there the daemon runs with the capability."""
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    return -1 if hard == resource.RLIM_INFINITY or _has_cap_sys_resource() else hard


def _has_cap_sys_resource() -> bool:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> 24 & 1)  # CAP_SYS_RESOURCE is capability 24
    return False
