"""Fit arithmetic against the worked example of seeds 000 and 002 (DeepSeek-V4.1 on one GB300)."""

from pathlib import Path

import pytest

from recipe_ledger.recipes.boxes import load_box
from recipe_ledger.recipes.fit import FitInputs, compute_fit, segment_match, verdict_lines
from recipe_ledger.recipes.models import MemoryBlock

BOXES = Path(__file__).resolve().parents[2] / "recipes" / "boxes"

# The guide's memory table (seed 002), with the runtime reserve fitted to its 3.09M-token KV pool.
MEMORY = MemoryBlock.model_validate(
    {
        "disk_gb": 511,
        "kv_bytes_per_token": 890,
        "activation_reserve_gib": 9.7,
        "components": [
            {
                "name": "experts",
                "kind": "experts",
                "stored_gib": 259.5,
                "offload": "uva",
                "param_names": [
                    "model.layers.{i}.ffn.routed_experts.w13_weight",
                    "model.layers.{i}.ffn.routed_experts.w2_weight",
                ],
            },
            {"name": "engram", "kind": "engram", "stored_gib": 183.1, "offload": "host_table"},
            {"name": "dense", "kind": "dense", "stored_gib": 6.9},
            {"name": "embedding", "kind": "embedding", "stored_gib": 3.9},
            {"name": "scales", "kind": "scales", "stored_gib": 21.9},
        ],
    }
)

V14_ARGV = [
    "vllm",
    "serve",
    "deepseek-ai/DeepSeek-V4.1-Flash",
    "--offload-backend",
    "uva",
    "--cpu-offload-gb",
    "60",
    "--cpu-offload-params",
    "routed_experts.w13_weight",
    "routed_experts.w2_weight",
    "--engram-config",
    '{"cpu_offload":true}',
    "--gpu-memory-utilization",
    "0.97",
    "--max-model-len",
    "1048576",
]


def station_fit(**overrides):
    box = load_box(BOXES, "dgx-station-gb300")
    return compute_fit(FitInputs(memory=MEMORY, box=box, argv=overrides.pop("argv", V14_ARGV), **overrides))


def test_budget_is_utilization_times_hbm():
    report = station_fit()
    assert report.budget_gib == pytest.approx(0.97 * 252)
    assert round(report.budget_gib) == 244


def test_checkpoint_totals_and_vram_minimum_match_the_guide():
    report = station_fit()
    assert report.checkpoint_gib == pytest.approx(475.3, abs=0.05)
    assert report.vram_minimum_computed_gb == 614  # ceil(1.2 x 511)


@pytest.mark.parametrize(
    ("offload", "boots", "weights_fit"),
    [(40, False, False), (55, False, True), (60, True, True), (70, True, True)],
)
def test_the_offload_ladder_of_seed_000(offload, boots, weights_fit):
    report = station_fit(offload_gib=offload)
    assert report.fits is boots
    assert report.weights_fit is weights_fit


def test_more_offload_buys_kv_capacity():
    at60, at70 = station_fit(offload_gib=60), station_fit(offload_gib=70)
    assert at70.kv_capacity_tokens > at60.kv_capacity_tokens
    assert 2.5e6 < at60.kv_capacity_tokens < 3.5e6  # the guide: about 3.09M tokens


def test_minimum_offload_lies_between_the_failing_and_the_working_setting():
    report = station_fit(offload_gib=0)
    assert 55 < report.min_expert_offload_gib <= 60


def test_a_wildcard_pattern_offloads_nothing_and_is_reported():
    argv = [a for a in V14_ARGV if not a.startswith("routed_experts")]
    argv[argv.index("--cpu-offload-params") + 1 : argv.index("--cpu-offload-params") + 1] = ["experts.*"]
    report = station_fit(argv=argv)
    assert report.expert_offload_gib == 0
    assert not report.fits
    assert any("experts.*" in problem for problem in report.problems)


def test_engram_stays_on_gpu_without_its_offload_flag():
    argv = [a for a in V14_ARGV if a not in ("--engram-config", '{"cpu_offload":true}')]
    report = station_fit(argv=argv)
    assert not report.weights_fit
    assert "does not boot" in verdict_lines(report)[0]


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("experts", "mlp.experts.w2_weight", True),
        ("experts.w2_weight", "mlp.experts.w2_weight", True),
        ("expert", "mlp.experts.w2_weight", False),
        ("w2", "mlp.experts.w2_weight", False),
        ("experts.*", "mlp.experts.w2_weight", False),
        ("experts", "ffn.routed_experts.w2_weight", False),
    ],
)
def test_segment_match_follows_vllm(pattern, name, expected):
    assert segment_match(pattern, name) is expected
