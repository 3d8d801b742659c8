#!/usr/bin/env python3
"""The GPU-to-GPU path of one box, measured (issue 30): P2P copy bandwidth both ways, and NCCL
all-reduce and all-to-all time and bus bandwidth over message sizes from one decode step's
activation (a few KiB) to a prefill chunk's (tens of MiB). A ``command`` instrument's script: it
prints one JSON object of metrics on its last line.

    python3 scripts/gpu_link_study.py --world 2 --sizes 4096,65536,1048576,33554432 --budget-s 2

Two processes on this host (torch.multiprocessing), one per GPU, backend NCCL; without two GPUs
(``--backend gloo``, or no CUDA) the same code runs on CPU tensors through gloo, which is how CI
checks the plumbing: the numbers then describe loopback, not a GPU path, and say so
(``backend`` in the output). Bus bandwidth follows nccl-tests' convention (doc/PERFORMANCE.md):
all-reduce ``algbw x 2 (n - 1) / n``, all-to-all ``algbw x (n - 1) / n``, so the numbers compare
with nccl-tests' and with ``recipes.parallel_cost``'s bytes per GPU.

NCCL settings are taken from the environment as the device README asks (``NCCL_NVLS_ENABLE=0``
kept); this script sets none of them.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=int, default=2, help="processes (GPUs) taking part")
    parser.add_argument(
        "--sizes", default="4096,65536,1048576,33554432", help="message bytes, comma-separated"
    )
    parser.add_argument("--budget-s", type=float, default=2.0, help="timed seconds per (collective, size)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls before each measurement")
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    parser.add_argument("--port", type=int, default=29533, help="the rendezvous port on 127.0.0.1")
    parser.add_argument("--seed", type=int, default=0, help="accepted for the instrument's template")
    return parser.parse_args(argv)


def _backend(choice: str) -> str:
    import torch

    if choice != "auto":
        return choice
    return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= 2 else "gloo"


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(call, device, budget_s: float, warmup: int) -> list[float]:
    """Seconds per call, each timed alone (synchronised), until the budget is spent (at least 5)."""
    import torch.distributed as dist

    for _ in range(warmup):
        call()
    _sync(device)
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < 5 or time.perf_counter() < deadline:
        dist.barrier()
        start = time.perf_counter()
        call()
        _sync(device)
        times.append(time.perf_counter() - start)
        if len(times) >= 10_000:
            break
    return times


def _agreed_median(times: list[float], device) -> float:
    """The slowest rank's median: a collective is as slow as the rank that waits longest."""
    import torch
    import torch.distributed as dist

    value = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def _collectives(args: argparse.Namespace, rank: int, world: int, device) -> dict[str, float]:
    import torch
    import torch.distributed as dist

    out: dict[str, float] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        elements = max(world, size // 2 // world * world)  # bf16 on GPUs, a multiple of the world
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        data = torch.ones(elements, dtype=dtype, device=device)
        nbytes = elements * data.element_size()
        reduce_call = functools.partial(dist.all_reduce, data)
        seconds = _agreed_median(_timed(reduce_call, device, args.budget_s, args.warmup), device)
        out[f"allreduce_us_{size}"] = seconds * 1e6
        out[f"allreduce_busbw_gbps_{size}"] = nbytes / seconds / 1e9 * 2 * (world - 1) / world
        target = torch.empty_like(data)
        try:
            exchange_call = functools.partial(dist.all_to_all_single, target, data)
            seconds = _agreed_median(_timed(exchange_call, device, args.budget_s, args.warmup), device)
        except RuntimeError as error:  # gloo builds without all-to-all
            if rank == 0:
                print(f"all-to-all not measured on {dist.get_backend()}: {error}", file=sys.stderr)
            continue
        out[f"alltoall_us_{size}"] = seconds * 1e6
        out[f"alltoall_busbw_gbps_{size}"] = nbytes / seconds / 1e9 * (world - 1) / world
    return out


def _p2p(args: argparse.Namespace, rank: int, device) -> dict[str, float]:
    """Rank 0 -> 1 and 1 -> 0 send/recv bandwidth at the largest size."""
    import torch
    import torch.distributed as dist

    size = max(int(s) for s in args.sizes.split(","))
    data = torch.ones(size // 4, dtype=torch.float32, device=device)
    out = {}
    for src, dst in ((0, 1), (1, 0)):

        def call(src: int = src, dst: int = dst) -> None:
            if rank == src:
                dist.send(data, dst)
            elif rank == dst:
                dist.recv(data, src)

        seconds = _agreed_median(_timed(call, device, args.budget_s, args.warmup), device)
        out[f"p2p_gbps_{src}to{dst}"] = data.numel() * 4 / seconds / 1e9
    return out


def _worker(rank: int, args: argparse.Namespace, backend: str, results) -> None:
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend, init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=args.world
    )
    try:
        metrics = {**_p2p(args, rank, device), **_collectives(args, rank, args.world, device)}
        if rank == 0:
            results.put(metrics)
    finally:
        dist.destroy_process_group()


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.world < 2:
        print("gpu_link_study: --world must be at least 2 (a path needs two ends)", file=sys.stderr)
        return 2
    import torch.multiprocessing as mp

    backend = _backend(args.backend)
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    mp.start_processes(_worker, args=(args, backend, results), nprocs=args.world, start_method="spawn")
    metrics = results.get()
    print(json.dumps({"backend": backend, "world": args.world, **metrics}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
