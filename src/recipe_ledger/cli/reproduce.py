"""`ledger reproduce LANE@VERSION`: re-measure a release against its own published numbers.

Each number reads as a verdict on an equivalence bar (docs/releases.md): `reproduced` when its
effect's CI lies inside the tolerance, `not-reproduced` when it lies outside, else `inconclusive`,
each with its reason on one line.

Exit codes: 0 reproduced; 1 recorded but not confirmed (inconclusive or not-reproduced: each
number's outcome and reason are printed); 2 bad input; 3 a pin cannot be met here, the machine is
not ready, or a file that feeds the measurement differs from the commit (without --allow-dirty);
5 a re-run failed (a failure entry was written); 130 interrupted.
"""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import allow_dirty_option, root_option, writer_option
from recipe_ledger.cli.output import echo_line, echo_reasons, text
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.pipeline.events import Event, Notice
from recipe_ledger.releases import reproduce as reproducing


@click.command("reproduce")
@click.argument("ref", metavar="LANE@VERSION")
@click.option(
    "--check", "check_only", is_flag=True, help="Only check the pins against this machine; run nothing."
)
@click.option(
    "--repeats",
    type=click.IntRange(min=2),
    default=None,
    help="Launches per arm (default: the experiment's repeats). More narrow the CI.",
)
@allow_dirty_option("Re-run")
@root_option
@writer_option
def reproduce_cmd(
    ref: str, check_only: bool, repeats: int | None, allow_dirty: bool, root: Path, writer: str
) -> None:
    """Re-run the experiments behind a release's numbers with its pins and record a reproduction."""
    repo = root.resolve()
    ledger = Ledger.open(repo)
    if check_only:
        plan = reproducing.plan_reproduction(ledger, repo, ref)
        for notice in plan.notices:
            click.echo(f"notice: {notice}")
        arms = ", ".join(f"{t.record.name}:{'+'.join(t.arms)}" for t in plan.targets)
        click.echo(f"every pin of {plan.release.ref} is met on this machine; would re-run {arms}")
        return
    entry, outcomes = reproducing.reproduce(
        ledger,
        repo,
        ref,
        writer=writer,
        events=_echo_notices,
        repeats=repeats,
        allow_dirty=allow_dirty,
    )
    # Each number says why, in the format `ledger run` and `ledger show` explain a verdict in.
    explained = [(o.number.name, o.outcome, o.reason) for o in outcomes]
    echo_reasons(explained, every=True)
    outcome = entry["payload"]["outcome"]
    echo_line(f"reproduction {entry['id'][:12]}: ", text(outcome), f" (ledger show {entry['id'][:12]})")
    if outcome != "reproduced":
        raise click.exceptions.Exit(1)


def _echo_notices(event: Event) -> None:
    if isinstance(event, Notice):
        click.echo(event.text)
