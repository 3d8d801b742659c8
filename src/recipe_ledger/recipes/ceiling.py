"""The decode throughput the host link alone allows, for an expert-offload configuration.

Pure arithmetic over a fit (how many GiB of routed experts live in host memory), the recipe's
routing (experts per layer, top-k) and the box's link bandwidth:

  share touched  = the fraction of an offloaded layer's experts one decode step selects:
                   one sequence's window of k tokens touches top-k x m(k) experts (m = unique experts
                   in the window over one token's; uniform routing unless a measurement says
                   otherwise), and B sequences route independently: 1 - (1 - that / E)^B
  bytes per step = offloaded expert bytes x share touched (vLLM's UVA offload reads only the rows
                   of the selected experts, layer after layer)
  step time      = bytes per step / link bandwidth (nothing else on the critical path)
  ceiling        = B x k tokens / step time (every drafted token accepted: an upper bound)

The H200 hot/cold study (docs/expert-placement.md) found link-bound steps within 1.03-1.2x of
exactly this byte floor, which is why it is worth stating before any run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

GIB = 1024**3


@dataclass(frozen=True)
class Routing:
    """A MoE layer's routing and, when measured, the window multipliers that replace uniform's."""

    experts_per_layer: int
    experts_per_token: int
    window_multiplier: dict[int, float] = field(default_factory=dict)
    source: str = "uniform routing"


@dataclass(frozen=True)
class Ceiling:
    batch: int
    window: int
    offloaded_gib: float
    link_gbps: float
    window_multiplier: float
    share_touched: float
    bytes_per_step: float
    step_ms: float
    tokens_per_step: int
    tok_s: float


def uniform_window_multiplier(experts: int, topk: int, window: int) -> float:
    """Unique experts a window of ``window`` independently routed tokens selects, over one token's
    top-k: (1 - (1 - k/E)^w) x E / k. 1 for a single token; approaches w while windows are small."""
    p = topk / experts
    return (1.0 - (1.0 - p) ** window) / p


def window_multiplier(routing: Routing, window: int) -> tuple[float, bool]:
    """m(window) and whether it was measured (else uniform routing's)."""
    measured = routing.window_multiplier.get(window)
    if measured is not None:
        return measured, True
    return uniform_window_multiplier(routing.experts_per_layer, routing.experts_per_token, window), False


def decode_ceiling(
    offloaded_gib: float, link_gbps: float, routing: Routing, batch: int, window: int
) -> Ceiling:
    """The link-bound ceiling for ``batch`` sequences decoding ``window`` tokens per step."""
    multiplier, _ = window_multiplier(routing, window)
    per_sequence = min(1.0, routing.experts_per_token * multiplier / routing.experts_per_layer)
    share = 1.0 - (1.0 - per_sequence) ** batch
    nbytes = offloaded_gib * GIB * share
    step_s = nbytes / (link_gbps * 1e9) if link_gbps > 0 else math.inf
    tokens = batch * window
    return Ceiling(
        batch=batch,
        window=window,
        offloaded_gib=offloaded_gib,
        link_gbps=link_gbps,
        window_multiplier=multiplier,
        share_touched=share,
        bytes_per_step=nbytes,
        step_ms=step_s * 1e3,
        tokens_per_step=tokens,
        tok_s=tokens / step_s if step_s > 0 else math.inf,
    )


def ceiling_assumptions(
    routing: Routing, link_gbps: float, link_source: str, windows: list[int]
) -> list[str]:
    """What the ceilings above take for granted, in words."""
    notes = [
        f"link {link_gbps:g} GB/s ({link_source}) carries every offloaded expert byte, one step after "
        "another; attention, the HBM-resident layers and the drafter take no time (an upper bound)",
        f"{routing.experts_per_token} of {routing.experts_per_layer} routed experts per token per layer "
        "(shared experts stay in HBM)",
        "every drafted token is accepted (tokens per step = batch x window)",
        "sequences in a batch route independently",
    ]
    for w in windows:
        if w == 1:
            continue
        m, measured = window_multiplier(routing, w)
        uniform = "uniform routing; real routers repeat experts"
        source = f"measured ({routing.source})" if measured else uniform
        notes.append(f"a window of {w} tokens touches {m:.2f}x one token's experts: {source}")
    return notes
