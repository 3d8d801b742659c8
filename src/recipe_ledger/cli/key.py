"""`ledger key`: this box's signing key for its writer's chain heads."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import root_option, writer_option
from recipe_ledger.ledger import actions
from recipe_ledger.ledger.store import Ledger


@click.group("key")
def key_group() -> None:
    """This box's signing key: chain heads signed with it, its public half in ledger/allowed_signers."""


@key_group.command("init")
@root_option
@writer_option
def init(root: Path, writer: str) -> None:
    """Make this writer's key (once, outside the repository), list it, and sign the chain's head.

    The private key goes to ~/.config/recipe-ledger/keys/WRITER.key ($RECIPE_LEDGER_KEY_DIR
    overrides); its public half is appended to ledger/allowed_signers, which you commit. Safe to run
    again: it signs the chain's current head again (after an interrupted append).
    """
    setup, head = actions.key_init(Ledger.open(root), writer=writer)
    made = "made" if setup.created_key else "kept"
    click.echo(f"{made} {setup.key_file} ({setup.public[:32]}...)")
    if setup.added_signer:
        click.echo(f"added {writer} to ledger/allowed_signers: commit it (git add ledger/allowed_signers)")
    if head is not None:
        click.echo(f"signed the head of {writer}: seq {head['seq']} ({head['id'][:12]})")
