"""`ledger sweep SPEC... --cluster ADDRESS`: each experiment on the box it names, through Ray.

Exit codes: 0 every experiment left a result; 1 some left a failure (each is in the ledger);
2 bad input (a spec); 3 the cluster is not there or has no node for a named box (nothing ran).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from recipe_ledger.cli.options import root_option, writer_option
from recipe_ledger.cli.output import print_table
from recipe_ledger.errors import LedgerError

if TYPE_CHECKING:  # the sweep's modules are imported when the command runs (they pull in ray)
    from recipe_ledger.scaleout.sweep import SweepEvent, SweepSummary


@click.command("sweep")
@click.argument(
    "specs",
    metavar="EXPERIMENT...",
    nargs=-1,
    required=True,
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
)
@click.option("--cluster", "address", required=True, help="Ray address of the head node (HOST:PORT).")
@click.option(
    "--remote", default=None, help="Git remote each box syncs with (default: its upstream, else origin)."
)
@click.option(
    "--checkout",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The project's path on the boxes (default: --root; $RECIPE_LEDGER_CHECKOUT on a box wins).",
)
@click.option("--no-sync", is_flag=True, help="Neither the boxes nor this driver run `ledger sync`.")
@root_option
@writer_option
def sweep_cmd(
    specs: tuple[Path, ...],
    address: str,
    remote: str | None,
    checkout: Path | None,
    no_sync: bool,
    root: Path,
    writer: str,
) -> None:
    """Run each EXPERIMENT on the box it names (Ray label box=NAME); progress per box and a summary.

    The driver pushes its commits first (the experiments must be committed). Each box runs
    `ledger run` in its own checkout, appends to its own chain and pushes it with `ledger sync`.
    A box that dies, or returns without an entry, gets a failure entry written by this driver
    under its own writer. At the end the driver syncs, so the summary's entries are here.

    Exit codes: 0 every experiment left a result, 1 some left a failure (each in the ledger),
    2 bad input (a spec, an uncommitted spec), 3 no cluster or no node for a named box.
    """
    from recipe_ledger.scaleout import sweep
    from recipe_ledger.scaleout.onbox import BoxJob
    from recipe_ledger.scaleout.raycluster import RayCluster

    items = sweep.plan_sweep(root, specs)
    if not no_sync:
        sweep.check_committed(root, items)
    cluster = RayCluster(address)
    try:
        sweep.check_boxes(items, cluster, address)
        if not no_sync:  # the boxes fetch the specs from the remote: push this clone's commits first
            _sync_driver(root, remote, "before")
        where = str((checkout or root).resolve())
        summary = sweep.run_sweep(
            root,
            items,
            cluster,
            writer=writer,
            job=lambda item: BoxJob(item.spec, where, remote, sync=not no_sync),
            events=_show_event,
        )
    finally:
        cluster.close()
    if not no_sync:
        _sync_driver(root, remote, "after")
    _print_summary(summary)
    if summary.failed:
        raise LedgerError(
            f"{len(summary.failed)} of {len(summary.outcomes)} experiment(s) did not leave a result",
            hint="ledger show ID for each failure above",
        )


def _show_event(event: SweepEvent) -> None:
    prefix = f"[{event.box} {event.done}/{event.total}]"
    outcome = event.outcome
    if outcome is None:
        click.echo(f"{prefix} {event.item.name}: started ({event.item.spec})")
        return
    who = "by the driver" if outcome.by_driver else f"by {outcome.writer}"
    click.echo(
        f"{prefix} {event.item.name}: {outcome.entry_kind} {outcome.entry_id[:12]} ({who},"
        f" {outcome.seconds:.1f} s)" + (f"; {outcome.problem.splitlines()[0]}" if outcome.problem else "")
    )


def _sync_driver(root: Path, remote: str | None, when: str) -> None:
    from recipe_ledger.ledger.sync import sync

    if when == "before":  # a failure here stops the sweep: the boxes would not find the specs
        result = sync(root, remote)
    else:
        try:
            result = sync(root, remote)
        except LedgerError as error:  # the boxes' entries are on the remote; this clone catches up later
            click.echo(f"driver not synced ({error.one_line()})")
            return
    click.echo(f"driver synced with {result.remote}/{result.branch} {when}: {result.entries_after} entries")


def _print_summary(summary: SweepSummary) -> None:
    rows = [
        [
            o.item.box,
            o.item.name,
            o.entry_kind,
            o.entry_id[:12],
            o.writer,
            f"{o.seconds:.1f}",
            "ok" if o.ok else "FAILED",
        ]
        for o in sorted(summary.outcomes, key=lambda o: (o.item.box, o.item.spec))
    ]
    print_table(
        ["box", "experiment", "entry", "id", "writer", "seconds", "status"],
        rows,
        title=f"sweep: {len(summary.outcomes)} experiment(s) in {summary.seconds:.1f} s",
    )
