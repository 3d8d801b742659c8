"""`ledger sync [REMOTE]`: commit this box's new entries, fetch, merge, verify, push."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from recipe_ledger.cli.options import json_option, root_option
from recipe_ledger.cli.output import print_json


@click.command("sync")
@click.argument("remote", required=False)
@json_option("One JSON object: remote, branch, committed, merged, rounds, entries_before/after, chains.")
@root_option
def sync_cmd(remote: str | None, as_json: bool, root: Path) -> None:
    """Share the ledger through a git remote: commit, fetch, merge, verify, push (never forced).

    REMOTE defaults to the branch's upstream remote, else origin. Exit 3 when the remote cannot be
    reached, refuses the push, or the merge conflicts or does not verify: nothing is pushed then.
    """
    from recipe_ledger.ledger.sync import sync

    result = sync(root, remote)
    if as_json:
        print_json(dataclasses.asdict(result))
        return
    taken = result.entries_after - result.entries_before
    retried = f" after {result.rounds} rounds (the remote moved on)" if result.rounds > 1 else ""
    click.echo(
        f"synced with {result.remote}/{result.branch}{retried}: {result.entries_after} entries in"
        f" {result.chains} chain(s), {taken} new from other boxes"
        + ("; this box's new entries committed and pushed" if result.committed else "")
    )
