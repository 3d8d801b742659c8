"""One version check for every spec file this tool reads (experiment, release, box, recipe superset).

A spec carries ``schema_version``: an integer, 1 or more. Left out, it means the version the
model defaults to. A version newer than this tool is refused *before* the fields are validated:
a newer file may well have fields this tool has never heard of, and "unknown field" would hide the
real reason. Every failure is one line at file:line (exit 2), never a traceback: a quoted
``"2"``, a ``2.0`` or a ``true`` is named for what it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from recipe_ledger.errors import SpecError
from recipe_ledger.spec.validate import validate_doc
from recipe_ledger.spec.yamlfile import PathKey, YamlDoc, format_path, load_yaml

ModelT = TypeVar("ModelT", bound=BaseModel)

FIELD = "schema_version"
UPGRADE_HINT = "pip install -U recipe-ledger"


def version_problem(value: object, current: int) -> tuple[str, str | None] | None:
    """What is wrong with ``value`` as a schema_version this tool (at ``current``) reads, and the
    next step; None when it is fine. The one rule every versioned file follows."""
    if isinstance(value, bool) or not isinstance(value, int):
        shown = f'"{value}"' if isinstance(value, str) else repr(value)
        return f"expected an integer version such as {current}, got {shown}", None
    if value < 1:
        return f"versions start at 1, got {value}", None
    if value > current:
        return f"version {value} is newer than this tool understands ({current})", UPGRADE_HINT
    return None


def check_doc(doc: YamlDoc, current: int, *, at: PathKey = (FIELD,)) -> None:
    """Refuse ``doc`` when the version at ``at`` (when present) is not one this tool reads."""
    node: object = doc.data
    for part in at:
        if not isinstance(node, dict) or part not in node:
            return  # left out: the model's default applies
        node = node[part]
    problem = version_problem(node, current)
    if problem:
        message, hint = problem
        raise SpecError(f"{format_path(at)}: {message}", where=doc.where(at), hint=hint)


def load_versioned(path: Path | str, model: type[ModelT], current: int, *, what: str) -> ModelT:
    """Load a YAML spec, check its ``schema_version`` against ``current``, validate it as ``model``."""
    doc = load_yaml(Path(path))
    check_doc(doc, current)
    return validate_doc(doc, model, what=what)
