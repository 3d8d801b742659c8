"""The AIPerf replay's public datasets, benchmark durations and agentic scenario: the options' rules
at load, the argv they build, AIPerf's registry and the offline check before launch, the validity
signals and --plan's notes for runs without a trace."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from recipe_ledger.errors import InputError
from recipe_ledger.instruments import aiperf_datasets, aiperf_replay
from recipe_ledger.instruments.base import InvalidPoint, MeasureContext
from recipe_ledger.instruments.replay_trace import TraceSummary

from helpers.resources import AIPERF

WEKA = "semianalysis_cc_traces_weka_062126"
AGENTIC = {"public_dataset": WEKA, "benchmark_duration_s": 900, "agentic": {}}
SUMMARY = TraceSummary(
    requests=8, sessions=2, max_input_length=900, max_total_length=940, expected_cache_reuse=0.8
)
RESULT = {
    "inter_token_latency": {"p50": 5.0},
    "completed_request_count": {"avg": 40.0},
    "benchmark_duration": {"avg": 60.0},
    "is_complete": True,
}


def ctx(tmp_path: Path, **kw) -> MeasureContext:
    base = {"arm": "control", "point": 4, "repeat": 1, "seed": 7, "out_dir": tmp_path / "raw"}
    return MeasureContext(**{**base, "model_name": "tiny", "base_url": "http://127.0.0.1:9", **kw})


@pytest.mark.parametrize(
    ("options", "field", "says"),
    [
        (
            {"trace": "t.jsonl", "public_dataset": "sharegpt", "request_count": 5},
            "public_dataset",
            "leave out trace",
        ),
        (
            {"generate": {"sessions": 2}, "public_dataset": "sharegpt", "request_count": 5},
            "public_dataset",
            "generate",
        ),
        (
            {"block_size": 64, "public_dataset": "sharegpt", "request_count": 5},
            "public_dataset",
            "block_size",
        ),
        ({"public_dataset": "sharegpt"}, "public_dataset", "needs request_count or benchmark_duration_s"),
        ({"request_count": 5, "benchmark_duration_s": 60}, "benchmark_duration_s", "not with request_count"),
        ({"schedule": "fixed", "benchmark_duration_s": 60}, "benchmark_duration_s", "schedule: fixed"),
        ({"benchmark_grace_period_s": 5}, "benchmark_grace_period_s", "only with benchmark_duration_s"),
        ({"benchmark_duration_s": 900, "agentic": {}}, "agentic", "no public_dataset"),
        ({**AGENTIC, "public_dataset": "sharegpt"}, "agentic", "'sharegpt'"),
        ({**AGENTIC, "benchmark_duration_s": 300}, "agentic", ">= 900"),
        ({**AGENTIC, "benchmark_duration_s": None, "request_count": 50}, "agentic", "got none"),
        ({**AGENTIC, "ignore_eos": False}, "agentic", "ignore_eos"),
        ({**AGENTIC, "endpoint_type": "completions"}, "agentic", "multi-turn"),
        (
            {**AGENTIC, "agentic": {"trajectory_start_min_ratio": 0.8, "trajectory_start_max_ratio": 0.2}},
            "agentic.trajectory_start_max_ratio",
            "below trajectory_start_min_ratio 0.8",
        ),
        ({**AGENTIC, "agentic": {"scenario": "agentx-2"}}, "agentic.scenario", "inferencex-agentx-mvp"),
        ({"public_dataset": "sharegpt", "benchmark_duration_s": 0}, "benchmark_duration_s", "greater than 0"),
    ],
)
def test_each_rule_is_refused_at_load_at_its_field(options, field, says):
    with pytest.raises(InputError) as info:
        aiperf_replay.parse_options(options, "replay")
    message = str(info.value)
    assert f"options.{field}:" in message and says in message, message


def test_the_rules_accept_what_aiperf_accepts():
    parsed = aiperf_replay.parse_options({**AGENTIC, "public_dataset": WEKA.replace("_", "-")})
    assert parsed.agentic is not None and parsed.agentic.scenario == aiperf_replay.AGENTX
    assert aiperf_replay.parse_options({"benchmark_duration_s": 30, "benchmark_grace_period_s": 0})
    assert aiperf_replay.parse_options({"trace": "t.jsonl", "request_count": 3}).request_count == 3


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_a_public_dataset_run_names_the_dataset_and_no_trace(tmp_path):
    options = aiperf_replay.parse_options({"public_dataset": "sharegpt", "request_count": 40})
    argv = aiperf_replay.build_argv("aiperf", options, ctx(tmp_path), None, None, tmp_path / "a")
    assert _flag(argv, "--public-dataset") == "sharegpt" and _flag(argv, "--request-count") == "40"
    for trace_only in ("--input-file", "--custom-dataset-type", "--isl-block-size", "--num-sessions"):
        assert trace_only not in argv
    assert _flag(argv, "--concurrency") == "4" and "--benchmark-duration" not in argv


def test_a_duration_bounds_a_trace_s_replay_and_the_agentic_scenario_gets_its_flags(tmp_path):
    timed = aiperf_replay.parse_options({"benchmark_duration_s": 45.5, "benchmark_grace_period_s": 5})
    argv = aiperf_replay.build_argv("aiperf", timed, ctx(tmp_path), Path("t.jsonl"), SUMMARY, tmp_path)
    assert _flag(argv, "--benchmark-duration") == "45.5" and _flag(argv, "--benchmark-grace-period") == "5"
    assert _flag(argv, "--input-file") == str(Path("t.jsonl").resolve())  # AIPerf runs in the repository
    agentic = aiperf_replay.parse_options(
        {
            **AGENTIC,
            "agentic": {
                "trajectory_start_min_ratio": 0.1,
                "trajectory_start_max_ratio": 0.6,
                "cache_warmup_duration_s": 120,
                "warmup_grace_period_s": 30,
                "burst_phase_starts": True,
                "allow_dataset_wrap": True,
            },
        }
    )
    argv = aiperf_replay.build_argv("aiperf", agentic, ctx(tmp_path), None, None, tmp_path)
    assert _flag(argv, "--scenario") == "inferencex-agentx-mvp" and _flag(argv, "--public-dataset") == WEKA
    assert _flag(argv, "--trajectory-start-min-ratio") == "0.1"
    assert _flag(argv, "--trajectory-start-max-ratio") == "0.6"
    assert _flag(argv, "--agentic-cache-warmup-duration") == "120"
    assert _flag(argv, "--agentic-warmup-grace-period") == "30"
    assert "--burst-phase-starts" in argv and "--allow-dataset-wrap" in argv
    assert "--fixed-schedule" not in argv and _flag(argv, "--benchmark-duration") == "900"
    plain = aiperf_replay.build_argv(
        "aiperf", aiperf_replay.parse_options(AGENTIC), ctx(tmp_path), None, None, tmp_path
    )
    assert "--burst-phase-starts" not in plain and "--trajectory-start-min-ratio" not in plain


@pytest.mark.skipif(not AIPERF.is_file(), reason="no AIPerf venv: ./dev serve-setup")
def test_the_agentic_rules_are_the_installed_aiperf_s_scenario():
    """Drift guard: the constants the rules use against AIPerf's own scenario declaration."""
    site = aiperf_datasets.registry_path(str(AIPERF)).parents[1]  # .../site-packages/aiperf
    source = (site / "common" / "scenario" / "inferencex_agentx_mvp.py").read_text()
    call = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and n.keywords)
    declared = {k.arg: k.value for k in call.keywords}
    assert ast.literal_eval(declared["name"]) == aiperf_replay.AGENTX
    assert ast.literal_eval(declared["min_benchmark_duration_seconds"]) == aiperf_replay.AGENTX_MIN_DURATION_S
    assert (
        ast.literal_eval(declared["default_benchmark_duration_seconds"])
        == aiperf_replay.AGENTX_DEFAULT_DURATION_S
    )
    loaders = set(ast.literal_eval(declared["require_loader"]))
    assert set(aiperf_replay.AGENTX_DATASETS) == loaders - {"weka_trace", "weka_hf"}
    registry = aiperf_datasets.read_registry(aiperf_datasets.registry_path(str(AIPERF)))
    assert set(aiperf_replay.AGENTX_DATASETS) <= set(registry)
    assert all(
        registry[name].hf_dataset and registry[name].is_trace for name in aiperf_replay.AGENTX_DATASETS
    )
    assert registry["sharegpt"].url and registry["sharegpt"].filename  # an HTTP one, read from its loader


REGISTRY_YAML = """
public_dataset_loader:
  sharegpt:
    class: aiperf.dataset.loader.sharegpt:ShareGPTLoader
  spec_al_gsm8k:
    class: aiperf.dataset.loader.hf_instruction_response:HFInstructionResponseDatasetLoader
    metadata: {hf_dataset_name: openai/gsm8k, hf_subset: main, hf_split: test}
  semianalysis_cc_traces_weka_062126:
    class: aiperf.dataset.loader.semianalysis_cc_traces_weka:SemiAnalysisCCTracesWekaLoader
    metadata: {hf_dataset_name: semianalysisai/cc-traces-weka-062126, is_trace: true}
  weka_hf:
    class: aiperf.dataset.loader.semianalysis_cc_traces_weka:SemiAnalysisCCTracesWekaLoader
    metadata: {is_trace: true}
"""

SHAREGPT_LOADER = """class ShareGPTLoader:
    tag = "ShareGPT"
    url = "https://example.org/sharegpt.json"
    filename = "sharegpt.json"
"""

FAKE_AIPERF = """#!{python}
import json, os, pathlib, sys
args = sys.argv[1:]
out = pathlib.Path(args[args.index("--artifact-dir") + 1])
out.mkdir(parents=True)
seen = {{"argv": args, "cwd": os.getcwd(), "hf_datasets_cache": os.environ.get("HF_DATASETS_CACHE")}}
(out / "seen.json").write_text(json.dumps(seen))
(out / "profile_export_aiperf.json").write_text({result!r})
"""


def fake_venv(tmp_path: Path, result: dict = RESULT) -> str:
    """A venv-shaped AIPerf: bin/aiperf (a fake that records what it was given) beside a registry."""
    venv = tmp_path / "venv-aiperf"
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "aiperf" / "plugin").mkdir(parents=True)
    (site / "aiperf" / "plugin" / "plugins.yaml").write_text(REGISTRY_YAML)
    (site / "aiperf" / "dataset" / "loader").mkdir(parents=True)
    (site / "aiperf" / "dataset" / "loader" / "sharegpt.py").write_text(SHAREGPT_LOADER)
    (venv / "bin").mkdir()
    aiperf = venv / "bin" / "aiperf"
    aiperf.write_text(FAKE_AIPERF.format(python=sys.executable, result=json.dumps(result)))
    aiperf.chmod(0o755)
    return str(aiperf)


def test_the_registry_gives_each_dataset_its_source_and_names_what_it_lacks(tmp_path):
    registry = aiperf_datasets.read_registry(aiperf_datasets.registry_path(fake_venv(tmp_path)))
    assert registry["sharegpt"].url == "https://example.org/sharegpt.json"
    assert (
        registry["spec_al_gsm8k"].hf_dataset == "openai/gsm8k"
        and registry["spec_al_gsm8k"].hf_subset == "main"
    )
    assert aiperf_datasets.lookup(registry, WEKA.replace("_", "-"), "w").is_trace
    with pytest.raises(
        InputError, match="AIPerf has no public dataset .sharegtp.; it has: semianalysis.*, sharegpt, "
    ) as info:
        aiperf_datasets.lookup(registry, "sharegtp", "here")
    assert "plugins public_dataset_loader" in (info.value.hint or "")


def test_a_dataset_not_on_the_box_is_refused_with_its_place_and_the_fetch_command(tmp_path):
    aiperf = fake_venv(tmp_path)
    env = {"HF_DATASETS_CACHE": str(tmp_path / "hf")}
    options = {**AGENTIC}
    with pytest.raises(InputError, match="is not on this box") as info:
        aiperf_replay.check_before_launch(options, tmp_path, None, "agentx", aiperf, env)
    place = tmp_path / "hf" / "semianalysisai___cc-traces-weka-062126"
    assert str(place) in str(info.value) and info.value.where == "instrument 'agentx': options.public_dataset"
    assert "load_dataset('semianalysisai/cc-traces-weka-062126', split='train')" in (info.value.hint or "")
    (place / "default" / "0.0.0" / "abc123").mkdir(parents=True)  # datasets' prepared layout
    aiperf_replay.check_before_launch(options, tmp_path, None, "agentx", aiperf, env)

    sharegpt = {"public_dataset": "sharegpt", "request_count": 10}
    with pytest.raises(InputError, match="sharegpt.json") as info:
        aiperf_replay.check_before_launch(sharegpt, tmp_path, None, "r", aiperf, env)
    assert "curl -L --create-dirs -o" in (info.value.hint or "")
    file = tmp_path / ".cache" / "aiperf" / "datasets" / "sharegpt.json"
    file.parent.mkdir(parents=True)
    file.write_text("[]")
    aiperf_replay.check_before_launch(sharegpt, tmp_path, 16, "r", aiperf, env)  # no context check: no trace
    with pytest.raises(InputError, match="does not say where public dataset 'weka_hf' comes from"):
        aiperf_replay.check_before_launch(
            {**sharegpt, "public_dataset": "weka_hf"}, tmp_path, None, "r", aiperf, env
        )
    with pytest.raises(InputError, match="cannot find AIPerf's dataset registry"):
        aiperf_replay.check_before_launch(sharegpt, tmp_path, None, "r", sys.executable, env)


def test_a_public_dataset_point_runs_offline_in_the_repository_and_records_what_it_skipped(tmp_path):
    aiperf = fake_venv(tmp_path)
    place = tmp_path / "hf" / "openai___gsm8k" / "main" / "0.0.0" / "h"
    place.mkdir(parents=True)
    options = {"public_dataset": "spec_al_gsm8k", "benchmark_duration_s": 60}
    m = aiperf_replay.measure(
        aiperf, options, ctx(tmp_path), env={"HF_DATASETS_CACHE": str(tmp_path / "hf")}, repo=tmp_path
    )
    seen = json.loads((tmp_path / "raw" / "control-p4-r1.aiperf" / "seen.json").read_text())
    assert seen["cwd"] == str(tmp_path) and seen["hf_datasets_cache"] == str(tmp_path / "hf")
    assert "--input-file" not in seen["argv"] and _flag(seen["argv"], "--public-dataset") == "spec_al_gsm8k"
    assert m.facts["public_dataset"] == "spec_al_gsm8k" and m.facts["dataset_source"] == "openai/gsm8k"
    assert "trace-only checks, skipped" in m.facts["skipped_checks"] and "trace_sha256" not in m.facts
    # The same normalization as a trace's replay; no expected reuse without a trace.
    assert m.metrics["duration_s"] == 60.0 and m.metrics["decode_tps_per_stream"] == 200.0
    assert "cache_reuse_expected" not in m.metrics


def _problems(raw: dict, summary: TraceSummary | None, achieved: float | None = 0.05, **options) -> list[str]:
    parsed = aiperf_replay.parse_options(options)
    return aiperf_replay.validity_problems(raw, aiperf_replay.normalize(raw), summary, achieved, parsed)


def test_runs_without_the_whole_trace_skip_the_checks_on_it_and_keep_the_others():
    # Whole-trace replay: 40 completed of 8 is fine, a reuse of 5% of 80% is refused.
    assert "prefix cache served 5%" in _problems(RESULT, SUMMARY)[0]
    # A duration cuts or repeats the trace: no completion count, no reuse floor.
    assert _problems(RESULT, SUMMARY, benchmark_duration_s=60) == []
    short = {**RESULT, "completed_request_count": {"avg": 30.0}}
    assert _problems(short, None, public_dataset="sharegpt", request_count=40) == [
        "30 of request_count's 40 requests completed"
    ]
    failed = {**RESULT, "error_request_count": {"avg": 4.0}}
    assert _problems(failed, None, public_dataset="sharegpt", benchmark_duration_s=60)[0].startswith(
        "4 of 40 requests failed"  # counted once: AIPerf's completed count includes them
    )
    assert _problems({**RESULT, "is_complete": False}, None, public_dataset="x", request_count=40) == [
        "AIPerf did not complete the benchmark"
    ]


def test_plan_notes_say_what_a_launch_costs_and_which_checks_are_skipped(tmp_path):
    spec = type("Spec", (), {"name": "agentx", "kind": "aiperf_replay", "command": None})()
    spec.options = {
        **AGENTIC,
        "benchmark_duration_s": 1000,
        "benchmark_grace_period_s": 20,
        "agentic": {"cache_warmup_duration_s": 100},
    }
    notes = aiperf_replay.INSTRUMENT.plan_notes(spec, tmp_path)
    assert notes[
        0
    ] == f"instrument agentx: public dataset {WEKA} (AIPerf's registry, AIPerf's agentic scenario " + (
        "inferencex-agentx-mvp)"
    )
    assert (
        "a launch costs 1,120 s per point (benchmark_duration_s 1000 + grace 20 + cache warm-up 100"
        in notes[1]
    )
    assert "trace-only checks, skipped" in notes[2]
    spec.options = {"generate": {"sessions": 2, "turns": 3}, "benchmark_duration_s": 60}
    notes = aiperf_replay.INSTRUMENT.plan_notes(spec, tmp_path)
    assert "a generated trace per repeat: 6 requests in 2 sessions" in notes[0]
    assert "costs 90 s per point (benchmark_duration_s 60 + grace 30)" in notes[1]  # AIPerf's default grace
    assert "a duration cuts or repeats the trace" in notes[2]
    spec.options = {"generate": {"sessions": 2, "turns": 3}}
    assert len(aiperf_replay.INSTRUMENT.plan_notes(spec, tmp_path)) == 1  # a whole trace: nothing skipped


def test_a_measured_duration_run_past_its_trace_is_not_refused_for_the_count(tmp_path):
    result = {**RESULT, "completed_request_count": {"avg": 3.0}}
    options = {"generate": {"sessions": 2, "turns": 3}, "benchmark_duration_s": 5}
    m = aiperf_replay.measure(fake_venv(tmp_path, result), options, ctx(tmp_path), env={}, repo=tmp_path)
    assert m.metrics["completed"] == 3.0 and "a duration cuts" in m.facts["skipped_checks"]
    with pytest.raises(InvalidPoint, match="3 of the trace's 6 requests completed"):
        aiperf_replay.measure(
            fake_venv(tmp_path / "again", result),
            {"generate": {"sessions": 2, "turns": 3}},
            ctx(tmp_path / "again"),
            env={},
            repo=tmp_path,
        )
