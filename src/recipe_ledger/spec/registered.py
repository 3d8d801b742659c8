"""A spec field whose value is a name some registry knows (an instrument kind), not a fixed Literal.

The registry is asked when a file is validated and when the JSON Schema is written, so a plugin's
name is as good as a built-in's, and ``ledger experiment schema`` lists the names as an enum, as
it did for the Literal. A wrong value reads as a wrong Literal did (error type ``literal_error``:
"Input should be 'a', 'b' or 'c'"), so messages at file:line stay what they were.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema


@dataclass(frozen=True)
class RegisteredName:
    """``Annotated[str, RegisteredName(names)]``: a string among ``names()``. ``describe``, when
    given, writes the field's schema description from the registry too (what each name means)."""

    names: Callable[[], Sequence[str]]
    describe: Callable[[], str] | None = None

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(self._check)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out: JsonSchemaValue = {"enum": list(self.names()), "type": "string"}
        if self.describe is not None:
            out["description"] = self.describe()
        return out

    def _check(self, value: Any) -> str:
        known = list(self.names())
        if not isinstance(value, str) or value not in known:
            raise PydanticCustomError(
                "literal_error", "Input should be {expected}", {"expected": _one_of(known)}
            )
        return value


def _one_of(names: Sequence[str]) -> str:
    """pydantic's wording for a Literal's values: 'a', 'b' or 'c'."""
    quoted = [repr(name) for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
