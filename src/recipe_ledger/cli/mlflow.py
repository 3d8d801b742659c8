"""`ledger mlflow sync` and `ledger mlflow export`: the ledger's index in MLflow (see docs/mlflow.md).

The ledger stays the record; these commands only read it. MLflow is imported by
``recipe_ledger.tracking`` when a command runs, so `ledger --help` works without it installed.
"""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger import tracking
from recipe_ledger.cli.options import root_option, tracking_uri_option


@click.group("mlflow")
def mlflow_group() -> None:
    """Index the ledger into MLflow to browse and plot it (the ledger stays the record)."""


@mlflow_group.command("sync")
@root_option
@tracking_uri_option("MLflow store (default: sqlite:///<root>/mlflow.db; env MLFLOW_TRACKING_URI).")
@click.option(
    "--experiment",
    default=tracking.DEFAULT_EXPERIMENT,
    show_default=True,
    help="MLflow experiment that holds the index.",
)
def sync_cmd(root: Path, tracking_uri: str | None, experiment: str) -> None:
    """Index the ledger into MLflow, idempotently.

    Result, calibration and failure entries become runs (a failure FAILED, a retracted entry
    KILLED), with one child run per arm x repeat x point from their run folders (runs/ or
    evidence/*/) and the folders' files as artifacts. An entry already indexed is not indexed
    again; only its status (retracted, superseded, reproduced) is refreshed. Several boxes may sync
    into one server at once; a sync that stopped half-way resumes. Prints the link that opens
    the runs table (docs/mlflow.md).
    """
    report = tracking.sync_ledger(root.resolve(), tracking_uri, experiment_name=experiment)
    click.echo(str(report))


@mlflow_group.command("export")
@click.argument("dest", type=click.Path(path_type=Path, file_okay=False))
@root_option
@click.option(
    "--tracking-uri", help="A local sqlite:/// store to export (default: sqlite:///<root>/mlflow.db)."
)
def export_cmd(dest: Path, root: Path, tracking_uri: str | None) -> None:
    """Copy the local MLflow store into DEST.

    DEST gets mlflow.db (a consistent snapshot) and mlartifacts/, with artifact paths relative to
    DEST: serve it with `cd DEST && mlflow ui --backend-store-uri sqlite:///mlflow.db`.
    """
    report = tracking.export_local_store(root.resolve(), dest, tracking_uri)
    click.echo(str(report))
