"""This machine's box profile, read from what the machine says about itself (``ledger init``).

The parsers are pure and take the text the tools print (``nvidia-smi --query-gpu=...``,
``/proc/meminfo``, ``lscpu``), so tests feed them captured outputs. What cannot be read stays a
clear placeholder in the written profile (a ``FILL IN`` comment, a zero bandwidth) rather than a
guess: the fit arithmetic and the link ceiling are only as good as these numbers.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from recipe_ledger.recipes.boxes import BOX_SCHEMA_VERSION

GPU_QUERY = [
    "--query-gpu=name,memory.total,pcie.link.gen.max,pcie.link.width.max",
    "--format=csv,noheader,nounits",
]
# Host-to-GPU read bandwidth per PCIe generation at x16, GB/s (raw: a measurement is lower).
PCIE_X16_GBPS = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}
PLACEHOLDER = "FILL IN"
_MIB_PER_GIB = 1024
_KIB_PER_GIB = 1024 * 1024


@dataclass(frozen=True)
class Gpus:
    name: str
    count: int
    hbm_gib: float
    pcie_gen: int | None
    pcie_width: int | None


@dataclass(frozen=True)
class Probes:
    """What the machine printed; None where a tool is missing or failed."""

    nvidia_smi: str | None
    meminfo: str | None
    lscpu: str | None
    machine: str = "x86_64"  # platform.machine()


@dataclass(frozen=True)
class DetectedBox:
    id: str
    display_name: str
    hardware: str | None
    gpus: Gpus | None
    cpu: str | None
    ram_gib: float | None
    link_kind: str | None
    link_gbps: float | None


def parse_gpus(text: str) -> Gpus | None:
    """``nvidia-smi`` CSV rows (name, memory MiB, PCIe gen, width): the first kind, counted."""
    rows = [[cell.strip() for cell in line.split(",")] for line in text.splitlines() if line.strip()]
    rows = [row for row in rows if len(row) >= 2 and _number(row[1]) is not None]
    if not rows:
        return None
    name, memory = rows[0][0], _number(rows[0][1]) or 0.0
    gen = _integer(rows[0][2]) if len(rows[0]) > 2 else None
    width = _integer(rows[0][3]) if len(rows[0]) > 3 else None
    count = sum(1 for row in rows if row[0] == name)
    return Gpus(name, count, round(memory / _MIB_PER_GIB, 1), gen, width)


def parse_meminfo(text: str) -> float | None:
    """Host RAM in GiB from /proc/meminfo's MemTotal."""
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    return round(int(match.group(1)) / _KIB_PER_GIB, 1) if match else None


def parse_lscpu(text: str) -> str | None:
    """'<model name>, <n> cores' from lscpu."""
    fields = dict(_colon_pairs(text))
    model, cpus = fields.get("Model name"), fields.get("CPU(s)")
    if not model:
        return None
    return f"{model}, {cpus} CPUs" if cpus and cpus.isdigit() else model


def pcie_link(gpus: Gpus) -> tuple[str | None, float | None]:
    """The host link's kind and raw bandwidth from the PCIe generation and width, when known."""
    if gpus.pcie_gen is None or gpus.pcie_gen not in PCIE_X16_GBPS:
        return None, None
    width = gpus.pcie_width or 16
    return f"pcie{gpus.pcie_gen}", round(PCIE_X16_GBPS[gpus.pcie_gen] * width / 16, 1)


def match_hardware(gpus: Gpus | None, machine: str, profiles: dict[str, dict]) -> str | None:
    """The taxonomy hardware id whose display name the GPU's name holds (the same GPU count first,
    then the longest name); ``cpu_x86`` for an x86 machine without GPUs; None otherwise."""
    if gpus is None:
        return "cpu_x86" if machine in ("x86_64", "AMD64") and "cpu_x86" in profiles else None
    name = gpus.name.lower()
    fits = [
        (profile.get("gpu_count") == gpus.count, len(str(profile.get("display_name", ""))), hw_id)
        for hw_id, profile in profiles.items()
        if isinstance(profile, dict) and _holds_word(name, str(profile.get("display_name", "")).lower())
    ]
    return max(fits)[2] if fits else None


def detect(probes: Probes, profiles: dict[str, dict]) -> DetectedBox:
    """The box these probes describe (ids such as ``h200-x1`` or ``cpu-only``)."""
    gpus = parse_gpus(probes.nvidia_smi) if probes.nvidia_smi else None
    link_kind, link_gbps = pcie_link(gpus) if gpus else ("none", 0.0)
    box_id = f"{_slug(gpus.name)}-x{gpus.count}" if gpus else "cpu-only"
    shown = f"{gpus.count} x {gpus.name}" if gpus else "CPU-only machine"
    return DetectedBox(
        id=box_id,
        display_name=f"{shown} (detected by ledger init)",
        hardware=match_hardware(gpus, probes.machine, profiles),
        gpus=gpus,
        cpu=parse_lscpu(probes.lscpu) if probes.lscpu else None,
        ram_gib=parse_meminfo(probes.meminfo) if probes.meminfo else None,
        link_kind=link_kind,
        link_gbps=link_gbps,
    )


def render_box(box: DetectedBox) -> str:
    """The profile's YAML text (box schema 1), placeholders marked ``FILL IN``."""
    gpu = box.gpus
    lines = [
        f"# Written by `ledger init` from {'nvidia-smi, ' if gpu else ''}/proc/meminfo and lscpu.",
        f"# Check every number marked {PLACEHOLDER}: `ledger fit` and the link ceiling use them.",
        f"schema_version: {BOX_SCHEMA_VERSION}",
        f"id: {box.id}",
        f"display_name: {json.dumps(box.display_name)}",
        f"hardware: {box.hardware or 'null'}" + ("" if box.hardware else f"  # {PLACEHOLDER}: a taxonomy id"),
        "gpu:",
        f"  name: {json.dumps(gpu.name if gpu else 'none')}",
        f"  count: {gpu.count if gpu else 0}",
        f"  hbm_gib: {gpu.hbm_gib if gpu else 0}" + ("  # as nvidia-smi reports it" if gpu else ""),
        "host:",
        f"  cpu: {json.dumps(box.cpu or '')}" + ("" if box.cpu else f"  # {PLACEHOLDER}"),
        f"  ram_gib: {box.ram_gib or 1}"
        + ("" if box.ram_gib else f"  # {PLACEHOLDER}: /proc/meminfo unread"),
        "link:",
        f"  kind: {box.link_kind or 'unknown'}"
        + ("" if box.link_kind else f"  # {PLACEHOLDER}: pcie5, nvlink-c2c..."),
        f"  bandwidth_gbps: {box.link_gbps if box.link_gbps is not None else 0}" + _link_note(box),
        "sources:",
        '  - "ledger init on this machine"',
    ]
    return "\n".join(lines) + "\n"


def probe_machine() -> Probes:
    """Run the tools this machine has (each with a short timeout); None for what is missing."""
    return Probes(
        nvidia_smi=_run(["nvidia-smi", *GPU_QUERY]),
        meminfo=_read(Path("/proc/meminfo")),
        lscpu=_run(["lscpu"]),
        machine=platform.machine(),
    )


def _link_note(box: DetectedBox) -> str:
    if box.link_kind == "none":
        return ""
    if box.link_gbps is None:
        return f"  # {PLACEHOLDER}: host-to-GPU GB/s (measure it)"
    return "  # raw PCIe rate: a measured host read is lower (docs/lab.md)"


def _run(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _colon_pairs(text: str) -> list[tuple[str, str]]:
    return [
        (k.strip(), v.strip()) for k, sep, v in (line.partition(":") for line in text.splitlines()) if sep
    ]


def _holds_word(text: str, word: str) -> bool:
    return bool(word) and re.search(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])", text) is not None


def _slug(name: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-").split("-")
    kept = [w for w in words if w not in ("nvidia", "amd", "instinct", "geforce", "tesla")] or words
    return "-".join(kept)[:40].strip("-") or "gpu"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _integer(text: str) -> int | None:
    return int(text) if text.isdigit() else None
