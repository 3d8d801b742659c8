"""The ledger's commands: init, note, retract, log, show, verify, import-seed.

Each command resolves ``--root`` (default: the git top level of the current directory), calls one
function of ``recipe_ledger.ledger`` and prints; errors are LedgerErrors the group turns into one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from recipe_ledger.errors import LedgerError
from recipe_ledger.ledger import actions, gitinfo, seed_import, views
from recipe_ledger.ledger import verify as verify_mod
from recipe_ledger.ledger.fold import STATUSES
from recipe_ledger.ledger.models import KINDS, load_payload
from recipe_ledger.ledger.store import Ledger, default_writer

root_option = click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Project root holding ledger/ (default: the git top level of the current directory).",
)
writer_option = click.option(
    "--writer", default=None, help="Chain to append to (default: $RECIPE_LEDGER_WRITER or the host name)."
)


def _root(root: Path | None) -> Path:
    return root if root is not None else gitinfo.top_level(Path.cwd())


def _open(root: Path | None) -> Ledger:
    return Ledger.open(_root(root))


@click.command("init")
@root_option
def init(root: Path | None) -> None:
    """Create ledger/ (format marker, .gitattributes); safe to run again."""
    ledger = Ledger.init(_root(root))
    click.echo(f"ledger ready in {ledger.dir}")


@click.command("note")
@click.argument("text")
@click.option("--ref", "refs", multiple=True, metavar="ID", help="An entry this note is about (repeatable).")
@root_option
@writer_option
def note(text: str, refs: tuple[str, ...], root: Path | None, writer: str | None) -> None:
    """Append a note (a closed door, an observation) and print its id."""
    entry = actions.note(_open(root), text, refs=refs, writer=writer or default_writer())
    click.echo(entry["id"])


@click.command("retract")
@click.argument("entry_id", metavar="ID")
@click.option("--reason", required=True, help="Why the entry is wrong.")
@click.option("--evidence", multiple=True, metavar="ID", help="An entry showing it (repeatable).")
@root_option
@writer_option
def retract(
    entry_id: str, reason: str, evidence: tuple[str, ...], root: Path | None, writer: str | None
) -> None:
    """Retract entry ID (it stays, marked retracted) and print the retraction's id."""
    entry = actions.retract(
        _open(root), entry_id, reason=reason, evidence=evidence, writer=writer or default_writer()
    )
    click.echo(entry["id"])


@click.command("log")
@click.option("--kind", type=click.Choice(KINDS), default=None, help="Only entries of this kind.")
@click.option(
    "--status", type=click.Choice(STATUSES), default=None, help="Only entries with this folded status."
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per line: the stored entry plus its status."
)
@root_option
def log(kind: str | None, status: str | None, as_json: bool, root: Path | None) -> None:
    """List entries, oldest first, with their folded status."""
    rows = views.query(_open(root), kind=kind, status=status)
    if as_json:
        for start in range(0, len(rows), 1000):  # batched: one write per thousand lines at 100k entries
            batch = rows[start : start + 1000]
            click.echo("\n".join(json.dumps({**e, "status": s}, ensure_ascii=False) for e, s in batch))
        return
    _print_table(rows)


def _print_table(rows: list[tuple[dict, str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False)
    if not console.is_terminal:
        console = Console(soft_wrap=False, width=160)  # piped: a fixed width, not rich's 80 columns
    table = Table(box=None, pad_edge=False)
    for column in ("id", "time (UTC)", "writer", "kind", "status", "summary"):
        table.add_column(
            column, overflow="ellipsis", no_wrap=True, min_width=12 if column == "summary" else None
        )
    for entry, folded in rows:
        style = "strike dim" if folded == "retracted" else None
        table.add_row(
            entry["id"][:12],
            entry.get("ts", "")[:19].replace("T", " "),
            entry.get("writer", ""),
            entry.get("kind", ""),
            folded,
            views.summarize(entry),
            style=style,
        )
    console.print(table)
    if not rows:
        click.echo("(no entries)")


@click.command("show")
@click.argument("entry_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print entry, status and referrers as one JSON object.")
@root_option
def show(entry_id: str, as_json: bool, root: Path | None) -> None:
    """Show entry ID (or a unique id prefix), its status and everything that refers to it."""
    found = views.detail(_open(root), entry_id)
    if as_json:
        click.echo(json.dumps(found, indent=2, ensure_ascii=False))
        return
    entry = found["entry"]
    _warn_unreadable_payload(entry)
    click.echo(json.dumps(entry, indent=2, ensure_ascii=False))
    click.echo(f"status: {found['status']}")
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


@click.command("verify")
@click.option(
    "--repair", is_flag=True, help="Move torn last lines to ledger/quarantine/ (no byte is deleted)."
)
@click.option(
    "--history", is_flag=True, help="Also check that no git commit changed or removed a ledger line."
)
@root_option
def verify(repair: bool, history: bool, root: Path | None) -> None:
    """Check every chain: hashes, links, order, refs, torn tails. Exit 1 naming file:line if not whole."""
    ledger = _open(root)
    if repair:
        for chain_file, count, quarantine in verify_mod.repair(ledger):
            click.echo(f"repaired {chain_file}: moved a torn tail of {count} bytes to {quarantine}")
    report = verify_mod.verify(ledger)
    findings = list(report.findings)
    if history:
        findings += verify_mod.verify_history(ledger)
    for finding in findings:
        click.echo(str(finding))
    if findings:
        hint = "ledger verify --repair" if all(f.torn for f in findings) else "git log -p -- ledger/"
        raise LedgerError(
            f"ledger is not whole: {len(findings)} problem(s)", where=ledger.rel(ledger.dir), hint=hint
        )
    checked = " and its git history" if history else ""
    click.echo(f"ok: {report.entries} entries in {report.chains} chain(s){checked}")


@click.command("import-seed")
@root_option
def import_seed(root: Path | None) -> None:
    """Write the 000 seed's campaign (imported from its document, not measured here); idempotent."""
    result = seed_import.import_seed(_open(root))
    for key, entry_id in result.added:
        click.echo(f"added   {entry_id[:12]} {key}")
    click.echo(
        f"{len(result.added)} added, {len(result.present)} already present "
        f"(writer {seed_import.WRITER}, source {seed_import.SOURCE})"
    )


COMMANDS = [init, note, retract, log, show, verify, import_seed]
