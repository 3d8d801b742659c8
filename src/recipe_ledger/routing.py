"""Routing skew from an engine's expert-hit counts: pure arithmetic, no I/O.

Input: the counts an engine's recorder gives per forward pass, ``counts[pass][layer][expert]`` (SGLang's
expert-distribution recorder in ``stat`` mode dumps exactly this as ``logical_count``). Output: the
figures seed 000 reasoned with:

- the share of hits on the top x% of experts (its form: "98.7% of hits on 73% of experts"),
  computed per layer (experts ranked by that layer's hits) and averaged over layers;
- per-layer Gini coefficient and normalised entropy (1 = uniform, 0 = one expert takes all);
- unique experts a window of k consecutive decode tokens touches, over one token's top-k (its
  "3.7x unique experts per k=5 verify window"): read from decode passes that carry exactly one
  token per layer (concurrency 1), windows never crossing a prefill pass;
- the cumulative curve (expert share, hit share) the site plots.

This module imports nothing from the package, so scripts that run in an engine's own venv (without the
tool's dependencies) can use it too (scripts/routing_probe.py does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Counts = Sequence[Sequence[Sequence[int]]]  # [pass][layer][expert]

TOP_SHARES = (0.25, 0.5, 0.73)
WINDOWS = (2, 4, 5, 8)


def layer_totals(counts: Counts) -> list[list[int]]:
    """Hits per layer per expert, summed over passes."""
    if not counts:
        return []
    layers = len(counts[0])
    experts = len(counts[0][0]) if layers else 0
    totals = [[0] * experts for _ in range(layers)]
    for one_pass in counts:
        for layer, row in enumerate(one_pass):
            for expert, hits in enumerate(row):
                totals[layer][expert] += int(hits)
    return totals


def cumulative_curve(hits: Sequence[int]) -> list[tuple[float, float]]:
    """(share of experts, share of hits) with experts ranked hottest first, starting at (0, 0)."""
    total = sum(hits)
    ranked = sorted(hits, reverse=True)
    n = len(ranked)
    curve = [(0.0, 0.0)]
    running = 0
    for i, h in enumerate(ranked, start=1):
        running += h
        curve.append((i / n, running / total if total else 0.0))
    return curve


def hit_share_on_top(hits: Sequence[int], expert_share: float) -> float:
    """Share of the hits that land on the hottest ``expert_share`` of the experts (linear between
    whole experts, so 73% of 16 experts reads between the 11th and 12th)."""
    curve = cumulative_curve(hits)
    position = expert_share * len(hits)
    lower = math.floor(position)
    if lower >= len(hits):
        return curve[-1][1]
    frac = position - lower
    return curve[lower][1] + frac * (curve[lower + 1][1] - curve[lower][1])


def gini(hits: Sequence[int]) -> float:
    """Gini coefficient of the hits over experts: 0 when uniform, approaching 1 when one takes all."""
    n = len(hits)
    total = sum(hits)
    if n == 0 or total == 0:
        return 0.0
    ranked = sorted(hits)
    weighted = sum((i + 1) * h for i, h in enumerate(ranked))
    return (2 * weighted) / (n * total) - (n + 1) / n


def normalized_entropy(hits: Sequence[int]) -> float:
    """Shannon entropy of the hit distribution over log(experts): 1 when uniform."""
    total = sum(hits)
    if total == 0 or len(hits) < 2:
        return 0.0
    entropy = -sum((h / total) * math.log(h / total) for h in hits if h)
    return entropy / math.log(len(hits))


def decode_runs(counts: Counts, topk: int) -> list[list[list[frozenset[int]]]]:
    """Per layer, runs of consecutive single-token (decode) passes as expert sets; a pass carrying more
    tokens (prefill, or several sequences) ends a run."""
    layers = len(counts[0]) if counts else 0
    runs: list[list[list[frozenset[int]]]] = [[] for _ in range(layers)]
    current: list[list[frozenset[int]]] = [[] for _ in range(layers)]
    for one_pass in counts:
        single = all(sum(row) == topk for row in one_pass)
        for layer, row in enumerate(one_pass):
            if single:
                current[layer].append(frozenset(e for e, h in enumerate(row) if h))
            elif current[layer]:
                runs[layer].append(current[layer])
                current[layer] = []
    for layer in range(layers):
        if current[layer]:
            runs[layer].append(current[layer])
    return runs


def window_multiplier(runs: list[list[list[frozenset[int]]]], window: int, topk: int) -> float | None:
    """Mean unique experts in ``window`` consecutive decode tokens, over one token's top-k; None when no
    run is that long."""
    ratios = []
    for layer_runs in runs:
        for run in layer_runs:
            for start in range(len(run) - window + 1):
                union = frozenset().union(*run[start : start + window])
                ratios.append(len(union) / topk)
    return sum(ratios) / len(ratios) if ratios else None


def routing_figures(counts: Counts, topk: int) -> dict[str, float]:
    """The metrics a routing measurement records (see recipe_ledger.metrics for units)."""
    totals = layer_totals(counts)
    if not totals or not any(any(row) for row in totals):
        return {}
    live = [row for row in totals if sum(row)]
    figures: dict[str, float] = {
        "routing_hits": float(sum(sum(row) for row in totals)),
        "routing_layers": float(len(totals)),
        "routing_experts": float(len(totals[0])),
        "routing_gini": sum(gini(row) for row in live) / len(live),
        "routing_entropy": sum(normalized_entropy(row) for row in live) / len(live),
    }
    for share in TOP_SHARES:
        key = f"routing_hit_share_top{round(share * 100)}"
        figures[key] = sum(hit_share_on_top(row, share) for row in live) / len(live)
    runs = decode_runs(counts, topk)
    for window in WINDOWS:
        multiplier = window_multiplier(runs, window, topk)
        if multiplier is not None:
            figures[f"routing_window_multiplier_k{window}"] = multiplier
    return figures


def pooled_curve(counts: Counts, points: int = 21) -> list[tuple[float, float]]:
    """The skew curve averaged over layers at evenly spaced expert shares (for plots)."""
    live = [row for row in layer_totals(counts) if sum(row)]
    if not live:
        return []
    shares = [i / (points - 1) for i in range(points)]
    return [(s, sum(hit_share_on_top(row, s) for row in live) / len(live)) for s in shares]
