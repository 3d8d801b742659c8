"""`ledger import-seed [NAME]...`: the seed documents' campaigns, imported (not measured here)."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import root_option
from recipe_ledger.ledger import seed_campaigns, seed_import
from recipe_ledger.ledger.store import Ledger

SEED_NAMES = seed_campaigns.seed_names()


@click.command("import-seed")
@click.argument("names", metavar="[NAME]...", nargs=-1, type=click.Choice(SEED_NAMES))
@root_option
def import_seed(names: tuple[str, ...], root: Path) -> None:
    """Write the seeds' campaigns (000, 004) from their documents, not measured here; idempotent.

    NAME picks the seed documents to import (default: all of them, in order). Each seed has its own
    chain (writer seed-000, seed-004); running it again adds only what is missing.
    """
    ledger = Ledger.open(root)
    for name in names or SEED_NAMES:
        seed = seed_campaigns.load_seed(name)
        result = seed_import.import_seed(ledger, seed=seed)
        for key, entry_id in result.added:
            click.echo(f"added   {entry_id[:12]} {key}")
        click.echo(
            f"seed {seed.name}: {len(result.added)} added, {len(result.present)} already present "
            f"(writer {seed.writer}, source {seed.source})"
        )
