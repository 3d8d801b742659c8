"""`ledger witness`: record other writers' chain heads in this writer's chain (cross-signing)."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import root_option, writer_option
from recipe_ledger.errors import StateError
from recipe_ledger.ledger import actions
from recipe_ledger.ledger import verify as verify_mod
from recipe_ledger.ledger.store import Ledger


@click.command("witness")
@click.argument("others", nargs=-1, metavar="[WRITER]...")
@root_option
@writer_option
def witness(others: tuple[str, ...], root: Path, writer: str) -> None:
    """Record other writers' chain heads (all by default) in this writer's chain; print the entry id.

    The ledger must verify first: a witness vouches for what it saw, so it never witnesses a chain
    that is not whole. Afterwards, cutting back or rewriting a witnessed chain fails `ledger verify`.
    """
    ledger = Ledger.open(root)
    report = verify_mod.verify(ledger)
    if not report.ok:
        raise StateError(
            f"ledger does not verify ({len(report.findings)} problem(s)); nothing was witnessed",
            where=str(report.findings[0]),
            hint="ledger verify",
        )
    entry = actions.witness(ledger, writer=writer, others=others)
    heads = entry["payload"]["heads"]
    for name in sorted(heads):
        click.echo(f"witnessed {name} at seq {heads[name]['seq']} ({heads[name]['id'][:12]})", err=True)
    click.echo(entry["id"])
