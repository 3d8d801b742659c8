"""The OpenAI-compatible engines (``openai``: any server by command; ``transformers``: transformers
serve): how they read a command, which clients reach them, and what the plan says of the server
counters they cannot give."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from recipe_ledger import engines, instruments
from recipe_ledger.engines import openai_api, transformers_serve
from recipe_ledger.errors import InputError
from recipe_ledger.experiment.engines import (
    check_bars_have_counters,
    check_one_client_per_bar,
    counter_notes,
    counters_not_given,
)
from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.recipes.flags import LaunchCommand

TSERVE = engines.get("transformers")
OPENAI = engines.get("openai")


def command(*argv: str) -> LaunchCommand:
    return LaunchCommand.parse(list(argv))


def test_transformers_serve_reads_the_positional_model_in_both_program_forms():
    for argv in (
        ["transformers", "serve", "/m", "--device", "cpu"],
        ["python3", "-m", "transformers.cli.transformers", "serve", "/m", "--device", "cpu"],
    ):
        assert TSERVE.model_of(command(*argv)) == "/m" and TSERVE.served_model(command(*argv)) == "/m"
        moved = TSERVE.with_model(command(*argv), "/other").render()
        assert "/other" in moved and "/m" not in moved
    assert TSERVE.model_of(command("transformers", "serve", "--device", "cpu")) is None


def test_transformers_serve_runs_from_its_venv_or_the_override(tmp_path, monkeypatch):
    monkeypatch.delenv("RECIPE_LEDGER_TRANSFORMERS", raising=False)
    venv_bin = tmp_path / ".venv-tserve" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "transformers").write_text("#!/bin/sh\n")
    local = TSERVE.with_local_program(command("transformers", "serve", "/m"), tmp_path).render()
    assert local[0] == str(venv_bin / "transformers")
    monkeypatch.setenv("RECIPE_LEDGER_TRANSFORMERS", "/opt/t/bin/transformers")
    assert transformers_serve.find_transformers_bin(tmp_path) == "/opt/t/bin/transformers"
    # Another program (python -m ...) is left as written.
    as_module = command("python3", "-m", "transformers.cli.transformers", "serve", "/m")
    assert TSERVE.with_local_program(as_module, tmp_path).render()[0] == "python3"


def test_a_generic_server_names_its_model_by_its_flags():
    llama = command("llama-server", "-m", "/m.gguf", "--alias", "tiny")
    assert OPENAI.model_of(llama) == "/m.gguf" and OPENAI.served_model(llama) == "tiny"
    tgi = command("text-generation-launcher", "--model-id", "/m")
    assert OPENAI.served_model(tgi) == "/m"
    assert OPENAI.with_model(tgi, "/n").first_value("--model-id") == "/n"
    with pytest.raises(InputError, match="names its model with none of"):
        OPENAI.with_model(command("trtllm-serve", "/m"), "/n")


def test_the_server_counters_each_engine_cannot_give():
    assert counters_not_given("vllm") == ()
    assert counters_not_given("sglang") == ("spec_accept_rate", "tokens_per_step")
    assert counters_not_given("transformers") == (
        "prefix_cache_hit_rate",
        "spec_accept_len",
        "spec_accept_rate",
        "tokens_per_step",
    )


def spec(tmp_path, engine: str, bars: list[dict] | None = None, instrument: dict | None = None):
    body = {
        "name": "own-server",
        "hypothesis": "h",
        "box": "cpu-only",
        "engine": engine,
        "control": {"argv": ["transformers", "serve", "/m"]},
        "candidates": {"vllm": {"engine": "vllm", "argv": ["vllm", "serve", "/m"]}},
        "instruments": [
            instrument
            or {
                "name": "bench",
                "kind": "vllm_bench_serve",
                "options": {"backend": "openai-chat", "endpoint": "/v1/chat/completions"},
            }
        ],
        "points": [1],
        "bars": bars
        or [{"metric": "output_tps_total", "point": 1, "direction": "higher", "min_effect": 0.1}],
    }
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(body))
    return load_experiment(path)


def test_the_plan_names_the_counters_an_engine_without_metrics_cannot_give(tmp_path):
    experiment = spec(tmp_path, "transformers")
    check_one_client_per_bar(experiment)
    check_bars_have_counters(experiment)
    (note,) = counter_notes(experiment)  # vLLM gives them all: one line, transformers'
    assert note.startswith("engine transformers (arms control) has no /metrics counters for")
    assert "prefix_cache_hit_rate" in note and "not measured" in note


def test_a_generic_servers_counters_are_said_to_be_conditional(tmp_path):
    experiment = spec(tmp_path, "openai")
    (note,) = counter_notes(experiment)
    assert "only when it exposes vLLM's counter names" in note


def test_a_bar_on_a_counter_the_engine_cannot_give_is_refused(tmp_path):
    bar = {"metric": "prefix_cache_hit_rate", "point": 1, "direction": "higher", "min_effect": 0.1}
    with pytest.raises(InputError, match=r"arm 'control' \(transformers\) does not have"):
        check_bars_have_counters(spec(tmp_path, "transformers", bars=[bar]))
    check_bars_have_counters(spec(tmp_path, "openai", bars=[bar]))  # conditional: allowed


@pytest.mark.parametrize(
    ("kind", "options", "fields"),
    [
        ("vllm_bench_serve", {"backend": "openai"}, "repetition_penalty and ignore_eos"),
        ("vllm_bench_serve", {"backend": "openai-chat", "endpoint": "/v1/chat/completions"}, "ignore_eos"),
        ("tail", {}, "repetition_penalty and ignore_eos"),
        ("sglang_bench_serving", {"backend": "sglang-oai"}, "ignore_eos"),
    ],
)
def test_clients_that_add_fields_to_the_schema_cannot_measure_transformers_serve(kind, options, fields):
    # transformers serve 5.17 answers 422 "Unexpected fields in the request" to any field outside
    # OpenAI's schema (cli/serving/utils.py, _validate_request); seen for vllm bench serve here.
    instrument = instruments.get(kind)
    spec = SimpleNamespace(name="bench", kind=kind, options=options, command=None)
    served = command("transformers", "serve", "m")
    with pytest.raises(InputError, match=f"refuses request fields outside OpenAI's schema.*sends {fields}"):
        instrument.check_arm(spec, "transformers", "transformers", served)
    instruments.get("openai_bench").check_arm(spec, "transformers", "transformers", served)  # schema only
    instrument.check_arm(spec, "openai", "openai", served)  # a lenient OpenAI server: not refused


def test_a_native_vllm_backend_cannot_talk_to_transformers_serve(tmp_path):
    native = {"name": "bench", "kind": "vllm_bench_serve", "options": {"backend": "vllm"}}
    with pytest.raises(InputError, match="cannot talk to transformers"):
        check_one_client_per_bar(spec(tmp_path, "transformers", instrument=native))


@pytest.mark.parametrize(
    ("status", "body", "problem"),
    [
        (200, json.dumps({"choices": [{"message": {"content": ""}}]}), None),  # an empty answer is an answer
        (200, json.dumps({"choices": [{"text": "hi"}]}), None),
        (200, json.dumps({"choices": []}), "no completion in it"),
        (200, "<html>", "not JSON"),
        (500, "boom", "HTTP 500"),
        (None, "ConnectionRefusedError", "no answer"),
        (200, json.dumps({"choices": [{"delta": {}}]}), "neither text nor a message"),
    ],
)
def test_what_counts_as_a_completion(status, body, problem):
    found = openai_api._choice_problem(status, body)
    assert (found is None) if problem is None else (problem in (found or ""))


# Every counter each engine reads, grown over a point: what comes out must be exactly what the
# engine claims to give (the plan's notes and bar refusals trust ``counter_metric_names``).
VLLM_COUNTERS = {
    "vllm:prefix_cache_hits_total": 30.0,
    "vllm:prefix_cache_queries_total": 60.0,
    "vllm:spec_decode_num_drafts_total": 10.0,
    "vllm:spec_decode_num_draft_tokens_total": 30.0,
    "vllm:spec_decode_num_accepted_tokens_total": 15.0,
    "vllm:iteration_tokens_total_sum": 400.0,
    "vllm:iteration_tokens_total_count": 20.0,
}
SGLANG_COUNTERS = {
    "sglang:cached_tokens_total": 30.0,
    "sglang:prompt_tokens_total": 60.0,
    "sglang:generation_tokens_total": 50.0,
    "sglang:spec_verify_calls_total": 20.0,
}


@pytest.mark.parametrize(
    ("engine", "after"),
    [
        ("vllm", VLLM_COUNTERS),
        ("sglang", SGLANG_COUNTERS),
        ("openai", VLLM_COUNTERS),
        ("transformers", VLLM_COUNTERS),
    ],
)
def test_an_engine_gives_exactly_the_counter_metrics_it_claims(engine, after):
    given = engines.get(engine).counter_metrics({}, after)
    assert set(given) == engines.get(engine).counter_metric_names
