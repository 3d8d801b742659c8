"""The tail test: sequential requests through the real client's argv, cache busting, flattery."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from recipe_ledger.errors import InputError
from recipe_ledger.instruments import tail
from recipe_ledger.instruments.base import MeasureContext

FAKE_BENCH = """#!{python}
import json, pathlib, sys
args = sys.argv[1:]
value = lambda flag: args[args.index(flag) + 1]
out = pathlib.Path(value("--result-dir")) / value("--result-filename")
pathlib.Path(out.parent / "argv.json").write_text(json.dumps(args))
out.write_text(json.dumps({{"completed": int(value("--num-prompts")), "failed": 0, "median_ttft_ms": 40.0,
    "p90_ttft_ms": 55.0, "p99_ttft_ms": 900.0, "median_tpot_ms": 5.0, "p99_e2el_ms": 1000.0}}))
"""


def fake_client(tmp_path: Path) -> str:
    path = tmp_path / "vllm"
    path.write_text(FAKE_BENCH.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def test_cache_busting_draws_every_prompt_afresh_and_its_absence_shares_one_prefix():
    busting = tail.bench_options(tail.parse_options({"input_len": 200}))
    assert busting["random_prefix_len"] == 0 and busting["random_input_len"] == 200
    flattered = tail.bench_options(tail.parse_options({"input_len": 200, "cache_busting": False}))
    assert flattered["random_prefix_len"] + flattered["random_input_len"] == 200
    assert flattered["random_input_len"] < 200 / 10  # almost all of each prompt is the shared prefix
    for options in (busting, flattered):
        assert options["temperature"] == 0 and options["random_range_ratio"] == 0 and options["ignore_eos"]


def test_measure_runs_sequentially_whatever_the_point_and_derives_prefill_and_decode(tmp_path):
    ctx = MeasureContext("control", 8, 1, 1008, tmp_path / "raw", "http://127.0.0.1:1", "tiny", "/m")
    m = tail.measure(fake_client(tmp_path), {"requests": 7, "input_len": 120}, ctx, env={})
    argv = json.loads((tmp_path / "raw" / "argv.json").read_text())
    assert argv[argv.index("--max-concurrency") + 1] == "1"
    assert argv[argv.index("--num-prompts") + 1] == "7"
    assert m.instrument == tail.NAME and m.context.point == 8
    assert m.metrics["prefill_tps"] == pytest.approx(120 / (m.metrics["ttft_ms_p50"] / 1000))
    assert m.metrics["decode_tps_per_stream"] == pytest.approx(1000 / m.metrics["tpot_ms_p50"])
    assert m.metrics["ttft_ms_p99"] > m.metrics["ttft_ms_p90"] > m.metrics["ttft_ms_p50"]
    assert m.facts["cache_busting"] == "on"


def test_a_point_the_cache_served_is_flattered_and_says_by_how_much():
    options = {"max_cache_hit_rate": 0.1, "requests": 9}
    allowed = tail.allowed_hit_rate(tail.parse_options(options))
    assert allowed == pytest.approx(0.1 + 1 / 10)  # the bar plus the client's one test prompt in ten
    assert tail.flattery(options, {"prefix_cache_hit_rate": allowed}) is None
    assert tail.flattery(options, {"prefix_cache_hit_rate": allowed + 0.01}) is not None
    assert tail.flattery(options, {}) is None  # no counters: the busting stands alone
    text = tail.flattery({**options, "cache_busting": False}, {"prefix_cache_hit_rate": 0.93})
    assert text and "93%" in text and "flattered" in text and "cache busting off" in text


def test_bad_options_are_one_line_errors():
    with pytest.raises(InputError, match=r"options\.requests: Input should be greater than or equal to 2"):
        tail.parse_options({"requests": 1}, "tail")


def test_two_instruments_of_one_experiment_keep_their_raw_files_apart(tmp_path):
    from recipe_ledger.pipeline.measure import raw_dir
    from recipe_ledger.pipeline.stages import plan_experiment

    repo = Path(__file__).resolve().parents[2]
    plan = plan_experiment(repo / "experiments" / "examples" / "tiny-tail.yaml", repo)
    busting, flattered = plan.experiment.instruments
    assert raw_dir(plan, busting, tmp_path) != raw_dir(plan, flattered, tmp_path)
    single = plan_experiment(repo / "experiments" / "examples" / "tiny-batching.yaml", repo)
    assert raw_dir(single, single.experiment.instruments[0], tmp_path) == tmp_path / "raw"
