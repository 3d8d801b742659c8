"""Answer agreement (kind ``agreement``): does a candidate still answer what the control answered?

A fixed prompt set, sent greedy (temperature 0) with per-token log-probabilities to the server's
OpenAI ``/v1/completions`` (vLLM and SGLang alike), ``client_concurrency`` requests in flight: a
candidate's batches are as full as its speed was measured at, since batching changes numerics. The
answers of the control's first launch at the point are the reference (``MeasureContext.reference``);
every other measurement is compared with them prompt by prompt (``agreement_compare``). A flag that
damages weights or numerics shows as answers that differ, even when it is faster.

Raw file: ``<stem>.answers.json`` (every prompt's text, ids, log-probabilities, top log-probabilities,
finish reason, and the comparison when there is one), written whole or not at all. A server error, a
timeout, or an answer without token ids or log-probabilities fails the point, naming the prompt.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from recipe_ledger import engines
from recipe_ledger.engines.base import ServerCommand
from recipe_ledger.errors import InputError
from recipe_ledger.instruments import base
from recipe_ledger.instruments.agreement_compare import (
    Answer,
    agreement_items,
    agreement_metrics,
    answer_metrics,
    compare,
    self_agreement,
)
from recipe_ledger.instruments.base import (
    InstrumentError,
    InstrumentKind,
    InstrumentSpec,
    MeasureContext,
    Measurement,
    PointRun,
    sha256_file,
    sha256_json,
)
from recipe_ledger.launch.health import post_json

NAME = "agreement"
CLIENT_VERSION = "agreement/1"  # this module is the client: a change in what it sends or reads bumps it
OPTIONS_HINT = "docs/instruments.md lists the agreement instrument's options"
SHIPPED_PROMPTS = Path(__file__).with_name("data") / "agreement_prompts.jsonl"
ANSWERS_FORMAT = "recipe-ledger/answers"
ANSWERS_VERSION = 1
COMPLETIONS_PATH = "/v1/completions"
_JSONL_KEYS = frozenset({"prompt", "category"})
_JSONL_HINT = 'one {"prompt": "..."} per line'  # and an optional "category"


class AgreementOptions(BaseModel):
    """An ``agreement`` instrument's options (experiment YAML ``options:``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    prompts: str | None = Field(
        default=None,
        description='A prompt file, repository-relative: JSON lines ({"prompt": ...}) or .txt '
        "(one prompt per line); default: the shipped set of 200.",
    )
    max_tokens: int = Field(default=16, ge=1, le=4096, description="Generated tokens per prompt (at most).")
    top_logprobs: int = Field(default=5, ge=1, le=100, description="Top log-probabilities per token.")
    limit: int | None = Field(default=None, ge=1, description="Use the first N prompts.")
    timeout_s: float = Field(default=60.0, gt=0, le=3600, description="Per request.")


def parse_options(options: Mapping[str, Any], instrument: str = NAME) -> AgreementOptions:
    return base.parse_options(AgreementOptions, options, instrument, OPTIONS_HINT)


# --- the prompt set -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptSet:
    """The prompts one measurement sends, and where they came from."""

    source: str  # the repository-relative path, or the shipped set's file name
    prompts: tuple[str, ...]

    @property
    def sha256(self) -> str:
        return sha256_json(list(self.prompts))

    @property
    def instrument_version(self) -> str:
        # A changed prompt set is a different instrument: its answers are not comparable.
        return f"{CLIENT_VERSION} prompts:{self.sha256.removeprefix('sha256:')[:12]}"


def prompt_set(options: AgreementOptions, repo: Path) -> PromptSet:
    """The options' prompts (the shipped set by default), cut to ``limit``; InputError when the
    file is missing or malformed (at file:line) or holds fewer prompts than the limit asks for."""
    path = SHIPPED_PROMPTS if options.prompts is None else repo / options.prompts
    source = f"shipped:{SHIPPED_PROMPTS.name}" if options.prompts is None else options.prompts
    prompts = read_prompts(path)
    if options.limit is not None and options.limit > len(prompts):
        raise InputError(
            f"options.limit {options.limit} is more than the {len(prompts)} prompts the file holds",
            where=str(path),
            hint="lower options.limit or add prompts",
        )
    return PromptSet(source, prompts[: options.limit])


def read_prompts(path: Path) -> tuple[str, ...]:
    """A prompt file: ``.jsonl`` (one object per line, ``prompt`` and an optional ``category``) or
    ``.txt`` (each non-blank line a prompt, as written). Blank lines are skipped."""
    if path.suffix not in (".jsonl", ".txt"):
        raise InputError(
            "a prompt file is .jsonl (one JSON object per line) or .txt (one prompt per line)",
            where=str(path),
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = "options.prompts is relative to the repository"
        raise InputError("no such prompt file", where=str(path), hint=hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the prompt file as UTF-8 text: {exc}", where=str(path)) from None
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if path.suffix == ".txt":
        prompts = tuple(line for _, line in lines)
    else:
        prompts = tuple(_jsonl_prompt(line, f"{path}:{number}") for number, line in lines)
    if not prompts:
        raise InputError("the prompt file holds no prompt", where=str(path))
    return prompts


def _jsonl_prompt(line: str, where: str) -> str:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON ({exc.msg})", where=where, hint=_JSONL_HINT) from None
    if not isinstance(value, dict):
        raise InputError("not a JSON object", where=where, hint=_JSONL_HINT)
    unknown = sorted(set(value) - _JSONL_KEYS)
    if unknown:
        raise InputError(f"unknown keys {unknown}", where=where, hint=_JSONL_HINT + ', "category" optional')
    prompt = value.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise InputError("'prompt' must be a non-empty string", where=where)
    return prompt


# --- asking the server ----------------------------------------------------------------------------


def completion_request(prompt: str, options: AgreementOptions, ctx: MeasureContext) -> dict[str, Any]:
    """One greedy completion with log-probabilities, the same body for vLLM and SGLang."""
    body: dict[str, Any] = {
        "prompt": prompt,
        "temperature": 0,
        "max_tokens": options.max_tokens,
        "logprobs": options.top_logprobs,
        "seed": ctx.seed,
        "return_token_ids": True,  # ids, not the display strings, say what was generated
    }
    if ctx.model_name:
        body["model"] = ctx.model_name  # vLLM answers only its served name; SGLang any
    return body


def ask(url: str, index: int, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """One prompt's answer as the raw file keeps it; an InstrumentError naming the prompt otherwise."""
    status, text = post_json(url, body, timeout_s=timeout_s)
    if status is None:
        message = f"prompt {index}: no answer from the server (timeout {timeout_s:g} s): {text}"
        raise InstrumentError(message, where=url)
    if status != 200:
        raise InstrumentError(f"prompt {index}: HTTP {status}: {server_message(text)}", where=url)
    try:
        response = json.loads(text)
    except ValueError:
        message = f"prompt {index}: HTTP 200 but not JSON: {_one_line(text)}"
        raise InstrumentError(message, where=url) from None
    return {"index": index, "prompt": body["prompt"], **read_choice(response, index, url)}


def server_message(text: str) -> str:
    """The error's own words: vLLM's ``{"error": {"message"}}``, SGLang's flat ``{"message"}``."""
    try:
        body = json.loads(text)
    except ValueError:
        return _one_line(text)
    error = body.get("error") if isinstance(body, dict) else None
    message = (error or {}).get("message") if isinstance(error, dict) else None
    if message is None and isinstance(body, dict):
        message = body.get("message")
    return _one_line(str(message)) if message else _one_line(text)


def read_choice(response: object, index: int, url: str) -> dict[str, Any]:
    """``choices[0]``'s text, finish reason, token ids, log-probabilities and top log-probabilities,
    checked: one of each per generated token, or the point fails naming what is missing."""
    choices = response.get("choices") if isinstance(response, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    if choice is None:
        raise InstrumentError(f"prompt {index}: the answer has no choices[0]", where=url)
    ids = choice.get("token_ids")
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise InstrumentError(
            f"prompt {index}: the answer has no choices[0].token_ids (the server ignored return_token_ids)",
            where=url,
        )
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        logprobs = {}  # the checks below name what is missing
    token_logprobs = _numbers(logprobs.get("token_logprobs"))
    tops = _top_lists(logprobs.get("top_logprobs"))
    if token_logprobs is None or tops is None or not len(token_logprobs) == len(tops) == len(ids):
        raise InstrumentError(
            f"prompt {index}: choices[0].logprobs does not give a log-probability and a top list for "
            f"each of the {len(ids)} generated tokens",
            where=url,
        )
    return {
        "text": choice.get("text"),
        "finish_reason": choice.get("finish_reason"),
        "token_ids": ids,
        "token_logprobs": token_logprobs,
        "top_logprobs": tops,
        "prompt_token_ids": choice.get("prompt_token_ids"),
    }


def _numbers(values: object) -> list[float] | None:
    if not isinstance(values, list) or not all(_is_number(v) for v in values):
        return None
    return [float(v) for v in values]


def _top_lists(values: object) -> list[dict[str, float]] | None:
    if not isinstance(values, list):
        return None
    tops = []
    for top in values:
        if not isinstance(top, dict) or not top or not all(_is_number(v) for v in top.values()):
            return None
        tops.append({str(key): float(v) for key, v in top.items()})
    return tops


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def ask_all(
    base_url: str, bodies: Sequence[dict[str, Any]], concurrency: int, timeout_s: float
) -> list[dict]:
    """Every prompt's answer, in prompt order, ``concurrency`` requests in flight. The first failure
    (in prompt order) fails the point; the requests not yet sent are dropped."""
    url = base_url.rstrip("/") + COMPLETIONS_PATH
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="agreement")
    try:
        futures: list[Future[dict]] = [
            pool.submit(ask, url, index, body, timeout_s) for index, body in enumerate(bodies)
        ]
        return [future.result() for future in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def as_answer(record: Mapping[str, Any]) -> Answer:
    return Answer(tuple(record["token_ids"]), tuple(record["token_logprobs"]), tuple(record["top_logprobs"]))


# --- the raw file and the reference ---------------------------------------------------------------


def answers_path(out_dir: Path, stem: str) -> Path:
    return out_dir / f"{stem}.answers.json"


def write_atomic(path: Path, document: Mapping[str, Any]) -> None:
    """The whole file or none of it: a reader (the next arm's comparison) never sees half."""
    temp = path.with_name(f".{path.name}.tmp")
    with temp.open("w", encoding="utf-8") as handle:
        json.dump(document, handle, sort_keys=True, separators=(",", ":"))  # 200 prompts: ~0.5 MB
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def read_reference(ctx: MeasureContext, prompts: PromptSet, options: AgreementOptions) -> list[dict]:
    """The reference's answer records, from its raw file; an InstrumentError when it is missing or
    was measured with other prompts or options (its answers would not be to the same questions)."""
    path = answers_path(ctx.out_dir, ctx.reference)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InstrumentError(
            f"no reference answers for {ctx.stem}: {ctx.reference} has not been measured; "
            "the control's first launch at this point must be measured first",
            where=str(path),
            hint="the run measures control r1 first (ABBA); a resumed run needs its raw files",
        ) from None
    except (OSError, ValueError) as exc:
        raise InstrumentError(f"cannot read the reference answers: {exc}", where=str(path)) from None
    expected = {"format": ANSWERS_FORMAT, "prompt_set_sha256": prompts.sha256, **_request_options(options)}
    differs = [
        f"{key} {document.get(key)!r} (this one: {value!r})"
        for key, value in expected.items()
        if document.get(key) != value
    ]
    if differs:
        raise InstrumentError(
            f"the reference was measured differently: {', '.join(differs)}",
            where=str(path),
            hint="every arm of a run measures with the same agreement options",
        )
    return list(document["answers"])


def prompt_tokens_differ(reference: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]]) -> int:
    """Prompts the two servers tokenized differently (both said): their answers answer other input,
    which a cross-engine arm's tokenizer (a BOS token, a chat template) can cause, not its numerics."""
    pairs = zip(reference, records, strict=True)
    return sum(
        1
        for expected, got in pairs
        if expected.get("prompt_token_ids") is not None
        and got.get("prompt_token_ids") is not None
        and expected["prompt_token_ids"] != got["prompt_token_ids"]
    )


def _request_options(options: AgreementOptions) -> dict[str, int]:
    return {"max_tokens": options.max_tokens, "top_logprobs": options.top_logprobs}


def answers_document(
    ctx: MeasureContext,
    prompts: PromptSet,
    options: AgreementOptions,
    answers: list[dict],
    comparisons: list[dict] | None,
) -> dict[str, Any]:
    return {
        "format": ANSWERS_FORMAT,
        "version": ANSWERS_VERSION,
        "stem": ctx.stem,
        "reference": ctx.reference,
        "model": ctx.model_name,
        "concurrency": ctx.client_concurrency,
        "prompts": prompts.source,
        "prompt_set_sha256": prompts.sha256,
        **_request_options(options),
        "answers": answers,
        "comparisons": comparisons,  # None: this measurement is the reference
    }


# --- one measurement ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one measurement's answers say, on their own and against the reference's."""

    metrics: dict[str, float]
    items: dict[str, dict[str, float]]
    comparisons: list[dict] | None  # per prompt, for the raw file; None: this is the reference
    facts: dict[str, str]


def as_reference(records: Sequence[Mapping[str, Any]]) -> Outcome:
    """The reference itself: its own numbers, agreement trivially perfect, no items (it is what
    the others are compared with, not evidence)."""
    answers = [as_answer(record) for record in records]
    return Outcome(answer_metrics(answers) | self_agreement(answers), {}, None, {"reference": "self"})


def against(
    reference: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]], name: str
) -> Outcome:
    """This measurement's answers compared with the reference's (``name``), prompt by prompt."""
    answers = [as_answer(record) for record in records]
    pairs = zip(reference, answers, strict=True)
    compared = [compare(as_answer(expected), got) for expected, got in pairs]
    facts = {"reference": name}
    differ = prompt_tokens_differ(reference, records)
    if differ:
        facts["prompt_tokens_differ"] = f"{differ} of {len(records)} prompts"
    metrics = answer_metrics(answers) | agreement_metrics(compared)
    return Outcome(metrics, agreement_items(compared), [c.as_json() for c in compared], facts)


def measure(options: Mapping[str, Any], ctx: MeasureContext, *, repo: Path) -> Measurement:
    """Ask every prompt, keep the answers, and compare them with the reference's (unless this is it)."""
    parsed = parse_options(options)
    prompts = prompt_set(parsed, repo)
    if not ctx.base_url or not ctx.reference:
        raise InstrumentError(f"{ctx.stem}: the agreement instrument needs a server and a reference to name")
    reference = None if ctx.stem == ctx.reference else read_reference(ctx, prompts, parsed)  # fail early
    started = time.monotonic()
    bodies = [completion_request(prompt, parsed, ctx) for prompt in prompts.prompts]
    records = ask_all(ctx.base_url, bodies, ctx.client_concurrency, parsed.timeout_s)
    wall = time.monotonic() - started
    outcome = as_reference(records) if reference is None else against(reference, records, ctx.reference)
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    raw = answers_path(ctx.out_dir, ctx.stem)
    write_atomic(raw, answers_document(ctx, prompts, parsed, records, outcome.comparisons))
    facts = {**outcome.facts, "prompts": prompts.source}
    return Measurement(
        NAME,
        prompts.instrument_version,
        ctx,
        outcome.metrics,
        raw,
        sha256_file(raw),
        wall,
        [],
        facts,
        outcome.items,
    )


# --- before any launch ----------------------------------------------------------------------------


def check_arm(spec: InstrumentSpec, arm: str, engine_name: str, command: ServerCommand) -> None:
    """Refuse an arm whose engine cannot return log-probabilities, or returns fewer than asked."""
    options = parse_options(spec.options, spec.name)
    engine = engines.get(engine_name)
    if engine.logprobs_option is None:
        raise InputError(
            f"instrument {spec.name!r} ({NAME}) needs per-token log-probabilities; engine "
            f"{engine_name!r} cannot return them (no logprobs option)",
            where=f"arm {arm!r}",
            hint="serve this arm with an engine that returns logprobs, or leave this instrument out",
        )
    cap = engine.max_logprobs(command)
    if cap is not None and cap < options.top_logprobs:
        raise InputError(
            f"instrument {spec.name!r} ({NAME}): engine {engine_name!r} returns at most {cap} top "
            f"log-probabilities: --max-logprobs {cap} < top_logprobs {options.top_logprobs}",
            where=f"arm {arm!r}",
            hint="raise --max-logprobs or lower options.top_logprobs",
        )


class Agreement(InstrumentKind):
    kind = NAME
    client = "answers (OpenAI /v1/completions)"
    summary = "greedy answers with log-probabilities, compared with the control's (answer agreement)"
    options_model = AgreementOptions
    options_hint = OPTIONS_HINT
    extra_summary_metrics = (
        "answer_match_rate",
        "top1_agreement",
        "first_divergence_mean",
        "kl_per_token_mean",
    )
    item_metrics = ("answer_match_rate", "top1_agreement")

    def check_before_launch(self, spec: InstrumentSpec, repo: Path, max_model_len: int | None) -> None:
        """The options and the prompt file (present, well formed, enough prompts for ``limit``)."""
        prompt_set(parse_options(spec.options, spec.name), repo)

    def check_arm(self, spec: InstrumentSpec, arm: str, engine: str, command: ServerCommand) -> None:
        check_arm(spec, arm, engine, command)

    def measure(self, run: PointRun) -> Measurement:
        return measure(run.spec.options, run.ctx, repo=run.repo)


INSTRUMENT = Agreement()


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat[:limit] + ("..." if len(flat) > limit else "")
