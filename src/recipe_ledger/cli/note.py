"""`ledger note`: append a note (a closed door, an observation)."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import root_option, writer_option
from recipe_ledger.ledger import actions
from recipe_ledger.ledger.store import Ledger


@click.command("note")
@click.argument("text")
@click.option("--ref", "refs", multiple=True, metavar="ID", help="An entry this note is about (repeatable).")
@root_option
@writer_option
def note(text: str, refs: tuple[str, ...], root: Path, writer: str) -> None:
    """Append a note (a closed door, an observation) and print its id."""
    entry = actions.note(Ledger.open(root), text, refs=refs, writer=writer)
    click.echo(entry["id"])
