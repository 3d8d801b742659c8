"""Docs for the real user hold: every spec field is described, docs/experiments.md is generated from
the schema and current, the DeepSeek quickstart's commands run as written up to the GPU, and every
link in docs/ and the README lands on a file and heading that exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import BaseModel, Field

from recipe_ledger.cli import main
from recipe_ledger.experiment.reference import markdown, model_order
from recipe_ledger.experiment.spec import RecipeArm, experiment_json_schema, load_experiment
from recipe_ledger.recipes.boxes import Box
from recipe_ledger.releases.spec import ReleaseSpec, load_release_spec

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "docs" / "quickstart-deepseek.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


# --- every field described -------------------------------------------------------------------------


def _undescribed(schema: dict[str, Any]) -> list[str]:
    models = {str(schema.get("title")): schema, **schema.get("$defs", {})}
    missing = [f"{name} (the model)" for name, model in models.items() if not model.get("description")]
    for name, model in models.items():
        missing += [
            f"{name}.{field}" for field, s in model.get("properties", {}).items() if not s.get("description")
        ]
    return missing


@pytest.mark.parametrize(
    "schema",
    [experiment_json_schema(), Box.model_json_schema(), ReleaseSpec.model_json_schema()],
    ids=["experiment", "box", "release"],
)
def test_every_spec_field_and_model_has_a_description(schema: dict[str, Any]) -> None:
    assert _undescribed(schema) == []


class _Inner(BaseModel):
    """Described."""

    bare: int = 0


class _Outer(BaseModel):
    """Described."""

    inner: _Inner = Field(description="The inner part.")


def test_the_description_check_finds_an_undescribed_field() -> None:
    assert _undescribed(_Outer.model_json_schema()) == ["_Inner.bare"]


# --- the generated reference ------------------------------------------------------------------------


def test_the_experiment_reference_is_current() -> None:
    written = (REPO / "docs" / "experiments.md").read_text(encoding="utf-8")
    assert written == markdown(), "docs/experiments.md is out of date: run ./dev docs"


def test_the_cli_prints_the_same_reference() -> None:
    result = CliRunner().invoke(main, ["experiment", "schema", "--markdown"])
    assert result.exit_code == 0, result.output
    assert result.output == markdown()


def test_the_reference_has_a_section_per_model_naming_each_field_with_its_description() -> None:
    schema = experiment_json_schema()
    page = markdown(schema)
    definitions = {"Experiment": schema, **schema["$defs"]}
    assert set(model_order(schema)) == set(definitions)
    for name, model in definitions.items():
        section = page.split(f"\n## {name}\n")[1].split("\n## ")[0]
        for field, field_schema in model["properties"].items():
            row = next(line for line in section.splitlines() if line.startswith(f"| `{field}` |"))
            assert " ".join(field_schema["description"].split())[:40] in row.replace("\\|", "|")


class _Leaf(BaseModel):
    """A leaf."""

    ratio: float = Field(default=0.5, gt=0, lt=1, description="A bounded ratio.")
    tags: list[str] = Field(default_factory=list, description="Some tags.")


class _Root(BaseModel):
    """The root."""

    name: str = Field(pattern=r"^[a-z]+$", description="A name.")
    leaves: list[_Leaf] = Field(min_length=1, description="The leaves.")
    mode: int | str = Field(default=1, description="Either.")


def test_the_generator_renders_types_defaults_bounds_and_links_from_any_schema() -> None:
    page = markdown(_Root.model_json_schema())
    assert "## _Root\n\nThe root." in page and "## _Leaf\n\nA leaf." in page
    assert "| `name` | string | **required** | A name. (matches `^[a-z]+$`) |" in page
    assert "| `leaves` | list of [_Leaf](#_leaf) | **required** | The leaves. (not empty) |" in page
    assert "| `mode` | int \\| string | `1` | Either. |" in page
    assert "| `ratio` | number | `0.5` | A bounded ratio. (> 0, < 1) |" in page
    assert "| `tags` | list of string | `[]` | Some tags. |" in page


# --- the quickstart runs as written -----------------------------------------------------------------


def _blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(QUICKSTART.read_text(encoding="utf-8")) if lang == language]


def _ledger_commands(language: str) -> list[list[str]]:
    """Each `ledger ...` line of the quickstart's blocks in ``language``, as argv after `ledger`."""
    commands = []
    for block in _blocks(language):
        for line in block.splitlines():
            argv = shlex.split(line, comments=True)
            if argv and argv[0] == "ledger":
                commands.append(argv[1:])
    return commands


CPU_COMMANDS = _ledger_commands("sh")
GPU_COMMANDS = _ledger_commands("bash")


def test_the_quickstart_runs_fit_predict_and_the_plan_here() -> None:
    joined = [" ".join(argv) for argv in CPU_COMMANDS]
    assert any(c.startswith("fit ") and "--predict --window 5" in c for c in joined), joined
    assert "run experiments/deepseek-gb300-offload.yaml --plan" in joined
    assert GPU_COMMANDS, "the GPU steps (calibrate, run, publish) are shown in bash blocks"


@pytest.mark.parametrize("argv", CPU_COMMANDS, ids=[" ".join(a) for a in CPU_COMMANDS])
def test_each_quickstart_command_runs_as_written_on_this_box(argv: list[str], monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("argv", GPU_COMMANDS, ids=[" ".join(a) for a in GPU_COMMANDS])
def test_each_gpu_step_names_a_real_command_and_real_options(argv: list[str], monkeypatch) -> None:
    """The GPU steps cannot run here; parsing them with --help proves the command and every option
    exist (click rejects an unknown option before it handles the eager --help)."""
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(main, [*argv, "--help"])
    assert result.exit_code == 0, result.output


def test_the_quickstart_release_spec_loads(tmp_path: Path) -> None:
    specs = [block for block in _blocks("yaml") if block.startswith("# recipes/releases/")]
    assert specs
    for block in specs:
        path = tmp_path / "release.yaml"
        path.write_text(block, encoding="utf-8")
        spec = load_release_spec(path)
        assert all(number.experiment == "deepseek-gb300-offload" for number in spec.numbers)


def test_the_quickstart_experiment_is_the_offload_sweep_on_the_gb300() -> None:
    experiment = load_experiment(REPO / "experiments" / "deepseek-gb300-offload.yaml")
    assert experiment.box == "dgx-station-gb300"
    arms = {name: experiment.arm(name) for name in experiment.arm_names}
    offload = {name: arm.overrides.args for name, arm in arms.items() if isinstance(arm, RecipeArm)}
    assert offload == {"control": ["--cpu-offload-gb", "70"], "off60": ["--cpu-offload-gb", "60"]}
    assert len(experiment.points) > 1


# --- links --------------------------------------------------------------------------------------------

LINKED_PAGES = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", lambda m: "_" if m.group() == "_" else "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE):
        slug, n = _slug(heading), 1
        while slug in anchors:  # GitHub numbers repeated headings: x, x-1, x-2
            slug, n = f"{_slug(heading)}-{n}", n + 1
        anchors.add(slug)
    return anchors


def _links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def _broken_links(page: Path) -> list[str]:
    broken = []
    for target in _links(page):
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (linked.suffix != ".md" or anchor not in _anchors(linked)):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    return broken


@pytest.mark.parametrize("page", LINKED_PAGES, ids=[p.name for p in LINKED_PAGES])
def test_every_link_resolves_to_a_file_and_heading(page: Path) -> None:
    assert _broken_links(page) == []


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## The `fit` step\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n[ok](other.md#the-fit-step) [ok](#page) [web](https://example.com)\n"
        "[gone](missing.md) [bad](other.md#nope) [bad](#nope)\n```\n[in code](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    assert _broken_links(page) == [
        "missing.md: no such file",
        "other.md#nope: no heading #nope in other.md",
        "#nope: no heading #nope in page.md",
    ]


def test_every_docs_page_named_in_code_spans_exists() -> None:
    """The README and docs name pages as `docs/x.md` more often than they link them."""
    named = {m for page in LINKED_PAGES for m in re.findall(r"`(docs/[\w.-]+\.md)`", page.read_text("utf-8"))}
    assert [name for name in sorted(named) if not (REPO / name).exists()] == []
