#!/usr/bin/env python3
"""Generate a tiny random-weight Qwen2 model and tokenizer for serving tests, offline.

    .venv-serve/bin/python scripts/make_tiny_model.py OUT_DIR [--hidden 512 --layers 4 --heads 8
        --vocab 1024 --seed 0]

Deterministic: the same arguments (and the same torch/transformers/tokenizers, which the serve venv
pins) give byte-identical files, so a release can pin the model directory's content hash.
Idempotent: OUT_DIR/recipe-ledger-model.json records the arguments and the sha256 of every file;
when it matches, nothing is done (and torch is not even imported).

Only the standard library is imported at module level, so the argument and manifest logic can be
tested without torch; the heavy imports live in build().
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

MANIFEST = "recipe-ledger-model.json"
# Bump when the generated content changes for the same arguments (weights, tokenizer, config).
GENERATOR_VERSION = 1
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    p.add_argument("--hidden", type=int, default=512, help="hidden size")
    p.add_argument("--layers", type=int, default=4, help="number of decoder layers")
    p.add_argument("--heads", type=int, default=8, help="attention heads (also key/value heads)")
    p.add_argument("--vocab", type=int, default=1024, help="tokenizer and embedding vocabulary size")
    p.add_argument("--intermediate", type=int, default=None, help="MLP size (default 2 x hidden)")
    p.add_argument("--max-position", type=int, default=2048, help="max_position_embeddings")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.intermediate is None:
        args.intermediate = 2 * args.hidden
    if args.hidden % args.heads:
        p.error(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    if args.vocab < 256 + len(SPECIAL_TOKENS) + 1:
        p.error("--vocab must exceed the 256 byte-level symbols plus the special tokens")
    for name in ("hidden", "layers", "heads", "intermediate", "max_position"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    return args


def model_args(args: argparse.Namespace) -> dict:
    """The arguments that determine the content (everything except OUT_DIR)."""
    keys = ("hidden", "layers", "heads", "vocab", "intermediate", "max_position", "seed")
    return {k: getattr(args, k) for k in keys}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(out_dir: Path) -> dict | None:
    try:
        return json.loads((out_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def is_up_to_date(out_dir: Path, margs: dict) -> bool:
    """True when out_dir holds a complete model made by this generator with these arguments."""
    m = read_manifest(out_dir)
    if not m or m.get("generator_version") != GENERATOR_VERSION or m.get("args") != margs:
        return False
    files = m.get("files")
    if not isinstance(files, dict) or not files:
        return False
    return all((out_dir / n).is_file() and sha256_file(out_dir / n) == h for n, h in files.items())


def write_manifest(out_dir: Path, margs: dict) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    def installed(dist: str) -> str | None:
        try:
            return version(dist)
        except PackageNotFoundError:
            return None

    files = {
        p.name: sha256_file(p) for p in sorted(out_dir.iterdir()) if p.is_file() and p.name != MANIFEST
    }
    manifest = {
        "generator": "scripts/make_tiny_model.py",
        "generator_version": GENERATOR_VERSION,
        "args": margs,
        "made_with": {d: installed(d) for d in ("torch", "transformers", "tokenizers", "safetensors")},
        "files": files,
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def corpus(seed: int, lines: int = 20000) -> list[str]:
    """Deterministic recipe-flavoured text: enough variety for a ~1k byte-level BPE vocabulary."""
    rng = random.Random(seed)
    onsets = ["b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v", "st", "tr", "ch", "sh"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
    codas = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st"]
    words = [
        "".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(rng.randint(1, 3)))
        for _ in range(3000)
    ]
    words += ["the", "a", "of", "and", "to", "in", "is", "for", "with", "serve", "model"]
    words += ["batch", "token", "cache", "prefix", "recipe", "ledger"]
    out = []
    for _ in range(lines):
        sent = " ".join(rng.choice(words) for _ in range(rng.randint(4, 16)))
        sent = sent.capitalize() + rng.choice([".", ".", "?", "!", ",", ":"])
        if rng.random() < 0.3:
            sent += f" {rng.randint(0, 99999)} {rng.choice(['ms', 'GB', 'tok/s', '%', 'x'])}"
        if rng.random() < 0.1:
            sent = f'{{"key": "{rng.choice(words)}", "value": {rng.random():.4f}}}'
        out.append(sent)
    return out


def build_tokenizer(args: argparse.Namespace, out_dir: Path) -> dict[str, int]:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(args.seed), trainer=trainer)
    if tok.get_vocab_size() != args.vocab:
        raise SystemExit(f"tokenizer reached {tok.get_vocab_size()} tokens, not {args.vocab}: grow the corpus")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHATML_TEMPLATE,
        model_max_length=args.max_position,
        clean_up_tokenization_spaces=False,
    )
    fast.save_pretrained(out_dir)
    return {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}


def build_model(args: argparse.Namespace, out_dir: Path, ids: dict[str, int]) -> int:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        max_position_embeddings=args.max_position,
        max_window_layers=args.layers,
        tie_word_embeddings=False,  # tied + random weights just echo the last input token
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        dtype="bfloat16",
    )
    model = Qwen2ForCausalLM(config)
    # Fill every parameter from one seeded generator, in name order, rather than relying on
    # transformers' own init order: the bytes then depend only on the arguments.
    gen = torch.Generator().manual_seed(args.seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            elif name.endswith(".bias"):
                param.zero_()
            else:
                param.copy_(torch.normal(0.0, config.initializer_range, param.shape, generator=gen))
    model = model.to(torch.bfloat16)
    model.save_pretrained(out_dir, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir: Path = args.out_dir.resolve()
    margs = model_args(args)
    if is_up_to_date(out_dir, margs):
        print(f"tiny model in {out_dir} is up to date ({margs})")
        return 0
    if out_dir.exists() and any(out_dir.iterdir()) and read_manifest(out_dir) is None:
        print(f"refusing to replace {out_dir}: not empty and has no {MANIFEST}", file=sys.stderr)
        return 2

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # Build beside OUT_DIR, then swap it in, so OUT_DIR is never left half-written.
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        ids = build_tokenizer(args, tmp)
        n_params = build_model(args, tmp, ids)
        manifest = write_manifest(tmp, margs)
        tmp.chmod(0o755)  # mkdtemp makes 0700; safetensors writes 0600
        for f in tmp.iterdir():
            f.chmod(0o644)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = sum((out_dir / n).stat().st_size for n in manifest["files"])
    print(
        f"tiny model written to {out_dir}: {n_params / 1e6:.2f}M params, {size / 1e6:.1f} MB, "
        f"model.safetensors sha256 {manifest['files']['model.safetensors']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
