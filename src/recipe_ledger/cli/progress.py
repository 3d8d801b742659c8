"""What `run`, `calibrate` and `reproduce` share: the plan as text, a progress bar driven by the
pipeline's events, and the release lookup for experiment arms that launch a published release."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from recipe_ledger.cli import plan_text
from recipe_ledger.cli.output import console
from recipe_ledger.pipeline.events import Event, Notice, PhaseStarted, Planned, PointMeasured
from recipe_ledger.pipeline.plan import ReleaseLaunch, RunPlan
from recipe_ledger.redact import redact_text


def release_lookup(repo: Path) -> Callable[[str], ReleaseLaunch]:
    """ "LANE@VERSION" -> its pins; the ledger is opened only when an arm names a release."""

    def lookup(ref: str) -> ReleaseLaunch:
        from recipe_ledger.ledger.store import Ledger
        from recipe_ledger.releases import catalog

        return catalog.launch_of(catalog.find(Ledger.open(repo), ref))

    return lookup


def progress_bar() -> Progress:
    return Progress(
        TextColumn("{task.description}", markup=False),  # arm and experiment names are user text
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console(),
        transient=False,
    )


def print_plan(plan: RunPlan, print_line: Callable[[str], object]) -> None:
    """The plan as lines, redacted: an argv holds --api-key values and URLs with passwords. Each
    arm's command is a line a shell takes as it is (``plan_text``), a candidate's changes from the
    control on the line after it."""

    def echo(line: str) -> None:
        print_line(redact_text(line))

    echo(f"experiment {plan.experiment.name} on {plan.box.id}: {plan.experiment.hypothesis.strip()}")
    for arm in plan.arms.values():
        echo(f"  {arm.name}: {arm.source}")
        for line in plan_text.command_lines(plan, arm):
            echo(f"    {line}")
        if (changed := plan_text.difference_line(plan, arm)) is not None:
            echo(f"    {changed}")
    if plan.experiment.sequential:
        echo(
            "  schedule (sequential, a fresh launch each): launch pairs in ABBA order "
            f"({', '.join(plan.arms)}, then reversed, ...), a look after each, until every bar is decided"
        )
    else:
        echo(f"  schedule (ABBA, a fresh launch each): {', '.join(f'{a}#{r}' for a, r in plan.schedule)}")
    echo(f"  points {plan.experiment.points}, instruments {[i.name for i in plan.experiment.instruments]}")
    if plan.experiment.arms_have_own_points:
        for name in plan.arms:
            echo(f"    {name} at points {plan.experiment.arm_points(name)}{_uncompared(plan, name)}")
    sweep = plan.experiment.launch_sweep
    if sweep is not None:  # the points are values of a launch flag: say which, and on which arms
        swept = [name for name in plan.arms if sweep.applies_to(name)]
        echo(
            f"  launch sweep: each point relaunches {', '.join(swept)} with {' '.join(sweep.args)} "
            f"({{point}} = the point), the client at concurrency {sweep.concurrency}"
        )
    for note in plan.notes:
        echo(f"  note: {note}")


def _uncompared(plan: RunPlan, name: str) -> str:
    # A point measured that no bar compares costs launch time: say so, rather than let it pass.
    left = plan.experiment.uncompared_points(name)
    return f" ({left} measured, compared by no bar)" if left else ""


class ProgressListener:
    """Turns pipeline events into the progress bar and printed lines."""

    def __init__(self, bar: Progress):
        self.bar = bar
        self.task: TaskID | None = None  # added at the first phase: a refused run shows no empty bar
        self.phase = ""

    def __call__(self, event: Event) -> None:
        if isinstance(event, Planned):
            print_plan(event.plan, self.say)
        elif isinstance(event, Notice):
            self.say(event.text)
        elif isinstance(event, PhaseStarted):
            self.phase = event.name
            if self.task is None:
                self.task = self.bar.add_task(event.name, total=event.total_points)
            else:
                total = (self.bar.tasks[0].total or 0) + event.total_points
                self.bar.update(self.task, total=total, description=event.name)
        elif isinstance(event, PointMeasured) and self.task is not None:
            description = f"{self.phase}: {event.arm} #{event.repeat} point {event.point}"
            self.bar.update(self.task, advance=1, description=description)

    def say(self, text: str) -> None:
        # Plain text: an argv or a list of points must not be read as rich markup.
        self.bar.console.print(redact_text(text), markup=False, highlight=False, soft_wrap=True)
