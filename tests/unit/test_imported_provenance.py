"""An entry imported from a seed document was measured by no tree of ours: `ledger log` and `ledger
show` say "imported" where a measured entry from a dirty tree says "dirty tree" (display only: the
entries are copies of the committed chains and stay as written)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.ledger import views
from recipe_ledger.ledger.store import Ledger

from helpers.projects import committed_chains_project

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = committed_chains_project(tmp_path_factory.mktemp("project"))
    return root


def _entries(root: Path) -> tuple[dict, dict]:
    """An imported entry whose git stamp says dirty, and a measured one written from a dirty tree."""
    entries = Ledger.open(root).entries()
    imported = next(e for e in entries if e["payload"]["origin"]["how"] == "imported" and e["git"]["dirty"])
    measured = next(
        e for e in entries if e["payload"]["origin"]["how"] == "measured" and e["git"].get("dirty")
    )
    return imported, measured


def _run(root: Path, *args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--root", str(root)], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


def test_log_marks_an_imported_entry_imported_and_a_dirty_measurement_dirty(project):
    imported, measured = _entries(project)
    lines = _run(project, "log").splitlines()

    def row_of(entry: dict) -> str:
        at = next(i for i, line in enumerate(lines) if line.startswith(entry["id"][:12]))
        return " ".join(lines[at : at + 2])  # the summary may sit on the line below (stacked rows)

    assert "(imported)" in row_of(imported) and "(dirty tree)" not in row_of(imported)
    assert "(dirty tree)" in row_of(measured)


def test_show_gives_an_imported_entry_its_source_instead_of_a_tree(project):
    imported, measured = _entries(project)
    shown = _run(project, "show", imported["id"]).splitlines()
    source = imported["payload"]["origin"]["source"]
    assert f"provenance: imported from {source}" in "\n".join(shown)
    assert not any(line.startswith("tree: ") for line in shown)
    assert any(line.startswith("tree: ") for line in _run(project, "show", measured["id"]).splitlines())
    assert views.dirty_flag(imported)  # the stamp itself is unchanged: only what people read differs
