"""scripts/expert_placement_bench.py: the CPU side (arguments, routing, bytes, stats, JSON), no GPU."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import types
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "expert_placement_bench.py"


@pytest.fixture(scope="module")
def epb():
    spec = importlib.util.spec_from_file_location("expert_placement_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_module_imports_without_gpu_libraries(epb):
    for name in ("torch", "cupy", "numpy"):
        assert name not in vars(epb)


# --- arguments -------------------------------------------------------------------------------------


def test_defaults(epb):
    a = epb.parse_args([])
    assert (a.arm, a.hidden, a.intermediate, a.experts, a.topk) == ("hbm", 5120, 1536, 384, 6)
    assert a.batch_list == [1, 8, 32]
    assert (a.seed, a.reps, a.warmup, a.budget_s, a.routings) == (0, 20, 1, 15.0, 4)
    assert (a.check, a.quick, a.no_graph, a.host_alloc, a.device) == (False, False, False, "auto", 0)


def test_quick_shrinks_shapes_and_budgets(epb):
    a = epb.parse_args(["--quick"])
    assert (a.hidden, a.intermediate, a.experts, a.topk) == (256, 128, 384, 6)
    assert a.batch_list == [1, 8, 32]
    assert a.budget_s < epb.DEFAULTS["budget_s"] and a.bw_mib < epb.DEFAULTS["bw_mib"]
    assert a.reps <= epb.DEFAULTS["reps"]


def test_explicit_flags_beat_quick(epb):
    a = epb.parse_args(
        [
            "--quick",
            "--hidden",
            "512",
            "--batches",
            "4, 2",
            "--arm",
            "layer_copy",
            "--reps",
            "9",
            "--seed",
            "3",
            "--check",
        ]
    )
    assert (a.hidden, a.intermediate, a.batch_list, a.arm, a.reps, a.seed, a.check) == (
        512,
        128,
        [4, 2],
        "layer_copy",
        9,
        3,
        True,
    )


@pytest.mark.parametrize("arm", ["hbm", "uva", "layer_copy"])
def test_every_arm_parses(epb, arm):
    assert epb.parse_args(["--arm", arm]).arm == arm


@pytest.mark.parametrize(
    "bad",
    [
        ["--arm", "gpu"],
        ["--batches", "0"],
        ["--batches", "1,x"],
        ["--batches", ","],
        ["--topk", "7", "--experts", "6"],
        ["--hidden", "100"],  # not a multiple of 8
        ["--intermediate", "0"],
        ["--reps", "0"],
        ["--warmup", "-1"],
        ["--budget-s", "0"],
    ],
)
def test_rejects_bad_arguments(epb, bad):
    with pytest.raises(SystemExit):
        epb.parse_args(bad)


def test_parse_batches_keeps_order_and_drops_duplicates(epb):
    assert epb.parse_batches("32,1,8,1") == [32, 1, 8]
    with pytest.raises(ValueError):
        epb.parse_batches("-1")


def test_help_runs_without_torch():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], check=False, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0
    assert "--arm" in out.stdout and "layer_copy" in out.stdout and "--check" in out.stdout


# --- routing ---------------------------------------------------------------------------------------


def test_routing_is_deterministic_per_seed(epb):
    a = epb.make_routing(32, 384, 6, seed=0, index=0)
    assert a == epb.make_routing(32, 384, 6, seed=0, index=0)
    assert a != epb.make_routing(32, 384, 6, seed=1, index=0)
    assert a != epb.make_routing(32, 384, 6, seed=0, index=1)


def test_routing_rows_are_distinct_topk_with_normalized_gates(epb):
    ids, gates = epb.make_routing(64, 384, 6, seed=5)
    assert len(ids) == len(gates) == 64
    for row, g in zip(ids, gates, strict=False):
        assert len(row) == 6 and len(set(row)) == 6
        assert all(0 <= e < 384 for e in row)
        assert math.isclose(sum(g), 1.0, rel_tol=1e-12) and all(w > 0 for w in g)


def test_routing_with_topk_equal_experts_uses_all(epb):
    ids, _ = epb.make_routing(3, 6, 6, seed=0)
    assert all(sorted(row) == list(range(6)) for row in ids)
    with pytest.raises(ValueError):
        epb.make_routing(1, 4, 5, seed=0)


def test_unique_expert_counting(epb):
    ids = [[3, 1, 2], [2, 3, 9], [9, 10, 1]]
    assert epb.unique_experts(ids) == [1, 2, 3, 9, 10]
    assert epb.unique_experts([[5, 6]]) == [5, 6]


def test_expert_assignments_group_tokens_per_expert(epb):
    ids = [[3, 1], [1, 7]]
    gates = [[0.25, 0.75], [0.5, 0.5]]
    plan = epb.expert_assignments(ids, gates)
    assert list(plan) == [1, 3, 7]
    assert plan[1] == ([0, 1], [0.75, 0.5])
    assert plan[3] == ([0], [0.25])
    assert plan[7] == ([1], [0.5])


def test_assignments_cover_every_token_slot(epb):
    ids, gates = epb.make_routing(32, 384, 6, seed=2)
    plan = epb.expert_assignments(ids, gates)
    assert sum(len(t) for t, _ in plan.values()) == 32 * 6
    assert list(plan) == epb.unique_experts(ids)


def test_expected_unique_experts_formula(epb):
    assert epb.expected_unique_experts(384, 6, 1) == pytest.approx(6.0)
    assert epb.expected_unique_experts(384, 6, 8) == pytest.approx(45.46, abs=0.01)
    assert epb.expected_unique_experts(384, 6, 32) == pytest.approx(152.0, abs=0.1)
    assert epb.expected_unique_experts(384, 6, 10_000) == pytest.approx(384.0)
    draws = [len(epb.unique_experts(epb.make_routing(32, 384, 6, seed=s)[0])) for s in range(200)]
    assert sum(draws) / len(draws) == pytest.approx(epb.expected_unique_experts(384, 6, 32), rel=0.03)


# --- bytes -----------------------------------------------------------------------------------------


def test_byte_accounting(epb):
    hidden, inter, experts = 5120, 1536, 384
    assert epb.expert_bytes(hidden, inter) == 3 * hidden * inter * 2 == 47_185_920
    assert epb.layer_bytes(experts, hidden, inter) == experts * 3 * hidden * inter * 2 == 18_119_393_280
    assert epb.layer_bytes(experts, hidden, inter, dtype_bytes=1) * 2 == epb.layer_bytes(
        experts, hidden, inter
    )


def test_link_bytes_per_arm(epb):
    assert epb.link_bytes_per_step("hbm", 6, 100, 38_400) == 0
    assert epb.link_bytes_per_step("uva", 6, 100, 38_400) == 600
    assert epb.link_bytes_per_step("layer_copy", 6, 100, 38_400) == 38_400
    with pytest.raises(ValueError):
        epb.link_bytes_per_step("nvme", 6, 100, 38_400)


def test_gbps(epb):
    assert epb.gbps(55e9, 1000.0) == pytest.approx(55.0)
    assert epb.gbps(18_119_393_280, 330.0) == pytest.approx(54.9, abs=0.1)
    assert epb.gbps(1, 0) is None


# --- statistics ------------------------------------------------------------------------------------


def test_median_and_percentiles(epb):
    assert epb.median([3.0, 1.0, 2.0]) == 2.0
    assert epb.median([1.0, 2.0, 3.0, 4.0]) == 2.5
    assert epb.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 10) == pytest.approx(1.4)
    assert epb.percentile([7.0], 90) == 7.0
    s = epb.summarize([5.0, 1.0, 3.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (3.0, 1.0, 5.0, 3)
    with pytest.raises(ValueError):
        epb.median([])


def test_pick_reps_fits_the_budget(epb):
    assert epb.pick_reps(340.0, 5.0, 20) == 14  # layer copy: ~340 ms a step
    assert epb.pick_reps(0.2, 5.0, 20) == 20  # hbm: capped by --reps
    assert epb.pick_reps(10_000.0, 5.0, 20) == 3  # never fewer than 3
    assert epb.pick_reps(10_000.0, 5.0, 2) == 2  # ...unless --reps says so
    assert epb.pick_reps(0.0, 5.0, 7) == 7
    assert epb.pick_reps(float("nan"), 5.0, 7) == 7


def test_relative_error(epb):
    assert epb.relative_error(1.0, 100.0) == 0.01
    assert epb.relative_error(0.0, 0.0) == 0.0
    assert epb.relative_error(1.0, 0.0) == math.inf


# --- JSON ------------------------------------------------------------------------------------------


def _fake_result(epb, arm="uva", argv=("--quick",)):
    args = epb.parse_args([*argv, "--arm", arm])
    e = epb.expert_bytes(args.hidden, args.intermediate)
    lb = epb.layer_bytes(args.experts, args.hidden, args.intermediate)
    per_batch = {
        b: epb.batch_metrics(arm, b, [2.0, 1.0, 3.0], [6 * b, 6 * b, 6 * b], e, lb) for b in args.batch_list
    }
    bw = {"hbm_read_gbps": 4000.0, "uva_read_gbps": 50.0, "h2d_memcpy_gbps": 55.0}
    epb.add_ceilings(arm, per_batch, bw)
    return args, epb.assemble_result(arm, args, bw, per_batch, {"graphs": 1, "host_alloc": "cupy"})


def test_json_has_every_metric(epb):
    args, result = _fake_result(epb)
    for key in epb.expected_keys(args.batch_list):
        assert key in result, key
    for key in (
        "hbm_read_gbps",
        "uva_read_gbps",
        "h2d_memcpy_gbps",
        "moe_step_ms_b1",
        "moe_step_ms_b8",
        "moe_step_ms_b32",
        "unique_experts_b32",
        "expert_bytes_read_b8",
        "effective_gbps_b1",
        "layer_bytes",
    ):
        assert isinstance(result[key], (int, float)) and not isinstance(result[key], bool), key
    assert result["arm"] == "uva" and isinstance(result["config"], str)


def test_json_values_are_consistent(epb):
    args, result = _fake_result(epb)
    e = epb.expert_bytes(args.hidden, args.intermediate)
    assert result["moe_step_ms_b8"] == 2.0
    assert result["unique_experts_b8"] == 48
    assert result["expert_bytes_read_b8"] == 48 * e
    assert result["effective_gbps_b8"] == pytest.approx(48 * e / 2e-3 / 1e9)
    assert result["link_bytes_b8"] == 48 * e  # uva: only the selected experts
    assert result["layer_bytes"] == args.experts * 3 * args.hidden * args.intermediate * 2
    assert result["reps_b1"] == 3 and result["moe_step_ms_p10_b1"] <= 2.0 <= result["moe_step_ms_p90_b1"]


def test_layer_copy_link_bytes_are_the_whole_layer(epb):
    _, result = _fake_result(epb, arm="layer_copy")
    assert result["link_bytes_b1"] == result["layer_bytes"]
    _, result = _fake_result(epb, arm="hbm")
    assert result["link_bytes_b1"] == 0 and result["link_gbps_b1"] == 0.0


def test_json_line_round_trips_and_drops_non_finite(epb):
    _, result = _fake_result(epb)
    result["uva_read_gbps"] = float("nan")
    line = epb.result_json(result)
    assert "\n" not in line and line.startswith("{")
    back = json.loads(line)
    assert back["uva_read_gbps"] is None and back["arm"] == "uva"
    numeric = {k for k, v in back.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert {"hbm_read_gbps", "h2d_memcpy_gbps", "moe_step_ms_b32"} <= numeric


def test_batch_metrics_needs_one_count_per_step(epb):
    with pytest.raises(ValueError):
        epb.batch_metrics("uva", 1, [1.0, 2.0], [6], 10, 100)


# --- no CUDA ---------------------------------------------------------------------------------------


def _no_import(name):
    raise ImportError(f"No module named {name!r}")


def _fake_torch(available: bool, count: int = 1):
    cuda = types.SimpleNamespace(is_available=lambda: available, device_count=lambda: count)
    return types.SimpleNamespace(cuda=cuda)


def test_cuda_reason_when_torch_is_missing(epb):
    reason = epb.cuda_unavailable_reason(_no_import)
    assert reason and "torch" in reason and "CUDA" in reason


def test_cuda_reason_when_no_device(epb):
    reason = epb.cuda_unavailable_reason(lambda name: _fake_torch(False, 0))
    assert reason and "no CUDA device" in reason
    assert epb.cuda_unavailable_reason(lambda name: _fake_torch(True, 1)) is None


def test_cuda_reason_when_cuda_init_raises(epb):
    def boom():
        raise RuntimeError("driver too old")

    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=boom, device_count=lambda: 0))
    assert "driver too old" in epb.cuda_unavailable_reason(lambda name: torch)


@pytest.mark.parametrize("importer", [_no_import, lambda name: _fake_torch(False, 0)])
def test_main_exits_nonzero_with_a_clear_message(epb, capsys, importer):
    code = epb.main(["--quick", "--arm", "uva"], importer=importer)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""  # no JSON: nothing for a runner to mistake
    assert "expert_placement_bench:" in captured.err and "CUDA" in captured.err


# --- skewed routing, hot/cold placement, byte floors -----------------------------------------------


def test_tiered_popularity_matches_the_seeds_form(epb):
    weights = epb.popularity("tiered:0.987@0.73", 384)
    hot = round(0.73 * 384)
    assert len(weights) == 384 and sum(weights) == pytest.approx(1.0)
    assert sum(weights[:hot]) == pytest.approx(0.987)
    assert weights[0] > weights[-1]


def test_zipf_popularity_decreases_with_rank(epb):
    weights = epb.popularity("zipf:1.0", 16)
    assert weights == sorted(weights, reverse=True) and sum(weights) == pytest.approx(1.0)
    assert epb.popularity("uniform", 16) is None


@pytest.mark.parametrize("bad", ["tiered:1.2@0.5", "tiered:0.9", "zipf:-1", "pareto:2", "tiered:x@y"])
def test_bad_skew_is_a_usage_error(epb, bad):
    with pytest.raises(SystemExit):
        epb.parse_args(["--skew", bad])


def test_skewed_routing_lands_on_the_hot_tier(epb):
    weights = epb.popularity("tiered:0.987@0.73", 384)
    ids, gates = epb.make_routing(2000, 384, 6, seed=3, weights=weights)
    hot = round(0.73 * 384)
    hits = [e < hot for row in ids for e in row]
    # Sampling without replacement flattens the tiers a little (a token's six experts are
    # distinct), so the share sits near, not at, 98.7%: far above the 73% of uniform routing.
    assert 0.95 < sum(hits) / len(hits) <= 1.0
    assert all(len(set(row)) == 6 for row in ids)
    assert all(sum(g) == pytest.approx(1.0) for g in gates)


def test_skewed_routing_touches_fewer_experts_than_uniform(epb):
    weights = epb.popularity("zipf:1.2", 384)
    skewed = epb.make_routing(32, 384, 6, seed=0, weights=weights)[0]
    uniform = epb.make_routing(32, 384, 6, seed=0)[0]
    assert len(epb.unique_experts(skewed)) < len(epb.unique_experts(uniform))


def test_hot_cold_sends_only_cold_experts_over_the_link(epb):
    e = 1000
    row = epb.batch_metrics("hot_cold", 8, [2.0], [40], e, 384 * e, rep_cold=[10], hot_hit_share=0.9)
    assert row["link_bytes_b8"] == 10 * e and row["expert_bytes_read_b8"] == 40 * e
    assert row["cold_experts_b8"] == 10 and row["hot_hit_share_b8"] == 0.9
    uva = epb.batch_metrics("uva", 8, [2.0], [40], e, 384 * e)
    assert uva["link_bytes_b8"] == 40 * e


def test_step_floor_adds_link_and_hbm_bytes(epb):
    bw = {"hbm_read_gbps": 4000.0, "uva_read_gbps": 50.0, "h2d_memcpy_gbps": 55.0}
    # 1 GB over a 50 GB/s link plus 3 GB from HBM at 4 TB/s: 20 ms + 0.75 ms.
    assert epb.step_floor_ms("hot_cold", 4e9, 1e9, bw) == pytest.approx(20.75)
    assert epb.step_floor_ms("hbm", 4e9, 0, bw) == pytest.approx(1.0)
    # layer_copy copies the layer by DMA, then reads the selected experts from HBM.
    assert epb.step_floor_ms("layer_copy", 4e9, 55e9, bw) == pytest.approx(1000 + 1.0)
    assert epb.step_floor_ms("uva", 4e9, 4e9, {"hbm_read_gbps": None}) is None


def test_ceilings_are_added_per_batch(epb):
    args, result = _fake_result(epb, arm="hot_cold", argv=("--quick", "--hbm-share", "0.5"))
    for b in args.batch_list:
        floor = result[f"ceiling_step_ms_b{b}"]
        assert floor > 0
        assert result[f"step_over_ceiling_b{b}"] == pytest.approx(result[f"moe_step_ms_b{b}"] / floor)
    assert result["hbm_experts"] == 192 and result["tokens_per_step"] == 1


def test_hbm_share_and_window_are_parsed(epb):
    a = epb.parse_args(["--arm", "hot_cold", "--hbm-share", "0.25", "--tokens-per-step", "5"])
    assert (a.n_hot, a.tokens_per_step) == (96, 5)
    assert "tokens_per_step=5" in epb.config_string(a)
    with pytest.raises(SystemExit):
        epb.parse_args(["--hbm-share", "1.5"])
