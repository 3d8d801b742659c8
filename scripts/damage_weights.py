#!/usr/bin/env python3
"""Make a deliberately damaged copy of a model: the tensors a pattern names zeroed, scaled or noised.

    .venv-serve/bin/python scripts/damage_weights.py SRC_MODEL_DIR DST_DIR \\
        --tensor-pattern REGEX (--zero | --scale F | --noise SIGMA) [--seed N]

A quality instrument has to tell a damaged model from the one it was made from; this script makes
the damaged one, on purpose and reproducibly. DST_DIR gets every file of SRC_MODEL_DIR (config,
tokenizer) and a model.safetensors in which each tensor whose whole name matches REGEX
(``re.fullmatch``: ``o_proj`` alone matches nothing, and as in any regex ``.`` is any character, so
``experts.1.*`` also takes experts 10-19, where ``experts\\.1\\..*`` takes expert 1 only) is

- ``--zero``: all zeros;
- ``--scale F``: multiplied by F;
- ``--noise SIGMA``: plus gaussian noise of standard deviation SIGMA times the tensor's own standard
  deviation, drawn from a generator seeded by ``--seed`` and the tensor's name (the noise one
  tensor gets does not depend on which others matched).

Every other tensor keeps its bytes, and so does the file's metadata. The source's generator
manifest (recipe-ledger-model.json) is left out: it states hashes the new weights no longer have.
DST_DIR/recipe-ledger-damage.json says instead what was done to which source. One JSON line on
stdout names the tensors changed, their shapes and the new weights file's sha256.

Exit 2 with one line on stderr for what cannot be done: a pattern that matches nothing (the line
lists a few tensor names, to show the form), one that matches only tensors the operation would leave
as they are (``--noise`` on an all-zero bias, ``--scale 1``), a DST_DIR that is not empty, a source
without model.safetensors. Deterministic: the same source and arguments give the same bytes.

Only the standard library is imported at module level (the arguments are tested without torch).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WEIGHTS = "model.safetensors"
SOURCE_MANIFEST = "recipe-ledger-model.json"  # make_tiny_model.py's: its hashes no longer hold
DAMAGE_MANIFEST = "recipe-ledger-damage.json"
NAMES_SHOWN = 6  # tensor names a no-match error lists


class Refused(Exception):
    """What cannot be done, said in one line (exit 2)."""


@dataclass(frozen=True)
class Operation:
    kind: str  # "zero", "scale" or "noise"
    amount: float | None = None  # the factor of scale, the relative sigma of noise
    seed: int = 0

    def describe(self) -> dict[str, Any]:
        if self.kind == "zero":
            return {"kind": "zero"}
        if self.kind == "scale":
            return {"kind": "scale", "factor": self.amount}
        return {"kind": "noise", "sigma": self.amount, "relative_to": "tensor std", "seed": self.seed}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src", type=Path, metavar="SRC_MODEL_DIR")
    p.add_argument("dst", type=Path, metavar="DST_DIR")
    p.add_argument(
        "--tensor-pattern", required=True, metavar="REGEX", help="matches whole tensor names (re.fullmatch)"
    )
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--zero", action="store_true", help="set the matching tensors to zero")
    how.add_argument("--scale", type=float, metavar="F", help="multiply the matching tensors by F")
    how.add_argument(
        "--noise", type=float, metavar="SIGMA", help="add gaussian noise of SIGMA x each tensor's std"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the noise (default 0)")
    args = p.parse_args(argv)
    try:
        args.pattern = re.compile(args.tensor_pattern)
    except re.error as error:
        p.error(f"--tensor-pattern {args.tensor_pattern!r} is not a regular expression: {error}")
    if args.scale is not None and not math.isfinite(args.scale):
        p.error("--scale must be a finite number")
    if args.noise is not None and not (math.isfinite(args.noise) and args.noise > 0):
        p.error("--noise must be a positive number (the noise's std relative to each tensor's)")
    return args


def operation_of(args: argparse.Namespace) -> Operation:
    if args.zero:
        return Operation("zero")
    if args.scale is not None:
        return Operation("scale", args.scale)
    return Operation("noise", args.noise, args.seed)


def matching(names: list[str], pattern: re.Pattern[str]) -> list[str]:
    """The names ``pattern`` matches whole, in name order."""
    return sorted(name for name in names if pattern.fullmatch(name))


def no_match_message(pattern: re.Pattern[str], names: list[str], weights: Path) -> str:
    shown = ", ".join(sorted(names)[:NAMES_SHOWN])
    more = f" (and {len(names) - NAMES_SHOWN} more)" if len(names) > NAMES_SHOWN else ""
    inside = sum(1 for name in names if pattern.search(name))
    # The usual slip: a part of a name ("o_proj") where the whole name is matched.
    hint = f"; '.*{pattern.pattern}.*' would match {inside}" if inside else ""
    return (
        f"--tensor-pattern {pattern.pattern!r} matches none of the {len(names)} tensors in {weights} "
        f"(it must match a whole name{hint}); they are named like {shown}{more}"
    )


def noise_seed(seed: int, name: str) -> int:
    """A generator seed for one tensor: from --seed and the name, so it is the same whichever
    other tensors match (Python's hash() is salted per process; sha256 is not)."""
    digest = hashlib.sha256(f"{seed}\0{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def damaged(tensor: Any, name: str, op: Operation) -> Any:
    """``tensor`` with ``op`` applied, in the tensor's own dtype (computed in float32)."""
    import torch

    if op.kind == "zero":
        return torch.zeros_like(tensor)
    values = tensor.to(torch.float32)
    if op.kind == "scale":
        return (values * op.amount).to(tensor.dtype)
    std = values.std().item() if values.numel() > 1 else 0.0
    generator = torch.Generator().manual_seed(noise_seed(op.seed, name))
    noise = torch.randn(values.shape, generator=generator, dtype=torch.float32)
    return (values + noise * (op.amount * std)).to(tensor.dtype)


def rewrite(weights: Path, out: Path, pattern: re.Pattern[str], op: Operation) -> list[dict[str, Any]]:
    """Write ``out``: ``weights`` with the matching tensors damaged. Returns what was changed."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(weights), framework="pt") as f:
        names = list(f.keys())
        metadata = f.metadata()
        targets = matching(names, pattern)
        if not targets:
            raise Refused(no_match_message(pattern, names, weights))
        tensors = {name: f.get_tensor(name) for name in names}
    changed = []
    for name in targets:
        before = tensors[name]
        after = damaged(before, name, op)
        if torch.equal(after, before):
            continue  # nothing to say about it: it is not damaged
        tensors[name] = after.contiguous()
        dtype = str(before.dtype).removeprefix("torch.")
        changed.append({"name": name, "shape": list(before.shape), "dtype": dtype})
    if not changed:
        listed = ", ".join(targets[:3]) + (", ..." if len(targets) > 3 else "")
        raise Refused(
            f"--tensor-pattern {pattern.pattern!r} matches {len(targets)} tensor(s) ({listed}) "
            f"that {op.kind} leaves as they are: nothing would be damaged"
        )
    save_file(tensors, str(out), metadata=metadata)
    return changed


def build(args: argparse.Namespace) -> dict[str, Any]:
    """Make DST_DIR; return the JSON line's content."""
    src, dst = args.src.resolve(), args.dst.resolve()
    weights = src / WEIGHTS
    if not weights.is_file():
        raise Refused(f"{src} has no {WEIGHTS} (a single-file safetensors model is what this rewrites)")
    if dst == src:
        raise Refused(f"DST_DIR is SRC_MODEL_DIR ({src}): the damaged copy needs a folder of its own")
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise Refused(f"{dst} is not an empty folder: remove it or name another DST_DIR")
    op = operation_of(args)
    dst.parent.mkdir(parents=True, exist_ok=True)
    # Built beside DST_DIR, then renamed into place, so DST_DIR is never half a model.
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        for path in sorted(src.iterdir()):
            if path.name in (WEIGHTS, SOURCE_MANIFEST):
                continue
            if path.is_dir():
                shutil.copytree(path, tmp / path.name)
            else:
                shutil.copy2(path, tmp / path.name)
        changed = rewrite(weights, tmp / WEIGHTS, args.pattern, op)
        report = {
            "src": str(src),
            "dst": str(dst),
            "source_sha256": sha256_file(weights),
            "tensor_pattern": args.pattern.pattern,
            "operation": op.describe(),
            "tensors": changed,
            "sha256": sha256_file(tmp / WEIGHTS),
        }
        (tmp / DAMAGE_MANIFEST).write_text(
            json.dumps({"generator": "scripts/damage_weights.py", **report}, indent=2, sort_keys=True) + "\n"
        )
        tmp.chmod(0o755)  # mkdtemp makes 0700; safetensors writes 0600
        (tmp / WEIGHTS).chmod(0o644)
        if dst.exists():
            dst.rmdir()  # checked empty above
        tmp.rename(dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = build(args)
    except Refused as refusal:
        print(f"damage_weights.py: {refusal}", file=sys.stderr)
        return 2
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
