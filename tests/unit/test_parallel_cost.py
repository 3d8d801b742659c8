"""recipes.parallel_cost against hand calculations (issue 30, part 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipe_ledger.errors import InputError
from recipe_ledger.recipes.boxes import load_box
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.fitting import fit_recipe, predict_decode
from recipe_ledger.recipes.models import ShapeBlock
from recipe_ledger.recipes.parallel_cost import (
    GpuPath,
    ModelShape,
    ParallelSizes,
    decode_step,
    expert_parallel_cost,
    shares,
    tensor_parallel_cost,
)
from recipe_ledger.recipes.sglang_flags import VllmArgs, parallel_sizes

REPO = Path(__file__).resolve().parents[2]

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


# --- the layout a launch command asks for --------------------------------------------------------


def test_vllm_argv_gives_tp_dp_and_ep_as_vllm_reads_them():
    read = lambda *argv: parallel_sizes(VllmArgs.read(["vllm", "serve", "m", *argv]))  # noqa: E731
    assert read() == ParallelSizes(1, 1, False)
    assert read("--tensor-parallel-size", "2").label() == "TP2"
    # -tp/-dp are vLLM's aliases; expert parallelism spans TP x DP.
    sizes = read("-tp", "4", "-dp", "2", "--enable-expert-parallel")
    assert (sizes.tp, sizes.dp, sizes.ep, sizes.gpus) == (4, 2, 8, 8) and sizes.crosses_gpus
    assert read("--data-parallel-size", "8").crosses_gpus is False  # replicas pay nothing between GPUs
    assert read("--tensor-parallel-size", "two") is None


def test_a_step_adds_the_collectives_to_the_host_link_and_splits_the_batch_over_replicas():
    sizes = ParallelSizes(tp=2, dp=2, expert=True)  # EP4
    step = decode_step(QWEN3_MOE, sizes, STAGED, batch=7, window=1, host_link_ms=3.0)
    # By hand. 7 sequences over 2 replicas: the busiest carries ceil(7 / 2) = 4 tokens.
    # TP2: 96 all-reduces of 4 x 2048 x 2 B = 16,384 B, ring share 2 x 1/2 = 1: 1,572,864 B per GPU,
    #   0.027 ms at 58 GB/s against 96 x 20 us = 1.92 ms: latency binds.
    # EP4: 96 all-to-alls of 4 tokens x 8 copies x 2048 x 2 B = 131,072 B, 3/4 leaving the GPU:
    #   9,437,184 B, 0.163 ms against 1.92 ms: latency binds.
    tp, ep = step.collectives
    assert (tp.name, tp.calls, tp.bytes_per_gpu, tp.binds) == ("TP2 all-reduce", 96, 1_572_864, "latency")
    assert (ep.name, ep.calls, ep.bytes_per_gpu, ep.binds) == ("EP4 all-to-all", 96, 9_437_184, "latency")
    assert step.ms == pytest.approx(3.0 + 1.92 + 1.92)  # 6.84 ms
    assert step.tok_s == pytest.approx(7 / 6.84e-3)  # 1,023 tok/s
    assert step.shares() == pytest.approx(
        {"base": 3 / 6.84, "TP2 all-reduce": 1.92 / 6.84, "EP4 all-to-all": 1.92 / 6.84}
    )


# --- two shipped recipes on their boxes, by hand (ledger fit --predict) ----------------------------

V41 = "deepseek-ai/DeepSeek-V4.1-Flash"


def _predict(box: str, batches: list[int], **fit_options):
    report, resolved = fit_recipe(RecipeRoot(REPO / "recipes"), V41, box, **fit_options)
    return predict_decode(report, resolved, batches=batches, windows=[1])


def test_deepseek_v41_on_the_dual_gh200_pays_tp2_over_the_staged_bridge():
    # The box resolves the recipe's default hardware (gb200): single_node_tp at TP2. Its profile:
    # 58 GB/s across the GPUs (seed 004's staged Hopper-to-Hopper path), 8.6 us a call (NCCL's
    # model over PCI), 377 GB/s Grace-to-Hopper.
    link = load_box(REPO / "recipes" / "boxes", "dual-gh200").link
    assert (link.cross_gpu_bandwidth_gbps, link.cross_gpu_latency_us, link.bandwidth_gbps) == (58, 8.6, 377)
    prediction = _predict("dual-gh200", [1, 256], offload_gib=100)
    assert prediction.sizes == ParallelSizes(tp=2)
    one, busy = prediction.steps
    # The recipe's memory.shape: 40 layers of hidden 5120, bf16 activations: 80 all-reduces a step.
    # Batch 1: 1 x 5120 x 2 B = 10,240 B a call; a ring of 2 moves 2 x 1/2 of it: 819,200 B a step,
    # 0.0141 ms at 58 GB/s, against 80 x 8.6 us = 0.688 ms of latency: latency binds.
    (tp,) = one.collectives
    assert tp.calls == 80 and tp.bytes_per_gpu == pytest.approx(80 * 10_240)
    assert tp.bandwidth_ms == pytest.approx(819_200 / 58e9 * 1e3) and tp.ms == pytest.approx(0.688)
    assert tp.binds == "latency"
    # The host link: 2 GPUs x 100 GiB of experts offloaded, 6 of 384 touched by one token:
    # 200 GiB x 6/384 = 3.125 GiB = 3,355,443,200 B over 377 GB/s = 8.9004 ms.
    assert one.host_link_ms == pytest.approx(3_355_443_200 / 377e9 * 1e3)
    assert one.shares()["TP2 all-reduce"] == pytest.approx(0.688 / (0.688 + 8.9004), rel=1e-4)
    # Batch 256: 256 x 10,240 B a call, 80 calls: 209,715,200 B = 3.616 ms at 58 GB/s > 0.688 ms.
    (tp,) = busy.collectives
    assert tp.binds == "bandwidth" and tp.ms == pytest.approx(209_715_200 / 58e9 * 1e3)


def test_deepseek_v41_dep8_on_a_b200_node_pays_ep8_all_to_alls():
    # single_node_dep on b200: --data-parallel-size 8 --enable-expert-parallel (TP1): EP8. Nothing
    # is offloaded, so the step is the all-to-alls alone. Box b200-x8: NVLink 5, 900 GB/s one way,
    # 15.0 us a call (NCCL's model for 8 GPUs).
    link = load_box(REPO / "recipes" / "boxes", "b200-x8").link
    assert (link.cross_gpu_bandwidth_gbps, link.cross_gpu_latency_us) == (900, 15.0)
    prediction = _predict("b200-x8", [64], strategy="single_node_dep")
    assert prediction.sizes == ParallelSizes(tp=1, dp=8, expert=True) and not prediction.ceilings
    (step,) = prediction.steps
    (ep,) = step.collectives
    # 64 sequences over 8 replicas: 8 tokens per GPU, each with 6 routed copies of 5120 x 2 B:
    # 491,520 B; 7/8 of it leaves the GPU in each of 80 all-to-alls (40 MoE layers, dispatch and
    # combine): 34,406,400 B = 0.0382 ms at 900 GB/s, against 80 x 15 us = 1.2 ms: latency binds.
    assert ep.name == "EP8 all-to-all" and ep.calls == 80
    assert ep.bytes_per_gpu == pytest.approx(80 * 7 / 8 * 491_520)
    assert ep.bandwidth_ms == pytest.approx(34_406_400 / 900e9 * 1e3)
    assert ep.ms == pytest.approx(1.2) and ep.binds == "latency"
    assert step.shares() == pytest.approx({"base": 0.0, "EP8 all-to-all": 1.0})
    assert step.tok_s == pytest.approx(64 / 1.2e-3)


def test_a_parallel_command_on_a_box_without_a_gpu_path_says_why():
    # h200-x1 has one GPU: the TP4 command h200 resolves to names a path the box does not have.
    report, resolved = fit_recipe(RecipeRoot(REPO / "recipes"), V41, "h200-x1")
    with pytest.raises(InputError) as caught:
        predict_decode(report, resolved, batches=[1], windows=[1])
    assert "names no GPU-to-GPU path" in str(caught.value) and "TP4" in str(caught.value)


def test_moe_layers_cannot_exceed_layers():
    with pytest.raises(ValueError, match="moe_layers"):
        ShapeBlock.model_validate({"layers": 4, "hidden_size": 64, "moe_layers": 5})
