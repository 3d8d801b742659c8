"""`ledger show`: one entry, its folded status and everything that refers to it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from recipe_ledger.cli.options import json_option, root_option
from recipe_ledger.errors import LedgerError
from recipe_ledger.ledger import views
from recipe_ledger.ledger.models import load_payload
from recipe_ledger.ledger.store import Ledger


@click.command("show")
@click.argument("entry_id", metavar="ID")
@json_option("Print entry, status and referrers as one JSON object.")
@root_option
def show(entry_id: str, as_json: bool, root: Path) -> None:
    """Show entry ID (or a unique id prefix), its status and everything that refers to it."""
    found = views.detail(Ledger.open(root), entry_id)
    if as_json:
        click.echo(json.dumps(found, indent=2, ensure_ascii=False))
        return
    entry = found["entry"]
    _warn_unreadable_payload(entry)
    click.echo(json.dumps(entry, indent=2, ensure_ascii=False))
    click.echo(f"status: {found['status']}")
    flag = views.dirty_flag(entry)
    if flag:
        click.echo(flag)
    click.echo("referred to by:" if found["referred_by"] else "referred to by: nothing")
    for ref in found["referred_by"]:
        click.echo(
            f"  {ref['rel']:<11} {ref['id'][:12]} {ref['kind']:<12} {ref['status']:<10} {ref['summary']}"
        )


def _warn_unreadable_payload(entry: dict) -> None:
    # The stored entry is always printed; a payload this version cannot read is only flagged.
    try:
        load_payload(entry.get("kind", ""), entry.get("payload", {}), where=entry["id"][:12])
    except LedgerError as error:
        click.echo(f"warning: {error.one_line()}", err=True)
