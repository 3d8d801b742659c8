"""docs/experiments.md, written from the experiment schema: every field of an experiment file.

Generated, not hand-written, so the page cannot drift from what the loader accepts: the field
descriptions live on the pydantic models (``experiment/spec.py``), ``ledger experiment schema``
prints them as JSON Schema for editors, and this renders the same schema for people. A test
regenerates the page and compares (run ``./dev docs`` after changing the spec).
"""

from __future__ import annotations

import json
from typing import Any

from recipe_ledger.experiment.spec import experiment_json_schema

HEADER = """# Experiment file reference

Every field of an experiment file (`experiments/*.yaml`), generated from the schema that
`ledger run` validates against (`./dev docs` rewrites this page; tests/unit/test_docs_reference.py
fails when it is out of date). `ledger experiment schema` prints the same schema as JSON for
editors. Files are strict: an unknown field is an error naming the file and line.

A worked example is `experiments/deepseek-gb300-offload.yaml`, walked through in
[the DeepSeek quickstart](quickstart-deepseek.md); the words (arm, point, bar, MDE, ABBA...) are
defined in [the glossary](glossary.md), and how the verdict is reached in [verdicts](verdicts.md).

An arm (`control:` and each of `candidates:`) is one of four kinds, told apart by `kind:` or by
its main key: `recipe:` ([RecipeArm](#recipearm)), `argv:` ([CommandArm](#commandarm)),
`release:` ([ReleaseArm](#releasearm)) or `params:` ([StudyArm](#studyarm)).
"""

# JSON Schema keywords that bound a value, and how the page writes each.
_CONSTRAINTS = (
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
    ("minProperties", "at least {} entries"),
    ("maxProperties", "at most {} entries"),
    ("pattern", "matches `{}`"),
)


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type_of(schema: dict[str, Any]) -> str:
    """A short, readable type: `int`, `list of [Bar](#bar)`, `"vllm" | "sglang"`..."""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{name.lower()})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " \\| ".join(_type_of(option) for option in schema[key])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type_of(schema.get('items', {}))}"
    if kind == "object":
        values = schema.get("additionalProperties")
        return f"map of name to {_type_of(values)}" if isinstance(values, dict) else "map"
    return {"integer": "int", "number": "number", "string": "string", "boolean": "bool", "null": "null"}.get(
        str(kind), "any"
    )


def _constraints_of(schema: dict[str, Any]) -> list[str]:
    if schema.get("minItems") == 1 or schema.get("minProperties") == 1:
        schema = {key: value for key, value in schema.items() if key not in ("minItems", "minProperties")}
        found = ["not empty"]
    else:
        found = []
    found += [template.format(schema[key]) for key, template in _CONSTRAINTS if key in schema]
    for option in schema.get("anyOf", []):
        found.extend(_constraints_of(option))
    return found


def _default_of(name: str, schema: dict[str, Any], required: set[str]) -> str:
    if name in required:
        return "**required**"
    if "default" in schema:
        return f"`{json.dumps(schema['default'])}`"
    # A default_factory leaves no default in the schema: an empty container, or a model's defaults.
    return {"array": "`[]`", "object": "`{}`"}.get(str(schema.get("type")), "its defaults")


def _cell(text: str) -> str:
    """Table cells are one line; a pipe would end the cell early. Docstrings' ``code`` is Markdown's."""
    return " ".join(text.split()).replace("``", "`").replace("|", "\\|")


def _field_rows(model: dict[str, Any]) -> list[str]:
    required = set(model.get("required", []))
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, schema in model.get("properties", {}).items():
        description = schema.get("description", "")
        constraints = _constraints_of(schema)
        if constraints:
            description = (
                f"{description} ({', '.join(constraints)})" if description else ", ".join(constraints)
            )
        default = _default_of(name, schema, required)
        rows.append(f"| `{name}` | {_type_of(schema)} | {default} | {_cell(description)} |")
    return rows


def _refs_in(schema: Any) -> list[str]:
    """Model names referenced anywhere inside ``schema``, in the order they appear."""
    if isinstance(schema, dict):
        found = [_ref_name(schema["$ref"])] if "$ref" in schema else []
        for value in schema.values():
            found.extend(_refs_in(value))
        return found
    if isinstance(schema, list):
        return [name for item in schema for name in _refs_in(item)]
    return []


def model_order(schema: dict[str, Any]) -> list[str]:
    """The top-level model, then every nested model in the order its first reference appears."""
    order = [str(schema["title"])]
    queue = [schema]
    definitions = schema.get("$defs", {})
    while queue:
        for name in _refs_in(queue.pop(0).get("properties", {})):
            if name not in order:
                order.append(name)
                queue.append(definitions[name])
    return order


def markdown(schema: dict[str, Any] | None = None) -> str:
    """The whole reference page for ``schema`` (default: the experiment schema)."""
    schema = schema or experiment_json_schema()
    definitions = {str(schema["title"]): schema, **schema.get("$defs", {})}
    sections = [HEADER]
    for name in model_order(schema):
        model = definitions[name]
        lines = [f"## {name}", ""]
        if model.get("description"):
            lines += [_cell(model["description"]), ""]
        lines += _field_rows(model)
        sections.append("\n".join(lines) + "\n")
    return "\n".join(sections)


if __name__ == "__main__":
    print(markdown(), end="")
