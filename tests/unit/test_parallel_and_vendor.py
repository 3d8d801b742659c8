"""Per-GPU throughput from an arm's parallel sizes, and the GPU vendor a box profile says: what
InferenceX's configurations need (tput_per_gpu; AMD arms in docker), refused where they cannot fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipe_ledger import engines, metrics
from recipe_ledger.errors import InputError
from recipe_ledger.pipeline.plan import check_vendor
from recipe_ledger.recipes.boxes import list_boxes, load_box
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.flags import LaunchCommand

REPO = Path(__file__).resolve().parents[2]
BOXES = REPO / "recipes" / "boxes"


@pytest.mark.parametrize(
    ("engine", "argv", "gpus"),
    [
        ("vllm", ["vllm", "serve", "m"], 1),
        ("vllm", ["vllm", "serve", "m", "--tensor-parallel-size", "8"], 8),
        ("vllm", ["vllm", "serve", "m", "-tp", "4", "-dp", "2", "--enable-expert-parallel"], 8),
        ("vllm", ["vllm", "serve", "m", "--tensor-parallel-size=2", "--pipeline-parallel-size", "2"], 4),
        ("sglang", ["python", "-m", "sglang.launch_server", "--tp-size", "8", "--dp-size", "8"], 64),
        (
            "sglang",
            ["python", "-m", "sglang.launch_server", "--tp", "8", "--dp", "8", "--enable-dp-attention"],
            8,
        ),
        ("sglang", ["python", "-m", "sglang.launch_server", "--tp-size", "4", "--ep-size", "4"], 4),
    ],
)
def test_gpus_used_multiply_the_parallel_sizes(engine, argv, gpus):
    assert engines.get(engine).gpus_used(LaunchCommand.parse(argv)) == gpus


def test_per_gpu_throughput_divides_what_was_measured():
    assert metrics.per_gpu({"output_tps_total": 800.0, "total_tps": 1600.0, "ttft_ms_p50": 9.0}, 8) == {
        "output_tps_per_gpu": 100.0,
        "total_tps_per_gpu": 200.0,
    }
    assert metrics.per_gpu({"ttft_ms_p50": 9.0}, 8) == {}
    assert metrics.unit("output_tps_per_gpu") == "tok/s/GPU" and metrics.lookup("output_tps_per_gpu").known
    assert metrics.direction("output_tps_per_gpu") == "higher"


def test_the_common_nodes_have_sourced_profiles_with_their_vendor():
    boxes = {box.id: box for box in list_boxes(BOXES)}
    for box_id, vendor, count in [
        ("h100-x8", "nvidia", 8),
        ("h200-x8", "nvidia", 8),
        ("b200-x8", "nvidia", 8),
        ("gb200-x4", "nvidia", 4),
        ("mi300x-x8", "amd", 8),
        ("mi355x-x8", "amd", 8),
    ]:
        box = boxes[box_id]
        assert (box.gpu.vendor, box.gpu.count) == (vendor, count) and box.sources, box_id
        assert box.gpu.hbm_gib > 0 and box.link.cross_gpu_bandwidth_gbps


@pytest.mark.parametrize(
    ("hardware", "box_id", "refused"),
    [
        ("mi300x", "h200-x8", True),
        ("h200", "mi300x-x8", True),
        ("mi355x", "mi300x-x8", False),
        ("h100", "h200-x8", False),
        ("mi300x", "cpu-only", False),  # no GPUs: nothing to reach
    ],
)
def test_an_arm_for_the_other_vendor_is_refused_before_launch(hardware, box_id, refused):
    root, box = RecipeRoot(REPO / "recipes"), load_box(BOXES, box_id)
    if not refused:
        check_vendor("b", hardware, root, box)
        return
    with pytest.raises(InputError, match=rf"arm 'b' resolves for {hardware} \(\w+ GPUs\), but box"):
        check_vendor("b", hardware, root, box)


def test_every_multi_gpu_box_states_its_whole_gpu_to_gpu_path_and_where_it_comes_from():
    for box in list_boxes(BOXES):
        link = box.link
        if box.gpu.count <= 1:  # h200-x1, the DGX Station, the CPU box: no path between GPUs
            assert link.cross_gpu_bandwidth_gbps is None and link.cross_gpu_latency_us is None, box.id
            continue
        assert link.cross_gpu_kind and link.cross_gpu_bandwidth_gbps and link.cross_gpu_latency_us, box.id
        # Measured: the ledger entry says so; sourced: a source names the latency's origin.
        assert link.cross_gpu_measured_in or any("latency" in s for s in box.sources), box.id


def test_the_dual_gh200_path_is_seed_004s_staged_bridge():
    link = load_box(BOXES, "dual-gh200").link
    assert (link.cross_gpu_kind, link.cross_gpu_bandwidth_gbps) == ("host-staged", 58)


def test_a_measured_path_names_a_ledger_entry_by_id(tmp_path):
    text = (BOXES / "h200-x2.yaml").read_text()
    (tmp_path / "h200-x2.yaml").write_text(
        text.replace(
            "  cross_gpu_kind: nvlink\n", "  cross_gpu_kind: nvlink\n  cross_gpu_measured_in: bd60452cc40c\n"
        )
    )
    assert load_box(tmp_path, "h200-x2").link.cross_gpu_measured_in == "bd60452cc40c"
    (tmp_path / "h200-x2.yaml").write_text(
        text.replace(
            "  cross_gpu_kind: nvlink\n", "  cross_gpu_kind: nvlink\n  cross_gpu_measured_in: the study\n"
        )
    )
    with pytest.raises(InputError):
        load_box(tmp_path, "h200-x2")
