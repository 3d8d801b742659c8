"""The command line: parse, call one core function, print, map errors to exit codes.

This package is the only one that imports click. Exit codes:
  0 success; 1 a finding (lint warnings with --strict, a verify failure, a losing verdict);
  2 bad input (a malformed file, an unknown id, a missing path); 3 the world is not ready
  (a port in use, a dead server); 130 interrupted.
"""

from __future__ import annotations

import sys

import click

from recipe_ledger import __version__
from recipe_ledger.errors import LedgerError


class LedgerGroup(click.Group):
    """A click group that turns a LedgerError into one line on stderr and its exit code."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except LedgerError as error:
            click.echo(f"error: {error.one_line()}", err=True)
            ctx.exit(error.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="ledger", message="%(prog)s %(version)s")
def main() -> None:
    """Recipe Ledger: launch commands, memory fit, measured runs and an append-only ledger."""


def _register() -> None:
    from recipe_ledger.cli import ledger_commands, recipe_commands, run_commands

    main.add_command(recipe_commands.recipe)
    main.add_command(recipe_commands.fit)
    main.add_command(run_commands.run_cmd)
    main.add_command(run_commands.calibrate_cmd)
    main.add_command(run_commands.experiment_group)
    for command in ledger_commands.COMMANDS:
        main.add_command(command)
    from recipe_ledger.cli import mlflow_commands

    main.add_command(mlflow_commands.mlflow_group)
    from recipe_ledger.cli import release_commands

    for command in release_commands.COMMANDS:
        main.add_command(command)
    from recipe_ledger.cli import publish_commands

    for command in publish_commands.COMMANDS:
        main.add_command(command)


_register()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
