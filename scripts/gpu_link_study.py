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
kept); the script sets one only when asked: ``--p2p off`` sets ``NCCL_P2P_DISABLE=1`` in the
workers, so the same GPUs measure a host-staged path beside their own.

The process group, the timing loop and the rank agreement below are shared with
scripts/gpu_tp2_step.py, which imports them (``add_group_args``, ``run_ranks``, ``timed``,
``agreed_median``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable


def add_group_args(parser: argparse.ArgumentParser) -> None:
    """The options every multi-process study takes: who takes part, how, and for how long."""
    parser.add_argument("--world", type=int, default=2, help="processes (GPUs) taking part")
    parser.add_argument("--budget-s", type=float, default=2.0, help="timed seconds per measurement")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls before each measurement")
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    parser.add_argument("--port", type=int, default=29533, help="the rendezvous port on 127.0.0.1")
    parser.add_argument(
        "--p2p",
        choices=("on", "off"),
        default="on",
        help="off: NCCL_P2P_DISABLE=1, so NCCL stages every transfer through host memory (the path "
        "004's dual GH200 has between its Hoppers); on: NCCL's choice",
    )
    parser.add_argument("--seed", type=int, default=0, help="the random data's seed")


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_group_args(parser)
    parser.add_argument(
        "--sizes", default="4096,65536,1048576,33554432", help="message bytes, comma-separated"
    )
    return parser.parse_args(argv)


def pick_backend(choice: str) -> str:
    import torch

    if choice != "auto":
        return choice
    return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= 2 else "gloo"


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _once(call: Callable[[], object], device) -> float:
    """One call's seconds, synchronised."""
    start = time.perf_counter()
    call()
    sync(device)
    return time.perf_counter() - start


def _agreed_count(wanted: int, device) -> int:
    """The fewest calls any rank wants: every rank must make the same number of collective calls,
    or the one that stops first leaves the others waiting forever in their next call."""
    import torch
    import torch.distributed as dist

    count = torch.tensor([wanted], dtype=torch.int64, device=device)
    dist.all_reduce(count, op=dist.ReduceOp.MIN)
    return int(count.item())


def timed(call: Callable[[], object], device, budget_s: float, warmup: int) -> list[float]:
    """Seconds per call, each timed alone after a barrier, as many calls (at least 5, at most
    10,000) as the first timed call says fit the budget, the same number on every rank."""
    import torch.distributed as dist

    for _ in range(warmup):
        call()
    sync(device)
    first = _once(call, device)
    times: list[float] = []
    for _ in range(_agreed_count(min(10_000, max(5, int(budget_s / max(first, 1e-9)))), device)):
        dist.barrier()
        times.append(_once(call, device))
    return times


def agreed_median(times: list[float], device) -> float:
    """The slowest rank's median: a collective is as slow as the rank that waits longest."""
    import torch
    import torch.distributed as dist

    value = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def _collectives(args: argparse.Namespace, rank: int, device) -> dict[str, float]:
    import torch
    import torch.distributed as dist

    world = args.world
    out: dict[str, float] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        elements = max(world, size // 2 // world * world)  # bf16 on GPUs, a multiple of the world
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        data = torch.ones(elements, dtype=dtype, device=device)
        nbytes = elements * data.element_size()
        reduce_call = functools.partial(dist.all_reduce, data)
        seconds = agreed_median(timed(reduce_call, device, args.budget_s, args.warmup), device)
        out[f"allreduce_us_{size}"] = seconds * 1e6
        out[f"allreduce_busbw_gbps_{size}"] = nbytes / seconds / 1e9 * 2 * (world - 1) / world
        target = torch.empty_like(data)
        try:
            exchange_call = functools.partial(dist.all_to_all_single, target, data)
            seconds = agreed_median(timed(exchange_call, device, args.budget_s, args.warmup), device)
        except RuntimeError as error:  # a gloo build without all-to-all
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

        seconds = agreed_median(timed(call, device, args.budget_s, args.warmup), device)
        out[f"p2p_gbps_{src}to{dst}"] = data.numel() * 4 / seconds / 1e9
    return out


def link_metrics(rank: int, args: argparse.Namespace, device) -> dict[str, float]:
    return {**_p2p(args, rank, device), **_collectives(args, rank, device)}


Worker = Callable[[int, argparse.Namespace, object], "dict[str, float]"]


def _rank_main(rank: int, worker: Worker, args: argparse.Namespace, backend: str, results) -> None:
    """One rank: join the group (one GPU each on NCCL), run ``worker``, hand rank 0's metrics back."""
    import torch
    import torch.distributed as dist

    if args.p2p == "off":  # before the communicator exists: NCCL reads it once, at init
        os.environ["NCCL_P2P_DISABLE"] = "1"
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)  # ranks share the host's cores: one thread each, not one pool each
    dist.init_process_group(
        backend, init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=args.world
    )
    try:
        metrics = worker(rank, args, device)
        if rank == 0:
            results.put(metrics)
    finally:
        dist.destroy_process_group()


def run_ranks(worker: Worker, args: argparse.Namespace) -> tuple[str, dict[str, float]]:
    """``worker`` on ``args.world`` spawned processes; the backend and rank 0's metrics."""
    import torch.multiprocessing as mp

    backend = pick_backend(args.backend)
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    mp.start_processes(
        _rank_main, args=(worker, args, backend, results), nprocs=args.world, start_method="spawn"
    )
    return backend, results.get()


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.world < 2:
        print("gpu_link_study: --world must be at least 2 (a path needs two ends)", file=sys.stderr)
        return 2
    backend, metrics = run_ranks(link_metrics, args)
    print(json.dumps({"backend": backend, "world": args.world, "p2p": args.p2p, **metrics}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
