"""What people read at 80, 120 and 200 columns: ids, digests, names and versions whole; user text
printed as text (never rich markup or a terminal link); colour only on a terminal without NO_COLOR.

The ledgers are copies of the committed chains (nothing here writes to the project's ledger); the
expected ids, references and values are read from those copies, not written into the tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger import metrics
from recipe_ledger.cli import main
from recipe_ledger.cli.output import Column, cell_len, choose_layout, free, paint, text
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.releases import catalog

from helpers.projects import committed_chains_project
from helpers.resources import COMPAT, require

REPO = Path(__file__).resolve().parents[2]
WIDTHS = (80, 120, 200)
MISTRAL = ("mistralai/Mistral-Medium-3.5-128B", "mistralai/Mistral-Small-4-119B-2603")
HOSTILE_NOTE = "parser leaks [/THINK] and [link=https://x]y[/link] into [bold]the log"
ESCAPING_NOTE = "see \x1b]8;;https://evil.example\x07the docs\x1b]8;;\x07 and \x1b[31mred\x1b[0m"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
COLOUR = re.compile(r"\x1b\[(?:[0-9]+;)*(?:3[0-7]|9[0-7])[;m]")  # a foreground colour (bold is not one)
HYPERLINK = "\x1b]8;"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The committed CPU lane and seed chains, plus a note holding markup-looking text."""
    root = committed_chains_project(tmp_path_factory.mktemp("project"))
    added = ledger(root, "note", HOSTILE_NOTE, "--writer", "a-rather-long-writer-name-for-a-box")
    assert added.exit_code == 0, added.output
    assert ledger(root, "note", ESCAPING_NOTE, "--writer", "box-b").exit_code == 0
    return root


def ledger(root: Path, *args: str, columns: int = 200, **env: str):
    environment = {"COLUMNS": str(columns), "NO_COLOR": None, "FORCE_COLOR": None, **env}
    return CliRunner().invoke(main, [*args, "--root", str(root)], env=environment)


def entries(root: Path) -> list[dict]:
    return Ledger.open(root).entries()


@pytest.mark.parametrize("columns", WIDTHS)
def test_log_shows_every_id_whole_and_the_note_as_written(project, columns):
    shown = ledger(project, "log", columns=columns)
    assert shown.exit_code == 0, shown.output
    for entry in entries(project):
        assert entry["id"][:12] in shown.output
        assert entry["writer"] in shown.output
    # The summary column folds at 120 columns; its continuation lines hold only spaces elsewhere.
    assert "".join(HOSTILE_NOTE.split()) in "".join(shown.output.split())
    assert HYPERLINK not in shown.output and not ANSI.search(shown.output)


@pytest.mark.parametrize("columns", WIDTHS)
def test_show_says_the_status_first_then_a_verdict_table_with_units_and_signed_effects(project, columns):
    result = next(
        e
        for e in entries(project)
        if e["kind"] == "result" and (e["payload"].get("experiment") or {}).get("bars")
    )
    shown = ledger(project, "show", result["id"][:10], columns=columns)
    assert shown.exit_code == 0, shown.output
    assert any(line.startswith("status: ") for line in shown.output.splitlines()[:3])
    assert result["id"] in shown.output  # the whole id, and no raw JSON dump
    assert '"payload"' not in shown.output
    for bar in _bars(result):
        assert metrics.format_value(bar["metric"], bar["control"]) in shown.output
        assert metrics.format_effect(bar["effect"]) in shown.output
        assert bar["outcome"] in shown.output
    headline = {k: v for k, v in result["payload"]["metrics"].items() if k.endswith(".output_tps_total")}
    assert headline  # a headline metric: every arm's median at every point, with its unit
    for key, value in headline.items():
        assert metrics.format_value("output_tps_total", value) in shown.output, key
    raw = ledger(project, "show", result["id"][:10], "--json")
    assert json.loads(raw.output)["entry"] == result


def test_show_prints_a_hostile_note_as_text(project):
    note = next(e for e in entries(project) if e["payload"].get("text") == HOSTILE_NOTE)
    for columns in WIDTHS:
        shown = ledger(project, "show", note["id"], columns=columns)
        assert shown.exit_code == 0, shown.output
        assert HOSTILE_NOTE in shown.output and HYPERLINK not in shown.output


def test_a_retracted_entry_says_so_and_by_which_entry_on_its_first_line(project):
    statuses = {e["id"]: s for e, s in _with_status(project)}
    retracted = next(i for i, s in statuses.items() if s == "retracted")
    first = ledger(project, "show", retracted).output.splitlines()[0]
    retraction = next(
        e for e in entries(project) if e["kind"] == "retraction" and e["payload"]["target"] == retracted
    )
    assert first.startswith("status: retracted") and retraction["id"][:12] in first


def _bars(entry: dict) -> list:
    return (entry["payload"].get("experiment") or {}).get("bars") or []


def _with_status(root: Path):
    from recipe_ledger.ledger import views

    return views.query(Ledger.open(root))


@pytest.mark.parametrize("columns", WIDTHS)
def test_release_list_and_diff_show_whole_references_and_signed_changes_with_units(project, columns):
    found = catalog.releases(Ledger.open(project))
    listed = ledger(project, "release", "list", columns=columns)
    assert listed.exit_code == 0, listed.output
    for release in found:
        assert release.ref in listed.output and release.id[:12] in listed.output
        if release.payload.image and release.payload.image.digest:
            assert release.payload.image.digest in listed.output

    older, newer = [r for r in found if r.payload.lane == "tiny-cpu"][:2]
    diffed = ledger(project, "release", "diff", older.ref, newer.ref, columns=columns)
    assert diffed.exit_code == 0, diffed.output
    assert older.payload.image.ref in diffed.output and newer.payload.image.ref in diffed.output
    for a in older.payload.numbers:
        b = next(n for n in newer.payload.numbers if n.name == a.name)
        assert metrics.format_effect((b.value - a.value) / a.value) in diffed.output
        assert f"{a.value:,.6g} {metrics.unit(a.metric)}" in diffed.output


@pytest.mark.parametrize("columns", WIDTHS)
def test_recipe_list_keeps_every_name_whole(columns):
    require("compat", "the upstream recipes are the long names")
    root = COMPAT / "vllm-recipes"
    listed = CliRunner().invoke(
        main, ["recipe", "list", "--recipes", str(root)], env={"COLUMNS": str(columns), "NO_COLOR": None}
    )
    assert listed.exit_code == 0, listed.output
    names = [
        p.relative_to(root / "models").with_suffix("").as_posix() for p in (root / "models").rglob("*.yaml")
    ]
    assert names and all(name in listed.output for name in names)


@pytest.mark.parametrize("name", MISTRAL)
@pytest.mark.parametrize("columns", WIDTHS)
def test_upstream_recipes_with_bracketed_text_show_as_written(name, columns):
    require("compat", "the two upstream Mistral recipes hold [THINK]-style text")
    root = COMPAT / "vllm-recipes"
    shown = CliRunner().invoke(
        main,
        ["recipe", "show", name, "--recipes", str(root)],
        env={"COLUMNS": str(columns), "NO_COLOR": None},
    )
    assert shown.exit_code == 0, shown.output
    assert "[/THINK]" in shown.output and HYPERLINK not in shown.output


def test_colour_only_on_a_terminal_and_never_with_no_color(project):
    # FORCE_COLOR stands in for a terminal (rich reads it); NO_COLOR wins over it.
    coloured = ledger(project, "log", FORCE_COLOR="1")
    assert COLOUR.search(coloured.output)
    plain = ledger(project, "log", FORCE_COLOR="1", NO_COLOR="1")
    assert not COLOUR.search(plain.output)
    assert HYPERLINK not in coloured.output and "[/THINK]" in ANSI.sub("", coloured.output)


def test_layout_keeps_whole_columns_whole_by_stacking_then_going_vertical():
    columns = [Column("id"), Column("name"), free("summary")]
    cells = [[text("a" * 12), text("b" * 30), text("c" * 100)]]
    assert choose_layout(columns, cells, 200) == "table"
    assert choose_layout(columns, cells, 12 + 30 + 4 + 19) == "stacked"  # the free column would be 19 < 20
    assert choose_layout(columns, cells, 12 + 30 + 2) == "stacked"
    assert choose_layout(columns, cells, 12 + 30 + 1) == "vertical"


def test_cells_print_as_given_and_are_coloured_by_meaning():
    cell = text("[bold]x[/bold] [link=https://x]y[/link]")
    assert paint(cell, colour=True) == cell.plain  # no style: printed exactly as given
    assert text("regression").style and not text("a regression").style
    assert COLOUR.search(paint(text("regression"), colour=True)) and paint(text("win"), colour=False) == "win"


def test_wide_characters_take_two_columns_in_the_layout():
    assert cell_len("模型") == 4 and cell_len("e\u0301") == 1
    columns = [Column("name"), free("title")]
    assert choose_layout(columns, [[text("模" * 30), text("x")]], 60 + 2 + 5) == "table"  # "title" is 5
    assert choose_layout(columns, [[text("模" * 30), text("x")]], 60 + 2 + 4) != "table"


def test_errors_are_red_on_a_terminal_and_plain_with_no_color(project):
    runner = CliRunner()
    coloured = runner.invoke(
        main, ["show", "ffff", "--root", str(project)], color=True, env={"NO_COLOR": None}
    )
    plain = runner.invoke(main, ["show", "ffff", "--root", str(project)], color=True, env={"NO_COLOR": "1"})
    assert coloured.exit_code == plain.exit_code == 2
    assert COLOUR.search(coloured.output) and ANSI.sub("", coloured.output) == plain.output
    assert plain.output.startswith("error: ") and len(plain.output.splitlines()) == 1


@pytest.mark.parametrize("columns", WIDTHS)
def test_terminal_escapes_in_user_text_are_shown_not_obeyed(project, columns):
    note = next(e for e in entries(project) if e["payload"].get("text") == ESCAPING_NOTE)
    for args in (["log"], ["show", note["id"]]):
        shown = ledger(project, *args, columns=columns, FORCE_COLOR="1")
        assert shown.exit_code == 0, shown.output
        assert "\\x1b]8;;https://evil.example\\x07" in "".join(ANSI.sub("", shown.output).split())
        assert HYPERLINK not in shown.output and "\x1b[31mred" not in shown.output


@pytest.mark.parametrize("size", [5, 12, 20, 47])
def test_folding_keeps_every_character_and_the_width(size):
    from recipe_ledger.cli.output import _fold

    values = [HOSTILE_NOTE, "x" * 60 + " tail", "", "one", "模型 " * 20, "a  b\u00a0c " * 9]
    for value in values:
        lines = _fold(value, size)
        assert lines and all(cell_len(line) <= size for line in lines), (value, lines)
        assert "".join("".join(line.split()) for line in lines) == "".join(value.split())
