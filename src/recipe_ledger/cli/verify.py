"""`ledger verify`: check that every chain is whole (and, with --history, that git only appended)."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import json_option, root_option
from recipe_ledger.cli.output import Cell, echo_line, print_json
from recipe_ledger.errors import LedgerError
from recipe_ledger.ledger import verify as verify_mod
from recipe_ledger.ledger.store import Ledger


@click.command("verify")
@click.option(
    "--repair", is_flag=True, help="Move torn last lines to ledger/quarantine/ (no byte is deleted)."
)
@click.option(
    "--history", is_flag=True, help="Also check that no git commit changed or removed a ledger line."
)
@json_option("One JSON object: ok, entries, chains, history, repaired and findings (file, line, message).")
@root_option
def verify(repair: bool, history: bool, as_json: bool, root: Path) -> None:
    """Check every chain: hashes, links, order, refs, torn tails. Exit 1 naming file:line if not whole."""
    ledger = Ledger.open(root)
    repaired = verify_mod.repair(ledger) if repair else []
    report = verify_mod.verify(ledger)
    findings = list(report.findings)
    if history:
        findings += verify_mod.verify_history(ledger)
    if as_json:
        print_json(_as_dict(report, findings, repaired, history))
    else:
        _print_text(report, findings, repaired, history)
    if findings:
        hint = "ledger verify --repair" if all(f.torn for f in findings) else "git log -p -- ledger/"
        raise LedgerError(
            f"ledger is not whole: {len(findings)} problem(s)", where=ledger.rel(ledger.dir), hint=hint
        )


def _print_text(report: verify_mod.Report, findings: list, repaired: list, history: bool) -> None:
    for chain_file, count, quarantine in repaired:
        click.echo(f"repaired {chain_file}: moved a torn tail of {count} bytes to {quarantine}")
    for finding in findings:
        click.echo(str(finding))
    if not findings:
        checked = " and its git history" if history else ""
        echo_line(
            Cell("ok", "bold green"), f": {report.entries} entries in {report.chains} chain(s){checked}"
        )


def _as_dict(report: verify_mod.Report, findings: list, repaired: list, history: bool) -> dict:
    return {
        "ok": not findings,
        "entries": report.entries,
        "chains": report.chains,
        "history": history,
        "repaired": [{"chain": c, "bytes": n, "quarantine": q} for c, n, q in repaired],
        "findings": [
            {"path": f.path, "line": f.line, "message": f.message, "torn": f.torn} for f in findings
        ],
    }
