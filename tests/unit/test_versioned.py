"""One schema_version check for every spec file: experiment, release, box and the recipe superset."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import SpecError
from recipe_ledger.experiment.spec import EXPERIMENT_SCHEMA_VERSION, load_experiment
from recipe_ledger.recipes.boxes import BOX_SCHEMA_VERSION, load_box_file
from recipe_ledger.recipes.models import MEMORY_SCHEMA_VERSION, Recipe
from recipe_ledger.releases.spec import RELEASE_SPEC_SCHEMA_VERSION, load_release_spec
from recipe_ledger.spec.validate import validate_doc
from recipe_ledger.spec.versioned import version_problem
from recipe_ledger.spec.yamlfile import load_yaml

REPO = Path(__file__).resolve().parents[2]
VERSION_LINE = re.compile(r"^schema_version:.*$", re.MULTILINE)

SPECS = [
    pytest.param(
        REPO / "experiments/examples/tiny-lane.yaml",
        load_experiment,
        EXPERIMENT_SCHEMA_VERSION,
        id="experiment",
    ),
    pytest.param(
        REPO / "recipes/releases/tiny-cpu/v1.yaml",
        load_release_spec,
        RELEASE_SPEC_SCHEMA_VERSION,
        id="release",
    ),
    pytest.param(REPO / "recipes/boxes/cpu-only.yaml", load_box_file, BOX_SCHEMA_VERSION, id="box"),
]


def with_version(source: Path, tmp_path: Path, value: str | None) -> tuple[Path, int]:
    """A copy of ``source`` whose schema_version line is ``value`` (None: no such line), and the
    line number it is on."""
    text = VERSION_LINE.sub("", source.read_text())
    lines = text.splitlines()
    first_key = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    if value is not None:
        lines.insert(first_key, f"schema_version: {value}")
    path = tmp_path / source.name
    path.write_text("\n".join(lines) + "\n")
    return path, first_key + 1


@pytest.mark.parametrize(("source", "load", "current"), SPECS)
def test_the_current_version_and_a_missing_one_load(source, load, current, tmp_path):
    written, _ = with_version(source, tmp_path, str(current))
    assert load(written).schema_version == current
    missing, _ = with_version(source, tmp_path, None)
    assert load(missing).schema_version == current


@pytest.mark.parametrize(("source", "load", "current"), SPECS)
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"2"', 'expected an integer version such as {current}, got "2"'),
        ("2.0", "expected an integer version such as {current}, got 2.0"),
        ("true", "expected an integer version such as {current}, got True"),
        ("0", "versions start at 1, got 0"),
    ],
)
def test_a_version_that_is_not_a_positive_integer_is_one_line_at_its_line(
    source, load, current, value, expected, tmp_path
):
    path, line = with_version(source, tmp_path, value)
    with pytest.raises(SpecError) as info:
        load(path)
    assert str(info.value) == f"{path}:{line}: schema_version: {expected.format(current=current)}"
    assert info.value.exit_code == 2


@pytest.mark.parametrize(("source", "load", "current"), SPECS)
def test_a_newer_version_is_refused_before_its_unknown_fields(source, load, current, tmp_path):
    path, line = with_version(source, tmp_path, str(current + 8))
    path.write_text(path.read_text() + "a_field_from_the_future: {deep: {er: 1}}\n")
    with pytest.raises(SpecError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: schema_version: version {current + 8} is newer than this tool")
    assert "unknown field" not in message and "pip install -U recipe-ledger" in message


def test_the_rule_itself():
    assert version_problem(1, 1) is None
    assert version_problem(1, 3) is None  # older versions are read (models default what they lack)
    assert version_problem(4, 3) == (
        "version 4 is newer than this tool understands (3)",
        "pip install -U recipe-ledger",
    )
    assert version_problem(None, 1) is not None and version_problem([1], 1) is not None


TINY = REPO / "recipes/models/recipe-ledger/tiny-qwen2.yaml"


def recipe_with_memory_version(tmp_path: Path, value: str) -> Path:
    text = TINY.read_text()
    assert "\nmemory:\n" in text
    path = tmp_path / "tiny.yaml"
    path.write_text(text.replace("\nmemory:\n", f"\nmemory:\n  schema_version: {value}\n", 1))
    return path


def test_the_recipe_superset_block_is_versioned_by_the_same_rule(tmp_path):
    assert (
        validate_doc(load_yaml(recipe_with_memory_version(tmp_path, "1")), Recipe).memory.schema_version == 1
    )
    path = recipe_with_memory_version(tmp_path, str(MEMORY_SCHEMA_VERSION + 1))
    doc = load_yaml(path)
    with pytest.raises(SpecError) as info:
        validate_doc(doc, Recipe)
    line = doc.line_of(("memory", "schema_version"))
    assert str(info.value).startswith(
        f"{path}:{line}: memory.schema_version: version 2 is newer than this tool"
    )
    quoted = recipe_with_memory_version(tmp_path, '"1"')
    with pytest.raises(
        SpecError, match='memory.schema_version: expected an integer version such as 1, got "1"'
    ):
        validate_doc(load_yaml(quoted), Recipe)


def test_a_quoted_version_in_an_experiment_is_one_line_and_exit_2_through_the_cli(tmp_path):
    """The issue's check: `schema_version: "2"` once ended in a TypeError traceback."""
    root = tmp_path / "repo"
    root.mkdir()
    runner = CliRunner()
    assert runner.invoke(main, ["init", "--root", str(root)]).exit_code == 0
    spec, line = with_version(REPO / "experiments/examples/tiny-lane.yaml", tmp_path, '"2"')
    result = runner.invoke(main, ["run", str(spec), "--plan", "--root", str(root)])
    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, TypeError) and "Traceback" not in result.output
    errors = [row for row in result.output.splitlines() if row.startswith("error:")]
    assert errors == [f'error: {spec}:{line}: schema_version: expected an integer version such as 1, got "2"']
