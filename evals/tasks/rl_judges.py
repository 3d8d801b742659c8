"""How the shipped tasks judge an answer (lm-eval ``process_results`` hooks; the task YAMLs name
them as ``!function rl_judges.NAME``). lm-eval imports this file in its own venv (.venv-eval), so it
uses the standard library only. Each judge returns one 0/1 metric: an item's outcome."""

from __future__ import annotations

import json
import re

# lm-eval's stand-in for an answer whose content was null (lm_eval.models.api_models); an empty
# answer by another name.
NONE_PLACEHOLDER = "LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER"
_THINK_CLOSED = re.compile(r"<think>.*?</think>", re.DOTALL)


def _answer(results: list) -> str:
    text = results[0] if results else ""
    return "" if not isinstance(text, str) or text.strip() == NONE_PLACEHOLDER else text


def first_json_object(text: str) -> object:
    """The first JSON value that starts at a ``{`` of ``text``, or None."""
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char == "{":
            try:
                return decoder.raw_decode(text, start)[0]
            except ValueError:
                continue
    return None


def tool_call(doc: dict, results: list) -> dict[str, float]:
    """Correct: the answer's first JSON object is ``{"name": <the tool>, "arguments": <exactly the
    expected arguments>}`` (numbers compare as numbers: 10 and 10.0 are one argument)."""
    call = first_json_object(_answer(results))
    correct = (
        isinstance(call, dict)
        and call.get("name") == doc["name"]
        and call.get("arguments") == doc["arguments"]
    )
    return {"call_correct": 1.0 if correct else 0.0}


def after_reasoning(text: str) -> str:
    """The answer without its reasoning trace: closed ``<think>`` blocks removed, and everything
    after an unclosed ``<think>`` dropped (the budget ran out inside the trace)."""
    text = _THINK_CLOSED.sub("", text)
    return text.split("<think>", 1)[0].strip()


def budget_answer(doc: dict, results: list) -> dict[str, float]:
    """Correct: the answer left after any reasoning trace is not empty and holds the expected word
    or number as a whole word (case-insensitive)."""
    answer = after_reasoning(_answer(results))
    expected = re.compile(rf"(?<![\w-]){re.escape(str(doc['answer']))}(?!\w)", re.IGNORECASE)
    return {"answered_correctly": 1.0 if answer and expected.search(answer) else 0.0}
