"""`ledger run` and `ledger calibrate`: the main job, with progress and a readable verdict table.

Exit codes of `ledger run`:
  0  the run completed and its result entry is in the ledger (whatever the verdicts say)
  2  bad input (the experiment file, a recipe, an unknown id)
  3  the machine is not ready (port in use, GPU busy, engine missing, model on a network share), or a
     file that feeds the measurement (the experiment, recipes/, scripts/, the tool) differs from
     the commit and --allow-dirty was not given
  5  the run failed (a server did not boot, died, or a client failed): a failure entry was written
  130 interrupted with Ctrl-C: servers stopped, a failure entry was written
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from recipe_ledger.cli.output import console, print_table
from recipe_ledger.ledger.gitinfo import top_level
from recipe_ledger.ledger.store import Ledger, default_writer
from recipe_ledger.pipeline import run as runner
from recipe_ledger.pipeline import stages
from recipe_ledger.pipeline.clean_tree import dirty_summary
from recipe_ledger.pipeline.events import Event, Notice, PhaseStarted, Planned, PointMeasured
from recipe_ledger.pipeline.plan import ReleaseLaunch


def _repo_root(root: Path | None) -> Path:
    return root.resolve() if root else top_level(Path.cwd())


def _release_lookup(repo: Path):
    """ "LANE@VERSION" -> its pins; the ledger is opened only when an arm names a release."""

    def lookup(ref: str) -> ReleaseLaunch:
        from recipe_ledger.releases import catalog

        return catalog.launch_of(catalog.find(Ledger.open(repo), ref))

    return lookup


def _progress_bar() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console(),
        transient=False,
    )


def _print_plan(plan, echo) -> None:
    echo(f"experiment {plan.experiment.name} on {plan.box.id}: {plan.experiment.hypothesis.strip()}")
    for arm in plan.arms.values():
        echo(f"  {arm.name}: {arm.source}")
        detail = " ".join(arm.argv) or ", ".join(f"{k}={v}" for k, v in sorted(arm.params.items()))
        echo(f"    {detail}")
    echo(f"  schedule (ABBA, a fresh launch each): {', '.join(f'{a}#{r}' for a, r in plan.schedule)}")
    echo(f"  points {plan.experiment.points}, instruments {[i.name for i in plan.experiment.instruments]}")


def _pct(value) -> str:
    return "-" if value is None else f"{value * 100:+.1f}%"


def print_verdicts(outcome: runner.RunOutcome) -> None:
    rows = []
    for bar in outcome.bars:
        ci = "-" if bar.ci_low is None else f"[{_pct(bar.ci_low)}, {_pct(bar.ci_high)}]"
        rows.append(
            [
                bar.candidate,
                bar.metric,
                bar.point,
                f"{bar.control:.4g}" if bar.control else "-",
                f"{bar.value:.4g}" if bar.value else "-",
                _pct(bar.effect),
                ci,
                _pct(bar.mde),
                f"{bar.min_effect * 100:g}%",
                bar.outcome.upper(),
            ]
        )
    print_table(
        [
            "candidate",
            "metric",
            "point",
            "control",
            "candidate value",
            "effect",
            "95% CI",
            "MDE",
            "bar",
            "verdict",
        ],
        rows,
        title=f"{outcome.entry['payload']['subject']}: verdicts"
        + (" (DIRTY TREE)" if dirty_summary(outcome.entry.get("git")) else ""),
    )
    for bar in outcome.bars:
        click.echo(f"  {bar.candidate} {bar.metric}@{bar.point}: {bar.reason}")
    summary = dirty_summary(outcome.entry.get("git"))
    if summary:
        click.echo(summary)


class _ProgressListener:
    """Turns pipeline events into the progress bar and printed lines."""

    def __init__(self, bar: Progress):
        self.bar = bar
        self.task = bar.add_task("starting", total=0)
        self.phase = ""

    def __call__(self, event: Event) -> None:
        if isinstance(event, Planned):
            _print_plan(event.plan, self.say)
        elif isinstance(event, Notice):
            self.say(event.text)
        elif isinstance(event, PhaseStarted):
            self.phase = event.name
            total = (self.bar.tasks[0].total or 0) + event.total_points
            self.bar.update(self.task, total=total, description=event.name)
        elif isinstance(event, PointMeasured):
            description = f"{self.phase}: {event.arm} #{event.repeat} point {event.point}"
            self.bar.update(self.task, advance=1, description=description)

    def say(self, text: str) -> None:
        # Plain text: an argv or a list of points must not be read as rich markup.
        self.bar.console.print(text, markup=False, highlight=False, soft_wrap=True)


@click.command("run")
@click.argument("experiment", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    help="Repository root (default: git top level).",
)
@click.option(
    "--writer", default=None, help="Ledger writer (the box). Default: $RECIPE_LEDGER_WRITER or the host name."
)
@click.option("--plan", "plan_only", is_flag=True, help="Show what would be launched and stop.")
@click.option(
    "--tracking-uri",
    envvar="MLFLOW_TRACKING_URI",
    help="MLflow store to index the run into (default: ./mlflow.db).",
)
@click.option(
    "--no-mlflow", is_flag=True, help="Do not index the run into MLflow now (`ledger mlflow sync` can later)."
)
@click.option("--allow-network-fs", is_flag=True, help="Allow a model on NFS/CIFS/FUSE (slow boots).")
@click.option("--allow-busy-gpu", is_flag=True, help="Run even if other processes use the GPU.")
@click.option(
    "--allow-dirty",
    is_flag=True,
    help="Run although the experiment, recipes/, scripts/ or the tool differ from the commit "
    "(the entry records dirty: true, the files and the diff's hash).",
)
def run_cmd(
    experiment: Path,
    root,
    writer,
    plan_only,
    tracking_uri,
    no_mlflow,
    allow_network_fs,
    allow_busy_gpu,
    allow_dirty,
) -> None:
    """Run EXPERIMENT on this box: launch, measure against the control (ABBA), decide, record.

    Exit codes: 0 completed (result entry written), 2 bad input, 3 machine not ready or a dirty
    tree, 5 run failed (failure entry written), 130 interrupted (failure entry written).
    """
    repo = _repo_root(root)
    if plan_only:
        _print_plan(stages.plan_experiment(experiment, repo, _release_lookup(repo)), click.echo)
        return
    options = stages.RunOptions(allow_dirty, allow_network_fs, allow_busy_gpu)
    with _progress_bar() as bar:
        outcome = stages.run_experiment(
            experiment,
            repo,
            writer=writer or default_writer(),
            options=options,
            release_lookup=_release_lookup(repo),
            events=_ProgressListener(bar),
        )
    print_verdicts(outcome)
    click.echo(
        f"result entry {outcome.entry['id'][:12]} (ledger show {outcome.entry['id'][:12]}); raw files in "
        f"{outcome.run_dir.relative_to(repo) if outcome.run_dir.is_relative_to(repo) else outcome.run_dir}"
    )
    if not no_mlflow:
        _sync_mlflow(repo, tracking_uri)


def _sync_mlflow(repo: Path, tracking_uri: str | None) -> None:
    """Index the run at once when MLflow is here and answers; the ledger is the record either way."""
    from recipe_ledger.tracking import TrackingUnavailable, sync_ledger

    try:
        synced = sync_ledger(repo, tracking_uri)
        click.echo(f"indexed in MLflow: {synced}")
    except TrackingUnavailable as error:
        click.echo(f"not indexed in MLflow now ({error.message}); `ledger mlflow sync` indexes it later")
    except Exception as error:  # noqa: BLE001 - indexing may fail and be retried; the run is recorded
        click.echo(f"MLflow indexing failed ({error}); the ledger has the run: `ledger mlflow sync` later")


@click.command("calibrate")
@click.argument("experiment", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    help="Repository root (default: git top level).",
)
@click.option("--writer", default=None, help="Ledger writer (the box).")
@click.option(
    "--allow-dirty",
    is_flag=True,
    help="Calibrate although the experiment, recipes/, scripts/ or the tool differ from the commit.",
)
def calibrate_cmd(experiment: Path, root, writer, allow_dirty) -> None:
    """A/A runs of EXPERIMENT's control: measure the instrument's noise and record a calibration."""
    repo = _repo_root(root)
    with _progress_bar() as bar:
        entries = stages.calibrate_experiment(
            experiment,
            repo,
            writer=writer or default_writer(),
            options=stages.RunOptions(allow_dirty=allow_dirty),
            release_lookup=_release_lookup(repo),
            events=_ProgressListener(bar),
        )
    for entry in entries:
        click.echo(f"calibration {entry['id'][:12]}: {entry['payload']['text']}")


@click.group("experiment")
def experiment_group() -> None:
    """Experiment specs (experiments/*.yaml): their JSON Schema."""


@experiment_group.command("schema")
def experiment_schema_cmd() -> None:
    """Print the JSON Schema of experiment files, for editors to validate and complete them."""
    from recipe_ledger.cli.output import print_json
    from recipe_ledger.experiment.spec import experiment_json_schema

    print_json(experiment_json_schema())
