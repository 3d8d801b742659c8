"""The functional probes against the real engines serving the tiny model on this CPU: vLLM 0.32
with a tool-call parser and a reasoning parser, vLLM without a tool-call parser, and SGLang 0.5.23
without one. One server per test (booted inside it, so never two at once), every probe of the
configuration sent in one or two measurements.

What the tiny model's random weights do and do not allow (seen on these servers):
- inside a forced call's grammar they choose whitespace (a tab, then a newline...) until the budget
  is gone, and the call never completes (vLLM's hermes and qwen3_xml parsers alike). The tests ban
  the vocabulary's whitespace tokens with ``logit_bias`` through ``extra_body``: what is tested is
  the server's parsing of a completed call, not the model's choice to make one;
- with ``--reasoning-parser qwen3`` thinking is on by default and the tokenizer has no ``</think>``,
  so every token is reasoning: the small budget's ``content`` is empty, and a forced call never
  starts (vLLM holds the call's grammar back until the trace ends). ``enable_thinking: false``
  sends the text to ``content``.

Needs ``./dev serve-setup``: ``require("vllm")``; the SGLang test ``require("sglang")``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from recipe_ledger.instruments import probes
from recipe_ledger.instruments.base import MeasureContext, Measurement
from recipe_ledger.launch.process import ProcessLauncher

from helpers.resources import TINY_MODEL, require
from helpers.servers import tiny_sglang_spec, tiny_vllm_spec

pytestmark = pytest.mark.slow

PARSERS = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3"]
THINKING_OFF = {"chat_template_kwargs": {"enable_thinking": False}}


def byte_level_whitespace_ids(tokenizer_json: Path) -> dict[str, int]:
    """The ids of the tokens that decode to whitespace only, read from a byte-level BPE vocabulary
    (GPT-2's alphabet: printable bytes stand for themselves, the others for chr(256 + n)); as
    ``logit_bias`` entries that ban them."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
    alphabet, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            alphabet[chr(byte)] = byte
        else:
            alphabet[chr(256 + shifted)] = byte
            shifted += 1
    vocab = json.loads(tokenizer_json.read_text())["model"]["vocab"]
    spaces = set(b" \t\n\r\x0b\x0c")
    ids = [i for token, i in vocab.items() if token and all(alphabet.get(c) in spaces for c in token)]
    return {str(i): -100 for i in sorted(ids)}


NO_WHITESPACE = {"logit_bias": byte_level_whitespace_ids(TINY_MODEL / "tokenizer.json")}


@contextmanager
def vllm_server(tmp_path: Path, *flags: str) -> Iterator[str]:
    require("vllm")
    with ProcessLauncher().start(tiny_vllm_spec(tmp_path, "probes-vllm", *flags)) as running:
        yield running.base_url


@contextmanager
def sglang_server(tmp_path: Path, *flags: str) -> Iterator[str]:
    require("sglang")
    with ProcessLauncher().start(tiny_sglang_spec(tmp_path, "probes-sglang", *flags)) as running:
        yield running.base_url


def measure(base_url: str, options: dict, out: Path, arm: str = "candidate") -> Measurement:
    ctx = MeasureContext(arm, 1, 1, 1001, out, base_url, "tiny", str(TINY_MODEL), reference="control-p1-r1")
    measurement = probes.measure(options, ctx)
    for probe in json.loads(measurement.raw_path.read_text())["probes"]:
        print(f"{arm}: {probe['name']}: {'pass' if probe['passed'] else 'FAIL'}: {probe['detail']}")
    return measurement


def details(measurement: Measurement) -> dict[str, dict]:
    return {p["name"]: p for p in json.loads(measurement.raw_path.read_text())["probes"]}


def test_vllm_with_parsers_parses_the_call_refuses_a_bad_effort_and_thinks_away_a_small_budget(tmp_path):
    assert len(NO_WHITESPACE["logit_bias"]) >= 4  # tab, newline, space... the random model's loop
    with vllm_server(tmp_path, *PARSERS) as base_url:
        thinking = measure(
            base_url,
            {
                "reasoning_efforts": ["low", "turbo"],
                "chat_template_kwargs": [{"enable_thinking": False}],
                "extra_body": NO_WHITESPACE,
            },
            tmp_path / "thinking",
            "thinking",
        )
        thinking_off = measure(
            base_url, {"extra_body": {**NO_WHITESPACE, **THINKING_OFF}}, tmp_path / "off", "thinking-off"
        )
    assert thinking.items[probes.PASSED_RATE] == {
        "tool_call": 0.0,  # thinking on: the trace takes every token, the call never starts
        "reasoning_effort=low": 1.0,
        "reasoning_effort=turbo": 0.0,
        'chat_template_kwargs={"enable_thinking":false}': 1.0,
        "small_budget=16": 0.0,
    }
    seen = details(thinking)
    assert "the reasoning trace (message.reasoning, " in seen["tool_call"]["detail"]
    turbo = seen["reasoning_effort=turbo"]
    assert turbo["status"] == 400 and "'turbo'" in turbo["detail"] and "reasoning_effort" in turbo["detail"]
    small = seen["small_budget=16"]
    assert small["detail"].startswith("content empty: the reasoning trace (message.reasoning, ")
    assert small["observed"]["content_chars"] == 0 and small["observed"]["reasoning_chars"] > 0
    assert thinking.metrics == {probes.PASSED_RATE: 2 / 5, probes.TOTAL: 5.0}

    # Thinking off: the call completes and is parsed, the small budget answers in content.
    assert thinking_off.items[probes.PASSED_RATE] == {"tool_call": 1.0, "small_budget=16": 1.0}
    call = details(thinking_off)["tool_call"]["observed"]
    assert call["name"] == probes.TOOL_NAME and json.loads(call["arguments"])["city"] in ("Paris", "Tokyo")


def test_vllm_without_a_tool_parser_refuses_the_call_with_its_400(tmp_path):
    with vllm_server(tmp_path) as base_url:
        m = measure(base_url, {}, tmp_path / "raw", "no-parser")
    assert m.items[probes.PASSED_RATE] == {"tool_call": 0.0, "small_budget=16": 1.0}
    tool = details(m)["tool_call"]
    assert tool["status"] == 400
    assert tool["detail"] == 'HTTP 400: tool_choice="required" requires --tool-call-parser to be set'


def test_sglang_without_a_tool_parser_answers_the_call_as_text(tmp_path):
    with sglang_server(tmp_path) as base_url:
        m = measure(
            base_url, {"reasoning_efforts": ["low", "turbo"], "extra_body": NO_WHITESPACE}, tmp_path, "sglang"
        )
    seen = details(m)
    assert seen["tool_call"]["passed"] is False and seen["tool_call"]["status"] == 200
    assert "the server parsed no tool call" in seen["tool_call"]["detail"]
    assert seen["reasoning_effort=low"]["passed"] is True
    assert (
        seen["reasoning_effort=turbo"]["status"] == 400
        and "turbo" in seen["reasoning_effort=turbo"]["detail"]
    )
    assert seen["small_budget=16"]["passed"] is True
