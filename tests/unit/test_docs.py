"""Every command and option is documented: it has help text, docs/cli.md (generated from that help)
is current, and the README's table names every top-level command."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from recipe_ledger.cli import COMMANDS, main
from recipe_ledger.cli.reference import markdown, walk

REPO = Path(__file__).resolve().parents[2]
COMMAND_PATHS = [(" ".join(path), command) for path, command in walk(main)]


@pytest.mark.parametrize("path,command", COMMAND_PATHS, ids=[p for p, _ in COMMAND_PATHS])
def test_every_command_and_option_has_help_text(path: str, command: click.Command) -> None:
    assert (command.help or "").strip(), f"{path} has no help text"
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert (param.help or "").strip(), f"{path} {'/'.join(param.opts)} has no help text"


def test_the_command_reference_is_current() -> None:
    written = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert written == markdown(main), "docs/cli.md is out of date: run ./dev docs"


def test_the_reference_names_every_command_and_option() -> None:
    written = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for path, command in COMMAND_PATHS:
        assert f"## `{path}`" in written, path
        section = written.split(f"## `{path}`")[1].split("\n## ")[0]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert all(name in section for name in param.opts), (path, param.opts)


def test_the_readme_table_names_every_top_level_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    missing = [name for name in COMMANDS if f"`ledger {name}" not in readme and f"/ `{name}" not in readme]
    assert not missing, f"README.md's command table does not name: {missing}"


def test_test_files_have_unique_names() -> None:
    """pytest imports test files by basename (no packages): two files of one name break collection."""
    names = [path.name for path in (REPO / "tests").rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
