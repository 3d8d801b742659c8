"""`ledger recipe update --from PATH`: take in a new upstream recipes snapshot (recipes.upstream)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from recipe_ledger.cli.options import FOLDER, recipes_option
from recipe_ledger.cli.output import echo_line
from recipe_ledger.errors import InputError

if TYPE_CHECKING:  # imported when the command runs: `ledger --help` need not load the recipe engine
    from recipe_ledger.recipes.upstream import UpdateReport


@click.command("update")
@click.option(
    "--from",
    "source",
    type=FOLDER,
    required=True,
    help="A recipes checkout (models/, strategies/, taxonomy.yaml) or an archive of one (.tar.gz, .zip).",
)
@click.option("--hardware", multiple=True, help="Also compare commands on this hardware id (repeatable).")
@click.option("--dry-run", is_flag=True, help="Show what would change and the lint; replace nothing.")
@recipes_option
def update_cmd(source: Path, hardware: tuple[str, ...], dry_run: bool, recipes: Path) -> None:
    """Take in a new upstream snapshot: what changed, the lint, then recipes/upstream/ replaced.

    Lists the recipes added and removed, and each recipe whose resolved command changed on the
    hardware of the lab's boxes (boxes/) and any --hardware. recipes/overlay/ is never touched;
    recipes/UPSTREAM.yaml records the source, its commit and the snapshot's content hash.
    """
    take_in(recipes, source, dry_run=dry_run, extra_hardware=hardware)


def take_in(recipes: Path, source: Path, *, dry_run: bool, extra_hardware: tuple[str, ...] = ()) -> None:
    """Update ``recipes`` (a lab's layered recipes/) from ``source`` and print the report."""
    from recipe_ledger.recipes import upstream
    from recipe_ledger.recipes.layers import layers_of

    layers = layers_of(recipes)
    if layers is not None and not layers.layered:
        raise InputError(
            "a flat recipes root (models/ directly) has no upstream to replace",
            where=str(recipes),
            hint="update it with git, or run `ledger init` in a new lab",
        )
    hardware = [*_lab_hardware(recipes), *extra_hardware]
    report = upstream.update(recipes, source, _commit_of(source), hardware, dry_run=dry_run)
    _print_report(report, hardware)


def _lab_hardware(recipes: Path) -> list[str]:
    """The taxonomy ids of the lab's own boxes (not the packaged profiles)."""
    from recipe_ledger.recipes.boxes import list_boxes
    from recipe_ledger.recipes.catalog import RecipeRoot
    from recipe_ledger.recipes.layers import PACKAGED_BOXES

    own = [d for d in RecipeRoot.of_project(recipes.parent).boxes_dirs if d != PACKAGED_BOXES]
    return sorted({box.hardware for box in list_boxes(own) if box.hardware})


def _commit_of(source: Path) -> str | None:
    """The commit of a checkout given at its top level; None for an archive or a plain folder."""
    if not (source / ".git").exists():
        return None
    from recipe_ledger.ledger import gitinfo

    state = gitinfo.snapshot(source)
    return state["commit"] if state else None


def _print_report(report: UpdateReport, hardware: list[str]) -> None:
    # Upstream's text is quoted (paths, flags, lint messages): echo_line prints it printable.
    echo_line(f"upstream {report.source} (commit {report.commit or 'unknown'}, {report.content_sha256[:19]})")
    for ref in report.added:
        echo_line(f"  added    {ref}")
    for ref in report.removed:
        echo_line(f"  removed  {ref}")
    for change in report.changed:
        echo_line(f"  changed  {change.recipe} on {change.hardware}:")
        echo_line(f"    before: {change.before}")
        echo_line(f"    after:  {change.after}")
    if not (report.added or report.removed or report.changed):
        echo_line(
            "  no recipe added or removed; no command changed"
            + (f" on {', '.join(hardware)}" if hardware else "")
        )
    for warning in report.warnings:
        echo_line(f"  lint: {warning}")
    echo_line(
        "recipes/upstream/ replaced (overlay untouched)" if report.applied else "dry run: nothing replaced"
    )
