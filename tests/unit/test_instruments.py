"""Instrument adapters: argv building, result normalization, server counters, command scripts."""

import sys

import pytest

from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.instruments import command, server_metrics, tail, vllm_bench
from recipe_ledger.instruments.base import InstrumentError, MeasureContext, last_json_object, option_flags

BENCH_RESULT = {
    "completed": 32,
    "failed": 0,
    "duration": 4.2,
    "max_concurrency": 4,
    "request_throughput": 7.6,
    "output_throughput": 487.5,
    "total_token_throughput": 1462.1,
    "median_ttft_ms": 30.5,
    "mean_ttft_ms": 33.0,
    "p99_ttft_ms": 80.1,
    "median_tpot_ms": 8.0,
    "mean_tpot_ms": 8.2,
    "p99_tpot_ms": 9.9,
    "median_itl_ms": 7.9,
    "median_e2el_ms": 540.0,
}


def ctx(tmp_path, **kw):
    base = {
        "arm": "control",
        "point": 4,
        "repeat": 1,
        "seed": 1009,
        "out_dir": tmp_path,
        "base_url": "http://127.0.0.1:8123",
        "model_name": "tiny",
        "tokenizer": "/models/tiny",
    }
    return MeasureContext(**{**base, **kw})


def test_bench_argv_has_the_sweep_point_seed_and_result_file(tmp_path):
    argv = vllm_bench.build_argv("vllm", {"num_prompts": 16}, ctx(tmp_path), tmp_path / "r.json")
    joined = " ".join(argv)
    assert argv[:3] == ["vllm", "bench", "serve"]
    assert "--max-concurrency 4" in joined and "--seed 1009" in joined
    assert "--num-prompts 16" in joined and "--ignore-eos" in joined
    assert "--result-filename r.json" in joined and f"--result-dir {tmp_path}" in joined


def test_bench_result_normalizes_to_named_metrics():
    metrics = vllm_bench.normalize(BENCH_RESULT)
    assert metrics["output_tps_total"] == 487.5
    assert metrics["ttft_ms_p50"] == 30.5 and metrics["ttft_ms_p99"] == 80.1
    assert metrics["decode_tps_per_stream"] == pytest.approx(125.0)
    assert metrics["completed"] == 32 and metrics["duration_s"] == 4.2


PROM_BEFORE = """\
# HELP vllm:prefix_cache_queries_total Prefix cache queries
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="tiny"} 100.0
vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 10.0
vllm:spec_decode_num_drafts_total{engine="0"} 50
vllm:spec_decode_num_draft_tokens_total{engine="0"} 250
vllm:spec_decode_num_accepted_tokens_total{engine="0"} 100
vllm:iteration_tokens_total_sum{engine="0"} 1000
vllm:iteration_tokens_total_count{engine="0"} 100
"""
PROM_AFTER = """\
vllm:prefix_cache_queries_total{engine="0",model_name="tiny"} 300.0
vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 60.0
vllm:spec_decode_num_drafts_total{engine="0"} 150
vllm:spec_decode_num_draft_tokens_total{engine="0"} 750
vllm:spec_decode_num_accepted_tokens_total{engine="0"} 340
vllm:iteration_tokens_total_sum{engine="0"} 3000
vllm:iteration_tokens_total_count{engine="0"} 200
"""


def test_server_counters_become_interval_metrics():
    derived = server_metrics.derive(
        server_metrics.parse_prometheus(PROM_BEFORE), server_metrics.parse_prometheus(PROM_AFTER), VLLM
    )
    assert derived["prefix_cache_hit_rate"] == pytest.approx(50 / 200)
    assert derived["spec_accept_len"] == pytest.approx(1 + 240 / 100)
    assert derived["spec_accept_rate"] == pytest.approx(240 / 500)
    assert derived["tokens_per_step"] == pytest.approx(20.0)


def test_no_metrics_endpoint_gives_nothing_not_an_error():
    assert server_metrics.derive(None, {}, VLLM) == {}
    assert server_metrics.scrape("http://127.0.0.1:9") is None


def test_command_instrument_runs_a_script_and_reads_its_json(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(
        "import json,sys\nprint('warming up')\n"
        "print(json.dumps({'hbm_read_gbps': 100.0 + int(sys.argv[2]), 'arm': sys.argv[1]}))\n"
    )
    template = [sys.executable, str(script), "{arm}", "{point}"]
    measurement = command.measure(template, ctx(tmp_path, arm="uva", point=8), root=tmp_path)
    assert measurement.metrics == {"hbm_read_gbps": 108.0}
    assert measurement.raw_sha256.startswith("sha256:")
    assert measurement.instrument_version.startswith("command:")


def test_command_instruments_log_is_redacted_before_it_is_hashed(tmp_path):
    from recipe_ledger.instruments.base import sha256_file

    script = tmp_path / "leaky.py"
    script.write_text(
        "import json\n"
        "print('connecting to https://alice:S3cr3tPw@db.lab/x with hf_abcdefghijklmnopqrstuvwx')\n"
        "print(json.dumps({'hbm_read_gbps': 1.5}))\n"
    )
    measurement = command.measure([sys.executable, str(script)], ctx(tmp_path), root=tmp_path)
    text = measurement.raw_path.read_text()
    assert "S3cr3tPw" not in text and "hf_abcdefghijklmnopqrstuvwx" not in text
    assert measurement.metrics == {"hbm_read_gbps": 1.5}
    # The hash the entry pins is the redacted file's: the record verifies as it is stored.
    assert measurement.raw_sha256 == sha256_file(measurement.raw_path)


def test_command_instrument_failure_carries_the_output(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("import sys\nprint('CUDA error: out of memory')\nsys.exit(3)\n")
    with pytest.raises(InstrumentError) as info:
        command.measure([sys.executable, str(script)], ctx(tmp_path), root=tmp_path)
    assert "exited with 3" in str(info.value)
    assert "out of memory" in info.value.output_tail


def test_unknown_template_field_is_named(tmp_path):
    with pytest.raises(InstrumentError, match="unknown field"):
        command.fill_template(["x", "{gpu}"], ctx(tmp_path), tmp_path / "o.json")


def test_last_json_object_skips_log_lines():
    assert last_json_object('log\n{"a": 1}\nmore log\n') == {"a": 1}
    with pytest.raises(InstrumentError):
        last_json_object("no json here\n")


def test_the_client_version_is_read_from_its_environment_without_running_it(tmp_path):
    venv = tmp_path / "venv"
    dist = venv / "lib" / "python3.11" / "site-packages" / "vllm-9.8.7+cpu.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 9.8.7+cpu\n")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin").mkdir()
    client = venv / "bin" / "vllm"
    client.write_text("#!/bin/sh\nexit 3\n")  # not executable: running it would fail the test
    vllm_bench.client_version.cache_clear()
    assert vllm_bench.client_version(str(client)) == "vllm 9.8.7+cpu"


def test_outside_a_virtual_environment_the_client_is_asked_for_its_version(tmp_path):
    client = tmp_path / "vllm"
    client.write_text("#!/bin/sh\necho 'INFO some log line'\necho 1.2.3\n")
    client.chmod(0o755)
    vllm_bench.client_version.cache_clear()
    assert vllm_bench.installed_version(client) is None
    assert vllm_bench.client_version(str(client)) == "vllm 1.2.3"


def test_a_zero_option_is_a_value_not_an_absent_flag(tmp_path):
    """`temperature: 0` (greedy, what the tail test asks) once vanished: 0 == False in Python.
    sglang.bench_serving's flags go through the same option_flags."""
    argv = vllm_bench.build_argv(
        "vllm", {"temperature": 0, "ignore_eos": True, "x": False}, ctx(tmp_path), tmp_path / "r.json"
    )
    assert argv[argv.index("--temperature") + 1] == "0" and "--ignore-eos" in argv and "--x" not in argv
    tail_argv = vllm_bench.build_argv(
        "vllm", tail.bench_options(tail.parse_options({})), ctx(tmp_path), tmp_path / "t.json"
    )
    assert tail_argv[tail_argv.index("--temperature") + 1] == "0"
    assert tail_argv[tail_argv.index("--random-range-ratio") + 1] == "0.0"
    assert option_flags({"temperature": 0, "seed": 0.0, "on": True, "off": False, "none": None}) == [
        "--temperature",
        "0",
        "--seed",
        "0.0",
        "--on",
    ]
