"""SGLang's instruments: bench_serving's argv and result line, its /metrics and /server_info, the
prefix-cache flush, and the promise that both engines store a meaning under one name.

The recorded outputs under tests/fixtures/sglang come from a real SGLang 0.5.23 on this CPU
(tests/fixtures/sglang/README.md says how they were made)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from recipe_ledger import metrics
from recipe_ledger.engines import sglang_api
from recipe_ledger.engines.sglang import ENGINE as SGLANG
from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.instruments import server_metrics, sglang_bench, vllm_bench
from recipe_ledger.instruments.base import InstrumentError, MeasureContext, sha256_json
from recipe_ledger.pipeline.measure import PointRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang"
RESULT_TEXT = (FIXTURES / "bench_serving_result.jsonl").read_text()
RESULT = json.loads(RESULT_TEXT.splitlines()[-1])
RECORDED_PROMPTS = 8  # --num-prompts of the recorded run


def ctx(tmp_path: Path, **kw) -> MeasureContext:
    base = {
        "arm": "candidate",
        "point": 4,
        "repeat": 2,
        "seed": 1009,
        "out_dir": tmp_path,
        "base_url": "http://127.0.0.1:30000",
        "model_name": "tiny",
        "tokenizer": "/models/tiny",
    }
    return MeasureContext(**{**base, **kw})


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


# -- argv ----------------------------------------------------------------------------------------


def test_argv_runs_the_module_from_the_venv_with_the_point_seed_and_result_file(tmp_path):
    argv = sglang_bench.build_argv("/v/bin/python", {"num_prompts": 16}, ctx(tmp_path), tmp_path / "r.jsonl")
    assert argv[:3] == ["/v/bin/python", "-m", "sglang.bench_serving"]
    assert flag(argv, "--base-url") == "http://127.0.0.1:30000"
    assert flag(argv, "--max-concurrency") == "4" and flag(argv, "--seed") == "1009"
    assert flag(argv, "--num-prompts") == "16" and flag(argv, "--output-file") == str(tmp_path / "r.jsonl")
    assert flag(argv, "--dataset-name") == "random-ids" and flag(argv, "--random-range-ratio") == "1"
    assert flag(argv, "--model") == "/models/tiny" and flag(argv, "--served-model-name") == "tiny"
    assert argv[argv.index("--disable-tqdm") + 1].startswith("--")  # a bare switch, no "True"


@pytest.mark.parametrize(("engine", "backend"), [("sglang", "sglang-oai"), ("vllm", "vllm")])
def test_the_backend_follows_the_measured_engine(tmp_path, engine, backend):
    argv = sglang_bench.build_argv("py", {}, ctx(tmp_path), tmp_path / "r.jsonl", engine)
    assert flag(argv, "--backend") == backend


def test_an_option_names_the_backend_and_an_unknown_engine_is_refused(tmp_path):
    argv = sglang_bench.build_argv("py", {"backend": "vllm-chat"}, ctx(tmp_path), tmp_path / "r", "sglang")
    assert flag(argv, "--backend") == "vllm-chat"
    with pytest.raises(InstrumentError, match="no backend for engine 'trtllm'"):
        sglang_bench.build_argv("py", {}, ctx(tmp_path), tmp_path / "r", "trtllm")


def test_both_clients_measure_the_same_default_workload():
    for key in ("random_input_len", "random_output_len", "num_prompts"):
        assert sglang_bench.DEFAULT_OPTIONS[key] == vllm_bench.DEFAULT_OPTIONS[key], key


# -- the result line -----------------------------------------------------------------------------


def test_the_recorded_line_normalizes_into_the_vllm_names():
    got = sglang_bench.normalize(RESULT, RECORDED_PROMPTS)
    assert got["output_tps_total"] == RESULT["output_throughput"]
    assert got["total_tps"] == RESULT["total_throughput"]
    assert got["request_rps"] == RESULT["request_throughput"]
    assert got["ttft_ms_p50"] == RESULT["median_ttft_ms"] and got["itl_ms_p99"] == RESULT["p99_itl_ms"]
    assert got["e2el_ms_p90"] == RESULT["p90_e2e_latency_ms"]
    assert got["failed"] == RECORDED_PROMPTS - RESULT["completed"]
    assert got["decode_tps_per_stream"] == pytest.approx(1000.0 / RESULT["median_tpot_ms"])
    assert RESULT["accept_length"] is None and "spec_accept_len" not in got


def test_both_clients_give_the_same_names_for_the_same_meanings():
    vllm_raw = {k: 1.0 for k in ("output_throughput", "total_token_throughput", "request_throughput")}
    vllm_raw |= {"completed": 8, "failed": 0, "duration": 2.0}
    for stat in ("median", "mean", "p90", "p99"):
        vllm_raw |= {f"{stat}_{lat}_ms": 5.0 for lat in ("ttft", "tpot", "itl", "e2el")}
    assert set(sglang_bench.normalize(RESULT, RECORDED_PROMPTS)) == set(vllm_bench.normalize(vllm_raw))


def test_every_name_sglang_gives_is_in_the_table_with_its_sglang_source():
    names = set(sglang_bench.normalize({**RESULT, "accept_length": 2.5}, RECORDED_PROMPTS))
    names |= set(server_metrics.derive(*prometheus_pair(), engine=SGLANG))
    names |= set(server_metrics.derive(*spec_counters(), engine=SGLANG))
    for name in names:
        assert "sglang" in metrics.lookup(name).sources, name


@pytest.mark.parametrize(("reported", "expected"), [(2.5, 2.5), (None, None), (0, None), (0.0, None)])
def test_accept_length_is_kept_only_when_the_server_reported_one(reported, expected):
    got = sglang_bench.normalize({**RESULT, "accept_length": reported})
    assert got.get("spec_accept_len") == expected
    assert "failed" not in got  # not knowing how many prompts were sent, nothing is guessed


def test_the_last_appended_line_is_the_run(tmp_path):
    older = json.dumps({**RESULT, "completed": 1})
    assert sglang_bench.last_result(older + "\n" + RESULT_TEXT, "f")["completed"] == RESULT["completed"]
    with pytest.raises(InstrumentError, match="last line"):
        sglang_bench.last_result(RESULT_TEXT + '{"completed": 3, "dura', "f")  # torn: no older line


def test_the_server_info_snapshot_is_hashed_and_summarized():
    facts = sglang_bench.server_info_facts(RESULT)
    info = RESULT["server_info"]
    reordered = dict(reversed(list(info.items())))
    assert facts["server_info_sha256"] == sha256_json(reordered)
    assert facts["server_info.version"] == info["version"]
    assert facts["server_info.model_path"] == info["model_path"]
    assert facts["server_info.tp_size"] == str(info["tp_size"])
    assert sglang_bench.server_info_facts({**RESULT, "server_info": None}) == {}  # measuring vLLM


def test_a_prefill_decode_split_is_summarized_by_its_decode_role():
    raw = {"server_info": {"decode": [{"version": "9.9", "tp_size": 8}], "prefill": [{"tp_size": 4}]}}
    assert sglang_bench.server_info_facts(raw)["server_info.tp_size"] == "8"


# -- the client, run ----------------------------------------------------------------------------

FAKE_CLIENT = """#!{python}
import sys
argv = sys.argv
out = argv[argv.index("--output-file") + 1]
with open(out, "a") as f:  # like bench_serving: append
    f.write({line!r})
    f.write({line!r})
"""


def fake_venv(tmp_path: Path, line: str, version: str = "0.5.23") -> Path:
    """A venv whose bin/python is a script standing in for bench_serving: it appends ``line``."""
    venv = tmp_path / "venv"
    dist = venv / "lib" / "python3.11" / "site-packages" / f"sglang-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin").mkdir()
    script = venv / "bin" / "python-real"
    script.write_text(FAKE_CLIENT.format(python=sys.executable, line=line))
    script.chmod(0o755)
    (venv / "bin" / "python").symlink_to(script)
    return venv / "bin" / "python"


def test_a_run_reads_its_line_and_keeps_the_server_info_facts(tmp_path):
    python = fake_venv(tmp_path, RESULT_TEXT)
    sglang_bench.client_version.cache_clear()
    m = sglang_bench.measure(str(python), {"num_prompts": RECORDED_PROMPTS}, ctx(tmp_path / "raw"), env={})
    assert m.instrument == "sglang_bench_serving" and m.instrument_version == "sglang 0.5.23"
    assert m.metrics == sglang_bench.normalize(RESULT, RECORDED_PROMPTS)
    assert m.facts["server_info_sha256"] == sha256_json(RESULT["server_info"])
    assert m.facts["client_backend"] == RESULT["backend"]
    assert m.raw_path.name == "candidate-p4-r2.jsonl" and m.raw_sha256.startswith("sha256:")


def test_the_version_comes_from_the_venv_the_python_sits_in_not_where_it_points(tmp_path):
    python = fake_venv(tmp_path, RESULT_TEXT, version="7.7.7")
    sglang_bench.client_version.cache_clear()
    assert sglang_bench.client_version(str(python)) == "sglang 7.7.7"


def test_a_run_where_nothing_completed_fails_the_point(tmp_path):
    python = fake_venv(tmp_path, json.dumps({**RESULT, "completed": 0}) + "\n")
    sglang_bench.client_version.cache_clear()
    with pytest.raises(InstrumentError, match="no request completed at concurrency 4"):
        sglang_bench.measure(str(python), {}, ctx(tmp_path / "raw"), env={})


def test_a_missing_venv_is_named_before_anything_runs(tmp_path):
    sglang_bench.client_version.cache_clear()
    with pytest.raises(InstrumentError, match="no sglang client at") as info:
        sglang_bench.measure(str(tmp_path / "nowhere" / "python"), {}, ctx(tmp_path / "raw"), env={})
    assert info.value.hint and not (tmp_path / "raw").exists()


# -- the server's own numbers -------------------------------------------------------------------


def prometheus_pair() -> tuple[server_metrics.Samples, server_metrics.Samples]:
    return (
        server_metrics.parse_prometheus((FIXTURES / "metrics_before.txt").read_text()),
        server_metrics.parse_prometheus((FIXTURES / "metrics_after.txt").read_text()),
    )


def spec_counters() -> tuple[server_metrics.Samples, server_metrics.Samples]:
    # Transcribed (no speculative SGLang runs on this CPU): 600 tokens in 200 verify calls.
    before = {"sglang:generation_tokens_total": 100.0, "sglang:spec_verify_calls_total": 40.0}
    after = {"sglang:generation_tokens_total": 700.0, "sglang:spec_verify_calls_total": 240.0}
    return before, after


def test_the_recorded_counters_give_the_prefix_cache_hit_rate():
    before, after = prometheus_pair()
    derived = server_metrics.derive(before, after, engine=SGLANG)
    # Recorded: prompt tokens 19 (the readiness request) -> 19 + 405 (the run, streaming, another
    # label set: summed); cached tokens absent -> 35 (the series appears at the first hit).
    assert derived == {"prefix_cache_hit_rate": pytest.approx(35 / 405)}


def test_verify_calls_give_the_accept_length_and_no_rate_is_invented():
    derived = server_metrics.derive(*spec_counters(), engine=SGLANG)
    assert derived["spec_accept_len"] == pytest.approx(600 / 200)
    assert "spec_accept_rate" not in derived and "tokens_per_step" not in derived


def test_sglang_counters_mean_nothing_to_the_vllm_derivation_and_the_reverse():
    before, after = prometheus_pair()
    assert server_metrics.derive(before, after, engine=VLLM) == {}
    vllm_after = {"vllm:prefix_cache_hits_total": 5.0, "vllm:prefix_cache_queries_total": 10.0}
    assert server_metrics.derive({}, vllm_after, engine=SGLANG) == {}


def test_the_accept_length_of_server_info():
    states = {"internal_states": [{"avg_spec_accept_length": 3.2}]}
    assert sglang_api.accept_length_of(states) == 3.2
    assert sglang_api.accept_length_of({"decode": [states], "prefill": [{}]}) == 3.2
    assert sglang_api.accept_length_of(RESULT["server_info"]) is None  # no speculation
    assert sglang_api.accept_length_of({"internal_states": []}) is None
    assert sglang_api.accept_length_of(None) is None


def test_no_server_info_endpoint_gives_no_accept_length_not_an_error():
    assert sglang_api.server_info_accept_length("http://127.0.0.1:9") is None
    assert (
        server_metrics.point_metrics(*spec_counters(), "http://127.0.0.1:9", SGLANG)["spec_accept_len"] == 3
    )


# -- the record ----------------------------------------------------------------------------------


def test_a_record_keeps_its_facts_and_one_without_reads_as_before():
    plain = json.loads(PointRecord("a", 1, 4, "bench", "vllm 1", 7, {"x": 1.0}).to_json())
    assert "facts" not in plain
    facts = {"server_info_sha256": "sha256:ab"}
    kept = json.loads(PointRecord("a", 1, 4, "bench", "sglang 1", 7, {}, facts=facts).to_json())
    assert kept["facts"] == facts
