"""The shared options: --root (the project root, on every command), --recipes, --writer and --json.

Every call runs from a folder outside any git repository, so a command that ignored --root (and fell
back to the git top level of the current directory) would fail rather than pass by accident.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main

REPO = Path(__file__).resolve().parents[2]
TINY = "recipe-ledger/tiny-qwen2"


def _leaf_commands() -> list[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(main)
    found = []

    def walk(command, path):
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), (*path, name))
        else:
            found.append((path, command))

    walk(main, ())
    return found


def _option(command: click.Command, flag: str) -> click.Option | None:
    return next((p for p in command.params if isinstance(p, click.Option) and flag in p.opts), None)


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """The current directory: an empty folder that is not inside a git working tree."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("RECIPE_LEDGER_WRITER", "box-a")
    return cwd


@pytest.fixture
def project(tmp_path, elsewhere):
    """A project with a ledger and a copy of this repository's recipes, minus the tiny recipe."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "recipes", root / "recipes")
    (root / "recipes" / "models" / f"{TINY}.yaml").unlink()
    assert CliRunner().invoke(main, ["init", "--root", str(root)]).exit_code == 0
    return root


def ledger(*args: str):
    return CliRunner().invoke(main, list(args))


def _recipe_names(result) -> set[str]:
    assert result.exit_code == 0, result.output
    return {row["name"] for row in json.loads(result.stdout)}


def test_every_root_option_is_the_project_root():
    with_root = [(path, _option(c, "--root")) for path, c in _leaf_commands() if _option(c, "--root")]
    assert len(with_root) > 15
    for path, option in with_root:
        assert option.help.startswith("Project root"), path


def test_recipes_is_offered_exactly_where_recipes_are_read():
    with_recipes = {path for path, c in _leaf_commands() if _option(c, "--recipes")}
    assert with_recipes == {
        ("fit",),
        ("recipe", "command"),
        ("recipe", "lint"),
        ("recipe", "list"),
        ("recipe", "render"),
        ("recipe", "show"),
        ("recipe", "update"),
    }


def test_every_json_option_is_the_same_flag():
    with_json = [(path, _option(c, "--json")) for path, c in _leaf_commands() if _option(c, "--json")]
    assert {("log",), ("show",), ("verify",), ("fit",), ("recipe", "list"), ("release", "list")} <= {
        path for path, _ in with_json
    }
    for path, option in with_json:
        assert option.is_flag and option.name == "as_json" and option.opts == ["--json"], path


def test_every_allow_dirty_option_is_the_same_flag_with_the_same_rule():
    found = {path: _option(c, "--allow-dirty") for path, c in _leaf_commands() if _option(c, "--allow-dirty")}
    assert set(found) == {("run",), ("calibrate",), ("reproduce",), ("release", "publish")}
    for path, option in found.items():
        assert option.is_flag and option.name == "allow_dirty", path
        assert "recipes/, scripts/ or the tool differ from the commit" in option.help, path


def test_ledger_commands_read_the_project_given_by_root(project):
    note = ledger("note", "offload 55 does not boot at 1M", "--root", str(project))
    assert note.exit_code == 0, note.output
    rows = [json.loads(line) for line in ledger("log", "--json", "--root", str(project)).stdout.splitlines()]
    assert [r["id"] for r in rows] == [note.stdout.strip()]
    checked = ledger("verify", "--json", "--root", str(project))
    assert checked.exit_code == 0 and json.loads(checked.stdout)["entries"] == 1


def test_without_root_outside_git_one_line_names_the_option(elsewhere):
    result = ledger("log")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "not inside a git working tree" in result.stderr
    assert "--root" in result.stderr and "Traceback" not in result.output


def test_recipe_commands_take_the_project_root_or_the_recipes_root(project):
    by_project = _recipe_names(ledger("recipe", "list", "--json", "--root", str(project)))
    by_recipes = _recipe_names(ledger("recipe", "list", "--json", "--recipes", str(project / "recipes")))
    assert by_project == by_recipes
    assert TINY not in by_project and by_project  # the copy's recipes, not this repository's


def test_recipes_wins_over_root(project):
    names = _recipe_names(
        ledger("recipe", "list", "--json", "--recipes", str(REPO / "recipes"), "--root", str(project))
    )
    assert TINY in names


def test_fit_reads_the_boxes_of_the_given_recipes(project):
    (project / "recipes" / "boxes" / "h200-x1.yaml").unlink()
    listed = ledger("fit", "--list-boxes", "--recipes", str(project / "recipes"))
    assert listed.exit_code == 0, listed.output
    assert "h200-x8" in listed.stdout and "h200-x1 " not in listed.stdout


def test_root_given_a_recipes_root_says_to_pass_recipes(project):
    result = ledger("recipe", "show", "deepseek-ai/DeepSeek-V4.1-Flash", "--root", str(project / "recipes"))
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "\n" not in line and "--root is the project root" in line
    assert f"pass --recipes {project / 'recipes'}" in line


def test_writer_defaults_to_the_environment_and_the_option_wins(project):
    ledger("note", "from the environment", "--root", str(project))
    ledger("note", "named", "--writer", "box-b", "--root", str(project))
    rows = [json.loads(line) for line in ledger("log", "--json", "--root", str(project)).stdout.splitlines()]
    assert {r["payload"]["text"]: r["writer"] for r in rows} == {
        "from the environment": "box-a",
        "named": "box-b",
    }


def test_verify_json_names_each_problem_and_exits_1(project):
    ledger("note", "a line to tear", "--root", str(project))
    chain = project / "ledger" / "box-a.jsonl"
    chain.write_bytes(chain.read_bytes() + b'{"torn')
    result = ledger("verify", "--json", "--root", str(project))
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["entries"] == 1
    assert [(f["path"], f["line"], f["torn"]) for f in report["findings"]] == [
        ("ledger/box-a.jsonl", 2, True)
    ]
    assert "ledger verify --repair" in result.stderr
