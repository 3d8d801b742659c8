"""Preflight: refuse to spend machine time on a run that cannot be right.

Seed 000 lost a 92-minute boot to a model on a network share and four 74-minute kernel autotunes
to flag changes; both are cheap to see before launching. What a cold cache looks like, and where a
server program comes from, is each engine's to say (``recipe_ledger.engines``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from recipe_ledger import engines
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


def check_engine(plan: RunPlan) -> None:
    """Every arm's server program is installed (a local process; an image brings its own)."""
    if plan.experiment.server.launcher != "process":
        return
    for arm in plan.arms.values():
        if not arm.argv:
            continue  # a study arm
        binary = arm.argv[0]
        if shutil.which(binary) is None and not Path(binary).is_file():
            engine = engines.get(arm.engine)
            raise StateError(
                f"arm {arm.name!r}: {engine.program_label} {binary!r} is not installed",
                where=binary,
                hint=engine.setup_hint,
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


def boot_cache_notice(arm: ArmPlan, container_volumes: Mapping[str, str] | None = None) -> str | None:
    """The arm's engine on its kernel or compile cache: a notice when the first boot will be slow
    (``container_volumes``: the mounts of the container it runs in, None for a local process)."""
    engine = engines.get(arm.engine)
    return engine.boot_cache_notice(arm.name, arm.env, autotune_fingerprint(arm.argv), container_volumes)


def remember_flagset(arm: ArmPlan) -> None:
    """After a successful boot: the engine's cache (vLLM's autotune cache, SGLang's Triton cache)
    has now seen this flag set."""
    seen_file = engines.get(arm.engine).flagset_seen_file(arm.env)
    if seen_file is None:
        return  # an engine without such a cache
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
            notice = boot_cache_notice(arm, server.volumes if server.launcher == "docker" else None)
            if notice:
                report.notices.append(notice)
    gpu = check_gpu_idle(allow_busy_gpu)
    if gpu:
        report.notices.append(gpu)
    return report
