"""What a decode step pays between GPUs under tensor and expert parallelism (issue 30), pure.

The ceiling (``recipes.ceiling``) models the host link only. A TP or EP recipe also pays, every
decode step, collectives over the GPU-to-GPU path; this module states that cost in the same
spirit: bytes and calls from the model's shape, time from the path's bandwidth and small-message
latency, the larger of the two binding (a lower bound on time: NCCL overlaps a call's latency with
its transfer, never does better than either).

Tensor parallel (Megatron layout, vLLM's and SGLang's): each transformer layer ends its attention
and its MLP (or MoE) block with an all-reduce of the step's activations, ``tokens x hidden x
dtype bytes``. A ring all-reduce over ``n`` GPUs moves ``2 (n - 1) / n`` of the message through
each GPU's link (NCCL's "bus bandwidth" convention: nccl-tests doc/PERFORMANCE.md), so

  calls per step   = 2 x layers
  bytes per GPU    = calls x 2 (n - 1) / n x tokens x hidden x dtype_bytes
  time             = max(bytes / bandwidth, calls x latency)

Expert parallel: each MoE layer dispatches every routed token's activation to the GPUs holding
its top-k experts and combines the answers back, two all-to-alls. Under uniform routing a share
``(n - 1) / n`` of the top-k copies leaves the GPU, so per GPU, for the tokens it holds,

  calls per step   = 2 x moe_layers
  bytes per GPU    = calls x (n - 1) / n x tokens_per_gpu x top_k x hidden x dtype_bytes
  time             = max(bytes / bandwidth, calls x latency)

Both take one link speed for every pair (a uniform path such as NVLink or one PCIe switch); a box
whose pairs differ (004's dual GH200: local HBM, then a slow staged bridge) is described by its
slowest pair, which the collectives wait for.

A decode step (``decode_step``) adds these to the host link's time (``recipes.ceiling``) for a
layout read from the launch command (``ParallelSizes``: TP within a replica, DP replicas, EP over
all of them). A batch spreads over the DP replicas, so each replica's all-reduces and each GPU's
dispatch carry ``ceil(batch x window / dp)`` tokens: the busiest replica sets the step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuPath:
    """The GPU-to-GPU path: bandwidth one way per GPU (GB/s) and one collective call's latency (us)."""

    gbps: float
    latency_us: float
    source: str = ""


@dataclass(frozen=True)
class ModelShape:
    """What the collectives' sizes depend on."""

    layers: int
    hidden: int
    dtype_bytes: float = 2.0  # bf16 activations
    moe_layers: int = 0
    experts_per_token: int = 0


@dataclass(frozen=True)
class CollectiveCost:
    """One parallel dimension's cost per decode step."""

    name: str
    calls: int
    bytes_per_gpu: float
    bandwidth_ms: float
    latency_ms: float

    @property
    def ms(self) -> float:
        return max(self.bandwidth_ms, self.latency_ms)

    @property
    def binds(self) -> str:
        """Which term sets the time: ``latency`` (many small calls) or ``bandwidth``."""
        return "latency" if self.latency_ms >= self.bandwidth_ms else "bandwidth"


def _cost(name: str, calls: int, nbytes: float, path: GpuPath) -> CollectiveCost:
    bandwidth_ms = nbytes / (path.gbps * 1e9) * 1e3 if path.gbps > 0 else float("inf")
    return CollectiveCost(name, calls, nbytes, bandwidth_ms, calls * path.latency_us / 1e3)


def tensor_parallel_cost(shape: ModelShape, tp: int, tokens: int, path: GpuPath) -> CollectiveCost | None:
    """The all-reduces of one decode step of ``tokens`` tokens at TP ``tp``; None without TP."""
    if tp <= 1:
        return None
    calls = 2 * shape.layers
    message = tokens * shape.hidden * shape.dtype_bytes
    return _cost(f"TP{tp} all-reduce", calls, calls * 2 * (tp - 1) / tp * message, path)


def expert_parallel_cost(
    shape: ModelShape, ep: int, tokens_per_gpu: int, path: GpuPath
) -> CollectiveCost | None:
    """The dispatch and combine all-to-alls of one decode step at EP ``ep``; None without EP or MoE."""
    if ep <= 1 or shape.moe_layers <= 0 or shape.experts_per_token <= 0:
        return None
    calls = 2 * shape.moe_layers
    routed = tokens_per_gpu * shape.experts_per_token * shape.hidden * shape.dtype_bytes
    return _cost(f"EP{ep} all-to-all", calls, calls * (ep - 1) / ep * routed, path)


def shares(base_ms: float, costs: list[CollectiveCost]) -> dict[str, float]:
    """Each part's share of the step (the base, e.g. the host link's time, and each collective),
    the collectives taken as adding to the base (nothing overlaps them with the step's compute)."""
    total = base_ms + sum(cost.ms for cost in costs)
    if total <= 0:
        return {}
    return {"base": base_ms / total, **{cost.name: cost.ms / total for cost in costs}}


@dataclass(frozen=True)
class ParallelSizes:
    """A launch's parallel layout: TP within a replica, DP replicas, and whether experts are spread
    over all of them (vLLM's --enable-expert-parallel: EP size = TP x DP)."""

    tp: int = 1
    dp: int = 1
    expert: bool = False

    @property
    def ep(self) -> int:
        return self.tp * self.dp if self.expert else 1

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    @property
    def crosses_gpus(self) -> bool:
        """Whether a decode step pays a collective between GPUs (DP alone does not)."""
        return self.tp > 1 or self.ep > 1

    def label(self) -> str:
        parts = [f"TP{self.tp}"] if self.tp > 1 else []
        parts += [f"DP{self.dp}"] if self.dp > 1 else []
        parts += [f"EP{self.ep}"] if self.ep > 1 else []
        return " x ".join(parts) or "one GPU"


@dataclass(frozen=True)
class StepCost:
    """One decode step of ``batch`` sequences x ``window`` tokens: the host link's time and each
    collective's, taken as adding up (nothing here overlaps them)."""

    batch: int
    window: int
    host_link_ms: float
    collectives: tuple[CollectiveCost, ...] = field(default_factory=tuple)

    @property
    def tokens(self) -> int:
        return self.batch * self.window

    @property
    def ms(self) -> float:
        return self.host_link_ms + sum(cost.ms for cost in self.collectives)

    @property
    def tok_s(self) -> float:
        return self.tokens / (self.ms / 1e3) if self.ms > 0 else math.inf

    def shares(self) -> dict[str, float]:
        """Each part's share of the step: ``base`` is the host link's."""
        return shares(self.host_link_ms, list(self.collectives))


def tokens_per_replica(batch: int, window: int, sizes: ParallelSizes) -> int:
    """The busiest DP replica's tokens in one step (the batch spread evenly, rounded up)."""
    return math.ceil(batch * window / sizes.dp)


def decode_step(
    shape: ModelShape, sizes: ParallelSizes, path: GpuPath, batch: int, window: int, host_link_ms: float = 0.0
) -> StepCost:
    """The step's cost: the host link's ``host_link_ms`` plus the TP all-reduces and EP all-to-alls
    of the busiest replica."""
    tokens = tokens_per_replica(batch, window, sizes)
    parts = (
        tensor_parallel_cost(shape, sizes.tp, tokens, path),
        expert_parallel_cost(shape, sizes.ep, tokens, path),
    )
    return StepCost(batch, window, host_link_ms, tuple(cost for cost in parts if cost is not None))


def parallel_assumptions(shape: ModelShape, sizes: ParallelSizes, path: GpuPath) -> list[str]:
    """What the cross-GPU terms take for granted, in words (``path.source`` says where the path's
    numbers come from)."""
    width = f"batch x window x {shape.hidden} x {shape.dtype_bytes:g} B"
    notes = []
    if sizes.tp > 1:
        notes.append(
            f"TP{sizes.tp}: each of the {shape.layers} layers ends its attention and its MLP with an "
            f"all-reduce of {width} per replica ({2 * shape.layers} calls a step); a ring moves "
            f"2(n-1)/n of it through each GPU; NCCL's all-reduce, where vLLM's own (its default for small "
            "messages over NVLink) can take less, and 004's launchers turn it off"
        )
    expert = sizes.ep > 1 and shape.moe_layers > 0 and shape.experts_per_token > 0
    if expert:
        notes.append(
            f"EP{sizes.ep} (TP{sizes.tp} x DP{sizes.dp}): each of the {shape.moe_layers} MoE layers "
            f"dispatches every token's {shape.experts_per_token} routed copies and combines them back "
            f"({2 * shape.moe_layers} all-to-alls a step); under uniform routing (n-1)/n of the copies "
            "leave the GPU"
        )
    if sizes.dp > 1:
        notes.append(f"the batch spreads evenly over the {sizes.dp} DP replicas; the busiest sets the step")
    notes += [
        f"GPU-to-GPU path {path.gbps:g} GB/s one way per GPU and {path.latency_us:g} us a call "
        f"({path.source}); the slowest pair sets every collective",
        "a collective takes max(bytes / bandwidth, calls x latency): a lower bound, since NCCL overlaps "
        "a call's latency with its transfer and never beats either"
        + ("; the small all-reduce's latency stands for the all-to-all's too" if expert else ""),
        "the collectives add to the host link's time (nothing overlaps them), and the step's compute "
        "is not counted: the shares are of the modelled parts only",
    ]
    return notes
