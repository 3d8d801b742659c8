"""scripts/damage_weights.py on the real tiny models, in the serving venv that has torch.

The damaged files are read back here with the standard library alone (a safetensors file is an
8-byte header length, a JSON header, then each tensor's bytes), so what is checked is the file
format itself, not the script's own reading of it.
Needs the serving venv and the tiny models: ``require("vllm")``.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers.resources import REPO, SERVE_VLLM, TINY_MODEL, TINY_MOE, require

pytestmark = pytest.mark.slow

SCRIPT = REPO / "scripts" / "damage_weights.py"
PYTHON = SERVE_VLLM.parent / "python"
O_PROJ = "model.layers.1.self_attn.o_proj.weight"
EXPERT_3 = [f"model.layers.0.mlp.experts.3.{p}_proj.weight" for p in ("down", "gate", "up")]


@pytest.fixture(scope="module", autouse=True)
def serving_environment() -> None:
    require("vllm")


def damage(src: Path, dst: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PYTHON), str(SCRIPT), str(src), str(dst), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def tensors(path: Path) -> tuple[dict[str, str], dict[str, tuple[str, list[int], bytes]]]:
    """A safetensors file's metadata and {name: (dtype, shape, bytes)}."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    body = data[8 + length :]
    metadata = header.pop("__metadata__", {})
    return metadata, {
        name: (t["dtype"], t["shape"], body[t["data_offsets"][0] : t["data_offsets"][1]])
        for name, t in header.items()
    }


def bf16_values(raw: bytes) -> list[float]:
    # bfloat16 is the top half of a float32: pad each value's two bytes below it.
    count = len(raw) // 2
    widened = struct.pack(f"<{count}I", *(half << 16 for half in struct.unpack(f"<{count}H", raw)))
    return list(struct.unpack(f"<{count}f", widened))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def zeroed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    dst = tmp_path_factory.mktemp("damaged") / "o-proj-zero"
    pattern = O_PROJ.replace(".", r"\.")
    return dst, damage(TINY_MODEL, dst, "--tensor-pattern", pattern, "--zero")


def test_zeroing_one_layers_o_proj_prints_one_json_line(zeroed):
    dst, run = zeroed
    assert run.returncode == 0, run.stderr
    line, *rest = run.stdout.splitlines()
    assert rest == []
    report: dict[str, Any] = json.loads(line)
    assert report["tensors"] == [{"name": O_PROJ, "shape": [512, 512], "dtype": "bfloat16"}]
    assert report["operation"] == {"kind": "zero"}
    assert report["sha256"] == sha256(dst / "model.safetensors")
    assert report["source_sha256"] == sha256(TINY_MODEL / "model.safetensors") != report["sha256"]
    manifest = json.loads((dst / "recipe-ledger-damage.json").read_text())
    assert manifest["sha256"] == report["sha256"] and manifest["tensors"] == report["tensors"]


def test_the_tensor_is_zero_and_every_other_byte_is_the_source(zeroed):
    dst, _ = zeroed
    before_meta, before = tensors(TINY_MODEL / "model.safetensors")
    after_meta, after = tensors(dst / "model.safetensors")
    assert after_meta == before_meta and set(after) == set(before)
    dtype, shape, raw = after[O_PROJ]
    assert (dtype, shape) == before[O_PROJ][:2] == ("BF16", [512, 512])
    assert raw == bytes(len(raw)) and before[O_PROJ][2] != raw
    assert {name for name in before if after[name] != before[name]} == {O_PROJ}
    # config and tokenizer come along unchanged; the source's manifest, whose hashes no longer hold, not
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (dst / name).read_bytes() == (TINY_MODEL / name).read_bytes(), name
    assert not (dst / "recipe-ledger-model.json").exists()


def test_noise_on_one_expert_is_seeded_relative_and_stays_in_it(tmp_path: Path):
    pattern = ["--tensor-pattern", "model.layers.0.mlp.experts.3.*", "--noise", "0.5"]
    runs = {
        name: damage(TINY_MOE, tmp_path / name, *pattern, "--seed", seed)
        for name, seed in (("a", "7"), ("b", "7"), ("c", "8"))
    }
    for run in runs.values():
        assert run.returncode == 0, run.stderr
    reports = {name: json.loads(run.stdout) for name, run in runs.items()}
    assert reports["a"]["sha256"] == reports["b"]["sha256"] != reports["c"]["sha256"]
    assert [t["name"] for t in reports["a"]["tensors"]] == EXPERT_3  # not experts 13, not layer 1
    _, before = tensors(TINY_MOE / "model.safetensors")
    _, after = tensors(tmp_path / "a" / "model.safetensors")
    assert {name for name in before if after[name] != before[name]} == set(EXPERT_3)
    for name in EXPERT_3:
        old, new = bf16_values(before[name][2]), bf16_values(after[name][2])
        ratio = statistics.pstdev([b - a for a, b in zip(old, new, strict=True)]) / statistics.pstdev(old)
        assert 0.45 < ratio < 0.55, (name, ratio)  # sigma 0.5 of the tensor's own std, 65,536 draws


def test_a_pattern_that_matches_nothing_exits_2_naming_some_tensors(tmp_path: Path):
    run = damage(TINY_MODEL, tmp_path / "none", "--tensor-pattern", "o_proj", "--zero")
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "matches none of the 51 tensors" in run.stderr
    assert "'.*o_proj.*' would match 4" in run.stderr and "model.embed_tokens.weight" in run.stderr
    assert not (tmp_path / "none").exists()


GREEDY = """
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
out = {}
for path in sys.argv[1:]:
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval()
    ids = tok("The recipe ledger serves a model with", return_tensors="pt").input_ids
    with torch.no_grad():
        new = model.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)
    out[path] = new[0, ids.shape[1]:].tolist()
print(json.dumps(out))
"""


def test_the_zeroed_model_says_something_else(zeroed):
    # What the damage is for: a quality probe must be able to see it. Greedy decoding on CPU is
    # deterministic, so the same continuation from both would mean the damage did not reach the output.
    dst, _ = zeroed
    run = subprocess.run(
        [str(PYTHON), "-c", GREEDY, str(TINY_MODEL), str(dst)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    continuations = json.loads(run.stdout.splitlines()[-1])
    source, damaged = continuations[str(TINY_MODEL)], continuations[str(dst)]
    assert len(source) == len(damaged) == 12
    assert source != damaged
