"""The two-GPU studies' scripts (issue 30) run for real on two local processes through
torch.distributed's gloo backend, in the serving venv that has torch: the plumbing the GPU run needs
(spawning a rank per device, the rendezvous, every rank timing the same number of calls, rank 0's
JSON on the last line) without a GPU. The numbers describe loopback on this host, so only their
presence and sign are checked; the scripts say ``backend: gloo`` themselves.
Needs the serving venv's torch with gloo: ``require("torch-gloo")``.
"""

from __future__ import annotations

import json
import socket
import subprocess

import pytest

from helpers.resources import REPO, SERVE_VLLM, require

pytestmark = pytest.mark.slow

PYTHON = SERVE_VLLM.parent / "python"
SCRIPTS = REPO / "scripts"
SIZES = (4096, 65536)
TOKENS = (1, 4)


@pytest.fixture(scope="module", autouse=True)
def serving_torch() -> None:
    require("torch-gloo")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def last_json(script: str, *args: str) -> dict:
    """Run ``script`` on two gloo ranks with a tiny budget; its last stdout line as JSON."""
    argv = [str(PYTHON), str(SCRIPTS / script), "--backend", "gloo", "--world", "2", "--budget-s", "0.02"]
    argv += ["--warmup", "1", "--port", str(free_port()), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_link_study_measures_every_collective_and_both_copy_directions() -> None:
    # --p2p off is the experiment's staged arm: NCCL_P2P_DISABLE=1, which gloo ignores.
    metrics = last_json("gpu_link_study.py", "--sizes", ",".join(map(str, SIZES)), "--p2p", "off")
    assert (metrics["backend"], metrics["world"], metrics["p2p"]) == ("gloo", 2, "off")
    names = ["p2p_gbps_0to1", "p2p_gbps_1to0"]
    # gloo on this torch has all-to-all; a build without it would print why on stderr and leave
    # the alltoall_* keys out, which this test would then report.
    for size in SIZES:
        names += [
            f"{kind}_{unit}_{size}" for kind in ("allreduce", "alltoall") for unit in ("us", "busbw_gbps")
        ]
    assert {name: metrics.get(name, 0) > 0 for name in names} == dict.fromkeys(names, True)


def test_the_tp2_step_reports_its_parts_beside_parallel_costs_prediction() -> None:
    tokens = ",".join(map(str, TOKENS))
    metrics = last_json(
        "gpu_tp2_step.py", "--tiny", "--tokens", tokens, "--context", "16", "--box", "h200-x2"
    )
    assert (metrics["backend"], metrics["layer"]) == ("gloo", "tiny")
    for t in TOKENS:
        parts = ("tp_step_ms", "compute_ms", "allreduce_ms", "predicted_comm_ms", "comm_over_predicted")
        assert all(metrics[f"{part}_t{t}"] > 0 for part in parts), metrics
        # By hand: the tiny layer's 2 all-reduces of t x 64 x 4 B (fp32 on CPU) over h200-x2's path
        # (450 GB/s, 7.8 us a call): at most 2 KiB, nanoseconds of bandwidth, so 2 x 7.8 us binds.
        assert metrics[f"predicted_comm_ms_t{t}"] == pytest.approx(2 * 7.8 / 1000)
        # The ratio is the measured all-reduces over the prediction, both printed.
        ratio = metrics[f"allreduce_ms_t{t}"] / metrics[f"predicted_comm_ms_t{t}"]
        assert metrics[f"comm_over_predicted_t{t}"] == pytest.approx(ratio)
        assert f"step_comm_over_predicted_t{t}" in metrics  # (step - compute) / predicted: any sign on CPU
