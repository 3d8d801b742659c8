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
"""

from __future__ import annotations

from dataclasses import dataclass


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
