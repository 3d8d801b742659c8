#!/usr/bin/env python3
"""Where MoE expert weights live, measured: HBM, host memory read over UVA, or copied a layer at a time.

    python3 scripts/expert_placement_bench.py --arm {hbm,uva,layer_copy} [--batches 1,8,32]
        [--hidden 5120 --intermediate 1536 --experts 384 --topk 6] [--seed 0] [--reps 20]
        [--warmup 1] [--budget-s 15] [--routings 4] [--quick] [--check] [--no-graph]

One process measures three bandwidths (device-memory read, zero-copy read of mapped pinned host memory
by a GPU kernel, pinned host -> device memcpy) and one MoE decode step of ONE layer per batch size,
for the placement named by --arm:

  hbm         all experts resident in device memory (the ceiling);
  uva         all experts in pinned, mapped host memory; the GEMMs run on tensors whose data pointer
              is the mapped host memory, so the GPU reads only the selected experts' rows over the
              link (vLLM's UVA offload);
  layer_copy  experts in pinned host memory; every step first copies the whole layer's expert
              tensors (all experts) to a device buffer, then computes from it (SGLang's layer offload).
  hot_cold    the hottest --hbm-share of the experts (by the --skew popularity ranking) resident in
              device memory, the rest read over UVA like `uva` (placement control: hot in HBM, cold
              in host memory).

--skew draws the routing from a popularity curve instead of uniformly (e.g. tiered:0.987@0.73,
seed 000's "98.7% of hits on 73% of experts"); --tokens-per-step k routes k tokens per sequence per
step (a speculative verify window), so a step of batch B routes B x k tokens. Every batch size also
reports the byte floor of its step (ceiling_step_ms_b<B>: bytes over the link at this run's measured
link rate plus bytes from HBM at its measured HBM rate) and the measured step over that floor.

A step: for a batch of tokens with seeded random top-k routing, run each selected expert's SwiGLU FFN
(w13 [2I, H], w2 [H, I], bf16) on the tokens routed to it and sum the gated outputs. The same code
computes every arm; only where the weights live differs. The step is captured in a CUDA graph per
routing and replayed (no Python launch overhead in the numbers); --no-graph runs it eagerly.

Logs go to stderr; the LAST stdout line is one JSON object (docs/expert-placement.md lists its keys).
--check runs all three arms on the same routing and inputs, compares each with a float64 reference
and with the hbm arm, and exits 1 on a mismatch (use it with --quick).

Only the standard library is imported at module level: argument parsing, routing, byte accounting,
statistics and the JSON assembly are importable and testable without torch, cupy or a GPU. torch
(and cupy, for the host allocation) are imported inside the functions that need them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import random
import sys
import time
from collections.abc import Callable, Sequence

ARMS = ("hbm", "uva", "layer_copy", "hot_cold")
HOST_ALLOC_MODES = ("auto", "cupy", "register")
BF16_BYTES = 2

# The defaults model one DeepSeek-style routed-expert layer; --quick is a smoke test that takes
# seconds. An explicit flag always wins over either table.
DEFAULTS = {
    "hidden": 5120,
    "intermediate": 1536,
    "experts": 384,
    "topk": 6,
    "batches": "1,8,32",
    "reps": 20,
    "warmup": 1,
    "budget_s": 15.0,
    "routings": 4,
    "bw_mib": 1024,
    "hbm_bw_mib": 4096,
    "bw_reps": 10,
    "skew": "uniform",
    "hbm_share": 0.0,
    "tokens_per_step": 1,
}
QUICK = {
    "hidden": 256,
    "intermediate": 128,
    "experts": 384,
    "topk": 6,
    "batches": "1,8,32",
    "reps": 5,
    "warmup": 1,
    "budget_s": 3.0,
    "routings": 2,
    "bw_mib": 64,
    "hbm_bw_mib": 256,
    "bw_reps": 5,
    "skew": "uniform",
    "hbm_share": 0.0,
    "tokens_per_step": 1,
}

# Bandwidth keys printed on every run, and the per-batch keys (formatted with the batch size).
BANDWIDTH_KEYS = ("hbm_read_gbps", "uva_read_gbps", "h2d_memcpy_gbps")
PER_BATCH_KEYS = (
    "moe_step_ms_b{b}",
    "moe_step_ms_p10_b{b}",
    "moe_step_ms_p90_b{b}",
    "reps_b{b}",
    "unique_experts_b{b}",
    "expert_bytes_read_b{b}",
    "effective_gbps_b{b}",
    "link_bytes_b{b}",
    "link_gbps_b{b}",
    "cold_experts_b{b}",
    "hot_hit_share_b{b}",
)
# Added once the run's bandwidths are known (add_ceilings).
CEILING_KEYS = ("ceiling_step_ms_b{b}", "step_over_ceiling_b{b}")

CHECK_TOL_VS_FP64 = 2e-2   # bf16 operands and intermediates against a float64 reference
CHECK_TOL_VS_HBM = 1e-3    # same kernels, same inputs: expected bit-identical; tolerate rounding


# --------------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------------

def parse_batches(text: str) -> list[int]:
    """'1,8,32' -> [1, 8, 32]; positive, distinct, order kept."""
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise ValueError(f"batch size {part!r} is not an integer") from None
        if value <= 0:
            raise ValueError(f"batch size {value} must be positive")
        if value not in out:
            out.append(value)
    if not out:
        raise ValueError("no batch size given")
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Defaults: " + ", ".join(f"{k}={v}" for k, v in DEFAULTS.items())
        + ". --quick: " + ", ".join(f"{k}={v}" for k, v in QUICK.items()) + ".",
    )
    p.add_argument("--arm", choices=ARMS, default="hbm", help="where the experts live (default hbm)")
    p.add_argument("--batches", default=None, help="comma-separated batch sizes (tokens per step)")
    p.add_argument("--seed", type=int, default=0, help="routing seed")
    p.add_argument("--reps", type=int, default=None, help="most timed steps per batch size")
    p.add_argument("--warmup", type=int, default=None, help="untimed full steps per batch size")
    p.add_argument("--hidden", type=int, default=None, help="model hidden size H")
    p.add_argument("--intermediate", type=int, default=None, help="expert intermediate size I")
    p.add_argument("--experts", type=int, default=None, help="routed experts per layer")
    p.add_argument("--topk", type=int, default=None, help="experts per token")
    p.add_argument("--budget-s", type=float, default=None, dest="budget_s",
                   help="seconds of timed steps, shared by all batch sizes (reps adapt to it)")
    p.add_argument("--routings", type=int, default=None,
                   help="distinct seeded routings per batch size, cycled over the reps")
    p.add_argument("--bw-mib", type=int, default=None, dest="bw_mib",
                   help="MiB of pinned host memory for the uva and h2d bandwidth tests")
    p.add_argument("--hbm-bw-mib", type=int, default=None, dest="hbm_bw_mib",
                   help="MiB of device memory for the hbm read bandwidth test")
    p.add_argument("--bw-reps", type=int, default=None, dest="bw_reps", help="timed reps per bandwidth test")
    p.add_argument("--quick", action="store_true", help="tiny shapes and budgets: a smoke test")
    p.add_argument("--check", action="store_true",
                   help="run all three arms on the same inputs, compare with float64 and with hbm; "
                        "exit 1 on mismatch (then time --arm as usual)")
    p.add_argument("--no-graph", action="store_true", dest="no_graph",
                   help="run steps eagerly instead of replaying a captured CUDA graph")
    p.add_argument("--host-alloc", choices=HOST_ALLOC_MODES, default="auto", dest="host_alloc",
                   help="cupy: cudaHostAlloc(Mapped|Portable) via cupy; register: mmap + "
                        "cudaHostRegister(Mapped|Portable) via torch; auto: cupy, else register")
    p.add_argument("--device", type=int, default=0, help="CUDA device index")
    p.add_argument("--skew", default=None,
                   help="routing popularity: uniform, tiered:HIT@SHARE (HIT of the hits on the first SHARE "
                        "of the experts, e.g. tiered:0.987@0.73) or zipf:S (weight of rank r ~ 1/(r+1)^S)")
    p.add_argument("--hbm-share", type=float, default=None, dest="hbm_share",
                   help="hot_cold: fraction of the experts (hottest first) resident in HBM, 0..1")
    p.add_argument("--tokens-per-step", type=int, default=None, dest="tokens_per_step",
                   help="tokens routed per sequence per step (k of a speculative verify window)")
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    table = QUICK if args.quick else DEFAULTS
    for key, value in table.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    try:
        args.batch_list = parse_batches(args.batches)
    except ValueError as exc:
        p.error(f"--batches: {exc}")
    for name in ("hidden", "intermediate", "experts", "topk", "reps", "routings", "bw_mib",
                 "hbm_bw_mib", "bw_reps", "tokens_per_step"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    if not args.budget_s > 0:
        p.error("--budget-s must be positive")
    if args.topk > args.experts:
        p.error(f"--topk {args.topk} exceeds --experts {args.experts}")
    for name in ("hidden", "intermediate"):
        if getattr(args, name) % 8:
            p.error(f"--{name} must be a multiple of 8 (16-byte rows for the GEMMs)")
    if args.device < 0:
        p.error("--device must be >= 0")
    if not 0.0 <= args.hbm_share <= 1.0:
        p.error("--hbm-share must be between 0 and 1")
    try:
        args.popularity = popularity(args.skew, args.experts)
    except ValueError as exc:
        p.error(f"--skew: {exc}")
    args.n_hot = hot_count(args.hbm_share, args.experts)
    return args


def config_string(args: argparse.Namespace) -> str:
    return (f"H={args.hidden} I={args.intermediate} E={args.experts} k={args.topk} bf16 "
            f"batches={','.join(map(str, args.batch_list))} routings={args.routings} seed={args.seed} "
            f"skew={args.skew} hbm_share={args.hbm_share:g} tokens_per_step={args.tokens_per_step}")


# --------------------------------------------------------------------------------------------------
# Routing (pure Python, seeded)
# --------------------------------------------------------------------------------------------------

def routing_seed(seed: int, batch: int, index: int) -> int:
    """One integer seed per (seed, batch size, routing index); stable across Python versions."""
    return (int(seed) * 1_000_003 + int(batch)) * 1_009 + int(index)


def popularity(spec: str, experts: int) -> list[float] | None:
    """Routing weight of each expert, hottest first (expert 0 is the most popular); None = uniform.

    tiered:HIT@SHARE  the first round(SHARE x E) experts share HIT of the weight evenly, the rest
                      share 1 - HIT (the seed's form: "98.7% of hits on 73% of experts");
    zipf:S            weight of the expert of rank r proportional to 1 / (r + 1)^S.
    """
    text = str(spec).strip()
    if text == "uniform":
        return None
    kind, _, rest = text.partition(":")
    try:
        if kind == "tiered":
            hit_text, _, share_text = rest.partition("@")
            hit, share = float(hit_text), float(share_text)
            if not (0 < hit < 1 and 0 < share < 1):
                raise ValueError
            n_hot = min(max(1, round(share * experts)), experts - 1)
            return [hit / n_hot] * n_hot + [(1 - hit) / (experts - n_hot)] * (experts - n_hot)
        if kind == "zipf":
            s = float(rest)
            if not s >= 0:
                raise ValueError
            raw = [1.0 / (r + 1) ** s for r in range(experts)]
            total = sum(raw)
            return [w / total for w in raw]
    except ValueError:
        pass
    raise ValueError(f"{text!r} is not uniform, tiered:HIT@SHARE (0 < HIT, SHARE < 1) or zipf:S (S >= 0)")


def hot_count(share: float, experts: int) -> int:
    """Experts resident in HBM for a share of them (the hottest ranks 0 .. n-1)."""
    return max(0, min(experts, round(share * experts)))


def _weighted_sample(rng: random.Random, weights: Sequence[float], k: int) -> list[int]:
    """k distinct indices drawn with probability proportional to weight, without replacement
    (Efraimidis-Spirakis: the k largest u^(1/w))."""
    keys = [(rng.random() ** (1.0 / w) if w > 0 else 0.0, i) for i, w in enumerate(weights)]
    return [i for _, i in sorted(keys, reverse=True)[:k]]


def make_routing(batch: int, experts: int, topk: int, seed: int, index: int = 0,
                 weights: Sequence[float] | None = None) -> tuple[list[list[int]], list[list[float]]]:
    """Random top-k routing of `batch` tokens: per token, k distinct experts and gate weights summing to 1.

    Uniform by default, the worst case for distinct experts per batch (expected count:
    expected_unique_experts()); `weights` (popularity()) skews it as real routers are.
    """
    if topk > experts:
        raise ValueError(f"topk {topk} > experts {experts}")
    rng = random.Random(routing_seed(seed, batch, index))
    ids: list[list[int]] = []
    gates: list[list[float]] = []
    for _ in range(batch):
        chosen = rng.sample(range(experts), topk) if weights is None else _weighted_sample(rng, weights, topk)
        raw = [0.5 + rng.random() for _ in range(topk)]
        total = sum(raw)
        ids.append(chosen)
        gates.append([w / total for w in raw])
    return ids, gates


def unique_experts(ids: Sequence[Sequence[int]]) -> list[int]:
    """The distinct experts a batch touched, ascending."""
    return sorted({e for row in ids for e in row})


def expert_assignments(ids: Sequence[Sequence[int]], gates: Sequence[Sequence[float]]
                       ) -> dict[int, tuple[list[int], list[float]]]:
    """{expert: (token indices, gate weights)} for every selected expert, ascending by expert."""
    plan: dict[int, tuple[list[int], list[float]]] = {}
    for token, (row_ids, row_gates) in enumerate(zip(ids, gates)):
        for e, g in zip(row_ids, row_gates):
            toks, gs = plan.setdefault(e, ([], []))
            toks.append(token)
            gs.append(g)
    return dict(sorted(plan.items()))


def expected_unique_experts(experts: int, topk: int, batch: int) -> float:
    """E[distinct experts] for uniform top-k routing of `batch` tokens: E * (1 - (1 - k/E)^B)."""
    return experts * (1.0 - (1.0 - topk / experts) ** batch)


# --------------------------------------------------------------------------------------------------
# Byte accounting
# --------------------------------------------------------------------------------------------------

def expert_bytes(hidden: int, intermediate: int, dtype_bytes: int = BF16_BYTES) -> int:
    """One expert's SwiGLU weights: w13 [2I, H] + w2 [H, I] = 3*H*I elements."""
    return 3 * hidden * intermediate * dtype_bytes


def layer_bytes(experts: int, hidden: int, intermediate: int, dtype_bytes: int = BF16_BYTES) -> int:
    """All routed experts of one layer."""
    return experts * expert_bytes(hidden, intermediate, dtype_bytes)


def link_bytes_per_step(arm: str, n_unique: int, expert_nbytes: int, layer_nbytes: int) -> int:
    """Bytes a step moves over the host link: none, the selected experts, or the whole layer.

    For hot_cold, n_unique is the number of selected experts that live in host memory (the cold ones).
    """
    if arm == "hbm":
        return 0
    if arm in ("uva", "hot_cold"):
        return n_unique * expert_nbytes
    if arm == "layer_copy":
        return layer_nbytes
    raise ValueError(f"unknown arm {arm!r}")


def gbps(nbytes: float, ms: float) -> float | None:
    """Bytes over milliseconds, in GB/s (1e9 bytes/s); None for a non-positive time."""
    if not ms or ms <= 0:
        return None
    return nbytes / (ms * 1e-3) / 1e9


# --------------------------------------------------------------------------------------------------
# Statistics and run-size helpers
# --------------------------------------------------------------------------------------------------

def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        raise ValueError("percentile of no values")
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * (q / 100.0)
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def median(values: Sequence[float]) -> float:
    return percentile(values, 50.0)


def summarize(values: Sequence[float]) -> dict[str, float]:
    return {"median": median(values), "p10": percentile(values, 10.0), "p90": percentile(values, 90.0),
            "min": float(min(values)), "max": float(max(values)), "n": len(values)}


def pick_reps(est_ms: float, budget_s: float, max_reps: int, min_reps: int = 3) -> int:
    """How many timed steps fit in budget_s given one step's estimate; within [min_reps, max_reps]."""
    floor = min(min_reps, max_reps)
    if not est_ms or est_ms <= 0 or not math.isfinite(est_ms):
        return max_reps
    fit = int(budget_s * 1000.0 / est_ms)
    return max(floor, min(max_reps, fit))


def relative_error(diff_norm: float, ref_norm: float) -> float:
    """||out - ref|| / ||ref||, guarded: a zero reference only matches a zero difference."""
    if ref_norm == 0:
        return 0.0 if diff_norm == 0 else math.inf
    return diff_norm / ref_norm


# --------------------------------------------------------------------------------------------------
# JSON assembly
# --------------------------------------------------------------------------------------------------

def batch_metrics(arm: str, batch: int, step_ms: Sequence[float], rep_unique: Sequence[int],
                  expert_nbytes: int, layer_nbytes: int, rep_cold: Sequence[int] | None = None,
                  hot_hit_share: float | None = None) -> dict[str, float]:
    """Per-batch keys from the timed steps and the distinct-expert count of each step's routing
    (rep_cold: of those, how many live in host memory, for hot_cold; every one for the other arms)."""
    if not step_ms or len(step_ms) != len(rep_unique):
        raise ValueError("need one distinct-expert count per timed step")
    cold = list(rep_unique if rep_cold is None else rep_cold)
    if len(cold) != len(rep_unique):
        raise ValueError("need one cold-expert count per timed step")
    useful = [u * expert_nbytes for u in rep_unique]
    on_link = cold if arm == "hot_cold" else rep_unique
    link = [link_bytes_per_step(arm, u, expert_nbytes, layer_nbytes) for u in on_link]
    s = summarize(step_ms)
    eff = [gbps(b, t) for b, t in zip(useful, step_ms)]
    lnk = [gbps(b, t) for b, t in zip(link, step_ms)]
    eff = [x for x in eff if x is not None]
    lnk = [x for x in lnk if x is not None]
    b = batch
    return {
        f"moe_step_ms_b{b}": s["median"],
        f"moe_step_ms_p10_b{b}": s["p10"],
        f"moe_step_ms_p90_b{b}": s["p90"],
        f"reps_b{b}": len(step_ms),
        f"unique_experts_b{b}": sum(rep_unique) / len(rep_unique),
        f"expert_bytes_read_b{b}": sum(useful) / len(useful),
        f"effective_gbps_b{b}": median(eff) if eff else None,
        f"link_bytes_b{b}": sum(link) / len(link),
        f"link_gbps_b{b}": median(lnk) if lnk else 0.0,
        f"cold_experts_b{b}": sum(cold) / len(cold),
        f"hot_hit_share_b{b}": 0.0 if hot_hit_share is None else hot_hit_share,
    }


def step_floor_ms(arm: str, useful_bytes: float, link_bytes: float, bandwidths: dict[str, float | None]
                  ) -> float | None:
    """The byte floor of one step: what crosses the host link at this run's link rate (UVA reads for
    uva/hot_cold, a DMA copy for layer_copy) plus the expert bytes read from HBM at the HBM rate.
    Compute, launches and the router are not in it: a step can only be slower."""
    hbm = bandwidths.get("hbm_read_gbps")
    link_rate = bandwidths.get("h2d_memcpy_gbps" if arm == "layer_copy" else "uva_read_gbps")
    from_hbm = useful_bytes if arm in ("hbm", "layer_copy") else useful_bytes - link_bytes
    if not hbm or (link_bytes and not link_rate):
        return None
    link_s = link_bytes / (link_rate * 1e9) if link_bytes else 0.0
    return (link_s + max(from_hbm, 0.0) / (hbm * 1e9)) * 1e3


def add_ceilings(arm: str, per_batch: dict[int, dict[str, float]], bandwidths: dict[str, float | None]) -> None:
    """ceiling_step_ms_b<B> (the byte floor) and step_over_ceiling_b<B> (measured / floor) per batch."""
    for b, row in per_batch.items():
        floor = step_floor_ms(arm, row[f"expert_bytes_read_b{b}"], row[f"link_bytes_b{b}"], bandwidths)
        row[f"ceiling_step_ms_b{b}"] = floor
        measured = row.get(f"moe_step_ms_b{b}")
        row[f"step_over_ceiling_b{b}"] = measured / floor if floor and measured else None


def expected_keys(batches: Sequence[int]) -> list[str]:
    keys = ["arm", "layer_bytes", "expert_bytes", *BANDWIDTH_KEYS]
    for b in batches:
        keys += [k.format(b=b) for k in (*PER_BATCH_KEYS, *CEILING_KEYS)]
    return keys


def assemble_result(arm: str, args: argparse.Namespace, bandwidths: dict[str, float | None],
                    per_batch: dict[int, dict[str, float]], extra: dict | None = None) -> dict:
    """The one JSON object: 'arm' and other strings for people, numbers for the runner."""
    result: dict = {
        "arm": arm,
        "config": config_string(args),
        "layer_bytes": layer_bytes(args.experts, args.hidden, args.intermediate),
        "expert_bytes": expert_bytes(args.hidden, args.intermediate),
        "hbm_experts": args.n_hot if arm == "hot_cold" else (args.experts if arm == "hbm" else 0),
        "tokens_per_step": args.tokens_per_step,
    }
    for key in BANDWIDTH_KEYS:
        result[key] = bandwidths.get(key)
    for b in args.batch_list:
        result.update(per_batch.get(b, {}))
    for key, value in (extra or {}).items():
        result.setdefault(key, value)
    return result


def result_json(result: dict) -> str:
    """One line; non-finite floats become null so any JSON parser reads it."""
    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v
    return json.dumps({k: clean(v) for k, v in result.items()}, separators=(", ", ": "))


# --------------------------------------------------------------------------------------------------
# CUDA availability (checked before any heavy work)
# --------------------------------------------------------------------------------------------------

def cuda_unavailable_reason(importer: Callable[[str], object] = importlib.import_module) -> str | None:
    """None when torch imports and sees a CUDA device; otherwise why not, in words."""
    try:
        torch = importer("torch")
    except Exception as exc:  # noqa: BLE001  (ImportError, or a broken install)
        return f"cannot import torch ({type(exc).__name__}: {exc}); this benchmark needs torch with CUDA"
    try:
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    except Exception as exc:  # noqa: BLE001  (a driver/runtime mismatch raises here)
        return f"torch.cuda failed ({type(exc).__name__}: {exc})"
    if not available or count < 1:
        return "no CUDA device: torch.cuda.is_available() is False (this benchmark needs a GPU)"
    return None


# --------------------------------------------------------------------------------------------------
# GPU side (torch and cupy are imported here, lazily)
# --------------------------------------------------------------------------------------------------

_T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[expert_placement_bench {time.monotonic() - _T0:7.2f}s] {msg}", file=sys.stderr, flush=True)


class _CudaArrayView:
    """A bare __cuda_array_interface__ over a device-accessible pointer (for torch.as_tensor)."""

    def __init__(self, ptr: int, nelems: int, typestr: str = "<i2"):
        self.__cuda_array_interface__ = {"shape": (nelems,), "typestr": typestr, "data": (ptr, False),
                                         "strides": None, "version": 2}


class HostBuffer:
    """nbytes of page-locked host memory, mapped into the GPU's address space.

    .gpu  torch int16 CUDA tensor whose data pointer is the mapped host memory: kernels (cuBLAS
          included) that read it read host memory over the link, zero-copy (UVA).
    .cpu  torch int16 CPU tensor over the same bytes: source/destination of DMA copies.

    mode 'cupy': cupy.cuda.runtime.hostAlloc(n, hostAllocMapped | hostAllocPortable); device pointer
    from cupy.cuda.runtime.hostGetDevicePointer where cupy has it, else pointerGetAttributes(ptr)
    .devicePointer (the same address on UVA systems); wrapped as a cupy ndarray over
    cupy.cuda.UnownedMemory + MemoryPointer, handed to torch through __cuda_array_interface__.
    mode 'register': an anonymous mmap, torch.cuda.cudart().cudaHostRegister(ptr, n,
    cudaHostRegisterPortable | cudaHostRegisterMapped); on UVA the host pointer is the device pointer.
    """

    def __init__(self, nbytes: int, mode: str, device: int):
        import ctypes

        import torch

        if nbytes % 4:
            raise ValueError("HostBuffer size must be a multiple of 4 bytes")
        self.nbytes = nbytes
        self.mode = mode
        self._freed = False
        self._keep: list = []
        if mode == "cupy":
            import cupy

            rt = cupy.cuda.runtime
            with cupy.cuda.Device(device):
                self.host_ptr = rt.hostAlloc(nbytes, rt.hostAllocMapped | rt.hostAllocPortable)
                get_dptr = getattr(rt, "hostGetDevicePointer", None)
                if get_dptr is not None:
                    self.dev_ptr = int(get_dptr(self.host_ptr, 0))
                else:
                    attrs = rt.pointerGetAttributes(self.host_ptr)
                    if getattr(attrs, "type", rt.memoryTypeHost) != rt.memoryTypeHost:
                        raise RuntimeError(f"hostAlloc gave memory of type {attrs.type}, not host")
                    self.dev_ptr = int(attrs.devicePointer)
                mem = cupy.cuda.UnownedMemory(self.dev_ptr, nbytes, None, device)
                arr = cupy.ndarray((nbytes // 2,), dtype=cupy.int16, memptr=cupy.cuda.MemoryPointer(mem, 0))
            self.gpu = torch.as_tensor(arr, device=f"cuda:{device}")
            cbuf = (ctypes.c_int16 * (nbytes // 2)).from_address(self.host_ptr)
            self._keep.append(cbuf)
            self.cpu = torch.frombuffer(cbuf, dtype=torch.int16)
        elif mode == "register":
            import mmap

            self._mm = mmap.mmap(-1, nbytes)
            self._anchor = ctypes.c_char.from_buffer(self._mm)
            self.host_ptr = ctypes.addressof(self._anchor)
            flags = 1 | 2  # cudaHostRegisterPortable | cudaHostRegisterMapped
            torch.cuda.check_error(torch.cuda.cudart().cudaHostRegister(self.host_ptr, nbytes, flags))
            self.dev_ptr = self.host_ptr  # UVA: the host pointer is valid on the device
            self.gpu = torch.as_tensor(_CudaArrayView(self.dev_ptr, nbytes // 2), device=f"cuda:{device}")
            self.cpu = torch.frombuffer(self._mm, dtype=torch.int16)
        else:
            raise ValueError(f"unknown host allocation mode {mode!r}")
        if self.gpu.data_ptr() != self.dev_ptr or self.gpu.device.type != "cuda":
            raise RuntimeError("the CUDA view of the host buffer does not point at the mapped memory")

    def free(self) -> None:
        if self._freed:
            return
        import torch

        torch.cuda.synchronize()
        self.gpu = None
        self.cpu = None
        self._keep.clear()
        if self.mode == "cupy":
            import cupy

            cupy.cuda.runtime.freeHost(self.host_ptr)
        else:
            torch.cuda.check_error(torch.cuda.cudart().cudaHostUnregister(self.host_ptr))
            del self._anchor
            try:
                self._mm.close()
            except BufferError:  # a CPU view is still referenced somewhere; the OS frees it at exit
                log("host buffer still exported; left to process exit")
        self._freed = True


def resolve_host_alloc(mode: str) -> str:
    if mode != "auto":
        return mode
    try:
        importlib.import_module("cupy")
        return "cupy"
    except Exception as exc:  # noqa: BLE001  (missing, or its CUDA libraries are)
        log(f"cupy not importable ({type(exc).__name__}: {exc}); using mmap + cudaHostRegister")
        return "register"


def _event_times(torch, fns: Sequence[Callable[[], object]], reps: int, offset: int = 0) -> list[float]:
    """Milliseconds of each call, CUDA events around it, call i runs fns[(offset+i) % len]."""
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(reps)]
    for i, (start, end) in enumerate(pairs):
        start.record()
        fns[(offset + i) % len(fns)]()
        end.record()
    torch.cuda.synchronize()  # all events complete before reading them
    return [start.elapsed_time(end) for start, end in pairs]


def time_calls(torch, fn: Callable[[], object], reps: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    return _event_times(torch, [fn], reps)


def fill_random_(torch, dst_flat, gen, dtype, scale: float, chunk_elems: int = 1 << 27) -> None:
    """Fill a flat int16 tensor (device, or CPU over pinned memory) with random `dtype` values.

    Values are drawn on the GPU in chunks and copied (DMA) when dst is host memory. Never zeros:
    zeros can run faster than real data and hide unwritten outputs.
    """
    elem = torch.empty((), dtype=dtype).element_size()
    per = elem // 2  # int16 slots per element
    n = dst_flat.numel() // per
    view = dst_flat.view(dtype)
    tmp = torch.empty(min(chunk_elems, n), dtype=torch.float32, device="cuda")
    for start in range(0, n, chunk_elems):
        m = min(chunk_elems, n - start)
        t = tmp[:m]
        if dtype == torch.float32:
            t.uniform_(0.5, 1.5, generator=gen)
        else:
            t.normal_(0.0, scale, generator=gen)
        src = t.to(dtype)
        view[start:start + m].copy_(src, non_blocking=True)
        torch.cuda.current_stream().synchronize()  # src and tmp are reused next round


class Weights:
    """w13 [E, 2I, H] and w2 [E, H, I] as bf16 CUDA tensors (device memory or mapped host memory)."""

    def __init__(self, w13, w2, where: str, buffers: Sequence[object] = ()):
        self.w13 = w13
        self.w2 = w2
        self.where = where
        self.buffers = list(buffers)

    def free(self) -> None:
        self.w13 = None
        self.w2 = None
        for buf in self.buffers:
            if isinstance(buf, HostBuffer):
                buf.free()
        self.buffers = []


def _shapes(args) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    E, H, I = args.experts, args.hidden, args.intermediate
    return (E, 2 * I, H), (E, H, I)


def device_weights(torch, args, gen) -> Weights:
    s13, s2 = _shapes(args)
    w13 = torch.empty(s13, dtype=torch.bfloat16, device="cuda")
    w2 = torch.empty(s2, dtype=torch.bfloat16, device="cuda")
    fill_random_(torch, w13.view(-1).view(torch.int16), gen, torch.bfloat16, 1.0 / math.sqrt(args.hidden))
    fill_random_(torch, w2.view(-1).view(torch.int16), gen, torch.bfloat16, 1.0 / math.sqrt(args.intermediate))
    return Weights(w13, w2, "hbm")


def host_weights(torch, args, gen, mode: str) -> Weights:
    s13, s2 = _shapes(args)
    n13 = math.prod(s13) * BF16_BYTES
    n2 = math.prod(s2) * BF16_BYTES
    t = time.monotonic()
    b13 = HostBuffer(n13, mode, args.device)
    b2 = HostBuffer(n2, mode, args.device)
    log(f"pinned+mapped host allocation of {(n13 + n2) / 1e9:.2f} GB ({mode}) took {time.monotonic() - t:.2f} s")
    t = time.monotonic()
    fill_random_(torch, b13.cpu, gen, torch.bfloat16, 1.0 / math.sqrt(args.hidden))
    fill_random_(torch, b2.cpu, gen, torch.bfloat16, 1.0 / math.sqrt(args.intermediate))
    log(f"filling host weights took {time.monotonic() - t:.2f} s")
    w13 = b13.gpu.view(torch.bfloat16).view(s13)
    w2 = b2.gpu.view(torch.bfloat16).view(s2)
    return Weights(w13, w2, "host", [b13, b2])


def hot_cold_from_host(torch, host: Weights, n_hot: int) -> Weights:
    """The hottest n_hot experts (ranks 0 .. n_hot-1) copied into device memory, the rest left in the
    mapped host memory of `host` and read over UVA; w13/w2 are per-expert lists that moe_forward
    indexes like tensors. The host buffers stay owned by `host`."""
    b13, b2 = host.buffers
    experts = host.w13.shape[0]
    hot13 = torch.empty((n_hot, *host.w13.shape[1:]), dtype=torch.bfloat16, device="cuda")
    hot2 = torch.empty((n_hot, *host.w2.shape[1:]), dtype=torch.bfloat16, device="cuda")
    if n_hot:
        hot13.view(-1).view(torch.int16).copy_(b13.cpu[: hot13.numel()], non_blocking=True)
        hot2.view(-1).view(torch.int16).copy_(b2.cpu[: hot2.numel()], non_blocking=True)
        torch.cuda.synchronize()
    w13 = [hot13[e] if e < n_hot else host.w13[e] for e in range(experts)]
    w2 = [hot2[e] if e < n_hot else host.w2[e] for e in range(experts)]
    return Weights(w13, w2, f"hbm:{n_hot}+host:{experts - n_hot}")


def device_buffer_like(torch, weights: Weights) -> Weights:
    return Weights(torch.empty_like(weights.w13, device="cuda"), torch.empty_like(weights.w2, device="cuda"),
                   "hbm-staging")


def copy_layer_(host: Weights, dst: Weights) -> None:
    """SGLang-style layer offload: DMA the whole layer's expert tensors host -> device."""
    b13, b2 = host.buffers
    dst.w13.view(-1).view(b13.cpu.dtype).copy_(b13.cpu, non_blocking=True)
    dst.w2.view(-1).view(b2.cpu.dtype).copy_(b2.cpu, non_blocking=True)


def build_plan(torch, ids, gates, device) -> list[tuple[int, object, object]]:
    """[(expert, token index tensor, gate column [n,1] bf16)] for the selected experts, ascending."""
    plan = []
    for e, (toks, gs) in expert_assignments(ids, gates).items():
        idx = torch.tensor(toks, dtype=torch.int64, device=device)
        g = torch.tensor(gs, dtype=torch.float32, device=device).to(torch.bfloat16).unsqueeze(1)
        plan.append((e, idx, g))
    return plan


def moe_forward(torch, x, w13, w2, plan, out, inter: int):
    """out[B, H] (fp32) = sum over selected experts of gate * w2 @ (silu(w1 x) * w3 x).

    Per expert: gather its tokens, two cuBLAS GEMMs reading only that expert's weight rows from
    wherever w13/w2 live, SwiGLU in between, scatter-add into out.
    """
    F = torch.nn.functional
    out.zero_()
    for e, idx, g in plan:
        xe = x.index_select(0, idx)                 # [n, H]
        h = torch.mm(xe, w13[e].t())                # [n, 2I]
        a = F.silu(h[:, :inter]).mul_(h[:, inter:]).mul_(g)
        y = torch.mm(a, w2[e].t())                  # [n, H]
        out.index_add_(0, idx, y.float())
    return out


def moe_reference(torch, x, w13, w2, plan, inter: int):
    """The same function in float64 (upcast operands), for --check."""
    F = torch.nn.functional
    xd = x.double()
    out = torch.zeros(x.shape, dtype=torch.float64, device=x.device)
    for e, idx, g in plan:
        h = xd.index_select(0, idx) @ w13[e].double().t()
        a = F.silu(h[:, :inter]) * h[:, inter:] * g.double()
        out.index_add_(0, idx, a @ w2[e].double().t())
    return out


class StepRunner:
    """One routing's MoE compute on fixed weights: eager warm-up, then a captured CUDA graph."""

    def __init__(self, torch, fn: Callable[[], object], use_graph: bool):
        self.fn = fn
        self.graph = None
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture path (handles, workspaces)
            fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        if use_graph:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn()
            self.graph = graph

    def __call__(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.fn()


class BatchCase:
    """Static inputs for one batch size: routings, plans, x, out; runners per weight set."""

    def __init__(self, torch, args, batch: int, gen, n_hot: int = 0):
        self.batch = batch
        tokens = batch * args.tokens_per_step  # a verify window routes k tokens per sequence
        self.routings = [make_routing(tokens, args.experts, args.topk, args.seed, r, args.popularity)
                         for r in range(args.routings)]
        self.unique = [len(unique_experts(ids)) for ids, _ in self.routings]
        self.cold = [sum(1 for e in unique_experts(ids) if e >= n_hot) for ids, _ in self.routings]
        hits = [e < n_hot for ids, _ in self.routings for row in ids for e in row]
        self.hot_hit_share = sum(hits) / len(hits)
        self.plans = [build_plan(torch, ids, gates, "cuda") for ids, gates in self.routings]
        self.x = torch.empty((tokens, args.hidden), dtype=torch.float32, device="cuda").normal_(generator=gen)
        self.x = self.x.to(torch.bfloat16)
        self.out = torch.empty((tokens, args.hidden), dtype=torch.float32, device="cuda")
        self.inter = args.intermediate

    def runners(self, torch, weights: Weights, use_graph: bool, plans=None) -> list[StepRunner]:
        out = []
        for plan in (self.plans if plans is None else plans):
            fn = (lambda plan=plan: moe_forward(torch, self.x, weights.w13, weights.w2, plan, self.out, self.inter))
            out.append(StepRunner(torch, fn, use_graph))
        return out


def make_runners(torch, case: BatchCase, weights: Weights, state: dict, plans=None) -> list[StepRunner]:
    """Runners with graphs if possible; a failed capture falls back to eager for the whole run."""
    if state["graphs"]:
        try:
            return case.runners(torch, weights, True, plans)
        except Exception as exc:  # noqa: BLE001  (capture unsupported: measure eagerly, say so)
            log(f"CUDA graph capture failed ({type(exc).__name__}: {exc}); falling back to eager steps")
            torch.cuda.synchronize()
            state["graphs"] = False
    return case.runners(torch, weights, False, plans)


def _hbm_read_gbps(torch, nbytes: int, reps: int, gen) -> float | None:
    """Device-memory read: a float32 sum over nbytes (bytes read = the buffer)."""
    dev = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_(0.5, 1.5, generator=gen)
    return gbps(nbytes, median(time_calls(torch, lambda: torch.sum(dev), reps, 3)))


def _uva_read(torch, host: HostBuffer, reps: int) -> tuple[float | None, int]:
    """Zero-copy read: torch.sum over the CUDA view of mapped host memory; and a content check."""
    uva = host.gpu.view(torch.float32)
    rate = gbps(host.nbytes, median(time_calls(torch, lambda: torch.sum(uva), reps, 2)))
    # The zero-copy read must see the same bytes as a DMA copy of them.
    dcopy = torch.empty(host.nbytes // 4, dtype=torch.float32, device="cuda")
    dcopy.copy_(host.cpu.view(torch.float32), non_blocking=True)
    s_uva = float(torch.sum(uva, dtype=torch.float64))
    s_dev = float(torch.sum(dcopy, dtype=torch.float64))
    return rate, int(abs(s_uva - s_dev) <= 1e-9 * max(abs(s_dev), 1.0))


def _h2d_gbps(torch, host: HostBuffer, reps: int) -> float | None:
    """Pinned host -> device DMA of the whole buffer (cudaMemcpyAsync through torch's copy_)."""
    dst = torch.empty(host.nbytes // 2, dtype=torch.int16, device="cuda")
    return gbps(host.nbytes, median(time_calls(torch, lambda: dst.copy_(host.cpu, non_blocking=True), reps, 2)))


def measure_bandwidths(torch, args, mode: str) -> tuple[dict[str, float | None], dict]:
    """hbm_read_gbps, uva_read_gbps, h2d_memcpy_gbps (+ uva_read_ok: the UVA read saw the data)."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    bw: dict[str, float | None] = {"hbm_read_gbps": _hbm_read_gbps(torch, args.hbm_bw_mib << 20,
                                                                   max(args.bw_reps, 10), gen)}
    extra: dict = {}
    t = time.monotonic()
    host = HostBuffer(args.bw_mib << 20, mode, args.device)
    extra["bw_host_alloc_s"] = time.monotonic() - t
    try:
        fill_random_(torch, host.cpu, gen, torch.float32, 1.0)
        bw["uva_read_gbps"], extra["uva_read_ok"] = _uva_read(torch, host, args.bw_reps)
        bw["h2d_memcpy_gbps"] = _h2d_gbps(torch, host, args.bw_reps)
    finally:
        host.free()
    return bw, extra


def run_check(torch, args, storages: dict[str, Weights], host: Weights, gen, state: dict) -> dict:
    """All three arms on routing 0 of every batch size: vs float64 and vs the hbm arm."""
    worst_fp64 = 0.0
    worst_hbm = 0.0
    all_finite = True
    for b in args.batch_list:
        case = BatchCase(torch, args, b, gen)
        plan = case.plans[0]
        ref = moe_reference(torch, case.x, storages["hbm"].w13, storages["hbm"].w2, plan, case.inter)
        ref_norm = float(torch.linalg.vector_norm(ref))
        outs = {}
        for arm in ARMS:
            w = storages[arm]
            runner = make_runners(torch, case, w, state, plans=[plan])[0]
            case.out.fill_(float("nan"))  # poison: the step must write every element
            if arm == "layer_copy":
                w.w13.fill_(float("nan"))  # poison: the step must copy the layer in
                w.w2.fill_(float("nan"))
                copy_layer_(host, w)
            runner()
            torch.cuda.synchronize()
            outs[arm] = case.out.clone()
        for arm, out in outs.items():
            finite = bool(torch.isfinite(out).all())
            all_finite &= finite
            e64 = relative_error(float(torch.linalg.vector_norm(out.double() - ref)), ref_norm)
            ehbm = relative_error(float(torch.linalg.vector_norm(out - outs["hbm"])),
                                  float(torch.linalg.vector_norm(outs["hbm"])))
            if not finite:
                e64 = ehbm = math.inf
            worst_fp64 = max(worst_fp64, e64)
            worst_hbm = max(worst_hbm, ehbm)
            log(f"check b={b} {arm:10s}: rel err vs fp64 {e64:.3e}, vs hbm {ehbm:.3e}, finite={finite}")
    ok = all_finite and worst_fp64 <= CHECK_TOL_VS_FP64 and worst_hbm <= CHECK_TOL_VS_HBM
    return {"check_ok": int(ok), "check_rel_err_vs_fp64_max": worst_fp64, "check_rel_err_vs_hbm_max": worst_hbm}


def time_arm(torch, args, arm: str, weights: Weights, host: Weights | None, gen, state: dict
             ) -> dict[int, dict[str, float]]:
    """Per batch size: warm up, size reps to the budget, time full steps with CUDA events."""
    e_bytes = expert_bytes(args.hidden, args.intermediate)
    l_bytes = layer_bytes(args.experts, args.hidden, args.intermediate)
    per_batch_budget = args.budget_s / len(args.batch_list)
    n_hot = {"hbm": args.experts, "hot_cold": args.n_hot}.get(arm, 0)
    results: dict[int, dict[str, float]] = {}
    for b in args.batch_list:
        case = BatchCase(torch, args, b, gen, n_hot)
        if arm == "layer_copy":
            copy_layer_(host, weights)  # valid data before the eager warm-up and capture
            torch.cuda.synchronize()
        runners = make_runners(torch, case, weights, state)
        if arm == "layer_copy":
            fns = [(lambda r=r: (copy_layer_(host, weights), r())) for r in runners]
        else:
            fns = list(runners)
        warm = _event_times(torch, fns, max(1, args.warmup))
        est = median(warm)
        reps = pick_reps(est, per_batch_budget, args.reps)
        offset = max(1, args.warmup)
        times = _event_times(torch, fns, reps, offset=offset)
        rep_unique = [case.unique[(offset + i) % len(fns)] for i in range(reps)]
        rep_cold = [case.cold[(offset + i) % len(fns)] for i in range(reps)]
        results[b] = batch_metrics(arm, b, times, rep_unique, e_bytes, l_bytes, rep_cold, case.hot_hit_share)
        log(f"{arm} b={b}: {results[b][f'moe_step_ms_b{b}']:.3f} ms median over {reps} reps "
            f"(warm-up {est:.3f} ms), {results[b][f'unique_experts_b{b}']:.1f} distinct experts, "
            f"effective {results[b][f'effective_gbps_b{b}'] or 0:.1f} GB/s")
        del runners, fns, case
        torch.cuda.synchronize()
    return results


def measure_layer_copy_only(torch, host: Weights, dst: Weights, reps: int) -> float:
    return median(time_calls(torch, lambda: copy_layer_(host, dst), reps, 1))


def run(args: argparse.Namespace) -> tuple[dict, bool]:
    """Everything that needs the GPU; returns (result dict, ok)."""
    import torch

    t_start = time.monotonic()
    torch.cuda.set_device(args.device)
    mode = resolve_host_alloc(args.host_alloc)
    state = {"graphs": not args.no_graph}
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234 + args.seed)
    log(f"device {torch.cuda.get_device_name(args.device)}, torch {torch.__version__}, host alloc {mode}, "
        f"{config_string(args)}")
    lb = layer_bytes(args.experts, args.hidden, args.intermediate)
    log(f"one layer's experts: {lb / 1e9:.2f} GB ({expert_bytes(args.hidden, args.intermediate) / 1e6:.2f} MB each)")

    bw, extra = measure_bandwidths(torch, args, mode)
    log("bandwidths: " + ", ".join(f"{k} {v:.1f}" if v is not None else f"{k} n/a" for k, v in bw.items()))
    extra["bandwidth_s"] = time.monotonic() - t_start

    t_setup = time.monotonic()
    need_host = args.check or args.arm in ("uva", "layer_copy", "hot_cold")
    host = host_weights(torch, args, gen, mode) if need_host else None
    storages: dict[str, Weights] = {}
    if host is not None:
        storages["uva"] = host
    if args.check or args.arm == "hot_cold":
        storages["hot_cold"] = hot_cold_from_host(torch, host, args.n_hot)
    if args.check or args.arm == "layer_copy":
        storages["layer_copy"] = device_buffer_like(torch, host)
    if args.check:
        hbm = device_buffer_like(torch, host)
        copy_layer_(host, hbm)  # identical weights to the host copy
        torch.cuda.synchronize()
        storages["hbm"] = Weights(hbm.w13, hbm.w2, "hbm")
    elif args.arm == "hbm":
        storages["hbm"] = device_weights(torch, args, gen)
    torch.cuda.synchronize()
    extra["setup_s"] = time.monotonic() - t_setup
    log(f"weights setup for arm {args.arm}{' (+check)' if args.check else ''} took {extra['setup_s']:.2f} s")

    ok = True
    try:
        if args.check:
            extra.update(run_check(torch, args, storages, host, gen, state))
            ok = bool(extra["check_ok"])
            log(f"check {'passed' if ok else 'FAILED'}: max rel err vs fp64 "
                f"{extra['check_rel_err_vs_fp64_max']:.3e} (tol {CHECK_TOL_VS_FP64}), vs hbm "
                f"{extra['check_rel_err_vs_hbm_max']:.3e} (tol {CHECK_TOL_VS_HBM})")
        per_batch: dict[int, dict[str, float]] = {}
        if ok:
            weights = storages[args.arm]
            if args.arm == "layer_copy":
                extra["layer_copy_ms"] = measure_layer_copy_only(torch, host, weights, 3)
                log(f"layer copy alone: {extra['layer_copy_ms']:.2f} ms "
                    f"({gbps(lb, extra['layer_copy_ms']) or 0:.1f} GB/s)")
            per_batch = time_arm(torch, args, args.arm, weights, host, gen, state)
            add_ceilings(args.arm, per_batch, bw)
    finally:
        torch.cuda.synchronize()
        for w in storages.values():
            if w is not host:
                w.free()
        if host is not None:
            host.free()
        storages.clear()
        torch.cuda.empty_cache()

    extra.update({
        "host_alloc": mode,
        "graphs": int(state["graphs"]),
        "device_name": torch.cuda.get_device_name(args.device),
        "torch_version": torch.__version__,
        "total_s": time.monotonic() - _T0,
    })
    return assemble_result(args.arm, args, bw, per_batch, extra), ok


def main(argv: Sequence[str] | None = None,
         importer: Callable[[str], object] = importlib.import_module) -> int:
    args = parse_args(argv)
    reason = cuda_unavailable_reason(importer)
    if reason is not None:
        print(f"expert_placement_bench: {reason}", file=sys.stderr)
        return 2
    result, ok = run(args)
    sys.stderr.flush()
    print(result_json(result), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
