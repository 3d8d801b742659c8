"""The AIPerf replay instrument: argv, AIPerf's result JSON, validity signals, a fake aiperf end to end."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from recipe_ledger.errors import InputError
from recipe_ledger.instruments import aiperf_replay
from recipe_ledger.instruments.base import InvalidPoint, MeasureContext
from recipe_ledger.instruments.replay_trace import TraceSummary

# The shape of AIPerf 0.13's profile_export_aiperf.json (keys as it writes them; values made up).
AIPERF_RESULT = {
    "aiperf_version": "0.13.0",
    "time_to_first_token": {"unit": "ms", "avg": 90.0, "p50": 95.0, "p90": 120.0, "p99": 138.0},
    "inter_token_latency": {"unit": "ms", "avg": 6.0, "p50": 6.25, "p90": 6.9, "p99": 7.0},
    "request_latency": {"unit": "ms", "avg": 260.0, "p50": 250.0, "p90": 380.0, "p99": 410.0},
    "output_token_throughput": {"unit": "tokens/sec", "avg": 142.5},
    "request_throughput": {"unit": "requests/sec", "avg": 4.0},
    "completed_request_count": {"unit": "requests", "avg": 8.0},
    "benchmark_duration": {"unit": "sec", "avg": 2.0},
    "was_cancelled": False,
    "is_complete": True,
    "error_summary": [],
}
SUMMARY = TraceSummary(
    requests=8, sessions=2, max_input_length=900, max_total_length=940, expected_cache_reuse=0.8
)


def ctx(tmp_path: Path, **kw) -> MeasureContext:
    base = {"arm": "control", "point": 2, "repeat": 1, "seed": 1002, "out_dir": tmp_path / "raw"}
    return MeasureContext(**{**base, "model_name": "tiny", "tokenizer": "/models/tiny", **kw})


def test_argv_replays_sessions_at_the_point_s_concurrency_or_on_the_trace_s_schedule(tmp_path):
    options = aiperf_replay.parse_options({"block_size": 32})
    # The block size is the one the trace was summarized with (stated, checked, or the trace's own).
    summary = dataclasses.replace(SUMMARY, block_size=32)
    argv = aiperf_replay.build_argv("aiperf", options, ctx(tmp_path), Path("t.jsonl"), summary, tmp_path)
    joined = " ".join(argv)
    assert "--concurrency 2" in joined and "--num-sessions 2" in joined and "--isl-block-size 32" in joined
    assert "--custom-dataset-type mooncake_trace" in joined and "--endpoint-type chat" in joined
    assert "--extra-inputs ignore_eos:true" in joined and "--fixed-schedule" not in joined
    sweep_point = aiperf_replay.build_argv(
        "aiperf", options, ctx(tmp_path, concurrency=5), Path("t"), SUMMARY, tmp_path
    )
    assert "--concurrency 5" in " ".join(sweep_point)
    fixed = aiperf_replay.parse_options({"schedule": "fixed", "ignore_eos": False})
    argv = aiperf_replay.build_argv("aiperf", fixed, ctx(tmp_path), Path("t.jsonl"), SUMMARY, tmp_path)
    assert "--fixed-schedule" in argv and "--concurrency" not in argv and "--extra-inputs" not in argv


def test_aiperf_result_becomes_normalized_metrics():
    metrics = aiperf_replay.normalize(AIPERF_RESULT)
    assert metrics["ttft_ms_p99"] == AIPERF_RESULT["time_to_first_token"]["p99"]
    assert metrics["tpot_ms_p50"] == AIPERF_RESULT["inter_token_latency"]["p50"]
    assert metrics["e2el_ms_mean"] == AIPERF_RESULT["request_latency"]["avg"]
    assert metrics["output_tps_total"] == AIPERF_RESULT["output_token_throughput"]["avg"]
    assert metrics["decode_tps_per_stream"] == pytest.approx(
        1000 / AIPERF_RESULT["inter_token_latency"]["p50"]
    )
    assert metrics["failed"] == 0 and metrics["context_overflows"] == 0  # absent means none


def _problems(raw: dict, achieved: float | None = 0.7, **options) -> list[str]:
    parsed = aiperf_replay.parse_options(options)
    return aiperf_replay.validity_problems(raw, aiperf_replay.normalize(raw), SUMMARY, achieved, parsed)


def test_a_valid_replay_has_no_problem_and_each_signal_names_its_own():
    assert _problems(AIPERF_RESULT) == []
    errors = {
        **AIPERF_RESULT,
        "completed_request_count": {"avg": 1.0},
        "error_request_count": {"avg": 7.0},
        "error_summary": [
            {"error_details": {"message": "Completions endpoint only supports one turn."}, "count": 7}
        ],
    }
    assert "7 of 8 requests failed" in _problems(errors)[0] and "one turn" in _problems(errors)[0]
    # Counted once: the trace's size is the total, however AIPerf's counts overlap (issue 28 saw
    # "2 of 52" for a 50-request trace).
    twice = {**AIPERF_RESULT, "error_request_count": {"avg": 2.0}, "error_summary": []}
    assert _problems(twice)[0].startswith("2 of 8 requests failed")
    overflow = {**AIPERF_RESULT, "context_overflow_count": {"avg": 2.0}}
    assert "overflowed the model's context" in _problems(overflow)[0]
    short = {**AIPERF_RESULT, "completed_request_count": {"avg": 5.0}}
    assert _problems(short) == ["5 of the trace's 8 requests completed"]
    assert "prefix cache served 10%" in _problems(AIPERF_RESULT, achieved=0.1)[0]
    assert _problems(AIPERF_RESULT, achieved=None) == []  # no counters: nothing to compare


def test_options_and_a_missing_aiperf_are_one_line_input_errors(tmp_path):
    with pytest.raises(InputError, match=r"options\.schedul: Extra inputs"):
        aiperf_replay.parse_options({"schedul": "fixed"})
    with pytest.raises(InputError, match="AIPerf is not installed") as info:
        aiperf_replay.require_aiperf(str(tmp_path / "no-such-aiperf"))
    assert "setup_aiperf_venv.sh" in (info.value.hint or "")


def test_a_trace_over_the_context_or_with_a_bad_line_is_refused_before_launch(tmp_path):
    trace = tmp_path / "user.jsonl"
    trace.write_text(json.dumps({"session_id": "a", "input_length": 1500, "output_length": 600}) + "\n")
    with pytest.raises(InputError, match="more than the model's context of 2048"):
        aiperf_replay.check_before_launch({"trace": "user.jsonl"}, tmp_path, 2048, "replay")
    aiperf_replay.check_before_launch({"trace": "user.jsonl"}, tmp_path, 4096, "replay")
    trace.write_text('{"session_id": "a", "input_length": 10}\n{"session_id": "a"}\n')
    with pytest.raises(InputError, match="missing field input_length") as info:
        aiperf_replay.check_before_launch({"trace": "user.jsonl"}, tmp_path, None, "replay")
    assert info.value.where == f"{trace}:2"
    with pytest.raises(InputError, match="timestamp on every line"):
        trace.write_text('{"input_length": 10}\n')
        aiperf_replay.check_before_launch({"trace": "user.jsonl", "schedule": "fixed"}, tmp_path, None, "r")


FAKE_AIPERF = """#!{python}
import json, pathlib, sys
args = sys.argv[1:]
out = pathlib.Path(args[args.index("--artifact-dir") + 1])
out.mkdir(parents=True)
requests = sum(1 for line in open(args[args.index("--input-file") + 1]) if line.strip())
result = json.loads({result!r})
result["completed_request_count"] = {{"avg": float(requests - {lost})}}
(out / "profile_export_aiperf.json").write_text(json.dumps(result))
print("aiperf (fake) replayed", requests)
"""


def fake_aiperf(tmp_path: Path, lost: int = 0) -> str:
    path = tmp_path / "bin" / "aiperf"
    path.parent.mkdir(exist_ok=True)
    path.write_text(FAKE_AIPERF.format(python=sys.executable, result=json.dumps(AIPERF_RESULT), lost=lost))
    path.chmod(0o755)
    return str(path)


def test_measure_generates_the_repeat_s_trace_and_records_its_hash(tmp_path):
    options = {"generate": {"sessions": 2, "turns": 3}, "block_size": 32}
    m = aiperf_replay.measure(fake_aiperf(tmp_path), options, ctx(tmp_path), env={}, repo=tmp_path)
    trace = tmp_path / "raw" / "control-p2-r1.trace.jsonl"
    assert m.metrics["completed"] == 6 and m.facts["trace_requests"] == "6"
    assert m.facts["trace_sha256"].startswith("sha256:") and trace.is_file()
    assert 0 < m.metrics["cache_reuse_expected"] < 1
    again = aiperf_replay.measure(fake_aiperf(tmp_path), options, ctx(tmp_path), env={}, repo=tmp_path)
    assert again.facts["trace_sha256"] == m.facts["trace_sha256"]  # same seed, same trace
    other = aiperf_replay.measure(
        fake_aiperf(tmp_path), options, ctx(tmp_path, seed=2002), env={}, repo=tmp_path
    )
    assert other.facts["trace_sha256"] != m.facts["trace_sha256"]


def test_measure_refuses_a_replay_that_lost_requests(tmp_path):
    with pytest.raises(InvalidPoint, match="5 of the trace's 6 requests completed"):
        aiperf_replay.measure(
            fake_aiperf(tmp_path, lost=1),
            {"generate": {"sessions": 2, "turns": 3}},
            ctx(tmp_path),
            env={},
            repo=tmp_path,
        )


def test_a_local_tokenizer_directory_is_offered_to_aiperf_as_a_cached_hub_model(tmp_path):
    tokenizer = tmp_path / "tok"
    tokenizer.mkdir()
    (tokenizer / "tokenizer.json").write_text("{}")
    argv, env = aiperf_replay.tokenizer_args(str(tokenizer), tmp_path / "hub")
    assert argv == ["--tokenizer", aiperf_replay.HUB_NAME] and env["HF_HUB_CACHE"] == str(tmp_path / "hub")
    model = tmp_path / "hub" / ("models--" + aiperf_replay.HUB_NAME.replace("/", "--"))
    snapshot = model / "snapshots" / (model / "refs" / "main").read_text()
    assert (snapshot / "tokenizer.json").read_text() == "{}"
    assert aiperf_replay.tokenizer_args("org/hub-tokenizer", tmp_path) == (
        ["--tokenizer", "org/hub-tokenizer"],
        {},
    )
