"""Functional probes (kind ``probes``): does the served model answer the way the recipe says, before
any speed number is worth reading?

The seeds' authors checked three things by hand on every new launch: a forced tool call comes back
parsed as ``tool_calls``; the reasoning switches and effort values the recipe names are accepted
(``reasoning_effort: medium`` was refused with HTTP 400 on one engine); and with a small token
budget the answer is not empty, because a reasoning trace that eats the budget leaves ``content``
empty, which "looks like a broken model and isn't". Each becomes one probe: one request to
``/v1/chat/completions``, greedy, seeded, one at a time, judged pass or fail.

A probe fails when the server answers and the answer is not what was asked for, an HTTP 4xx
included (the server's own message is the detail). A server that does not answer (refused
connection, timeout, a 5xx, a 200 that is no chat completion) is an ``InstrumentError``: a failed
point, never a failed probe, and never a pass. Every request and response is kept in
``<stem>.probes.json`` (redacted, hashed); the per-probe outcomes are the measurement's items.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from recipe_ledger.instruments import base
from recipe_ledger.instruments.base import (
    InstrumentError,
    InstrumentKind,
    MeasureContext,
    Measurement,
    PointRun,
    sha256_file,
)
from recipe_ledger.redact import redact_obj

NAME = "probes"
# The requests' shapes are the instrument: change a prompt, the tool or a judge and this changes.
VERSION = "probes 1"
RAW_FORMAT = "rl-probes/1"
OPTIONS_HINT = "docs/instruments.md lists the probes' options"
PASSED_RATE = "probes_passed_rate"
TOTAL = "probes_total"

# One tiny tool whose only argument is an enum: with a strict schema and a required choice, vLLM's
# grammar-constrained decoding gets a valid call out of even a random model, so a failure says
# something about the server's parsing, not about the model's wits.
TOOL_NAME = "pick_city"
TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Pick the city the user asks about.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}
TOOL_ARGUMENTS = TOOL["function"]["parameters"]
TOOL_PROMPT = "Which city is the Eiffel Tower in? Call the tool."
QUESTION = "What is 17 * 19? Answer with the number."
# Where each engine puts a reasoning parser's output: vLLM 0.32 `reasoning`, SGLang `reasoning_content`.
REASONING_FIELDS = ("reasoning", "reasoning_content")
SHOWN_CHARS = 120  # how much of an unexpected answer a detail quotes
# What the probes are: extra_body may add to a request, never change these.
OWNED_FIELDS = frozenset({"model", "messages", "tools", "tool_choice", "max_tokens", "temperature", "seed"})


class ProbesOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    tool_call: bool = Field(
        default=True, description="Force one call of a tiny tool (tool_choice: required); pass: tool_calls."
    )
    reasoning_efforts: list[str] = Field(
        default_factory=list, description="One request per value of reasoning_effort; pass: HTTP 200."
    )
    chat_template_kwargs: list[dict[str, Any]] = Field(
        default_factory=list, description="One request per chat_template_kwargs dict; pass: HTTP 200."
    )
    small_budget: int | None = Field(
        default=16, ge=1, description="max_tokens of the empty-answer probe (null: no such probe)."
    )
    max_tokens: int = Field(default=64, ge=1, description="max_tokens of every other probe.")
    timeout_s: float = Field(default=120.0, gt=0, description="Seconds one request may take.")
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Fields every probe's request carries (the OpenAI client's extra_body), "
        "e.g. chat_template_kwargs; a probe's own field of the same name wins.",
    )

    @field_validator("extra_body")
    @classmethod
    def _not_the_probes_own(cls, extra: dict[str, Any]) -> dict[str, Any]:
        owned = sorted(set(extra) & OWNED_FIELDS)
        if owned:
            raise PydanticCustomError(
                "owned_field", "the probes set {fields} themselves", {"fields": ", ".join(owned)}
            )
        return extra

    @field_validator("reasoning_efforts", "chat_template_kwargs")
    @classmethod
    def _each_once(cls, values: list[Any]) -> list[Any]:
        # A probe's name is its item id: two of one name would be one item measured twice.
        texts = [json.dumps(value, sort_keys=True) for value in values]
        repeated = sorted({text for text in texts if texts.count(text) > 1})
        if repeated:
            raise PydanticCustomError("same_probe", "listed twice: {values}", {"values": ", ".join(repeated)})
        return values

    @model_validator(mode="after")
    def _some_probe(self) -> ProbesOptions:
        if not probe_names(self):
            raise PydanticCustomError(
                "no_probe", "no probe to run: enable tool_call or small_budget, or list a value to send"
            )
        return self


def parse_options(options: Mapping[str, Any], instrument: str = NAME) -> ProbesOptions:
    return base.parse_options(ProbesOptions, options, instrument, OPTIONS_HINT)


# -- the probes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """A probe's outcome read from a 200 answer's ``choices[0]``: passed, why, what was seen."""

    passed: bool
    detail: str
    observed: dict[str, Any] = field(default_factory=dict)


Judge = Callable[[dict[str, Any]], Verdict]


@dataclass(frozen=True)
class Probe:
    name: str  # the item id: the same probe has the same name in every arm and launch
    body: dict[str, Any]  # what the probe adds to the common request
    judge: Judge


def kwargs_name(kwargs: Mapping[str, Any]) -> str:
    # Redacted: the name is an item id and a fact, which reach the record unlike the request body.
    shown = redact_obj(dict(kwargs))
    return "chat_template_kwargs=" + json.dumps(shown, sort_keys=True, separators=(",", ":"))


def probe_names(options: ProbesOptions) -> list[str]:
    names = ["tool_call"] if options.tool_call else []
    names += [f"reasoning_effort={value}" for value in options.reasoning_efforts]
    names += [kwargs_name(kwargs) for kwargs in options.chat_template_kwargs]
    if options.small_budget is not None:
        names.append(f"small_budget={options.small_budget}")
    return names


def plan_probes(options: ProbesOptions) -> list[Probe]:
    """The probes ``options`` ask for, in a fixed order (their names are ``probe_names``)."""
    question = [{"role": "user", "content": QUESTION}]
    probes = []
    if options.tool_call:
        body = {
            "messages": [{"role": "user", "content": TOOL_PROMPT}],
            "tools": [TOOL],
            "tool_choice": "required",
            "max_tokens": options.max_tokens,
        }
        probes.append(Probe("tool_call", body, tool_call_judge(options.max_tokens)))
    for value in options.reasoning_efforts:
        body = {"messages": question, "reasoning_effort": value, "max_tokens": options.max_tokens}
        probes.append(Probe(f"reasoning_effort={value}", body, judge_accepted))
    for kwargs in options.chat_template_kwargs:
        body = {"messages": question, "chat_template_kwargs": kwargs, "max_tokens": options.max_tokens}
        probes.append(Probe(kwargs_name(kwargs), body, judge_accepted))
    if options.small_budget is not None:
        # The request as a user sends it, no switches: the server's defaults decide whether the
        # reasoning trace spends the budget (a launch's --default-chat-template-kwargs counts).
        body = {"messages": question, "max_tokens": options.small_budget}
        probes.append(
            Probe(f"small_budget={options.small_budget}", body, small_budget_judge(options.small_budget))
        )
    return probes


def request_body(probe: Probe, ctx: MeasureContext, extra: Mapping[str, Any]) -> dict[str, Any]:
    common: dict[str, Any] = {**extra, "temperature": 0, "seed": ctx.seed}
    if ctx.model_name:
        common["model"] = ctx.model_name
    return {**common, **probe.body}


# -- judges -----------------------------------------------------------------------------------


def _shown(text: object) -> str:
    shown = json.dumps(text) if not isinstance(text, str) else text
    return shown if len(shown) <= SHOWN_CHARS else shown[:SHOWN_CHARS] + "..."


def _parses_as_json(text: object) -> bool:
    if not isinstance(text, str) or not text.strip():
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def reasoning_text(message: Mapping[str, Any]) -> tuple[str | None, str]:
    """The field holding the reasoning trace (the first non-empty of ``REASONING_FIELDS``) and its text."""
    for name in REASONING_FIELDS:
        text = message.get(name)
        if isinstance(text, str) and text:
            return name, text
    return None, ""


def arguments_problem(arguments: object) -> str | None:
    """What is wrong with a call's arguments against the tool's tiny schema, or None."""
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return f"tool_calls[0].function.arguments is no JSON object: {_shown(arguments)}"
    allowed = TOOL_ARGUMENTS["properties"]["city"]["enum"]
    if parsed.get("city") not in allowed:
        return f"tool_calls[0].function.arguments {_shown(arguments)} lack a city out of {allowed}"
    return None


def _no_call(choice: dict[str, Any], budget: int) -> str:
    """Why an answer holds no tool call: the trace or the call ran out of tokens, or the server
    parsed nothing (the call is in the text), or the model answered something else."""
    message = choice.get("message") or {}
    content, finish = message.get("content"), choice.get("finish_reason")
    reasoning_field, reasoning = reasoning_text(message)
    looks_like_a_call = _parses_as_json(content) or TOOL_NAME in str(content or "")
    if finish == "length" and reasoning_field and not str(content or "").strip():
        return (
            f"no tool_calls: the reasoning trace (message.{reasoning_field}, {len(reasoning)} chars) ran to "
            f"the budget of {budget} tokens before any call; turn thinking off for the probes "
            "(extra_body) or raise max_tokens"
        )
    if finish == "length" and looks_like_a_call:
        return (
            f"no tool_calls: the call in message.content was cut off at the budget of {budget} tokens "
            f"({_shown(content)}); raise max_tokens"
        )
    if looks_like_a_call:
        # SGLang without --tool-call-parser still constrains the output to the call's schema
        # and then hands it back as text: the model called, the server parsed nothing.
        return (
            f"no tool_calls: the call came back as text in message.content ({_shown(content)}): "
            "the server parsed no tool call; launch it with a tool-call parser "
            "(vLLM: --enable-auto-tool-choice --tool-call-parser NAME; SGLang: --tool-call-parser NAME)"
        )
    return f"no tool_calls (finish_reason {finish}; content {_shown(content)})"


def tool_call_judge(budget: int) -> Judge:
    def judge(choice: dict[str, Any]) -> Verdict:
        """Passed: ``message.tool_calls[0]`` calls the tool with arguments its schema allows."""
        message = choice.get("message") or {}
        calls = message.get("tool_calls") or []
        observed: dict[str, Any] = {"finish_reason": choice.get("finish_reason"), "tool_calls": len(calls)}
        if not calls:
            return Verdict(False, _no_call(choice, budget), observed)
        function = (calls[0] or {}).get("function") or {}
        name, arguments = function.get("name"), function.get("arguments")
        observed.update(name=name, arguments=arguments)
        if name != TOOL_NAME:
            return Verdict(False, f"tool_calls[0] calls {name!r}, not {TOOL_NAME!r}", observed)
        problem = arguments_problem(arguments)
        if problem:
            return Verdict(False, f"{problem} (finish_reason {choice.get('finish_reason')})", observed)
        return Verdict(True, f"tool_calls[0]: {TOOL_NAME}({_shown(arguments)})", observed)

    return judge


def judge_accepted(choice: dict[str, Any]) -> Verdict:
    """Passed: the server accepted the request (its 200 is the outcome; any 4xx never gets here)."""
    observed = {"finish_reason": choice.get("finish_reason")}
    return Verdict(True, "accepted (HTTP 200)", observed)


def small_budget_judge(budget: int) -> Judge:
    def judge(choice: dict[str, Any]) -> Verdict:
        """Passed: ``message.content`` holds more than whitespace within ``budget`` tokens."""
        message = choice.get("message") or {}
        content = message.get("content")
        content_text = content if isinstance(content, str) else ""
        reasoning_field, reasoning = reasoning_text(message)
        finish = choice.get("finish_reason")
        observed = {
            "content_chars": len(content_text),
            **{f"{name}_chars": len(message.get(name) or "") for name in REASONING_FIELDS},
            "finish_reason": finish,
        }
        if content_text.strip():
            return Verdict(True, f"content: {len(content_text)} chars in {budget} tokens", observed)
        if reasoning_field is None:
            return Verdict(
                False,
                f"content empty and no reasoning (finish_reason {finish}): the model answered nothing",
                observed,
            )
        if finish == "length":
            why = f"the reasoning trace (message.{reasoning_field}, {len(reasoning)} chars) ate the budget"
            hint = "turn thinking off (extra_body, or the launch's chat template defaults) or give it room"
            return Verdict(False, f"content empty: {why} of {budget} tokens; {hint}", observed)
        return Verdict(
            False,
            f"content empty; message.{reasoning_field} holds {len(reasoning)} chars "
            f"(finish_reason {finish}, not the budget)",
            observed,
        )

    return judge


# -- the exchange -----------------------------------------------------------------------------


@dataclass
class Outcome:
    """One probe as the raw file keeps it: the request, the server's answer, the verdict."""

    name: str
    passed: bool
    detail: str
    request: dict[str, Any]
    status: int
    response: Any
    wall_s: float
    observed: dict[str, Any] = field(default_factory=dict)


class Unanswered(Exception):
    """The server did not answer (refused, reset, timed out): no status, no body."""


# The instrument talks to the server its run launched: an http_proxy of the environment must not
# carry a loopback request elsewhere.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _decoded(data: bytes) -> Any:
    text = data.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def post_json(url: str, body: Mapping[str, Any], timeout_s: float) -> tuple[int, Any]:
    """POST ``body`` as JSON: the status and the body (parsed JSON, else text), for any status."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            return response.status, _decoded(response.read())
    except urllib.error.HTTPError as error:  # before OSError: it is one, but it has an answer
        return error.code, _decoded(error.read())
    except (OSError, http.client.HTTPException) as exc:
        raise Unanswered(f"{type(exc).__name__}: {exc}") from None


def server_message(body: Any) -> str:
    """The error's own words: vLLM nests them (``{"error": {"message"}}``), SGLang does not."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str) and error:
            return error
        if body.get("message"):
            return str(body["message"])
    return _shown(body)


def first_choice(body: Any) -> dict[str, Any] | None:
    choices = body.get("choices") if isinstance(body, dict) else None
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        if isinstance(choices[0].get("message"), dict):
            return choices[0]
    return None


def run_probe(
    probe: Probe, ctx: MeasureContext, url: str, options: ProbesOptions
) -> tuple[Outcome, str | None]:
    """One probe: its outcome, and why the point failed when the server did not answer it (None
    otherwise). The outcome is kept either way: the raw file shows what was sent."""
    body = request_body(probe, ctx, options.extra_body)
    start = time.monotonic()
    try:
        status, answer = post_json(url, body, options.timeout_s)
    except Unanswered as exc:
        outcome = Outcome(probe.name, False, str(exc), body, 0, None, time.monotonic() - start)
        return outcome, f"probe {probe.name}: no answer from {url}: {exc}"
    wall = time.monotonic() - start
    if 400 <= status < 500:
        detail = f"HTTP {status}: {server_message(answer)}"
        return Outcome(probe.name, False, detail, body, status, answer, wall), None
    choice = first_choice(answer) if 200 <= status < 300 else None
    if choice is None:
        what = "a 200 that is no chat completion" if 200 <= status < 300 else f"HTTP {status}"
        detail = f"{what}: {server_message(answer)}"
        return Outcome(probe.name, False, detail, body, status, answer, wall), f"probe {probe.name}: {detail}"
    verdict = probe.judge(choice)
    return Outcome(
        probe.name, verdict.passed, verdict.detail, body, status, answer, wall, verdict.observed
    ), None


# -- the raw file -----------------------------------------------------------------------------


def raw_document(ctx: MeasureContext, url: str, outcomes: list[Outcome], error: str | None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "format": RAW_FORMAT,
        "instrument_version": VERSION,
        "url": url,
        "model": ctx.model_name,
        "seed": ctx.seed,
        "probes": [asdict(outcome) for outcome in outcomes],
    }
    if error:
        document["error"] = error
    return document


def write_raw(path: Path, document: Mapping[str, Any]) -> str:
    """Write the raw file whole (temp, fsync, rename: a crash leaves the old file or the new one),
    redacted as an object so that a marker never lands inside the JSON syntax; its hash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(redact_obj(dict(document)), indent=2, sort_keys=True)
    temp = path.with_name(f".{path.name}.tmp")
    with temp.open("w", encoding="utf-8") as handle:
        handle.write(text + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    return sha256_file(path)


# -- one measurement --------------------------------------------------------------------------


def measure(options: Mapping[str, Any], ctx: MeasureContext) -> Measurement:
    """Every probe once against the server at ``ctx.base_url``, one request at a time.

    The probes compare with nothing: ``ctx.reference`` is ignored, and the reference launch gets its
    items like every other launch (a probe's outcome is evidence on its own)."""
    parsed = parse_options(options)
    if not ctx.base_url:
        raise InstrumentError("the probes need a server to ask, and this point has none")
    url = f"{ctx.base_url}/v1/chat/completions"
    raw_path = ctx.out_dir / f"{ctx.stem}.probes.json"
    outcomes: list[Outcome] = []
    start = time.monotonic()
    for probe in plan_probes(parsed):
        outcome, error = run_probe(probe, ctx, url, parsed)
        outcomes.append(outcome)
        if error:
            write_raw(raw_path, raw_document(ctx, url, outcomes, error))
            raise InstrumentError(error, where=str(raw_path), hint="read the server log of this launch")
    wall = time.monotonic() - start
    digest = write_raw(raw_path, raw_document(ctx, url, outcomes, None))
    passed = {outcome.name: 1.0 if outcome.passed else 0.0 for outcome in outcomes}
    failed = [outcome.name for outcome in outcomes if not outcome.passed]
    metrics = {PASSED_RATE: sum(passed.values()) / len(passed), TOTAL: float(len(passed))}
    return Measurement(
        NAME,
        VERSION,
        ctx,
        metrics,
        raw_path,
        digest,
        wall,
        facts={"probes_failed": ", ".join(failed) if failed else "none"},
        items={PASSED_RATE: passed},
    )


class Probes(InstrumentKind):
    kind = NAME
    client = "probes (OpenAI /v1/chat/completions)"
    summary = "functional probes: tool calls parsed, reasoning switches accepted, a small budget answered"
    options_model = ProbesOptions
    options_hint = OPTIONS_HINT
    extra_summary_metrics = (PASSED_RATE,)
    item_metrics = (PASSED_RATE,)

    def measure(self, run: PointRun) -> Measurement:
        return measure(run.spec.options, run.ctx)


INSTRUMENT = Probes()
