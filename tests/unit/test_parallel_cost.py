"""recipes.parallel_cost against hand calculations (issue 30, part 4)."""

from __future__ import annotations

import pytest

from recipe_ledger.recipes.parallel_cost import (
    GpuPath,
    ModelShape,
    expert_parallel_cost,
    shares,
    tensor_parallel_cost,
)

# DeepSeek-V3's shape (config.json: 61 layers, hidden 7168, 58 MoE layers, 8 of 256 experts).
DEEPSEEK = ModelShape(layers=61, hidden=7168, moe_layers=58, experts_per_token=8)
# Qwen3-30B-A3B's (48 layers, hidden 2048, every layer MoE, 8 of 128 experts).
QWEN3_MOE = ModelShape(layers=48, hidden=2048, moe_layers=48, experts_per_token=8)
STAGED = GpuPath(gbps=58.0, latency_us=20.0, source="004: the staged Hopper-to-Hopper path")


def test_tp2_on_the_staged_path_is_latency_bound_at_a_small_batch():
    cost = tensor_parallel_cost(DEEPSEEK, tp=2, tokens=32, path=STAGED)
    # By hand: 32 x 7168 x 2 B = 458,752 B per all-reduce; 122 calls; ring share 2 x 1/2 = 1.
    assert cost.calls == 122 and cost.bytes_per_gpu == pytest.approx(122 * 458_752)
    assert cost.bandwidth_ms == pytest.approx(55_967_744 / 58e9 * 1e3)  # 0.965 ms
    assert (
        cost.latency_ms == pytest.approx(2.44) and cost.binds == "latency" and cost.ms == pytest.approx(2.44)
    )


def test_tp_bytes_grow_with_the_batch_until_bandwidth_binds():
    small = tensor_parallel_cost(DEEPSEEK, tp=2, tokens=32, path=STAGED)
    large = tensor_parallel_cost(DEEPSEEK, tp=2, tokens=512, path=STAGED)
    assert large.bandwidth_ms == pytest.approx(16 * small.bandwidth_ms) and large.binds == "bandwidth"


def test_tp8_moves_seven_quarters_of_the_message():
    path = GpuPath(gbps=400.0, latency_us=0.0)
    cost = tensor_parallel_cost(QWEN3_MOE, tp=8, tokens=64, path=path)
    message = 64 * 2048 * 2
    assert cost.bytes_per_gpu == pytest.approx(96 * 2 * 7 / 8 * message)


def test_ep4_all_to_all_by_hand():
    path = GpuPath(gbps=400.0, latency_us=10.0)
    cost = expert_parallel_cost(QWEN3_MOE, ep=4, tokens_per_gpu=64, path=path)
    # 64 tokens x 8 copies x 2048 x 2 B = 2,097,152 B routed; 3/4 leave the GPU; 96 calls.
    assert cost.bytes_per_gpu == pytest.approx(96 * 0.75 * 2_097_152)
    assert cost.bandwidth_ms == pytest.approx(150_994_944 / 400e9 * 1e3)  # 0.378 ms
    assert cost.latency_ms == pytest.approx(0.96) and cost.binds == "latency"


def test_no_parallelism_costs_nothing():
    assert tensor_parallel_cost(DEEPSEEK, tp=1, tokens=32, path=STAGED) is None
    assert expert_parallel_cost(DEEPSEEK, ep=1, tokens_per_gpu=32, path=STAGED) is None
    assert (
        expert_parallel_cost(ModelShape(layers=32, hidden=4096), ep=2, tokens_per_gpu=8, path=STAGED) is None
    )


def test_shares_add_up_and_name_each_part():
    tp = tensor_parallel_cost(DEEPSEEK, tp=2, tokens=32, path=STAGED)
    parts = shares(2.44, [tp])
    assert parts == pytest.approx({"base": 0.5, "TP2 all-reduce": 0.5})
    assert sum(parts.values()) == pytest.approx(1.0)
