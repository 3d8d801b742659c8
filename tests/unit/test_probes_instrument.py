"""The functional probes against a stand-in chat server answering as vLLM or SGLang would: a tool
call parsed or not, an effort value refused with a 400, the reasoning trace eating a small budget,
and a server that does not answer (a failed point, never a pass)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipe_ledger import instruments, metrics
from recipe_ledger.errors import InputError
from recipe_ledger.experiment.spec import Instrument
from recipe_ledger.instruments import probes
from recipe_ledger.instruments.base import InstrumentError, MeasureContext, sha256_file

from helpers.fake_chat import ChatBehaviour, FakeChat

NO_SMALL_BUDGET = {"small_budget": None}


def ctx_for(base_url: str, tmp_path: Path, arm: str = "candidate", repeat: int = 2) -> MeasureContext:
    return MeasureContext(
        arm, 1, repeat, 4242, tmp_path / "raw", base_url, "tiny", "/m", reference="control-p1-r1"
    )


def measure(behaviour: ChatBehaviour, options: dict, tmp_path: Path, arm: str = "candidate", repeat: int = 2):
    with FakeChat(behaviour) as chat:
        measurement = probes.measure(options, ctx_for(chat.base_url, tmp_path, arm, repeat))
    return measurement, chat.requests


def raw_probes(measurement) -> dict[str, dict]:
    document = json.loads(measurement.raw_path.read_text())
    return {probe["name"]: probe for probe in document["probes"]}


# --- options -------------------------------------------------------------------------------------


def test_the_defaults_probe_a_tool_call_and_a_small_budget():
    options = probes.parse_options({})
    assert probes.probe_names(options) == ["tool_call", "small_budget=16"]
    assert (options.max_tokens, options.timeout_s) == (64, 120.0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tool_call": False, "small_budget": None}, r"options: no probe to run"),
        ({"reasoning_efforts": ["low", "low"]}, r'options\.reasoning_efforts: listed twice: "low"'),
        ({"small_budget": 0}, r"options\.small_budget: Input should be greater than or equal to 1"),
        ({"reasoning_effort": ["low"]}, r"options\.reasoning_effort: Extra inputs are not permitted"),
        ({"chat_template_kwargs": [True]}, r"options\.chat_template_kwargs\.0: Input should be a valid dict"),
        (
            {"extra_body": {"max_tokens": 4, "seed": 1}},
            r"options\.extra_body: the probes set max_tokens, seed",
        ),
    ],
)
def test_bad_options_are_refused_before_any_launch_naming_the_field(options, message):
    spec = Instrument(name="probe", kind="probes", options=options)
    with pytest.raises(InputError, match=rf"instrument 'probe': {message}"):
        instruments.get("probes").check_before_launch(spec, Path("."), None)


# --- a server that answers -----------------------------------------------------------------------


def test_each_probe_is_one_item_and_the_passed_rate_is_their_mean(tmp_path):
    options = {
        "reasoning_efforts": ["low", "turbo"],
        "chat_template_kwargs": [{"enable_thinking": False}],
    }
    m, requests = measure(ChatBehaviour(), options, tmp_path)
    items = m.items[probes.PASSED_RATE]
    assert items == {
        "tool_call": 1.0,
        "reasoning_effort=low": 1.0,
        "reasoning_effort=turbo": 0.0,
        'chat_template_kwargs={"enable_thinking":false}': 1.0,
        "small_budget=16": 1.0,
    }
    assert m.metrics == {probes.PASSED_RATE: pytest.approx(4 / 5), probes.TOTAL: 5.0}
    assert m.facts == {"probes_failed": "reasoning_effort=turbo"}
    assert set(m.metrics) <= set(metrics.METRICS)
    # One request per probe, greedy, seeded with the point's seed, for the served model.
    assert len(requests) == 5
    assert all((r["temperature"], r["seed"], r["model"]) == (0, 4242, "tiny") for r in requests)
    assert [r.get("reasoning_effort") for r in requests[1:3]] == ["low", "turbo"]
    assert requests[-1]["max_tokens"] == 16 and requests[0]["max_tokens"] == 64


def test_an_effort_value_the_server_refuses_is_a_failed_probe_with_the_server_s_words(tmp_path):
    m, _ = measure(ChatBehaviour(), {"reasoning_efforts": ["medium", "turbo"], **NO_SMALL_BUDGET}, tmp_path)
    refused = raw_probes(m)["reasoning_effort=turbo"]
    assert refused["passed"] is False and refused["status"] == 400
    assert refused["detail"].startswith("HTTP 400: 1 validation error")
    assert "'turbo'" in refused["detail"]
    assert refused["response"]["error"]["code"] == 400  # the body is kept as the server sent it
    assert raw_probes(m)["reasoning_effort=medium"]["passed"] is True


def test_a_parsed_tool_call_passes_with_its_arguments(tmp_path):
    m, requests = measure(ChatBehaviour(), NO_SMALL_BUDGET, tmp_path)
    tool = raw_probes(m)["tool_call"]
    assert tool["passed"] is True and tool["observed"]["arguments"] == '{"city": "Paris"}'
    sent = requests[0]
    assert sent["tool_choice"] == "required" and sent["tools"] == [probes.TOOL]
    assert sent["tools"][0]["function"]["strict"] is True


def test_vllm_without_a_tool_parser_refuses_the_call_and_the_probe_fails_with_its_message(tmp_path):
    m, _ = measure(ChatBehaviour(tool_parser=False), NO_SMALL_BUDGET, tmp_path)
    assert m.items[probes.PASSED_RATE] == {"tool_call": 0.0} and m.metrics[probes.PASSED_RATE] == 0.0
    detail = raw_probes(m)["tool_call"]["detail"]
    assert detail == 'HTTP 400: tool_choice="required" requires --tool-call-parser to be set'


def test_sglang_without_a_tool_parser_answers_json_text_and_the_probe_names_the_missing_parser(tmp_path):
    m, _ = measure(ChatBehaviour(engine="sglang", tool_parser=False), NO_SMALL_BUDGET, tmp_path)
    tool = raw_probes(m)["tool_call"]
    assert tool["passed"] is False and tool["status"] == 200
    assert "the call came back as text in message.content" in tool["detail"]
    assert "--tool-call-parser NAME" in tool["detail"]


def test_a_call_of_another_tool_fails(tmp_path):
    m, _ = measure(ChatBehaviour(tool_name="get_time"), NO_SMALL_BUDGET, tmp_path)
    assert raw_probes(m)["tool_call"]["detail"] == "tool_calls[0] calls 'get_time', not 'pick_city'"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"city": "Par', "arguments is no JSON object"),
        ('"Paris"', "arguments is no JSON object"),
        (None, "arguments is no JSON object"),
        ("{}", "lack a city out of ['Paris', 'Tokyo']"),  # vLLM's qwen3_xml parser, cut off inside the call
        ('{"city": "Rome"}', "lack a city out of"),
    ],
)
def test_tool_arguments_the_tool_s_schema_does_not_allow_fail(arguments, problem, tmp_path):
    m, _ = measure(ChatBehaviour(tool_arguments=arguments), NO_SMALL_BUDGET, tmp_path)
    tool = raw_probes(m)["tool_call"]
    assert tool["passed"] is False and problem in tool["detail"]


def test_a_call_cut_off_at_the_budget_says_so_and_not_that_a_parser_is_missing(tmp_path):
    m, _ = measure(ChatBehaviour(call_completes=False), NO_SMALL_BUDGET, tmp_path)
    detail = raw_probes(m)["tool_call"]["detail"]
    assert "was cut off at the budget of 64 tokens" in detail and "parser" not in detail


def test_a_thinking_server_spends_the_tool_probe_s_budget_on_reasoning_unless_extra_body_turns_it_off(
    tmp_path,
):
    thinking = ChatBehaviour(thinking=True)
    m, _ = measure(thinking, NO_SMALL_BUDGET, tmp_path / "on")
    detail = raw_probes(m)["tool_call"]["detail"]
    assert detail.startswith("no tool_calls: the reasoning trace (message.reasoning, ")
    assert "ran to the budget of 64 tokens before any call" in detail
    off = {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}, "small_budget": 16}
    m, requests = measure(ChatBehaviour(thinking=True), off, tmp_path / "off")
    assert m.items[probes.PASSED_RATE] == {"tool_call": 1.0, "small_budget=16": 1.0}
    assert all(r["chat_template_kwargs"] == {"enable_thinking": False} for r in requests)


def test_extra_body_joins_every_request_and_a_probe_s_own_field_wins(tmp_path):
    options = {
        "extra_body": {"chat_template_kwargs": {"enable_thinking": False}, "logit_bias": {"200": -100}},
        "chat_template_kwargs": [{"enable_thinking": True}],
        "tool_call": False,
    }
    _, requests = measure(ChatBehaviour(), options, tmp_path)
    assert all(r["logit_bias"] == {"200": -100} for r in requests)
    assert [r["chat_template_kwargs"] for r in requests] == [
        {"enable_thinking": True},
        {"enable_thinking": False},
    ]


@pytest.mark.parametrize(("engine", "field"), [("vllm", "reasoning"), ("sglang", "reasoning_content")])
def test_a_reasoning_trace_that_eats_a_small_budget_fails_and_says_so(engine, field, tmp_path):
    m, _ = measure(ChatBehaviour(engine=engine, thinking=True), {"tool_call": False}, tmp_path)
    small = raw_probes(m)["small_budget=16"]
    assert small["passed"] is False
    assert small["detail"].startswith(f"content empty: the reasoning trace (message.{field}, ")
    assert "ate the budget of 16 tokens" in small["detail"]
    assert small["observed"]["content_chars"] == 0 and small["observed"][f"{field}_chars"] > 0
    assert small["observed"]["finish_reason"] == "length"


def test_with_thinking_off_the_small_budget_answers(tmp_path):
    # The same server, its default switched off the way a request's kwargs switch it: content.
    verdict = probes.small_budget_judge(16)(
        {"message": {"content": "323", "reasoning": None}, "finish_reason": "length"}
    )
    assert verdict.passed and verdict.observed["content_chars"] == 3
    m, _ = measure(ChatBehaviour(thinking=False), {"tool_call": False}, tmp_path)
    assert m.items[probes.PASSED_RATE] == {"small_budget=16": 1.0}


def test_empty_content_without_reasoning_is_no_answer():
    verdict = probes.small_budget_judge(8)({"message": {"content": "  \n"}, "finish_reason": "stop"})
    assert (
        verdict.passed is False and "no reasoning" in verdict.detail and "answered nothing" in verdict.detail
    )


def test_the_reference_launch_keeps_its_items_too(tmp_path):
    m, _ = measure(ChatBehaviour(), {}, tmp_path, arm="control", repeat=1)
    assert m.context.stem == m.context.reference == "control-p1-r1"
    assert m.items == {probes.PASSED_RATE: {"tool_call": 1.0, "small_budget=16": 1.0}}


def test_the_raw_file_keeps_every_request_and_answer_hashed_and_redacted(tmp_path):
    secret = "sk-" + "a1B2c3D4" * 5
    options = {"chat_template_kwargs": [{"api_key": secret}], **NO_SMALL_BUDGET}
    m, requests = measure(ChatBehaviour(), options, tmp_path)
    assert m.raw_path == tmp_path / "raw" / "candidate-p1-r2.probes.json"
    assert m.raw_sha256 == sha256_file(m.raw_path)
    text = m.raw_path.read_text()
    assert secret in json.dumps(requests)  # it was sent (the server needs what the spec says)...
    assert secret not in text and secret not in json.dumps(m.items)  # ...and kept nowhere
    document = json.loads(text)
    assert document["format"] == probes.RAW_FORMAT and document["seed"] == 4242
    assert [p["request"]["messages"] for p in document["probes"]] == [r["messages"] for r in requests]
    assert all(p["status"] == 200 and p["response"]["choices"] for p in document["probes"])


# --- a server that does not answer ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("behaviour", "said"),
    [
        (ChatBehaviour(status=500), "HTTP 500: EngineCore encountered an issue"),
        (ChatBehaviour(status=503, engine="sglang"), "HTTP 503: EngineCore encountered an issue"),
        (ChatBehaviour(close_without_answer=True), "no answer from"),
        (ChatBehaviour(delay_s=2.0), "no answer from"),
    ],
)
def test_a_server_that_does_not_answer_fails_the_point_never_a_probe(behaviour, said, tmp_path):
    with pytest.raises(InstrumentError, match=said) as caught:
        measure(behaviour, {"timeout_s": 0.3}, tmp_path)
    assert "probe tool_call" in str(caught.value)
    raw = tmp_path / "raw" / "candidate-p1-r2.probes.json"
    assert caught.value.where == str(raw)
    document = json.loads(raw.read_text())
    assert document["error"] and [p["passed"] for p in document["probes"]] == [False]


def test_nothing_listening_is_an_instrument_error(tmp_path):
    with FakeChat() as chat:
        base_url = chat.base_url  # the port is free again once the server is gone
    with pytest.raises(InstrumentError, match="probe tool_call: no answer from"):
        probes.measure({}, ctx_for(base_url, tmp_path))


# --- the registry --------------------------------------------------------------------------------


def test_the_kind_is_registered_as_a_quality_instrument():
    kind = instruments.get("probes")
    assert kind is probes.INSTRUMENT and kind.measures_quality
    assert kind.item_metrics == (probes.PASSED_RATE,)
    assert kind.client == "probes (OpenAI /v1/chat/completions)"
