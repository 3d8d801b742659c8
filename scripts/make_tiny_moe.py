#!/usr/bin/env python3
"""Generate a tiny random-weight Qwen3-MoE model and tokenizer, offline: the routing instrument's model.

    .venv-serve/bin/python scripts/make_tiny_moe.py OUT_DIR [--hidden 256 --layers 2 --heads 4
        --intermediate 256 --experts 16 --experts-per-token 2 --vocab 1024 --seed 0]

Every routed layer is MoE, no shared expert: both engines serve it on CPU, and SGLang's expert-
distribution recorder supports it (Mixtral has no expert-location metadata there). Tokenizer,
manifest, idempotence and the atomic swap into OUT_DIR are make_tiny_model.py's, reused as they are:
the tiny CPU lane's releases pin that script's bytes, so it is imported here, never edited.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_model as dense  # noqa: E402  (the sibling script, by path)

DEFAULTS = {"hidden": 256, "layers": 2, "heads": 4, "intermediate": 256}
# The dense script's own argument steps, kept before main() points its flow at this script's.
_dense_parse_args, _dense_model_args = dense.parse_args, dense.model_args


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--experts", type=int, default=16, help="routed experts per layer")
    p.add_argument("--experts-per-token", type=int, default=2, help="top-k of the router")
    own, rest = p.parse_known_args(argv)
    for key, value in DEFAULTS.items():
        flag = f"--{key}"
        if flag not in rest:
            rest += [flag, str(value)]
    args = _dense_parse_args(rest)
    if own.experts < 1 or not 1 <= own.experts_per_token <= own.experts:
        p.error("--experts must be >= 1 and --experts-per-token between 1 and --experts")
    args.experts, args.experts_per_token = own.experts, own.experts_per_token
    return args


def model_args(args: argparse.Namespace) -> dict:
    return {**_dense_model_args(args), "experts": args.experts, "experts_per_token": args.experts_per_token}


def build_model(args: argparse.Namespace, out_dir: Path, ids: dict[str, int]) -> int:
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        moe_intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        head_dim=args.hidden // args.heads,
        max_position_embeddings=args.max_position,
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
    model = Qwen3MoeForCausalLM(config)
    gen = torch.Generator().manual_seed(args.seed)  # every parameter from one generator, in name order
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.copy_(torch.normal(0.0, config.initializer_range, param.shape, generator=gen))
    model.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> int:
    # make_tiny_model.main is the flow (idempotence, manifest, atomic swap); its three model-specific
    # steps are this script's.
    dense.parse_args, dense.model_args, dense.build_model = (
        lambda _argv: parse_args(_argv),
        model_args,
        build_model,
    )
    return dense.main(argv)


if __name__ == "__main__":
    sys.exit(main())
