"""Provenance: what a number was measured on and with (host, GPUs, model content).

Everything here reads the machine; nothing here decides. The runner stores the fingerprint in
every result so that two results from different machines are never compared as if alike.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path


def _run(argv: list[str], timeout_s: float = 10.0) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ram_gib() -> str:
    try:
        match = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
        return f"{int(match.group(1)) / 1024 / 1024:.1f}" if match else "?"
    except OSError:
        return "?"


def gpu_summary() -> dict[str, str]:
    """GPU names, count, driver and CUDA version from nvidia-smi; empty on a machine without it."""
    query = _run(
        [
            "nvidia-smi",
            "--query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max",
            "--format=csv,noheader",
        ]
    )
    if not query:
        return {}
    rows = [[c.strip() for c in line.split(",")] for line in query.splitlines() if line.strip()]
    names = sorted({row[0] for row in rows})
    info = {
        "gpu": " + ".join(names),
        "gpu_count": str(len(rows)),
        "driver": rows[0][1] if len(rows[0]) > 1 else "?",
    }
    if len(rows[0]) > 3:
        info["pcie_link"] = f"gen{rows[0][2]} x{rows[0][3]}"
    header = _run(["nvidia-smi"]) or ""
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)
    if cuda:
        info["cuda"] = cuda.group(1)
    return info


def host_fingerprint() -> dict[str, str]:
    """The facts that make two measurements comparable or not."""
    info = {
        "hostname": socket.gethostname(),
        "cpu": cpu_model(),
        "cpus": str(os.cpu_count() or "?"),
        "ram_gib": ram_gib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
    info.update(gpu_summary())
    docker = _run(["docker", "version", "--format", "{{.Server.Version}}"], timeout_s=5)
    if docker:
        info["docker"] = docker
    return info


def comparable_host(info: dict[str, str]) -> dict[str, str]:
    """The parts of a fingerprint that must match for numbers to be compared (not the hostname)."""
    keys = ("cpu", "cpus", "gpu", "gpu_count", "driver", "cuda")
    return {k: info[k] for k in keys if k in info}


def model_revision(path: Path) -> str | None:
    """A Hugging Face snapshot's commit (``.../snapshots/<commit>``), else a content hash of the
    directory: every file's relative path and bytes, in sorted order."""
    path = Path(path)
    if not path.is_dir():
        return None
    resolved = path.resolve()
    if resolved.parent.name == "snapshots" and re.fullmatch(r"[0-9a-f]{40}", resolved.name):
        return f"hf:{resolved.name}"
    digest = hashlib.sha256()
    for file in sorted(p for p in resolved.rglob("*") if p.is_file()):
        digest.update(file.relative_to(resolved).as_posix().encode() + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return "sha256:" + digest.hexdigest()
