"""`ledger retract`: mark an entry wrong, with a reason and evidence (the entry itself stays)."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import root_option, writer_option
from recipe_ledger.ledger import actions
from recipe_ledger.ledger.store import Ledger


@click.command("retract")
@click.argument("entry_id", metavar="ID")
@click.option("--reason", required=True, help="Why the entry is wrong.")
@click.option("--evidence", multiple=True, metavar="ID", help="An entry showing it (repeatable).")
@root_option
@writer_option
def retract(entry_id: str, reason: str, evidence: tuple[str, ...], root: Path, writer: str) -> None:
    """Retract entry ID (it stays, marked retracted) and print the retraction's id."""
    entry = actions.retract(Ledger.open(root), entry_id, reason=reason, evidence=evidence, writer=writer)
    click.echo(entry["id"])
