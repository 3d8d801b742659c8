"""`ledger run` and `ledger calibrate`: the main job, with progress and a readable verdict table.

Exit codes of `ledger run`:
  0  the run completed and its result entry is in the ledger (whatever the verdicts say)
  2  bad input (the experiment file, a recipe, an unknown id)
  3  the machine is not ready (port in use, GPU busy, engine missing, model on a network share)
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
from recipe_ledger.errors import LedgerError
from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.ledger.gitinfo import top_level
from recipe_ledger.ledger.store import Ledger, default_writer
from recipe_ledger.pipeline import run as runner
from recipe_ledger.pipeline.plan import plan_run
from recipe_ledger.pipeline.preflight import preflight
from recipe_ledger.recipes.catalog import RecipeRoot

RUN_FAILED = 5


class RunFailed(LedgerError):
    exit_code = RUN_FAILED


def _repo_root(root: Path | None) -> Path:
    return root.resolve() if root else top_level(Path.cwd())


def _plan(spec: Path, repo: Path):
    from recipe_ledger.releases import catalog

    experiment = load_experiment(spec)
    # Opened only when an arm names a release: planning a recipe experiment needs no ledger.
    return plan_run(
        spec,
        experiment,
        RecipeRoot(repo / "recipes"),
        repo,
        release_lookup=lambda ref: catalog.launch_of(catalog.find(Ledger.open(repo), ref)),
    )


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


def _print_plan(plan) -> None:
    click.echo(f"experiment {plan.experiment.name} on {plan.box.id}: {plan.experiment.hypothesis.strip()}")
    for arm in plan.arms.values():
        click.echo(f"  {arm.name}: {arm.source}")
        detail = " ".join(arm.argv) or ", ".join(f"{k}={v}" for k, v in sorted(arm.params.items()))
        click.echo(f"    {detail}")
    click.echo(f"  schedule (ABBA, a fresh launch each): {', '.join(f'{a}#{r}' for a, r in plan.schedule)}")
    click.echo(
        f"  points {plan.experiment.points}, instruments {[i.name for i in plan.experiment.instruments]}"
    )


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
        title=f"{outcome.entry['payload']['subject']}: verdicts",
    )
    for bar in outcome.bars:
        click.echo(f"  {bar.candidate} {bar.metric}@{bar.point}: {bar.reason}")


def _total_points(plan, launches: int) -> int:
    return launches * len(plan.experiment.points)


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
def run_cmd(
    experiment: Path, root, writer, plan_only, tracking_uri, no_mlflow, allow_network_fs, allow_busy_gpu
) -> None:
    """Run EXPERIMENT on this box: launch, measure against the control (ABBA), decide, record.

    Exit codes: 0 completed (result entry written), 2 bad input, 3 machine not ready,
    5 run failed (failure entry written), 130 interrupted (failure entry written).
    """
    repo = _repo_root(root)
    ledger = Ledger.open(repo)
    writer = writer or default_writer()
    stage = "planning"
    try:
        plan = _plan(experiment, repo)
        _print_plan(plan)
        if plan_only:
            return
        stage = "preflight"
        report = preflight(plan, allow_network_fs=allow_network_fs, allow_busy_gpu=allow_busy_gpu)
    except LedgerError as error:
        if not plan_only:
            entry = runner.record_setup_failure(ledger, writer, _subject(experiment), error, stage)
            click.echo(f"failure entry {entry['id'][:12]} recorded", err=True)
        raise
    for notice in report.notices:
        click.echo(f"notice: {notice}")
    outcome = _execute_with_progress(plan, ledger, writer, repo)
    print_verdicts(outcome)
    click.echo(
        f"result entry {outcome.entry['id'][:12]} (ledger show {outcome.entry['id'][:12]}); raw files in "
        f"{outcome.run_dir.relative_to(repo) if outcome.run_dir.is_relative_to(repo) else outcome.run_dir}"
    )
    if not no_mlflow:
        _sync_mlflow(repo, tracking_uri)


def _subject(experiment: Path) -> str:
    """The experiment's name when the file says it, else its file name."""
    try:
        return load_experiment(experiment).name
    except LedgerError:
        return experiment.stem


def _execute_with_progress(plan, ledger, writer, repo) -> runner.RunOutcome:
    with _progress_bar() as bar:
        task = bar.add_task("starting", total=_total_points(plan, len(plan.schedule)))

        def advance(arm: str, repeat: int, point: int) -> None:
            bar.update(task, advance=1, description=f"{arm} #{repeat} point {point}")

        def say(message: str) -> None:
            bar.console.print(message)
            if "A/A launches" in message:
                extra = _total_points(plan, plan.experiment.calibration.repeats)
                bar.update(task, total=bar.tasks[0].total + extra)

        ctx = runner.start_context(plan, ledger, writer, repo, repo / "runs", progress=advance, say=say)
        try:
            return runner.execute(ctx)
        except KeyboardInterrupt as error:
            entry = getattr(error, "failure_entry", None)
            click.echo(
                f"\ninterrupted: servers stopped; failure entry {entry['id'][:12] if entry else '?'}",
                err=True,
            )
            raise
        except LedgerError as error:
            entry = getattr(error, "failure_entry", None)
            raise RunFailed(
                f"{error.one_line()} — failure entry {entry['id'][:12] if entry else '?'} recorded",
                hint=f"ledger show {entry['id'][:12]}" if entry else None,
            ) from None


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
def calibrate_cmd(experiment: Path, root, writer) -> None:
    """A/A runs of EXPERIMENT's control: measure the instrument's noise and record a calibration."""
    repo = _repo_root(root)
    plan = _plan(experiment, repo)
    preflight(plan)
    ledger = Ledger.open(repo)
    with _progress_bar() as bar:
        task = bar.add_task("calibrating", total=_total_points(plan, plan.experiment.calibration.repeats))
        ctx = runner.start_context(
            plan,
            ledger,
            writer or default_writer(),
            repo,
            repo / "runs",
            progress=lambda a, r, p: bar.update(task, advance=1, description=f"A/A #{r} point {p}"),
            say=bar.console.print,
        )
        try:
            records, _ = runner.calibrate_inline(ctx)
        except BaseException as error:
            runner.stop_all()
            runner.record_failure(ctx, error, "calibration")
            raise
    runner.write_records(ctx.run_dir / "calibration.jsonl", records)
    for entry in runner.record_calibrations(ctx, records).values():
        payload = entry["payload"]
        click.echo(f"calibration {entry['id'][:12]}: {payload['text']}")


@click.group("experiment")
def experiment_group() -> None:
    """Experiment specs (experiments/*.yaml): their JSON Schema."""


@experiment_group.command("schema")
def experiment_schema_cmd() -> None:
    """Print the JSON Schema of experiment files, for editors to validate and complete them."""
    from recipe_ledger.cli.output import print_json
    from recipe_ledger.experiment.spec import experiment_json_schema

    print_json(experiment_json_schema())
