"""The routing probe against a real SGLang server serving the tiny Qwen3-MoE on this CPU.

SGLang's expert-distribution recorder (``--expert-distribution-recorder-mode stat``) needs two no-ops
torch's CPU module lacks; scripts/sglang_cpu/shim/ supplies them to the server's processes only.
Needs the ``sglang`` resource (SGLang's venv, the tiny dense and MoE models: ``./dev serve-setup``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.launch import LaunchSpec, ProcessLauncher

from helpers.net import free_port
from helpers.resources import REPO, SGLANG_PYTHON, TINY_MOE, require

pytestmark = pytest.mark.slow

HOST = "127.0.0.1"
PROBE = REPO / "scripts" / "routing_probe.py"
SHIM = REPO / "scripts" / "sglang_cpu" / "shim"


@pytest.fixture(scope="module", autouse=True)
def serving_environment() -> None:
    require("sglang")


def moe_spec(log_dir: Path, dump_dir: Path) -> LaunchSpec:
    port = free_port()
    argv = [
        str(SGLANG_PYTHON), "-m", "sglang.launch_server", "--model-path", str(TINY_MOE),
        "--host", HOST, "--port", str(port), "--device", "cpu", "--attention-backend", "torch_native",
        "--max-total-tokens", "4096", "--expert-distribution-recorder-mode", "stat",
    ]  # fmt: skip
    env = {
        "SGLANG_USE_CPU_ENGINE": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(SHIM),
        "SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR": str(dump_dir),
    }
    return LaunchSpec(
        argv=argv,
        env=env,
        host=HOST,
        port=port,
        health_path="/health",
        health_timeout_s=300.0,
        log_path=log_dir / "server-moe.log",
        run_id="routing-moe-r1",
        engine=VLLM,  # readiness by /health alone, as this test always launched it
    )


def test_the_probe_reads_the_engines_routing(tmp_path: Path) -> None:
    dump_dir = tmp_path / "dumps"
    out = tmp_path / "routing.json"
    with ProcessLauncher().start(moe_spec(tmp_path, dump_dir)) as server:
        probe = subprocess.run(
            [
                str(SGLANG_PYTHON),
                str(PROBE),
                "--url",
                f"http://{HOST}:{server.spec.port}",
                "--recorder-dir",
                str(dump_dir),
                "--model-dir",
                str(TINY_MOE),
                "--requests",
                "3",
                "--max-tokens",
                "12",
                "--out",
                str(out),
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert probe.returncode == 0, probe.stderr[-2000:]
    figures = json.loads(probe.stdout.strip().splitlines()[-1])
    config = json.loads((TINY_MOE / "config.json").read_text())
    assert figures["routing_layers"] == config["num_hidden_layers"]
    # transformers 5 writes Qwen3-MoE's expert count as num_local_experts (4.x: num_experts).
    assert figures["routing_experts"] == config.get("num_local_experts", config.get("num_experts"))
    # Every routed token picks top-k experts in every layer: hits are a multiple of layers x k.
    assert figures["routing_hits"] % (config["num_hidden_layers"] * config["num_experts_per_tok"]) == 0
    assert 0.25 <= figures["routing_hit_share_top25"] <= figures["routing_hit_share_top50"] <= 1.0
    # 12 decode tokens per request at concurrency 1: windows of 2..8 tokens exist, each >= one token's.
    assert figures["routing_window_multiplier_k5"] >= 1.0
    raw = json.loads(out.read_text())
    assert raw["topk"] == config["num_experts_per_tok"] and raw["counts"]
    assert raw["curve"][0] == [0.0, 0.0] and raw["curve"][-1][1] == pytest.approx(1.0)
