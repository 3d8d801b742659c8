"""`ledger import-seed`: the 000 seed's campaign, imported from its document (not measured here)."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import root_option
from recipe_ledger.ledger import seed_import
from recipe_ledger.ledger.store import Ledger


@click.command("import-seed")
@root_option
def import_seed(root: Path) -> None:
    """Write the 000 seed's campaign (imported from its document, not measured here); idempotent."""
    result = seed_import.import_seed(Ledger.open(root))
    for key, entry_id in result.added:
        click.echo(f"added   {entry_id[:12]} {key}")
    click.echo(
        f"{len(result.added)} added, {len(result.present)} already present "
        f"(writer {seed_import.WRITER}, source {seed_import.SOURCE})"
    )
