"""`ledger run` and `ledger calibrate`: the main job, with progress and a readable verdict table.

Exit codes of `ledger run`:
  0  the run completed and its result entry is in the ledger (whatever the verdicts say)
  2  bad input (the experiment file, a recipe, an unknown id)
  3  the machine is not ready (port in use, GPU busy, engine missing, model on a network share), or a
     file that feeds the measurement (the experiment, recipes/, scripts/, the tool) differs from
     the commit and --allow-dirty was not given
  5  the run failed (a server did not boot, died, or a client failed): a failure entry was written
  130 interrupted with Ctrl-C or SIGTERM: servers stopped, a failure entry was written
"""

from __future__ import annotations

import functools
from pathlib import Path

import click

from recipe_ledger.cli.options import allow_dirty_option, root_option, tracking_uri_option, writer_option
from recipe_ledger.cli.output import Column, echo_reasons, print_table, verdict_reasons
from recipe_ledger.cli.progress import ProgressListener, print_plan, progress_bar, release_lookup
from recipe_ledger.ledger import views
from recipe_ledger.ledger.views import allowed_dirty_text
from recipe_ledger.pipeline import run as runner
from recipe_ledger.pipeline import stages


def print_verdicts(outcome: runner.RunOutcome) -> None:
    """The verdict table (values with units, effects as signed percentages), then each bar's outcome
    and reason on a line of its own (``output.reason_lines``)."""
    dirty = allowed_dirty_text(outcome.entry.get("git"))
    keys = [Column(header, key=True) for header in views.VERDICT_HEADERS[:3]]
    print_table(
        [*keys, *views.VERDICT_HEADERS[3:]],
        [[*row[:-1], row[-1].upper()] for row in views.verdict_rows(outcome.entry)],  # WIN stands out
        title=f"{outcome.entry['payload']['subject']}: verdicts" + (" (DIRTY TREE)" if dirty else ""),
    )
    design = views.design_text(outcome.entry["payload"].get("experiment") or {})
    if design:
        click.echo(f"design {design}")
    # Every bar says why, decided or not, in the format `ledger show` and `ledger reproduce` use; a
    # sequential bar's reason opens with how it stopped ("decided after 6 ...").
    echo_reasons(verdict_reasons(outcome.entry), every=True, title="why")
    if dirty:
        click.echo(f"{dirty}; recorded in every entry of this run")


@click.command("run")
@click.argument("experiment", type=click.Path(path_type=Path, exists=True, dir_okay=False), required=False)
@root_option
@writer_option
@click.option("--plan", "plan_only", is_flag=True, help="Show what would be launched and stop.")
@click.option(
    "--resume",
    "resume_run",
    metavar="RUN",
    help="Continue the interrupted sequential run RUN (a folder under runs/) from its last kept "
    "launch; refused when the commit, the experiment file, the box or the host differ.",
)
@tracking_uri_option("MLflow store to index the run into (default: sqlite:///<root>/mlflow.db).")
@click.option(
    "--no-mlflow", is_flag=True, help="Do not index the run into MLflow now (`ledger mlflow sync` can later)."
)
@click.option("--allow-network-fs", is_flag=True, help="Allow a model on NFS/CIFS/FUSE (slow boots).")
@click.option("--allow-busy-gpu", is_flag=True, help="Run even if other processes use the GPU.")
@allow_dirty_option("Run")
def run_cmd(
    experiment: Path | None,
    root: Path,
    writer: str,
    plan_only: bool,
    resume_run: str | None,
    tracking_uri: str | None,
    no_mlflow: bool,
    allow_network_fs: bool,
    allow_busy_gpu: bool,
    allow_dirty: bool,
) -> None:
    """Run EXPERIMENT on this box: launch, measure against the control (ABBA), decide, record.

    The sequential design (the default) looks after every launch pair and stops once every bar is
    decided; `--resume RUN` continues one that was interrupted. Exit codes: 0 completed (result
    entry written), 2 bad input (also a --resume whose commit, spec, box or host differ), 3 machine
    not ready or a dirty tree, 5 run failed (failure entry written), 130 interrupted by Ctrl-C or
    SIGTERM (failure entry written, with the command that resumes it).
    """
    repo = root.resolve()
    if (experiment is None) == (resume_run is None):
        raise click.UsageError("give an EXPERIMENT file, or --resume RUN (not both)")
    if plan_only:
        if experiment is None:
            raise click.UsageError("--plan shows a new run; a resumed run continues its own plan")
        plan = stages.plan_experiment(experiment, repo, release_lookup(repo))
        print_plan(plan, click.echo)
        for line in stages.power_report(plan, repo):
            click.echo(f"  {line}")
        return
    # A new run starts from its experiment file, a resumed one from its run folder; the rest is one path.
    if experiment is not None:
        stage = functools.partial(stages.run_experiment, experiment)
    else:
        assert resume_run is not None  # exactly one of the two, checked above
        stage = functools.partial(stages.resume_experiment, resume_run)
    with progress_bar() as bar:
        outcome = stage(
            repo,
            writer=writer,
            options=stages.RunOptions(allow_dirty, allow_network_fs, allow_busy_gpu),
            release_lookup=release_lookup(repo),
            events=ProgressListener(bar),
        )
    _finish(outcome, repo, no_mlflow, tracking_uri)


def _finish(outcome: runner.RunOutcome, repo: Path, no_mlflow: bool, tracking_uri: str | None) -> None:
    """The verdicts, where the entry and the raw files are, and the MLflow index."""
    print_verdicts(outcome)
    click.echo(
        f"result entry {outcome.entry['id'][:12]} (ledger show {outcome.entry['id'][:12]}); raw files in "
        f"{outcome.run_dir.relative_to(repo) if outcome.run_dir.is_relative_to(repo) else outcome.run_dir}"
    )
    if not no_mlflow:
        _sync_mlflow(repo, tracking_uri)


def _sync_mlflow(repo: Path, tracking_uri: str | None) -> None:
    """Index the run at once when MLflow is here and answers; the ledger is the record either way."""
    from recipe_ledger.redact import redact_text
    from recipe_ledger.tracking import TrackingUnavailable, sync_ledger

    try:
        synced = sync_ledger(repo, tracking_uri)
        click.echo(f"indexed in MLflow: {synced}")
    except TrackingUnavailable as error:
        click.echo(f"not indexed in MLflow now ({error.message}); `ledger mlflow sync` indexes it later")
    except Exception as error:  # noqa: BLE001 - indexing may fail and be retried; the run is recorded
        reason = redact_text(str(error))
        click.echo(f"MLflow indexing failed ({reason}); the ledger has the run: `ledger mlflow sync` later")
