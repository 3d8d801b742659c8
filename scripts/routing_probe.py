#!/usr/bin/env python3
"""Which experts a MoE served by SGLang routes to: record, drive requests, dump, summarise.

    .venv-sglang/bin/python scripts/routing_probe.py --url URL --model-dir MODEL --out FILE
        [--source sglang-recorder --recorder-dir DIR | --source vllm-response]
        [--requests 8] [--max-tokens 32] [--seed 0]

The server must run with ``--expert-distribution-recorder-mode stat`` and
``SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR=DIR``. The probe calls ``/start_expert_distribution_record``,
sends ``--requests`` seeded completions one after another (concurrency 1, temperature 0, so decode passes
carry one token and the verify-window figures can be read), ``/stop_...`` and ``/dump_...``, loads the
dump (a torch file: run it with the engine's python, which has torch), writes the raw counts and the
skew curve to ``--out`` and prints the figures (recipe_ledger.routing) as the last stdout line, JSON.
``--source vllm-response`` reads vLLM's own record instead: a server started with
``--enable-return-routed-experts`` returns each completion's routing (every token, every layer, top-k)
as a base64 .npy array; each token becomes one pass. (vLLM 0.32's CPU build refuses that flag: it
needs Model Runner V2, which needs Triton; docs/instruments-routing.md.)
Exit 2 with one line on stderr when the engine gives no routing (a dense model, the recorder off).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # probe_client.py, beside this script
from probe_client import post, prompts, served_model  # noqa: E402

from recipe_ledger.routing import pooled_curve, routing_figures  # noqa: E402


def newest_dump(directory: Path, after: float, wait_s: float = 60) -> Path:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        fresh = [p for p in directory.glob("expert_distribution_recorder_*.pt") if p.stat().st_mtime >= after]
        if fresh:
            time.sleep(0.5)  # torch.save may still be writing
            return max(fresh, key=lambda p: p.stat().st_mtime)
        time.sleep(0.5)
    raise SystemExit(
        f"routing_probe: no expert distribution dump appeared in {directory} within {wait_s:g} s"
    )


def load_counts(path: Path) -> list[list[list[int]]]:
    import torch

    data = torch.load(str(path), weights_only=False)
    logical = data.get("logical_count") if isinstance(data, dict) else None
    if logical is None:
        raise SystemExit(f"routing_probe: {path} has no logical_count (run the recorder in 'stat' mode)")
    rows = logical.tolist()
    return [one_pass for one_pass in rows if any(any(layer) for layer in one_pass)]


def sglang_recorder_counts(base: str, model: str, texts: list[str], max_tokens: int, recorder_dir: Path):
    """SGLang: record around the requests, dump, read the per-pass counts back."""
    recorder_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    post(f"{base}/start_expert_distribution_record")
    for prompt in texts:
        post(f"{base}/v1/completions", completion(model, prompt, max_tokens))
    post(f"{base}/stop_expert_distribution_record")
    post(f"{base}/dump_expert_distribution_record")
    return load_counts(newest_dump(recorder_dir, started))


def vllm_response_counts(base: str, model: str, texts: list[str], max_tokens: int, experts: int):
    """vLLM with --enable-return-routed-experts: each completion carries its tokens' routing as a
    base64 .npy array [tokens, layers, top-k]; every token becomes a one-token pass, and an empty pass
    between requests keeps windows inside one sequence."""
    counts: list[list[list[int]]] = []
    for prompt in texts:
        reply = json.loads(post(f"{base}/v1/completions", completion(model, prompt, max_tokens)))
        encoded = reply["choices"][0].get("routed_experts")
        if not encoded:
            raise SystemExit(
                "routing_probe: the response has no routed_experts (start vLLM with "
                "--enable-return-routed-experts)"
            )
        counts.extend(token_passes(decode_routed_experts(encoded), experts))
        counts.append([[0] * experts for _ in counts[-1]])
    return counts


def decode_routed_experts(encoded: str) -> list[list[list[int]]]:
    import base64
    import io

    import numpy

    return numpy.load(io.BytesIO(base64.b64decode(encoded)), allow_pickle=False).tolist()


def token_passes(routed: list[list[list[int]]], experts: int) -> list[list[list[int]]]:
    """[token][layer][k] expert ids -> one pass per token of per-layer hit counts."""
    passes = []
    for token in routed:
        one_pass = []
        for layer_ids in token:
            row = [0] * experts
            for expert in layer_ids:
                row[int(expert)] += 1
            one_pass.append(row)
        passes.append(one_pass)
    return passes


def completion(model: str, prompt: str, max_tokens: int) -> dict:
    return {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--source", choices=("sglang-recorder", "vllm-response"), default="sglang-recorder")
    p.add_argument(
        "--recorder-dir", type=Path, help="SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR (sglang-recorder)"
    )
    p.add_argument("--model-dir", required=True, type=Path)
    p.add_argument("--requests", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args(argv)
    if args.source == "sglang-recorder" and args.recorder_dir is None:
        p.error("--source sglang-recorder needs --recorder-dir")
    config = json.loads((args.model_dir / "config.json").read_text())
    topk = config.get("num_experts_per_tok")
    experts = config.get("num_experts") or config.get("num_local_experts") or config.get("n_routed_experts")
    if not topk or not experts:
        print(f"routing_probe: {args.model_dir} is not a MoE model (no num_experts_per_tok)", file=sys.stderr)
        return 2
    base = args.url.rstrip("/")
    model = served_model(base)
    texts = prompts(args.requests, args.seed)
    try:
        if args.source == "sglang-recorder":
            counts = sglang_recorder_counts(base, model, texts, args.max_tokens, args.recorder_dir)
        else:
            counts = vllm_response_counts(base, model, texts, args.max_tokens, int(experts))
    except urllib.error.URLError as exc:
        print(f"routing_probe: {base} did not record routing ({exc}); is the recorder on?", file=sys.stderr)
        return 2
    figures = routing_figures(counts, int(topk))
    if not figures:
        print("routing_probe: no expert hits were recorded (no MoE layer ran?)", file=sys.stderr)
        return 2
    args.out.write_text(
        json.dumps({"topk": topk, "counts": counts, "curve": pooled_curve(counts)}, separators=(",", ":"))
    )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
