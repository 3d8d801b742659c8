#!/usr/bin/env python3
"""Where a served model's time goes: a seeded workload, once plain and once inside the engine's profiler.

    python scripts/profile_probe.py --url URL --trace-dir DIR --out FILE
        [--engine vllm|sglang] [--requests 4] [--max-tokens 16] [--seed 0] [--max-trace-mb 32]

vLLM must run with ``--profiler-config '{"profiler": "torch", "torch_profiler_dir": DIR, ...}'`` (DIR
the same folder as ``--trace-dir``); SGLang needs nothing (the probe tells it where to write). The probe
sends one warm-up completion, then ``--requests`` seeded completions one after another (temperature 0)
unprofiled and timed, then the same inside ``/start_profile`` ... ``/stop_profile`` (timed, and the stop
timed: it is when the trace is written). It finds the worker's new trace by the prefix it gave the
engine, summarises it (recipe_ledger.profile_summary) and prints, as the last stdout line, JSON:
``profile_share_<category>`` (summing to 1), ``profile_window_s``, ``profile_overhead`` (profiled wall
time / unprofiled), ``profile_flush_s`` and ``profile_trace_mb``. ``--out`` gets the shares, the trace's
name, size and sha256; the trace is copied beside it (``<out stem>.trace.json.gz``, for Perfetto) when
under ``--max-trace-mb``, else one line says it was not kept. Files appear whole or not at all.
Exit 2 with one line on stderr when the engine has no profiler (vLLM without ``--profiler-config``).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # probe_client.py, beside this script
from probe_client import post, prompts, served_model  # noqa: E402

from recipe_ledger.profile_summary import profile_metrics, summarize, trace_events  # noqa: E402

TRACE_SUFFIXES = (".json.gz", ".json")


class NoProfiler(Exception):
    """The engine answered /start_profile with 'no such route' or refused to profile."""


def run_workload(base: str, model: str, texts: list[str], max_tokens: int) -> float:
    """Wall seconds for the completions, sent one after another."""
    started = time.perf_counter()
    for text in texts:
        post(
            f"{base}/v1/completions",
            {"model": model, "prompt": text, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True},
        )
    return time.perf_counter() - started


def start_payload(engine: str, prefix: str, trace_dir: Path) -> dict:
    if engine == "sglang":
        # SGLang takes the folder per request; CPU only (it asks for CUDA activity by default), and no
        # Python stacks (they multiply the trace's size and say nothing the ops do not).
        return {
            "output_dir": str(trace_dir.resolve()),
            "activities": ["CPU"],
            "with_stack": False,
            "profile_prefix": prefix,
        }
    return {"profile_prefix": prefix}  # vLLM writes into its --profiler-config torch_profiler_dir


def start_profile(base: str, engine: str, prefix: str, trace_dir: Path) -> None:
    try:
        answer = post(f"{base}/start_profile", start_payload(engine, prefix, trace_dir), timeout=120)
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 405):
            raise NoProfiler(f"POST /start_profile answered {exc.code}") from None
        raise
    if b"fail" in answer.lower():
        raise NoProfiler(answer.decode(errors="replace").strip())


def stop_profile(base: str, timeout_s: float) -> float:
    """Seconds until the engine answers /stop_profile (vLLM writes the trace before answering)."""
    started = time.perf_counter()
    post(f"{base}/stop_profile", timeout=timeout_s)
    return time.perf_counter() - started


def worker_traces(trace_dir: Path, prefix: str, wait_s: float) -> list[Path]:
    """The new traces carrying ``prefix``, worker ranks only: vLLM's front-end trace (``async_llm``)
    records the API server's process, not the model. Waits for SGLang, which writes after answering."""
    deadline = time.monotonic() + wait_s
    while True:
        found = sorted(
            path
            for path in trace_dir.glob(f"{prefix}*")
            if path.name.endswith(TRACE_SUFFIXES) and ".async_llm." not in path.name
        )
        if found and all(settled(path) for path in found) or time.monotonic() > deadline:
            return found
        time.sleep(1)


def settled(path: Path) -> bool:
    """A file whose size holds still for half a second (the engine may still be writing it)."""
    size = path.stat().st_size
    time.sleep(0.5)
    return size > 0 and path.stat().st_size == size


def load_events(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as handle:
        return trace_events(json.load(handle))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_atomically(target: Path, fill) -> None:
    """Write through a temporary file in the same folder and rename it: whole or absent."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    try:
        fill(Path(temporary))
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide the run folder's files from other readers
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def keep_trace(trace: Path, out: Path, cap_bytes: int) -> Path | None:
    """Copy the trace (gzip) beside ``out`` when it is under the cap; None (and one line) when not."""
    size = trace.stat().st_size
    if size > cap_bytes:
        print(
            f"profile_probe: trace {trace.name} is {size / 1e6:.1f} MB, over the {cap_bytes / 1e6:g} MB cap:"
            " not kept (its sha256 and the metrics are recorded)",
            file=sys.stderr,
        )
        return None
    kept = out.parent / f"{out.name.removesuffix('.json').removesuffix('.out')}.trace.json.gz"

    def copy(temporary: Path) -> None:
        if trace.name.endswith(".gz"):
            shutil.copyfile(trace, temporary)
        else:
            with trace.open("rb") as source, gzip.open(temporary, "wb") as target:
                shutil.copyfileobj(source, target)

    write_atomically(kept, copy)
    return kept


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--trace-dir", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--engine", choices=("vllm", "sglang"), default="vllm")
    p.add_argument("--requests", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-trace-mb", type=float, default=32)
    p.add_argument("--stop-timeout-s", type=float, default=900)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return probe(args)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"profile_probe: {args.url}: {exc}", file=sys.stderr)
        return 2


def probe(args: argparse.Namespace) -> int:
    base = args.url.rstrip("/")
    args.trace_dir.mkdir(parents=True, exist_ok=True)
    model = served_model(base)
    texts = prompts(args.requests, args.seed)
    run_workload(base, model, texts[:1], args.max_tokens)  # warm-up: first-request costs stay out
    unprofiled_s = run_workload(base, model, texts, args.max_tokens)
    prefix = f"probe-{args.seed}-{os.getpid()}-{time.time_ns()}"
    try:
        start_profile(base, args.engine, prefix, args.trace_dir)
    except NoProfiler as exc:
        hint = 'start vLLM with --profiler-config \'{"profiler":"torch","torch_profiler_dir":DIR}\''
        print(f"profile_probe: {base} has no profiler ({exc}); {hint}", file=sys.stderr)
        return 2
    profiled_s = run_workload(base, model, texts, args.max_tokens)
    flush_s = stop_profile(base, args.stop_timeout_s)
    traces = worker_traces(args.trace_dir, prefix, wait_s=args.stop_timeout_s)
    if not traces:
        print(f"profile_probe: no trace named {prefix}* appeared in {args.trace_dir}", file=sys.stderr)
        return 2
    trace = traces[0]  # rank 0 (the names sort by rank); the others are listed in --out
    summary = summarize(load_events(trace))
    metrics = profile_metrics(summary)
    metrics |= {
        "profile_overhead": profiled_s / unprofiled_s,
        "profile_flush_s": flush_s,
        "profile_trace_mb": trace.stat().st_size / 1e6,
    }
    kept = keep_trace(trace, args.out, int(args.max_trace_mb * 1e6))
    record = {
        "engine": args.engine,
        "requests": args.requests,
        "max_tokens": args.max_tokens,
        "seed": args.seed,
        "unprofiled_s": unprofiled_s,
        "profiled_s": profiled_s,
        "thread": list(summary.thread) if summary.thread else None,
        "busy_us": dict(summary.busy_us),
        "shares": summary.shares,
        "traces": [{"name": t.name, "bytes": t.stat().st_size, "sha256": sha256_of(t)} for t in traces],
        "kept": kept.name if kept else None,
    }
    write_atomically(args.out, lambda temporary: temporary.write_text(json.dumps(record, indent=1)))
    print(json.dumps(metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
