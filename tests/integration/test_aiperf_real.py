"""The replay instrument against the real system: AIPerf 0.13 (its own venv) replaying generated
agent sessions against vLLM's CPU build serving the tiny model.

Needs ``./dev serve-setup`` (vLLM's venv, AIPerf's venv, the tiny model): ``require("aiperf")``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.errors import InputError
from recipe_ledger.instruments import aiperf_replay
from recipe_ledger.instruments.base import InvalidPoint, MeasureContext
from recipe_ledger.launch.process import ProcessLauncher
from recipe_ledger.launch.spec import LaunchSpec
from recipe_ledger.pipeline.measure import client_env

from helpers.net import free_port
from helpers.resources import AIPERF, SERVE_VLLM, TINY_MODEL, require

pytestmark = pytest.mark.slow
# The server caches in blocks of 128 tokens (vLLM CPU): the trace counts its reuse in the same blocks.
SESSIONS = {"sessions": 2, "turns": 4, "system_tokens": 128, "user_tokens": 16, "output_tokens": [4, 8]}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    require("aiperf")
    port, root = free_port(), tmp_path_factory.mktemp("aiperf-real")
    argv = [
        str(SERVE_VLLM),
        "serve",
        str(TINY_MODEL),
        "--served-model-name",
        "tiny",
        "--max-model-len",
        "1024",
    ]
    argv += ["--dtype", "bfloat16", "--enforce-eager", "--host", "127.0.0.1", "--port", str(port)]
    env = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    spec = LaunchSpec(
        argv=argv,
        env={**env, "VLLM_CACHE_ROOT": str(root / "vllm-cache")},
        host="127.0.0.1",
        port=port,
        health_path="/health",
        health_timeout_s=300,
        log_path=root / "server.log",
        run_id="aiperf-real",
        engine=VLLM,
    )
    with ProcessLauncher().start(spec) as running:
        yield running.base_url


def ctx(tmp_path: Path, base_url: str, seed: int = 1) -> MeasureContext:
    return MeasureContext("control", 2, 1, seed, tmp_path / "raw", base_url, "tiny", str(TINY_MODEL))


def test_a_generated_replay_completes_every_turn_and_the_cache_shares(server, tmp_path):
    options = {"generate": SESSIONS, "block_size": 128}
    m = aiperf_replay.measure(str(AIPERF), options, ctx(tmp_path, server), env=client_env(), repo=tmp_path)
    assert m.metrics["completed"] == 2 * 4 and m.metrics["failed"] == 0
    assert m.metrics["ttft_ms_p50"] > 0 and m.metrics["output_tps_total"] > 0
    assert m.instrument_version == "aiperf 0.13.0"
    # Later turns carry the session's history: the server's prefix cache served part of it.
    assert m.metrics["cache_reuse_achieved"] > 0
    assert json.loads(m.raw_path.read_text())["aiperf_version"] == "0.13.0"


def test_multi_turn_sessions_on_the_completions_endpoint_are_an_invalid_point(server, tmp_path):
    # AIPerf's completions endpoint sends one turn; every later turn errors, and the point says so.
    options = {"generate": SESSIONS, "block_size": 128, "endpoint_type": "completions"}
    with pytest.raises(InvalidPoint, match="requests failed"):
        aiperf_replay.measure(str(AIPERF), options, ctx(tmp_path, server), env=client_env(), repo=tmp_path)


def test_a_trace_beyond_the_served_context_is_refused_before_aiperf_runs(server, tmp_path):
    (tmp_path / "long.jsonl").write_text(
        json.dumps({"session_id": "a", "input_length": 1000, "output_length": 100})
    )
    with pytest.raises(InputError, match="more than the model's context of 1024"):
        aiperf_replay.measure(
            str(AIPERF), {"trace": "long.jsonl"}, ctx(tmp_path, server), env={}, repo=tmp_path
        )
    assert not (tmp_path / "raw" / "control-p2-r1.aiperf").exists()


def test_a_time_bounded_replay_stops_at_its_duration_and_is_read_the_same_way(server, tmp_path):
    # 16 sessions of 4 turns, 1-2 s of thinking between turns, 2 in flight: some 40 s of replay, cut
    # at 4 s (no new request after it) with 10 s for the answers in flight.
    sessions = {**SESSIONS, "sessions": 16, "think_ms": [1000, 2000]}
    options = {
        "generate": sessions,
        "block_size": 128,
        "benchmark_duration_s": 4,
        "benchmark_grace_period_s": 10,
    }
    m = aiperf_replay.measure(str(AIPERF), options, ctx(tmp_path, server), env=client_env(), repo=tmp_path)
    assert "--benchmark-duration 4 --benchmark-grace-period 10" in m.facts["aiperf_options"]
    assert 0 < m.metrics["completed"] < 16 * 4 and m.metrics["failed"] == 0  # cut, not refused for it
    assert m.metrics["ttft_ms_p50"] > 0 and m.metrics["duration_s"] > 0
    assert "a duration cuts or repeats the trace" in m.facts["skipped_checks"]


def _sharegpt(count: int) -> list[dict]:
    topics = ["rivers", "bridges", "lighthouses", "glaciers", "orchards", "harbours"]
    return [
        {
            "id": f"c{i}",
            "conversations": [
                {
                    "from": "human",
                    "value": f"Tell me three short facts about {topics[i % 6]} and why people visit them.",
                },
                {
                    "from": "gpt",
                    "value": f"Here are three facts about {topics[i % 6]}: they are old, wide and calm.",
                },
            ],
        }
        for i in range(count)
    ]


def test_a_public_dataset_is_read_offline_from_aiperf_s_own_cache(server, tmp_path):
    """ShareGPT in AIPerf's HTTP cache (a small file in its format): the real AIPerf loads it
    without network and sends its prompts; a dataset not there is refused before AIPerf runs."""
    options = {"public_dataset": "sharegpt", "request_count": 4}
    with pytest.raises(InputError, match="is not on this box"):
        aiperf_replay.measure(str(AIPERF), options, ctx(tmp_path, server), env=client_env(), repo=tmp_path)
    cached = tmp_path / ".cache" / "aiperf" / "datasets" / "ShareGPT_V3_unfiltered_cleaned_split.json"
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps(_sharegpt(6)))
    m = aiperf_replay.measure(str(AIPERF), options, ctx(tmp_path, server), env=client_env(), repo=tmp_path)
    assert m.metrics["completed"] == 4 and m.metrics["failed"] == 0
    assert "--input-file" not in m.argv and m.facts["dataset_place"] == str(cached)
    assert "trace-only checks, skipped" in m.facts["skipped_checks"]
