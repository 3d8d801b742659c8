"""Memory-fit arithmetic: does a checkpoint fit a box, and what must leave the GPU.

Pure functions over a recipe's ``memory`` block, a box profile and the resolved launch argv.
The model follows how vLLM budgets device memory:

  budget      = GPUs x HBM (as the runtime reports it) x --gpu-memory-utilization
  resident    = weights that stay on the GPU (after Engram host tables and UVA expert offload)
  KV room     = budget - resident - runtime reserve (activations, CUDA graphs, buffers)
  it boots    when KV room holds at least one sequence of the full context (vLLM refuses to
              start otherwise), and pinned host memory fits in host RAM.

Every number this prints is derived from those inputs; the assumptions are listed with it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from recipe_ledger.recipes.boxes import Box
from recipe_ledger.recipes.flags import all_values, last_value
from recipe_ledger.recipes.models import MemoryBlock, MemoryComponent

GIB = 1024**3
GB = 1e9
VLLM_DEFAULT_GPU_UTILIZATION = 0.9


@dataclass(frozen=True)
class Placement:
    name: str
    kind: str
    stored_gib: float
    gpu_gib: float
    host_gib: float
    where: str


@dataclass(frozen=True)
class FitInputs:
    memory: MemoryBlock
    box: Box
    argv: list[str]
    context: int | None = None  # overrides --max-model-len
    offload_gib: float | None = None  # overrides --cpu-offload-gb (per GPU, as vLLM takes it)
    gpu_utilization: float | None = None
    declared_vram_minimum_gb: float | None = None
    default_context: int | None = None  # the model's context length, when argv has none


@dataclass
class FitReport:
    box_id: str
    gpu_count: int
    context: int
    gpu_utilization: float
    placements: list[Placement]
    checkpoint_gib: float
    budget_gib: float
    resident_gib: float
    reserve_gib: float
    kv_room_gib: float
    kv_per_sequence_gib: float
    kv_capacity_tokens: int
    full_context_sequences: int
    host_ram_gib: float
    host_used_gib: float
    expert_offload_asked_gib: float
    expert_offload_gib: float
    min_expert_offload_gib: float | None
    weights_fit: bool
    kv_fits: bool
    host_fits: bool
    vram_minimum_computed_gb: float
    vram_minimum_declared_gb: float | None
    disk_gb: float
    link_gbps: float  # the box's host-to-GPU read bandwidth: what offloaded weights cross every step
    link_kind: str
    # The box's GPU-to-GPU path (what TP and EP collectives cross every step); None when it names none.
    cross_gpu_gbps: float | None = None
    cross_gpu_latency_us: float | None = None
    cross_gpu_kind: str | None = None
    cross_gpu_measured_in: str | None = None  # the ledger entry that measured it; None: sourced
    problems: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.weights_fit and self.kv_fits and self.host_fits


def segment_match(pattern: str, name: str) -> bool:
    """vLLM's --cpu-offload-params rule: the pattern's dot-separated segments must appear as a
    contiguous run of whole segments of the parameter name ("experts" matches
    "mlp.experts.w2_weight"; "expert", "w2" and "experts.*" do not: no globbing)."""
    want = pattern.split(".")
    have = name.split(".")
    return any(have[i : i + len(want)] == want for i in range(len(have) - len(want) + 1))


def patterns_matching_nothing(patterns: tuple[str, ...], components: list[MemoryComponent]) -> list[str]:
    """The offload patterns that match no known parameter name of the checkpoint."""
    names = [name for component in components for name in component.param_names]
    if not names:
        return []
    return [p for p in patterns if not any(segment_match(p, n) for n in names)]


def engram_offloaded(argv: list[str]) -> bool:
    raw = last_value(argv, "--engram-config")
    if not raw:
        return False
    try:
        return bool(json.loads(raw).get("cpu_offload"))
    except (ValueError, AttributeError):
        return False


def _expert_offload_asked(inputs: FitInputs) -> float:
    if inputs.offload_gib is not None:
        return inputs.offload_gib * max(inputs.box.gpu.count, 1)
    raw = last_value(inputs.argv, "--cpu-offload-gb")
    return float(raw) * max(inputs.box.gpu.count, 1) if raw else 0.0


def _gpu_utilization(inputs: FitInputs) -> float:
    if inputs.gpu_utilization is not None:
        return inputs.gpu_utilization
    raw = last_value(inputs.argv, "--gpu-memory-utilization")
    return float(raw) if raw else VLLM_DEFAULT_GPU_UTILIZATION


def _context(inputs: FitInputs) -> int:
    if inputs.context is not None:
        return inputs.context
    raw = last_value(inputs.argv, "--max-model-len")
    return int(raw) if raw else int(inputs.default_context or 0)


def _offloadable_experts(memory: MemoryBlock, argv: list[str]) -> tuple[float, list[str]]:
    """GiB of expert weights the given --cpu-offload-params can reach, and dead patterns."""
    experts = [c for c in memory.components if c.offload == "uva"]
    patterns = all_values(argv, "--cpu-offload-params")
    dead = patterns_matching_nothing(patterns, experts)
    if patterns and len(dead) == len(patterns):
        return 0.0, dead
    return sum(c.stored_gib for c in experts), dead


def place_components(inputs: FitInputs) -> tuple[list[Placement], float, list[str]]:
    """Where each component lives; returns the placements, the expert GiB offloaded, problems."""
    memory, box = inputs.memory, inputs.box
    problems: list[str] = []
    asked = _expert_offload_asked(inputs)
    reachable, dead = _offloadable_experts(memory, inputs.argv)
    for pattern in dead:
        problems.append(
            f"--cpu-offload-params {pattern!r} matches no parameter of this checkpoint "
            "(vLLM matches whole name segments, no wildcards): nothing is offloaded by it"
        )
    remaining = min(asked, reachable)
    offloaded = remaining
    engram_host = engram_offloaded(inputs.argv)
    placements = []
    for c in memory.components:
        if box.gpu.count == 0:
            placements.append(
                Placement(c.name, c.kind, c.stored_gib, 0.0, c.stored_gib, "host (CPU backend)")
            )
        elif c.offload == "host_table" and engram_host:
            placements.append(Placement(c.name, c.kind, c.stored_gib, 0.0, c.stored_gib, "host (table)"))
        elif c.offload == "uva" and remaining > 0:
            moved = min(remaining, c.stored_gib)
            remaining -= moved
            where = "GPU + host (UVA rows)" if moved < c.stored_gib else "host (UVA rows)"
            placements.append(Placement(c.name, c.kind, c.stored_gib, c.stored_gib - moved, moved, where))
        else:
            placements.append(Placement(c.name, c.kind, c.stored_gib, c.stored_gib, 0.0, "GPU"))
    if asked > reachable:
        problems.append(
            f"--cpu-offload-gb asks for {asked:g} GiB but only {reachable:.1f} GiB of weights match "
            "--cpu-offload-params"
        )
    return placements, offloaded, problems


def _assumptions(inputs: FitInputs, util_from_argv: bool) -> list[str]:
    notes = [
        (
            "HBM is what the CUDA runtime reports per GPU (the box profile's hbm_gib); "
            "--gpu-memory-utilization is a fraction of it"
        ),
        (
            f"runtime reserve of {inputs.memory.activation_reserve_gib:g} GiB (activations, CUDA graphs, "
            "buffers) from the recipe's memory block"
        ),
        "vLLM refuses to start unless the KV pool holds one sequence of the full context",
        "--cpu-offload-gb is per GPU and takes expert weights first (the only uva-offloadable component)",
    ]
    if inputs.box.gpu.count > 1:
        notes.append("weights and KV split evenly across the GPUs (tensor/expert parallel)")
    if not util_from_argv:
        notes.append(
            f"no --gpu-memory-utilization in the command: vLLM's default {VLLM_DEFAULT_GPU_UTILIZATION}"
        )
    return notes


def compute_fit(inputs: FitInputs) -> FitReport:
    """The whole fit report for one (recipe memory, box, command)."""
    memory, box = inputs.memory, inputs.box
    placements, offloaded, problems = place_components(inputs)
    util = _gpu_utilization(inputs)
    context = _context(inputs)
    checkpoint = sum(p.stored_gib for p in placements)
    resident = sum(p.gpu_gib for p in placements)
    host_used = sum(p.host_gib for p in placements)
    budget = (box.hbm_total_gib * util) if box.gpu.count else box.host.ram_gib
    if box.gpu.count == 0:
        resident, budget = host_used, box.host.ram_gib
    reserve = memory.activation_reserve_gib
    kv_room = budget - resident - reserve
    bytes_per_token = memory.kv_bytes_per_token or 0.0
    kv_per_seq = (bytes_per_token * context) / GIB + memory.kv_fixed_gib
    capacity = int(max(kv_room - memory.kv_fixed_gib, 0) * GIB / bytes_per_token) if bytes_per_token else 0
    sequences = int(max(kv_room, 0) // kv_per_seq) if kv_per_seq > 0 else 0
    unoffloaded = (
        sum(p.stored_gib for p in placements if not p.where.startswith("host (table")) if box.gpu.count else 0
    )
    needed = unoffloaded + reserve + kv_per_seq - budget
    min_offload = math.ceil(needed) if box.gpu.count and needed > 0 else (0.0 if box.gpu.count else None)
    disk_gb = memory.disk_gb or checkpoint * GIB / GB
    return FitReport(
        box_id=box.id,
        gpu_count=box.gpu.count,
        context=context,
        gpu_utilization=util,
        placements=placements,
        checkpoint_gib=checkpoint,
        budget_gib=budget,
        resident_gib=resident,
        reserve_gib=reserve,
        kv_room_gib=kv_room,
        kv_per_sequence_gib=kv_per_seq,
        kv_capacity_tokens=capacity,
        full_context_sequences=sequences,
        host_ram_gib=box.host.ram_gib,
        host_used_gib=host_used,
        expert_offload_asked_gib=_expert_offload_asked(inputs),
        expert_offload_gib=offloaded,
        min_expert_offload_gib=min_offload,
        weights_fit=resident <= budget,
        kv_fits=kv_room >= kv_per_seq,
        host_fits=host_used <= box.host.ram_gib,
        vram_minimum_computed_gb=math.ceil(memory.headroom_factor * disk_gb),
        vram_minimum_declared_gb=inputs.declared_vram_minimum_gb,
        disk_gb=disk_gb,
        link_gbps=box.link.bandwidth_gbps,
        link_kind=box.link.kind,
        cross_gpu_gbps=box.link.cross_gpu_bandwidth_gbps,
        cross_gpu_latency_us=box.link.cross_gpu_latency_us,
        cross_gpu_kind=box.link.cross_gpu_kind,
        cross_gpu_measured_in=box.link.cross_gpu_measured_in,
        problems=problems,
        assumptions=_assumptions(
            inputs,
            last_value(inputs.argv, "--gpu-memory-utilization") is not None
            or inputs.gpu_utilization is not None,
        ),
    )


def verdict_lines(report: FitReport) -> list[str]:
    """Plain-language conclusions, most important first."""
    lines = []
    if not report.weights_fit:
        lines.append(
            f"does not boot: {report.resident_gib:.1f} GiB of GPU-resident weights exceed the "
            f"{report.budget_gib:.1f} GiB budget"
        )
    elif not report.kv_fits:
        lines.append(
            f"does not boot at {report.context:,} tokens: {report.kv_room_gib:.2f} GiB left for KV, "
            f"one full-context sequence needs {report.kv_per_sequence_gib:.2f} GiB"
        )
    else:
        lines.append(
            f"fits: {report.kv_room_gib:.2f} GiB for KV, about {report.kv_capacity_tokens:,} tokens "
            f"({report.full_context_sequences} full-context sequence(s) of {report.context:,})"
        )
    if not report.host_fits:
        lines.append(f"host RAM short: {report.host_used_gib:.1f} GiB pinned > {report.host_ram_gib:g} GiB")
    if report.min_expert_offload_gib:
        lines.append(
            f"at least {report.min_expert_offload_gib:g} GiB of experts must leave the GPU "
            f"(--cpu-offload-gb, per GPU: {report.min_expert_offload_gib / max(report.gpu_count, 1):g})"
        )
    return lines
