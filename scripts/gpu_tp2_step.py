#!/usr/bin/env python3
"""One tensor-parallel decode step of a real-shape layer across GPUs, measured against what
``recipes.parallel_cost`` predicts it pays between them (issue 30). A ``command`` instrument's
script: it prints one JSON object of metrics on its last line.

    python3 scripts/gpu_tp2_step.py --world 2 --tokens 1,8,32 --box h200-x2 --budget-s 1

The layer is Qwen3-30B-A3B's (scripts/make_random_moe.py's QWEN3_30B_A3B_LAYER: hidden 2048, 32
query and 4 key/value heads of 128, 128 experts of intermediate 768, top-8) with random weights,
split the Megatron way vLLM splits it: each GPU holds its share of the heads and of every expert's
intermediate columns, so the attention's output projection and the MoE's down projection each end
in partial sums that one all-reduce adds up (two a layer). A step decodes ``T`` tokens, one per
sequence, each attending over a ``--context``-token KV cache.

For each ``T`` it reports, as the slowest rank's median (``scripts/gpu_link_study.py`` times and
agrees them):

  tp_step_ms_t<T>            the whole layer step, all-reduces included
  compute_ms_t<T>            the same step with the all-reduces left out (what the GPUs compute)
  allreduce_ms_t<T>          the step's two all-reduces alone, back to back
  predicted_comm_ms_t<T>     parallel_cost's time for those two all-reduces over the box's path
  comm_over_predicted_t<T>   allreduce / predicted: how far the model is from the wire
  step_comm_over_predicted_t<T>  (step - compute) / predicted: what the step pays, synchronisation
                             waits included, over the prediction

The box's path (bandwidth, small-message latency) comes from its profile (``--box``, loaded by
recipes.boxes); ``--path-gbps`` and ``--path-latency-us`` replace it, e.g. with what
scripts/gpu_link_study.py measured. On CPU (``--backend gloo`` or no two GPUs) ``--tiny`` makes the
layer small enough for a plumbing test; the numbers then describe gloo, and ``backend`` says so.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))  # the sibling scripts, by path
import gpu_link_study as group  # noqa: E402
from make_random_moe import QWEN3_30B_A3B_LAYER  # noqa: E402

from recipe_ledger.recipes.parallel_cost import GpuPath, ModelShape, tensor_parallel_cost  # noqa: E402

# A layer of the same structure, small enough for two CPU processes in a second.
TINY_LAYER = {
    "hidden": 64,
    "heads": 4,
    "kv_heads": 2,
    "head_dim": 16,
    "moe_intermediate": 32,
    "experts": 8,
    "experts_per_token": 2,
}


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group.add_group_args(parser)
    parser.add_argument(
        "--tokens", default="1,8,32", help="tokens per decode step (sequences), comma-separated"
    )
    parser.add_argument(
        "--context", type=int, default=1024, help="KV cache tokens each sequence attends over"
    )
    parser.add_argument("--box", default="h200-x2", help="box profile whose GPU path the prediction takes")
    parser.add_argument("--path-gbps", type=float, help="GPU-to-GPU bandwidth instead of the box's, GB/s")
    parser.add_argument(
        "--path-latency-us", type=float, help="small all-reduce latency instead of the box's, us"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="a tiny layer of the same structure (CPU plumbing)"
    )
    args = parser.parse_args(argv)
    args.layer = TINY_LAYER if args.tiny else QWEN3_30B_A3B_LAYER
    if args.world < 2 or any(args.layer[k] % args.world for k in ("kv_heads", "moe_intermediate")):
        parser.error("--world must be at least 2 and divide the key/value heads and the expert width")
    args.token_counts = [int(t) for t in args.tokens.split(",")]
    return args


def gpu_path(args: argparse.Namespace) -> GpuPath:
    """The path the prediction assumes: the box profile's, with any number given here instead."""
    from recipe_ledger.recipes.boxes import load_box

    link = load_box(HERE.parent / "recipes" / "boxes", args.box).link
    gbps = args.path_gbps if args.path_gbps is not None else link.cross_gpu_bandwidth_gbps
    latency = args.path_latency_us if args.path_latency_us is not None else link.cross_gpu_latency_us
    if gbps is None:
        raise SystemExit(f"gpu_tp2_step: box {args.box} names no cross-GPU bandwidth; give --path-gbps")
    return GpuPath(gbps, latency or 0.0, f"box {args.box}")


# ------------------------------------------------------------------------------ the layer, one rank


def _weights(layer: dict, world: int, device, dtype, seed: int) -> dict:
    """This rank's share of a random layer: its heads, every expert's share of intermediate columns,
    the router whole (every rank routes every token, as vLLM's TP MoE does)."""
    import torch

    generator = torch.Generator(device=device).manual_seed(seed)
    hidden, head_dim = layer["hidden"], layer["head_dim"]
    heads, kv_heads, inter = (
        layer["heads"] // world,
        layer["kv_heads"] // world,
        layer["moe_intermediate"] // world,
    )

    def draw(*shape: int):
        return torch.randn(*shape, generator=generator, device=device, dtype=dtype) * 0.02

    return {
        "wq": draw(hidden, heads * head_dim),
        "wkv": draw(hidden, 2 * kv_heads * head_dim),
        "wo": draw(heads * head_dim, hidden),
        "router": draw(hidden, layer["experts"]),
        "w13": draw(layer["experts"], hidden, 2 * inter),
        "w2": draw(layer["experts"], inter, hidden),
        "heads": heads,
        "kv_heads": kv_heads,
    }


def _attention(x, w: dict, cache, head_dim: int):
    """One decode query per sequence over its cache (the new key and value written into its last
    slot); the output projection's partial sums, to be all-reduced."""
    import torch.nn.functional as F

    tokens = x.shape[0]
    q = (x @ w["wq"]).view(tokens, w["heads"], 1, head_dim)
    k_new, v_new = (x @ w["wkv"]).view(tokens, 2, w["kv_heads"], 1, head_dim).unbind(1)
    keys, values = cache
    keys[:, :, -1:], values[:, :, -1:] = k_new, v_new
    out = F.scaled_dot_product_attention(q, keys, values, enable_gqa=True)
    return out.reshape(tokens, w["heads"] * head_dim) @ w["wo"]


def _moe(x, w: dict, top_k: int):
    """Top-k routing and each selected expert's share of columns, reading only the experts some
    token selected, as a fused MoE kernel does (gathered first, so their bytes are read twice); the
    down projection's partial sums."""
    import torch
    import torch.nn.functional as F

    tokens, hidden = x.shape
    gates, chosen = torch.topk(torch.softmax((x @ w["router"]).float(), dim=-1), top_k)
    experts, slot = torch.unique(chosen.flatten(), return_inverse=True)  # one group per expert
    order = torch.argsort(slot, stable=True)
    counts = torch.bincount(slot, minlength=len(experts))
    place = torch.empty_like(slot)
    place[order] = torch.arange(len(slot), device=x.device) - (torch.cumsum(counts, 0) - counts)[slot[order]]
    token_of = torch.arange(tokens, device=x.device).repeat_interleave(top_k)
    grouped = x.new_zeros(len(experts), int(counts.max()), hidden)
    grouped[slot, place] = x[token_of]
    gate, up = torch.bmm(grouped, w["w13"][experts]).chunk(2, dim=-1)
    down = torch.bmm(F.silu(gate) * up, w["w2"][experts])
    out = x.new_zeros(tokens, hidden)
    out.index_add_(0, token_of, down[slot, place] * gates.flatten()[:, None].to(x.dtype))
    return out


def _layer_step(x, w: dict, cache, layer: dict, reduce) -> object:
    """A pre-norm transformer layer: attention then MoE, each ending in ``reduce`` (an all-reduce,
    or nothing for the compute-only step)."""
    import torch.nn.functional as F

    hidden = x + reduce(_attention(F.rms_norm(x, (x.shape[1],)), w, cache, layer["head_dim"]))
    return hidden + reduce(_moe(F.rms_norm(hidden, (x.shape[1],)), w, layer["experts_per_token"]))


def _all_reduce(tensor):
    import torch.distributed as dist

    dist.all_reduce(tensor)
    return tensor


def _skip(tensor):
    return tensor


def _step_metrics(rank: int, args: argparse.Namespace, device) -> dict[str, float]:
    """Every token count's step, compute-only step and all-reduces, timed on every rank."""
    import torch

    layer, world = args.layer, args.world
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    w = _weights(layer, world, device, dtype, args.seed + rank)
    path = args.path  # main's: the box profile is read once, not in every rank
    out: dict[str, float] = {}
    for tokens in args.token_counts:
        x = torch.randn(tokens, layer["hidden"], device=device, dtype=dtype)
        cache_shape = (tokens, w["kv_heads"], args.context, layer["head_dim"])
        cache = (
            torch.randn(cache_shape, device=device, dtype=dtype),
            torch.randn(cache_shape, device=device, dtype=dtype),
        )
        message = torch.randn(tokens, layer["hidden"], device=device, dtype=dtype)
        calls = {
            "tp_step_ms": functools.partial(_layer_step, x, w, cache, layer, _all_reduce),
            "compute_ms": functools.partial(_layer_step, x, w, cache, layer, _skip),
            "allreduce_ms": lambda message=message: (_all_reduce(message), _all_reduce(message)),
        }
        for name, call in calls.items():
            times = group.timed(call, device, args.budget_s, args.warmup)
            out[f"{name}_t{tokens}"] = group.agreed_median(times, device) * 1e3
        out.update(_against_prediction(tokens, out, layer, world, path, torch.finfo(dtype).bits // 8))
    return out


def _against_prediction(
    tokens: int, measured: dict[str, float], layer: dict, world: int, path: GpuPath, dtype_bytes: int
) -> dict[str, float]:
    """parallel_cost's time for one layer's two all-reduces, and the measured times over it."""
    shape = ModelShape(layers=1, hidden=layer["hidden"], dtype_bytes=dtype_bytes)
    cost = tensor_parallel_cost(shape, world, tokens, path)
    assert cost is not None  # _parse refuses a world under 2: TP always pays its all-reduces here
    predicted = cost.ms
    step_comm = measured[f"tp_step_ms_t{tokens}"] - measured[f"compute_ms_t{tokens}"]
    return {
        f"predicted_comm_ms_t{tokens}": predicted,
        f"comm_over_predicted_t{tokens}": measured[f"allreduce_ms_t{tokens}"] / predicted,
        f"step_comm_over_predicted_t{tokens}": step_comm / predicted,
    }


def main(argv: list[str]) -> int:
    args = _parse(argv)
    # Read here, once: a box without a path is refused before any process starts, and the ranks
    # take it with their arguments.
    path = args.path = gpu_path(args)
    backend, metrics = group.run_ranks(_step_metrics, args)
    header = {
        "backend": backend,
        "world": args.world,
        "p2p": args.p2p,
        "layer": "tiny" if args.tiny else "qwen3-30b-a3b",
    }
    print(json.dumps({**header, "path_gbps": path.gbps, "path_latency_us": path.latency_us, **metrics}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
