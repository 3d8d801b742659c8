"""`ledger verify`: every chain whole, every entry meaningful, every signed head valid (and, with
--history, git only ever appended)."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import json_option, root_option
from recipe_ledger.cli.output import Cell, echo_line, print_json
from recipe_ledger.errors import LedgerError, StateError
from recipe_ledger.ledger import verify as verify_mod
from recipe_ledger.ledger.store import Ledger


@click.command("verify")
@click.option(
    "--repair", is_flag=True, help="Move torn last lines to ledger/quarantine/ (no byte is deleted)."
)
@click.option(
    "--history", is_flag=True, help="Also check that no git commit changed or removed a ledger line."
)
@click.option(
    "--fetch",
    is_flag=True,
    help="With --history on a shallow clone: fetch the missing history first (git fetch --unshallow).",
)
@json_option(
    "One JSON object: ok, entries, chains, signed, notices, warnings (unsigned chains), history,"
    " unchecked, repaired and findings."
)
@root_option
def verify(repair: bool, history: bool, fetch: bool, as_json: bool, root: Path) -> None:
    """Check every chain: hashes, links, order, payloads, refs, signatures. Exit 1 naming file:line.

    With --history on a shallow clone whose missing history was not fetched (--fetch), the commits
    at hand are checked and the command exits 3, saying what it could not check.
    """
    ledger = Ledger.open(root)
    repaired = verify_mod.repair(ledger) if repair else []
    report = verify_mod.verify(ledger)
    past = verify_mod.verify_history(ledger, fetch=fetch) if history else None
    findings = report.findings + (past.findings if past else [])
    unchecked = past.unchecked if past else None
    if as_json:
        print_json(_as_dict(report, findings, repaired, history, unchecked))
    else:
        _print_text(report, findings, repaired, history, unchecked)
    if findings:
        hint = "ledger verify --repair" if all(f.torn for f in findings) else "git log -p -- ledger/"
        raise LedgerError(
            f"ledger is not whole: {len(findings)} problem(s)", where=ledger.rel(ledger.dir), hint=hint
        )
    if unchecked:
        raise StateError(
            f"could not check {unchecked}", where=str(root), hint="ledger verify --history --fetch"
        )


def _print_text(
    report: verify_mod.Report, findings: list, repaired: list, history: bool, unchecked: str | None
) -> None:
    for chain_file, count, quarantine in repaired:
        click.echo(f"repaired {chain_file}: moved a torn tail of {count} bytes to {quarantine}")
    for finding in findings:
        click.echo(str(finding))
    for warning in report.warnings:
        click.echo(f"warning: {warning}")
    for notice in report.notices:
        click.echo(f"note: {notice}")
    if not findings:
        checked = " and its git history" if history and not unchecked else ""
        signed = f", {len(report.signed)} signed" if report.signed else ""
        echo_line(
            Cell("ok", "bold green"),
            f": {report.entries} entries in {report.chains} chain(s){signed}{checked}",
        )


def _as_dict(
    report: verify_mod.Report, findings: list, repaired: list, history: bool, unchecked: str | None
) -> dict:
    return {
        "ok": not findings and not unchecked,
        "entries": report.entries,
        "chains": report.chains,
        "signed": report.signed,
        "notices": report.notices,
        "warnings": report.warnings,
        "history": history,
        "unchecked": unchecked,
        "repaired": [{"chain": c, "bytes": n, "quarantine": q} for c, n, q in repaired],
        "findings": [
            {"path": f.path, "line": f.line, "message": f.message, "torn": f.torn} for f in findings
        ],
    }
