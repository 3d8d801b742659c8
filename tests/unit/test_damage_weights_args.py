"""scripts/damage_weights.py without torch: its arguments, which names a pattern takes, the noise
seed per tensor, the no-match line. The rewrite itself runs in tests/integration/test_damage_weights.py."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "damage_weights.py"
NAMES = [f"model.layers.{layer}.self_attn.o_proj.weight" for layer in (0, 1, 10)] + ["lm_head.weight"]


@pytest.fixture(scope="module")
def dw():
    spec = importlib.util.spec_from_file_location("damage_weights", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up while it is being built
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_module_imports_without_torch(dw):
    assert "torch" not in vars(dw) and "safetensors" not in vars(dw)


@pytest.mark.parametrize(
    ("flags", "operation"),
    [
        (["--zero"], {"kind": "zero"}),
        (["--scale", "0.5"], {"kind": "scale", "factor": 0.5}),
        (
            ["--noise", "0.1", "--seed", "3"],
            {"kind": "noise", "sigma": 0.1, "relative_to": "tensor std", "seed": 3},
        ),
    ],
)
def test_one_operation_is_described(dw, flags, operation):
    args = dw.parse_args(["src", "dst", "--tensor-pattern", "x", *flags])
    assert dw.operation_of(args).describe() == operation


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--zero", "--scale", "2"], "not allowed with"),
        ([], "one of the arguments"),
        (["--noise", "0"], "--noise must be a positive number"),
        (["--noise", "nan"], "--noise must be a positive number"),
        (["--scale", "inf"], "--scale must be a finite number"),
    ],
)
def test_a_bad_operation_exits_2(dw, capsys, flags, said):
    with pytest.raises(SystemExit) as exited:
        dw.parse_args(["src", "dst", "--tensor-pattern", "x", *flags])
    assert exited.value.code == 2 and said in capsys.readouterr().err


def test_a_pattern_that_is_no_regex_exits_2(dw, capsys):
    with pytest.raises(SystemExit) as exited:
        dw.parse_args(["src", "dst", "--tensor-pattern", "(", "--zero"])
    assert exited.value.code == 2 and "is not a regular expression" in capsys.readouterr().err


def test_a_pattern_matches_whole_names(dw):
    assert dw.matching(NAMES, re.compile(r"model\.layers\.1\..*")) == [NAMES[1]]
    assert dw.matching(NAMES, re.compile("o_proj")) == []  # a part of a name is not a name
    assert dw.matching(NAMES, re.compile(".*o_proj.*")) == NAMES[:3]


def test_the_noise_seed_depends_on_the_seed_and_the_name_only(dw):
    first = dw.noise_seed(7, NAMES[0])
    assert first == dw.noise_seed(7, NAMES[0])  # sha256, not Python's per-process salted hash()
    assert len({first, dw.noise_seed(8, NAMES[0]), dw.noise_seed(7, NAMES[1])}) == 3
    assert 0 <= first < 2**63  # what torch.Generator.manual_seed takes


def test_the_no_match_line_shows_the_names_and_the_usual_slip(dw):
    line = dw.no_match_message(re.compile("o_proj"), NAMES, Path("m/model.safetensors"))
    assert "matches none of the 4 tensors in m/model.safetensors" in line
    assert "'.*o_proj.*' would match 3" in line and "lm_head.weight" in line and "\n" not in line
    assert "would match" not in dw.no_match_message(re.compile("q_proj"), NAMES, Path("m"))
