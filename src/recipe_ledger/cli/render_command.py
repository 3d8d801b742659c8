"""`ledger recipe render --batch CASES.jsonl --root DIR`: resolve many selections in one process.

Each input line is a case in the compat format (recipe path relative to DIR, variant, strategy,
hardware, features, node_count, pd_nodes — or omni_task for omni recipes); any `result`/`error`
fields are ignored. Each output line is `{"result": {...}}` or `{"error": "..."}`, in input order,
with the reference builder's key order.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import click

from recipe_ledger.cli.output import print_json_line
from recipe_ledger.errors import InputError, LedgerError
from recipe_ledger.recipes.corpus import Corpus, resolve_case


def _open_cases(batch: str) -> tuple[IO[str], str]:
    """The case stream and the name errors should show for it ("-" is stdin)."""
    if batch == "-":
        return sys.stdin, "<stdin>"
    try:
        return open(batch, encoding="utf-8"), batch
    except OSError as exc:
        raise InputError(f"cannot read case file ({exc.strerror})", where=batch) from None


def _cases(stream: IO[str], name: str) -> Iterator[tuple[int, dict]]:
    """(line number, case) for every non-blank line; a bad line is an InputError at name:line."""
    try:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                case = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"not a JSON case line ({exc.msg})", where=f"{name}:{number}") from None
            if not isinstance(case, dict):
                raise InputError("a case line must be a JSON object", where=f"{name}:{number}")
            yield number, case
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", where=name) from None


def _render_one(corpus: Corpus, case: dict, where: str) -> dict:
    try:
        return resolve_case(corpus, case)
    except LedgerError as exc:
        # A case naming a missing recipe, or lacking fields, is bad input at this line.
        raise InputError(exc.one_line(), where=where) from None


@click.command("render")
@click.option(
    "--batch",
    "batch",
    required=True,
    metavar="CASES.jsonl",
    help="Case lines (JSON) to resolve; '-' reads stdin.",
)
@click.option(
    "--root",
    "root",
    required=True,
    type=click.Path(path_type=Path),
    help="Recipes root: taxonomy.yaml, strategies/, and the recipe paths the cases name.",
)
def render(batch: str, root: Path) -> None:
    """Resolve every case of CASES.jsonl to the site's launch command (one JSON line each)."""
    if not root.is_dir():
        raise InputError(
            "no such recipes root directory",
            where=str(root),
            hint="pass --root DIR containing taxonomy.yaml and strategies/",
        )
    corpus = Corpus(root)
    stream, name = _open_cases(batch)
    try:
        for number, case in _cases(stream, name):
            print_json_line(_render_one(corpus, case, f"{name}:{number}"))
    finally:
        if stream is not sys.stdin:
            stream.close()
