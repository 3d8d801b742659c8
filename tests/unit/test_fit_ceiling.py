"""`ledger fit --predict`: the decode ceiling the host link alone allows (recipes.ceiling)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.recipes.ceiling import GIB, Routing, decode_ceiling, uniform_window_multiplier

V41 = "deepseek-ai/DeepSeek-V4.1-Flash"


def test_one_token_touches_top_k():
    assert uniform_window_multiplier(384, 6, 1) == pytest.approx(1.0)
    # Independent tokens rarely share experts when k/E is small: a window of 5 is nearly 5x.
    assert 4.8 < uniform_window_multiplier(384, 6, 5) < 5.0


def test_ceiling_is_bytes_over_the_link():
    # One layer of the H200 study: 18.1 GB of experts, all offloaded, read at 51.4 GB/s.
    layer_bytes = 384 * 3 * 5120 * 1536 * 2
    c = decode_ceiling(layer_bytes / GIB, 51.4, Routing(384, 6), batch=1, window=1)
    assert c.bytes_per_step == pytest.approx(layer_bytes * 6 / 384)
    assert c.step_ms == pytest.approx(layer_bytes * 6 / 384 / 51.4e9 * 1e3)
    assert c.tok_s == pytest.approx(1 / (c.step_ms / 1e3))


def test_batch_shares_experts_as_uniform_routing_expects():
    c = decode_ceiling(60, 340, Routing(384, 6), batch=8, window=1)
    # The expected distinct experts of 8 uniform top-6 tokens: E x (1 - (1 - k/E)^B).
    assert c.share_touched * 384 == pytest.approx(384 * (1 - (1 - 6 / 384) ** 8))
    assert c.tokens_per_step == 8


def test_a_measured_multiplier_replaces_uniform():
    uniform = decode_ceiling(60, 340, Routing(384, 6), batch=1, window=5)
    measured = decode_ceiling(60, 340, Routing(384, 6, {5: 3.7}), batch=1, window=5)
    assert measured.window_multiplier == 3.7
    assert measured.bytes_per_step < uniform.bytes_per_step
    assert measured.tok_s > uniform.tok_s


def _fit(*args):
    return CliRunner().invoke(main, ["fit", V41, "--box", "dgx-station-gb300", *args])


def test_predict_prints_the_ceiling_and_its_assumptions():
    result = _fit("--predict", "--window", "5", "--window-multiplier", "3.7", "--batch", "1")
    assert result.exit_code == 0, result.output
    assert "tok/s ceiling" in result.output
    assert "measured (given with --window-multiplier)" in result.output
    assert "340 GB/s" in result.output


def test_predict_json_carries_the_numbers():
    result = _fit("--predict", "--batch", "1", "--json")
    data = json.loads(result.output)
    (only,) = data["ceilings"]
    assert only["batch"] == 1 and only["window"] == 1
    # 60 GiB offloaded x 6/384 over 340 GB/s.
    assert only["step_ms"] == pytest.approx(60 * GIB * 6 / 384 / 340e9 * 1e3)


def test_nothing_offloaded_is_one_line():
    result = _fit("--predict", "--offload-gb", "0")
    assert result.exit_code == 2
    assert "nothing is offloaded" in result.output and "Traceback" not in result.output


def test_a_result_without_routing_figures_is_refused_in_one_line():
    # The hot/cold study's result (this repository's ledger) measured step times, not routing.
    result = _fit("--predict", "--window", "5", "--routing-from", "ec6197b49d31")
    assert result.exit_code == 2
    assert "has no routing_window_multiplier_k5" in result.output and "Traceback" not in result.output


def test_a_routing_result_in_the_ledger_replaces_uniform_routing():
    # This repository's routing result of the tiny MoE (evidence/tiny-moe-routing/).
    result = _fit("--predict", "--window", "5", "--batch", "1", "--routing-from", "35b6108654cd", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    window = next(c for c in data["ceilings"] if c["window"] == 5)
    assert 1.0 <= window["window_multiplier"] < uniform_window_multiplier(384, 6, 5)
    assert any("ledger result 35b6108654cd" in note for note in data["ceiling_assumptions"])
