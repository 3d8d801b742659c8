"""`ledger show`: one entry, its folded status and everything that refers to it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from recipe_ledger.cli.options import json_option, root_option
from recipe_ledger.cli.output import (
    Cell,
    Column,
    echo_line,
    echo_reasons,
    free,
    print_table,
    text,
    verdict_reasons,
)
from recipe_ledger.errors import LedgerError
from recipe_ledger.ledger import views
from recipe_ledger.ledger.models import load_payload
from recipe_ledger.ledger.store import Ledger


@click.command("show")
@click.argument("entry_id", metavar="ID")
@json_option("The raw entry, its status, what it refers to and what refers to it, as one JSON object.")
@root_option
def show(entry_id: str, as_json: bool, root: Path) -> None:
    """Show entry ID (or a unique id prefix), its status and everything that refers to it."""
    from recipe_ledger.redact import redact_obj

    ledger = Ledger.open(root)
    record_abandoned(root, ledger)
    # Entries written before today's rules print redacted too (the ledger itself is never edited).
    found = redact_obj(views.detail(ledger, entry_id))
    if as_json:
        click.echo(json.dumps(found, indent=2, ensure_ascii=False))
        return
    entry = found["entry"]
    _warn_unreadable_payload(entry)
    _print_summary(found)


def record_abandoned(root: Path, ledger: Ledger) -> None:
    """Record the runs whose ledger process died (pipeline.abandoned), said on stderr: stdout stays
    the entry (--json is read by machines)."""
    from recipe_ledger.pipeline.abandoned import record_abandoned as record

    for entry in record(root, ledger):
        click.echo(f"recorded failure entry {entry['id'][:12]}: {entry['payload']['cause'][:200]}", err=True)


def _print_summary(found: dict) -> None:
    """Status first, then what the entry is, its verdict table (or a release's numbers), what it
    refers to and what refers to it. The raw entry is one flag away (--json)."""
    entry = found["entry"]
    echo_line(Cell("status: ", "bold"), text(found["status"]), _status_reason(found))
    for label, value in views.outline(entry):
        echo_line(Cell(f"{label}: ", "bold"), text(value))
    bars = views.verdict_rows(entry)
    if bars:
        keys = [Column(h, key=True) for h in views.VERDICT_HEADERS[:3]]
        print_table([*keys, *views.VERDICT_HEADERS[3:]], bars, "verdict by bar")
        echo_reasons(verdict_reasons(entry), title="why undecided")  # why each undecided bar decided nothing
    headers, medians = views.median_table(entry)
    if medians:
        print_table([Column(h, key=h in ("metric", "point")) for h in headers], medians, "medians")
    numbers = views.release_number_rows(entry)
    if numbers:
        print_table(["number", "value", "point", "result"], numbers, "numbers")
    _print_refs("refers to", found["refers_to"])
    _print_refs("referred to by", found["referred_by"])
    echo_line(Cell(f"raw entry: ledger show {entry['id'][:12]} --json", "dim"))


def _status_reason(found: dict) -> str:
    """Which entry set the status, when a later one did (retracted, superseded, reproduced...)."""
    if found["status"] == "active":
        return ""
    rels = {"retracted": "retracts", "superseded": "supersedes"}
    want = rels.get(found["status"])
    by = [
        r for r in found["referred_by"] if r["rel"] == want or (want is None and r["kind"] == "reproduction")
    ]
    if not by:
        return ""
    last = by[-1]
    return f" (by {last['kind']} {last['id'][:12]}: {last['summary']})"


def _print_refs(title: str, refs: list[dict]) -> None:
    if not refs:
        click.echo(f"{title}: nothing")
        return
    print_table(
        ["rel", Column("id", key=True), "kind", "status", free("summary")],
        [[r["rel"], r["id"][:12], r["kind"], r["status"], r["summary"]] for r in refs],
        f"{title}:",
    )


def _warn_unreadable_payload(entry: dict) -> None:
    # The stored entry is always printed; a payload this version cannot read is only flagged.
    try:
        load_payload(entry.get("kind", ""), entry.get("payload", {}), where=entry["id"][:12])
    except LedgerError as error:
        click.echo(f"warning: {error.one_line()}", err=True)
