"""`ledger calibrate`: A/A launches of an experiment's control, recorded as calibrations."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import allow_dirty_option, root_option, writer_option
from recipe_ledger.cli.progress import ProgressListener, progress_bar, release_lookup
from recipe_ledger.pipeline import stages


@click.command("calibrate")
@click.argument("experiment", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@root_option
@writer_option
@allow_dirty_option("Calibrate")
def calibrate_cmd(experiment: Path, root: Path, writer: str, allow_dirty: bool) -> None:
    """A/A runs of EXPERIMENT's control: measure the instrument's noise and record a calibration."""
    repo = root.resolve()
    with progress_bar() as bar:
        entries = stages.calibrate_experiment(
            experiment,
            repo,
            writer=writer,
            options=stages.RunOptions(allow_dirty=allow_dirty),
            release_lookup=release_lookup(repo),
            events=ProgressListener(bar),
        )
    for entry in entries:
        click.echo(f"calibration {entry['id'][:12]}: {entry['payload']['text']}")
