#!/usr/bin/env python3
"""Generate a random-weight Qwen3-MoE of a real model's layer shape, on the GPU, offline.

    python3 scripts/make_random_moe.py OUT_DIR [--layers 4 --device cuda --seed 0]

The lent H200 has no hub: the GPU lane's model (experiments/h200-tserve.yaml) is made there by this
script, in seconds. Each decoder layer has Qwen3-30B-A3B's shape (config.json of Qwen/Qwen3-30B-A3B:
hidden 2048, 32 query heads and 4 key/value heads of 128, 128 routed experts of intermediate 768,
top-8, RMSNorm eps 1e-6, rope theta 1e6); what is smaller is said plainly: fewer layers (48 there;
each launch boots the model, and a 12-layer one took about 305 s to serve in issue 27's probe) and
the tiny lane's byte-level BPE tokenizer (1024 tokens, not 151,936, so the embedding and the output
projection are small). The weights are N(0, 0.02) from one seeded generator on the device, in
parameter-name order, so the same arguments on the same GPU and torch give the same bytes.

The tokenizer, the manifest (arguments and the sha256 of every file), idempotence and the atomic swap
into OUT_DIR are make_tiny_model.py's, reused as make_tiny_moe.py reuses them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_model as dense  # noqa: E402  (the sibling script, by path)

# Qwen/Qwen3-30B-A3B's config.json, per layer.
QWEN3_30B_A3B_LAYER = {
    "hidden": 2048,
    "heads": 32,
    "kv_heads": 4,
    "head_dim": 128,
    "moe_intermediate": 768,
    "experts": 128,
    "experts_per_token": 8,
}
GENERATOR = "scripts/make_random_moe.py"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    p.add_argument("--layers", type=int, default=4, help="decoder layers (Qwen3-30B-A3B has 48)")
    p.add_argument("--device", default="cuda", help="where the weights are drawn (cuda, cuda:1, cpu)")
    p.add_argument("--max-position", type=int, default=4096, help="max_position_embeddings")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.layers < 1:
        p.error("--layers must be at least 1")
    if args.max_position < 64:
        p.error("--max-position must be at least 64")
    args.vocab = 1024  # the tiny lane's tokenizer, whose corpus reaches exactly this size
    args.__dict__.update(QWEN3_30B_A3B_LAYER)
    return args


def model_args(args: argparse.Namespace) -> dict:
    keys = ("layers", "max_position", "seed", "vocab", *QWEN3_30B_A3B_LAYER)
    return {"generator": GENERATOR, **{k: getattr(args, k) for k in keys}}


def qwen3_moe_config(args: argparse.Namespace, ids: dict[str, int]):  # -> Qwen3MoeConfig
    from transformers import Qwen3MoeConfig

    return Qwen3MoeConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=6144,  # the dense MLP size of the real config; unused (every layer is MoE)
        moe_intermediate_size=args.moe_intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim,
        max_position_embeddings=args.max_position,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        num_experts=args.experts,
        num_experts_per_tok=args.experts_per_token,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        norm_topk_prob=True,
        tie_word_embeddings=False,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        dtype="bfloat16",
    )


def build_model(args: argparse.Namespace, out_dir: Path, ids: dict[str, int]) -> int:
    import torch
    from transformers import Qwen3MoeForCausalLM

    config = qwen3_moe_config(args, ids)
    device = torch.device(args.device)
    # Built where the weights are drawn, in bf16 from the start: 2.5 B parameters in fp32 on the
    # host would take 10 GB and minutes of CPU random numbers.
    torch.set_default_dtype(torch.bfloat16)
    with device:
        model = Qwen3MoeForCausalLM(config)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.normal_(0.0, config.initializer_range, generator=gen)
    model.save_pretrained(out_dir, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> int:
    # make_tiny_model.main is the flow (idempotence, manifest, atomic swap); the three model-specific
    # steps are this script's.
    dense.parse_args, dense.model_args, dense.build_model = (
        lambda _argv: parse_args(_argv),
        model_args,
        build_model,
    )
    return dense.main(argv)


if __name__ == "__main__":
    sys.exit(main())
