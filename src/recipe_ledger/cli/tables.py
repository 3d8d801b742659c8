"""`ledger tables`: the published tables, what the dvc stage `tables` runs (see dvc.yaml, docs/site.md).

It refuses a ledger that does not verify. Paths given relative are kept relative in what the files
record, so the output never depends on where the repository was cloned.
"""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import FOLDER, root_option, under_root


@click.command("tables")
@root_option
@click.option(
    "--out",
    type=FOLDER,  # checked by under_root: one line, not click's usage block
    default=Path("tables"),
    show_default=True,
    help="Folder for the tables, relative to --root.",
)
@click.option(
    "--long",
    "long_",
    is_flag=True,
    help="Also write results-long: one row per metric of every result (hundreds of MB at 100k entries).",
)
def tables_cmd(root: Path, out: Path, long_: bool) -> None:
    """Write the published tables (csv, json, md) from the verified, non-retracted ledger entries."""
    from recipe_ledger.tables import write_tables

    label = out.as_posix() if not out.is_absolute() else out.name
    written = write_tables(root, under_root(root, out), label=label, long=long_)
    click.echo(f"{len(written)} table files in {out}")
