"""`ledger init`: create the ledger folder of a project."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import root_option
from recipe_ledger.ledger.store import Ledger


@click.command("init")
@root_option
def init(root: Path) -> None:
    """Create ledger/ (format marker, .gitattributes); safe to run again."""
    ledger = Ledger.init(root)
    click.echo(f"ledger ready in {ledger.dir}")
