"""`ledger log`: the entries, oldest first, with their folded status."""

from __future__ import annotations

import json
from pathlib import Path

import click

from recipe_ledger.cli.options import LazyChoice, json_option, root_option
from recipe_ledger.cli.output import free, print_table
from recipe_ledger.ledger import views
from recipe_ledger.ledger.fold import STATUSES
from recipe_ledger.ledger.store import Ledger


@click.command("log")
@click.option(
    "--kind",
    type=LazyChoice("recipe_ledger.ledger.models:KINDS"),
    default=None,
    help="Only entries of this kind.",
)
@click.option(
    "--status", type=click.Choice(STATUSES), default=None, help="Only entries with this folded status."
)
@json_option("One JSON object per line: the stored entry plus its status.")
@root_option
def log(kind: str | None, status: str | None, as_json: bool, root: Path) -> None:
    """List entries, oldest first, with their folded status."""
    rows = views.query(Ledger.open(root), kind=kind, status=status)
    if as_json:
        for start in range(0, len(rows), 1000):  # batched: one write per thousand lines at 100k entries
            batch = rows[start : start + 1000]
            click.echo("\n".join(json.dumps({**e, "status": s}, ensure_ascii=False) for e, s in batch))
        return
    _print_table(rows)


def _print_table(rows: list[tuple[dict, str]]) -> None:
    if not rows:
        click.echo("(no entries)")
        return
    print_table(
        ["id", "time (UTC)", "writer", "kind", "status", free("summary")],
        [
            [
                entry["id"][:12],
                entry.get("ts", "")[:19].replace("T", " "),
                entry.get("writer", ""),
                entry.get("kind", ""),
                folded,
                _mark(entry) + views.summarize(entry),
            ]
            for entry, folded in rows
        ],
        row_styles=["strike dim" if folded == "retracted" else None for _, folded in rows],
    )


def _mark(entry: dict) -> str:
    """``(imported) `` for a document's entry (its tree ran the import, measured nothing), ``(dirty
    tree) `` for an entry written from a dirty tree, else nothing (``views.provenance``)."""
    if views.imported_text(entry):
        return "(imported) "
    return "(dirty tree) " if views.provenance(entry) else ""
