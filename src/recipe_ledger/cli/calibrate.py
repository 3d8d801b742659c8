"""`ledger calibrate`: A/A launches of an experiment's control, recorded as calibrations.

Exit codes: 0 calibrations recorded (or, with --plan, the plan shown); 2 bad input (the experiment
file, a recipe, an unknown id: nothing is written); 3 the machine is not ready or the tree is dirty
(nothing is written); 5 a launch failed (a failure entry was written); 130 interrupted (a failure
entry was written).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from recipe_ledger.cli import plan_text
from recipe_ledger.cli.options import allow_dirty_option, root_option, writer_option
from recipe_ledger.cli.progress import ProgressListener, progress_bar, release_lookup
from recipe_ledger.pipeline import stages
from recipe_ledger.pipeline.plan import RunPlan
from recipe_ledger.redact import redact_text


@click.command("calibrate")
@click.argument("experiment", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@root_option
@writer_option
@click.option(
    "--plan", "plan_only", is_flag=True, help="Show what calibration would launch and measure, and stop."
)
@allow_dirty_option("Calibrate")
def calibrate_cmd(experiment: Path, root: Path, writer: str, plan_only: bool, allow_dirty: bool) -> None:
    """A/A runs of EXPERIMENT's control: measure the instrument's noise and record a calibration.

    Exit codes: 0 recorded (or the plan shown), 2 bad input, 3 machine not ready or a dirty tree
    (neither writes an entry), 5 a launch failed (failure entry written), 130 interrupted (failure
    entry written).
    """
    repo = root.resolve()
    if plan_only:
        plan = stages.plan_experiment(experiment, repo, release_lookup(repo))
        print_calibration_plan(plan, stages.calibration_needs(plan, repo), click.echo)
        return
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


def print_calibration_plan(
    plan: RunPlan, needs: list[tuple[str, str, dict | None]], echo: Callable[[str], object]
) -> None:
    """What `ledger calibrate` would do: the control's launches, points, and each metric's calibration
    (a matching one in the ledger is what `ledger run` would reuse; calibrate records a new one)."""
    exp, control = plan.experiment, plan.arms["control"]
    repeats = exp.calibration.repeats
    lines = [
        f"calibration of {exp.name}'s control on {plan.box.id}: {repeats} A/A launches "
        f"({repeats * len(exp.arm_points('control')) * len(exp.instruments)} measurements)",
        f"  control: {control.source}",
        *(f"    {line}" for line in plan_text.command_lines(plan, control)),  # as a shell takes it
        f"  points {exp.points}, instruments {[i.name for i in exp.instruments]}",
    ]
    for instrument, metric, entry in needs:
        found = (
            f"ledger has {entry['id'][:12]} from {entry['ts'][:10]} (`ledger run` would reuse it)"
            if entry
            else "none in the ledger yet"
        )
        lines.append(f"  {instrument} {metric}: {found}")
    for line in lines:
        echo(redact_text(line))  # an argv holds --api-key values and URLs with passwords
