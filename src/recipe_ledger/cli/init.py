"""`ledger init`: create the ledger folder of a project, and this box's writer signs from the start."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import root_option, writer_option
from recipe_ledger.ledger import actions, signing
from recipe_ledger.ledger.store import Ledger


@click.command("init")
@root_option
@writer_option
def init(root: Path, writer: str) -> None:
    """Create ledger/ (format marker, .gitattributes) and this writer's signing key; safe to run again.

    A writer without a chain gets its key (~/.config/recipe-ledger/keys/WRITER.key, outside the
    repository) and a chain that starts with its key entry. An existing unsigned chain is left as
    it is (`ledger key init --adopt` signs it forward). $RECIPE_LEDGER_SIGNING=off makes no key.
    """
    ledger = Ledger.init(root)
    click.echo(f"ledger ready in {ledger.dir}")
    if not signing.signs_new_writers():
        return
    path = ledger.chain_path(writer)
    if path.exists() and path.stat().st_size and not _has_key_entry(ledger, path):
        click.echo(f"warning: {ledger.rel(path)} is unsigned; `ledger key init --adopt` signs it forward")
        return
    setup, head = actions.key_init(ledger, writer=writer)
    if head is not None and head.get("kind") == "key":
        click.echo(f"{writer} signs its chain: {signing.fingerprint(setup.public)} (key in {setup.key_file})")


def _has_key_entry(ledger: Ledger, path: Path) -> bool:
    return any(entry.get("kind") == "key" for entry in ledger.read_chain(path))
