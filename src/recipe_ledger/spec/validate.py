"""Validate loaded YAML against a pydantic model; errors point at the file, line and field.

pydantic reports a location such as ``("variants", "default", "vram_minimum_gb", "float")``;
the last part names a union member, not a key in the file. The location is walked against the
data so that only the parts that exist in the file reach the message.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails  # the TypedDict of ValidationError.errors() items

from recipe_ledger.errors import SpecError
from recipe_ledger.redact import redact_text
from recipe_ledger.spec.bounds import CREDENTIAL_NAME, SLUG_PATTERN, SLUG_RULE
from recipe_ledger.spec.yamlfile import PathKey, YamlDoc, format_path

ModelT = TypeVar("ModelT", bound=BaseModel)

_EXPECTED = {
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "string_type": "expected a string",
    "bool_type": "expected true or false",
    "list_type": "expected a list",
    "dict_type": "expected a mapping",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "date_type": "expected a date (YYYY-MM-DD)",
    "literal_error": "expected one of the allowed values",
    "missing": "required field is missing",
    "extra_forbidden": "unknown field",
}


def data_path(data: Any, loc: tuple[Any, ...]) -> PathKey:
    """The longest path of keys/indexes present in ``data`` that ``loc`` names in order.

    pydantic puts names that are not keys into ``loc``: a union member's tag (``recipe`` for a
    recipe arm), a validator's name. Such a part may still match a key by accident (an arm's tag
    ``recipe`` is also its ``recipe:`` field), so each part is either followed or skipped and the
    deepest real node wins: ``control.overrides.env.X``, not ``control.recipe``. A key missing
    from the file is named when it is the last part.
    """
    return tuple(_deepest(data, tuple(loc), 0, {}))


def _deepest(node: Any, loc: tuple[Any, ...], at: int, memo: dict) -> list[str | int]:
    # Memoized on (node, position): without it, following-or-skipping is 2**len(loc) walks.
    key = (id(node), at)
    if key not in memo:
        memo[key] = _deepest_uncached(node, loc, at, memo)
    return memo[key]


def _deepest_uncached(node: Any, loc: tuple[Any, ...], at: int, memo: dict) -> list[str | int]:
    if at == len(loc):
        return []
    part = loc[at]
    # Skipping comes first so that it wins a tie: the path that matched the later parts of
    # ``loc`` (the field itself, not a tag that happens to share a key's name) is the one meant.
    options: list[list[str | int]] = [_deepest(node, loc, at + 1, memo)]
    if isinstance(node, dict) and _hashable(part) and part in node or _is_index(node, part):
        options.append([part, *_deepest(node[part], loc, at + 1, memo)])
    elif isinstance(node, dict) and at == len(loc) - 1 and part != "[key]":
        options.append([part])  # a missing key: name it, even though it is not in the file
    return max(options, key=len)


def _hashable(part: Any) -> bool:
    return isinstance(part, (str, int))


def _is_index(node: Any, part: Any) -> bool:
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_error(error: ErrorDetails) -> str:
    """One pydantic error as a sentence: what was expected and what the file holds."""
    kind = error["type"]
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == CREDENTIAL_NAME:
        return error["msg"]  # without the input: it may be a real token
    if kind == "value_error":
        # A validator's own sentence says what is wrong and names the field; the input it was
        # given (often the whole mapping) adds nothing.
        return error["msg"].removeprefix("Value error, ")
    if kind == "string_pattern_mismatch" and (error.get("ctx") or {}).get("pattern") == SLUG_PATTERN:
        return f"expected a name of {SLUG_RULE} characters, got {_shown(error.get('input'))}"
    expected = _EXPECTED.get(kind)
    if expected is None:
        # pydantic's own sentence ("Input should be less than or equal to 100"), and the value.
        return f"{error['msg']}, got {_shown(error.get('input'))}"
    return f"{expected}, got {_shown(error.get('input'))}"


def _best_error(errors: list[ErrorDetails]) -> ErrorDetails:
    """Among union alternatives pydantic reports one error each; prefer the deepest location."""
    return max(errors, key=lambda e: len(e["loc"]))


def validate_doc(doc: YamlDoc, model: type[ModelT], *, what: str = "") -> ModelT:
    """Validate ``doc.data`` as ``model``; a failure is a one-line SpecError at file:line."""
    if not isinstance(doc.data, dict):
        kind = type(doc.data).__name__ if doc.data is not None else "an empty document"
        raise SpecError(
            f"expected a mapping at the top level{what and ' of a ' + what}, got {kind}", where=doc.where()
        )
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        errors = exc.errors()
        first = _best_error(errors)
        path = data_path(doc.data, tuple(first["loc"]))
        more = len({tuple(e["loc"][:2]) for e in errors}) - 1
        suffix = f" (and {more} more problem{'s' * (more > 1)})" if more > 0 else ""
        shown = format_path(path)
        if first["type"] == CREDENTIAL_NAME:  # the path names the key: never echo a token
            shown = redact_text(shown, environ={})
        field = f"{shown}: " if path else ""
        raise SpecError(f"{field}{describe_error(first)}{suffix}", where=doc.where(path)) from None
