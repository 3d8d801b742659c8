"""Preflight: refuse to spend machine time on a run that cannot be right.

Seed 000 lost a 92-minute boot to a model on a network share and four 74-minute kernel autotunes
to flag changes; both are cheap to see before launching.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from recipe_ledger.errors import StateError
from recipe_ledger.launch.ports import ensure_port_free
from recipe_ledger.pipeline.plan import ArmPlan, RunPlan
from recipe_ledger.recipes.flags import parse_flags

NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "sshfs", "9p", "afs", "glusterfs", "ceph", "lustre"}

# Flags that change what the server does with requests, not which kernels it compiles: a change
# in these does not invalidate a kernel-autotune cache.
_NOT_AUTOTUNE_KEYED = {
    "--host",
    "--port",
    "--served-model-name",
    "--api-key",
    "--tool-call-parser",
    "--reasoning-parser",
    "--enable-auto-tool-choice",
    "--chat-template",
    "--disable-log-requests",
    "--disable-log-stats",
    "--disable-uvicorn-access-log",
    "--uvicorn-log-level",
    "--trust-remote-code",
}


@dataclass
class PreflightReport:
    notices: list[str] = field(default_factory=list)


def mount_fstype(path: Path) -> str | None:
    """The file-system type of the mount holding ``path`` (longest mount-point prefix)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    target = str(path.resolve())
    best: tuple[str | None, int] = (None, -1)
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) > best[1]:
            best = (parts[2], len(point))
    return best[0]


def is_network_fs(fstype: str | None) -> bool:
    if not fstype:
        return False
    return fstype in NETWORK_FS or fstype.startswith("fuse")


def check_model_local(arm: ArmPlan, allow_network_fs: bool) -> None:
    if not arm.model_dir:
        return
    if not Path(arm.model_dir).is_dir():
        raise StateError(
            f"arm {arm.name!r}: model directory {arm.model_dir} does not exist",
            where=arm.model_dir,
            hint="scripts/make_tiny_model.py DIR for the tiny model, or fix model_path",
        )
    fstype = mount_fstype(Path(arm.model_dir))
    if is_network_fs(fstype) and not allow_network_fs:
        raise StateError(
            f"arm {arm.name!r}: the model is on a network file system ({fstype}); seed 000 saw an "
            "8-minute boot become 92 minutes that way",
            where=arm.model_dir,
            hint="copy the model to a local disk, or pass --allow-network-fs",
        )


_ENGINE_SETUP = {"sglang": "./dev serve-setup  # builds .venv-sglang", "vllm": "scripts/setup_serve_venv.sh"}


def check_engine(plan: RunPlan) -> None:
    """Every arm's server program is installed (a local process; an image brings its own)."""
    if plan.experiment.server.launcher != "process":
        return
    for arm in plan.arms.values():
        if not arm.argv:
            continue  # a study arm
        binary = arm.argv[0]
        if shutil.which(binary) is None and not Path(binary).is_file():
            what = "SGLang's venv python" if arm.engine == "sglang" else "the serving engine"
            raise StateError(
                f"arm {arm.name!r}: {what} {binary!r} is not installed",
                where=binary,
                hint=_ENGINE_SETUP.get(arm.engine, _ENGINE_SETUP["vllm"]),
            )


def check_gpu_idle(allow_busy: bool) -> str | None:
    """A busy GPU makes every number wrong; say so before launching."""
    if shutil.which("nvidia-smi") is None:
        return None
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    busy = [line for line in out.stdout.splitlines() if line.strip()]
    if busy and not allow_busy:
        raise StateError(
            f"the GPU is busy: {'; '.join(busy)}",
            where="nvidia-smi",
            hint="stop those processes, or pass --allow-busy-gpu",
        )
    return f"GPU busy, allowed: {'; '.join(busy)}" if busy else None


def autotune_fingerprint(argv: list[str]) -> str:
    """The flags that key a kernel-autotune cache (all but the serving-only ones), hashed."""
    keyed = [(f.name, f.values) for f in parse_flags(argv[1:]) if f.name not in _NOT_AUTOTUNE_KEYED]
    return hashlib.sha256(json.dumps(sorted(keyed)).encode()).hexdigest()[:16]


def autotune_cache_dir(arm: ArmPlan) -> Path:
    return Path(
        arm.env.get("VLLM_CACHE_ROOT") or os.environ.get("VLLM_CACHE_ROOT") or Path.home() / ".cache" / "vllm"
    )


def check_autotune_cache(arm: ArmPlan) -> str | None:
    """Announce a long first boot when this flag set has never booted against this cache."""
    seen_file = autotune_cache_dir(arm) / ".recipe-ledger-flagsets.json"
    seen = set(json.loads(seen_file.read_text())) if seen_file.is_file() else set()
    fingerprint = autotune_fingerprint(arm.argv)
    if fingerprint in seen:
        return None
    return (
        f"arm {arm.name!r}: flag set {fingerprint} is new to the kernel cache {seen_file.parent}; the first "
        "boot may autotune for a long time (seed 000: 74 minutes on a GB300)"
    )


# ------------------------------------------------------------------------------ SGLang's compile caches

SEEN_FILE = ".recipe-ledger-flagsets.json"


@dataclass(frozen=True)
class CompileCache:
    """One persistent JIT cache SGLang fills at boot: its name, the variable that moves it, its root."""

    name: str
    env: str
    path: Path


def sglang_compile_caches(env: Mapping[str, str], home: Path, user: str) -> list[CompileCache]:
    """Where SGLang's kernels land, given the server's environment (pure). Seed 004: with the
    TileLang and Triton caches at their real roots, a 110 s prewarm became 5 s."""
    return [
        CompileCache(
            "Triton", "TRITON_CACHE_DIR", Path(env.get("TRITON_CACHE_DIR") or home / ".triton" / "cache")
        ),
        CompileCache(
            "TileLang",
            "TILELANG_CACHE_DIR",
            Path(env.get("TILELANG_CACHE_DIR") or home / ".tilelang" / "cache"),
        ),
        CompileCache(
            "torch inductor",
            "TORCHINDUCTOR_CACHE_DIR",
            Path(env.get("TORCHINDUCTOR_CACHE_DIR") or f"/tmp/torchinductor_{user}"),
        ),
    ]


def _has_entries(path: Path) -> bool:
    try:
        return any(child.name != SEEN_FILE for child in path.iterdir())
    except OSError:
        return False


def check_sglang_compile_caches(arm: ArmPlan, caches: list[CompileCache]) -> str | None:
    """Announce a cold compile: a cache that is empty (or missing), or a flag set these caches have
    never booted. A notice, never a refusal: a cold boot is slow, not wrong."""
    cold = [c for c in caches if not _has_entries(c.path)]
    if cold:
        listed = ", ".join(f"{c.name} at {c.path} (${c.env})" for c in cold)
        return (
            f"arm {arm.name!r}: SGLang's compile caches are empty: {listed}; the first boot compiles "
            "cold (seed 004: a 110 s prewarm, 5 s with the caches kept at their real roots)"
        )
    seen_file = caches[0].path / SEEN_FILE
    fingerprint = autotune_fingerprint(arm.argv)
    if fingerprint in _read_seen(seen_file):
        return None
    return (
        f"arm {arm.name!r}: flag set {fingerprint} is new to SGLang's compile caches "
        f"({', '.join(str(c.path) for c in caches)}); the first boot may compile kernels for a while"
    )


def unpersisted_container_caches(arm: ArmPlan, volumes: Mapping[str, str]) -> list[CompileCache]:
    """The caches an SGLang container would write inside itself (lost with it at every launch): none
    of ``volumes``' targets holds their root. The container runs as root with the arm's env."""
    targets = [Path(target.rsplit(":", 1)[0]) for target in volumes.values()]
    return [
        cache
        for cache in sglang_compile_caches(arm.env, Path("/root"), "root")
        if not any(cache.path == t or t in cache.path.parents for t in targets)
    ]


def _sglang_cache_notice(arm: ArmPlan, plan: RunPlan) -> str | None:
    server = plan.experiment.server
    if server.launcher == "docker":
        lost = unpersisted_container_caches(arm, server.volumes)
        if not lost:
            return None
        return (
            f"arm {arm.name!r}: SGLang's compile caches live inside the container and die with it: "
            + ", ".join(f"{c.name} ({c.path})" for c in lost)
            + "; every launch compiles cold (seed 004: 110 s against 5 s): mount a host directory "
            "at each under server.volumes"
        )
    caches = sglang_compile_caches({**os.environ, **arm.env}, Path.home(), getpass.getuser())
    return check_sglang_compile_caches(arm, caches)


def _read_seen(seen_file: Path) -> set[str]:
    try:
        return set(json.loads(seen_file.read_text())) if seen_file.is_file() else set()
    except (OSError, ValueError):
        return set()


def _seen_file(arm: ArmPlan) -> Path:
    if arm.engine == "sglang":
        caches = sglang_compile_caches({**os.environ, **arm.env}, Path.home(), getpass.getuser())
        return caches[0].path / SEEN_FILE
    return autotune_cache_dir(arm) / SEEN_FILE


def remember_flagset(arm: ArmPlan) -> None:
    """After a successful boot: this cache (vLLM's autotune cache, SGLang's Triton cache) has now
    seen this flag set."""
    seen_file = _seen_file(arm)
    try:
        seen = set(json.loads(seen_file.read_text())) if seen_file.is_file() else set()
        seen.add(autotune_fingerprint(arm.argv))
        seen_file.parent.mkdir(parents=True, exist_ok=True)
        seen_file.write_text(json.dumps(sorted(seen)))
    except OSError:
        pass  # a read-only cache only costs the announcement next time


def preflight(
    plan: RunPlan, *, allow_network_fs: bool = False, allow_busy_gpu: bool = False
) -> PreflightReport:
    report = PreflightReport()
    server = plan.experiment.server
    if server.needs_server:
        check_engine(plan)
        ensure_port_free(server.host, server.port)
    for arm in plan.arms.values():
        check_model_local(arm, allow_network_fs)
        # Kernel autotuning and JIT compiling are a GPU affair (SGLang on CPU serves with torch's
        # native attention): a CPU box has no such cache to warn about.
        if server.needs_server and plan.box.gpu.count > 0:
            notice = _sglang_cache_notice(arm, plan) if arm.engine == "sglang" else check_autotune_cache(arm)
            if notice:
                report.notices.append(notice)
    gpu = check_gpu_idle(allow_busy_gpu)
    if gpu:
        report.notices.append(gpu)
    return report
