"""scripts/make_tiny_moe.py: the MoE variant reuses the dense script's flow, arguments and manifest."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_tiny_moe.py"


@pytest.fixture(scope="module")
def moe():
    yield load_script("scripts/make_tiny_moe.py")
    sys.modules.pop("make_tiny_model", None)


def test_defaults_are_the_routing_examples_model(moe, tmp_path):
    args = moe.parse_args([str(tmp_path / "m")])
    assert (args.hidden, args.layers, args.heads, args.intermediate) == (256, 2, 4, 256)
    margs = moe.model_args(args)
    assert margs["experts"] == 16 and margs["experts_per_token"] == 2
    # The dense script's keys stay, so the manifest says everything the content depends on.
    assert {"hidden", "layers", "heads", "vocab", "intermediate", "max_position", "seed"} <= set(margs)


def test_explicit_sizes_win_over_the_moe_defaults(moe, tmp_path):
    args = moe.parse_args(
        [str(tmp_path / "m"), "--hidden", "128", "--experts", "8", "--experts-per-token", "4"]
    )
    assert (args.hidden, args.experts, args.experts_per_token) == (128, 8, 4)


@pytest.mark.parametrize("bad", [["--experts", "0"], ["--experts", "4", "--experts-per-token", "5"]])
def test_impossible_routing_is_a_usage_error(moe, tmp_path, bad):
    with pytest.raises(SystemExit):
        moe.parse_args([str(tmp_path / "m"), *bad])
