"""The command line: parse, call one core function, print, map errors to exit codes.

This package is the only one that imports click. Exit codes:
  0 success; 1 a finding (lint warnings with --strict, a verify failure, a losing verdict);
  2 bad input (a malformed file, an unknown id, a missing path); 3 the world is not ready
  (a port in use, a dead server, the docker daemon down, a file operation the system refused);
  130 interrupted.

Every command is registered one way: in ``COMMANDS`` below, by name, as "module:attribute" and its
one-line summary. A command's module is imported only when that command runs (or shows its own
help), so ``ledger --help`` and ``ledger log`` do not pay for docker, MLflow or the recipe models.
Each module is named after its command (``cli/log.py`` is ``ledger log``, ``cli/recipe.py`` the
``ledger recipe`` group, ``cli/recipe_update.py`` its ``update``); the options they share are
defined once, in ``cli/options.py``.
Besides the command modules: ``output`` prints for people (tables that never cut an id) and
machines (JSON lines); ``progress`` draws the progress bar ``run``, ``calibrate`` and ``reproduce``
share; ``plan_text`` prints a planned arm's launch as a line a shell takes as it is, and what it
changes from the control; ``reference`` writes docs/cli.md from every command's help (``./dev docs``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import click

from recipe_ledger import __version__
from recipe_ledger.errors import LedgerError, Terminated


class LazyCommand(NamedTuple):
    target: str  # "module:attribute" of the click command
    summary: str  # the first line of its docstring, for `ledger --help` (a unit test keeps them equal)


COMMANDS: dict[str, LazyCommand] = {
    "calibrate": LazyCommand(
        "recipe_ledger.cli.calibrate:calibrate_cmd",
        "A/A runs of EXPERIMENT's control: measure the instrument's noise and record a calibration.",
    ),
    "experiment": LazyCommand(
        "recipe_ledger.cli.experiment:experiment_group",
        "Experiment specs (experiments/*.yaml): their JSON Schema.",
    ),
    "fit": LazyCommand(
        "recipe_ledger.cli.fit:fit", "Memory arithmetic for recipe NAME on BOX, before any download."
    ),
    "import-seed": LazyCommand(
        "recipe_ledger.cli.import_seed:import_seed",
        "Write the seeds' campaigns (000, 004) from their documents, not measured here; idempotent.",
    ),
    "init": LazyCommand(
        "recipe_ledger.cli.init:init",
        "Make a lab: ledger/, recipes/ (overlay, upstream), boxes/, a first experiment; safe to run again.",
    ),
    "key": LazyCommand(
        "recipe_ledger.cli.key:key_group",
        "This box's signing key: a key entry in its chain, chain heads signed with it.",
    ),
    "log": LazyCommand("recipe_ledger.cli.log:log", "List entries, oldest first, with their folded status."),
    "mlflow": LazyCommand(
        "recipe_ledger.cli.mlflow:mlflow_group",
        "Index the ledger into MLflow to browse and plot it (the ledger stays the record).",
    ),
    "note": LazyCommand(
        "recipe_ledger.cli.note:note", "Append a note (a closed door, an observation) and print its id."
    ),
    "recipe": LazyCommand(
        "recipe_ledger.cli.recipe:recipe",
        "Recipes in the vLLM recipes schema: list, show, command, render, lint, schema, update.",
    ),
    "release": LazyCommand(
        "recipe_ledger.cli.release:release",
        "Published lanes: publish a release with full pins, list, show and diff them.",
    ),
    "reproduce": LazyCommand(
        "recipe_ledger.cli.reproduce:reproduce_cmd",
        "Re-run the experiments behind a release's numbers with its pins and record a reproduction.",
    ),
    "retract": LazyCommand(
        "recipe_ledger.cli.retract:retract",
        "Retract entry ID (it stays, marked retracted) and print the retraction's id.",
    ),
    "run": LazyCommand(
        "recipe_ledger.cli.run:run_cmd",
        "Run EXPERIMENT on this box: launch, measure against the control (ABBA), decide, record.",
    ),
    "show": LazyCommand(
        "recipe_ledger.cli.show:show",
        "Show entry ID (or a unique id prefix), its status and everything that refers to it.",
    ),
    "site": LazyCommand(
        "recipe_ledger.cli.site:site_cmd",
        "Build the static site: recipes with their command builder, releases, experiments, the ledger.",
    ),
    "sweep": LazyCommand(
        "recipe_ledger.cli.sweep:sweep_cmd",
        "Run each EXPERIMENT on the box it names (Ray label box=NAME); progress per box and a summary.",
    ),
    "sync": LazyCommand(
        "recipe_ledger.cli.sync:sync_cmd",
        "Share the ledger through a git remote: commit, fetch, merge, verify, push (never forced).",
    ),
    "tables": LazyCommand(
        "recipe_ledger.cli.tables:tables_cmd",
        "Write the published tables (csv, json, md) from the verified, non-retracted ledger entries.",
    ),
    "verify": LazyCommand(
        "recipe_ledger.cli.verify:verify",
        "Check every chain: hashes, links, order, payloads, refs, signatures. Exit 1 naming file:line.",
    ),
    "witness": LazyCommand(
        "recipe_ledger.cli.witness:witness",
        "Record other writers' chain heads (all by default) in this writer's chain; print the entry id.",
    ),
}


def load_command(target: str) -> click.Command:
    """Import "module:attribute" and return the click command it names."""
    module_name, _, attribute = target.partition(":")
    command = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is not a click command")
    return command


def _short_help(summary: str, limit: int) -> str:
    """The summary cut as click cuts a command's help for a group's listing."""
    return click.Command(None, help=summary).get_short_help_str(limit)


def _error_prefix() -> str:
    """ "error:", red on a terminal (click.echo drops the colour when stderr is not one) unless
    NO_COLOR is set."""
    if os.environ.get("NO_COLOR"):
        return "error:"
    return click.style("error:", fg="red", bold=True)


class LedgerGroup(click.Group):
    """The top-level group: loads commands lazily from ``COMMANDS`` (click's LazyGroup pattern) and
    turns a LedgerError into one line on stderr and its exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS:
            return load_command(COMMANDS[cmd_name].target)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # From the static summaries: listing the commands must not import every command module.
        rows = [(name, COMMANDS[name].summary) for name in self.list_commands(ctx) if name in COMMANDS]
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(name, _short_help(text, limit)) for name, text in rows])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with _terminate_as_interrupt():
                return super().invoke(ctx)
        except LedgerError as error:
            click.echo(f"{_error_prefix()} {_shown(error.one_line())}", err=True)
            ctx.exit(error.exit_code)
        except OSError as error:
            # The system refused a file operation the core did not expect to fail (permission
            # denied, disk full, a read-only file system): the world is not ready, exit 3, one line.
            where = f"{error.filename}: " if error.filename else ""
            click.echo(f"error: {_shown(where + (error.strerror or str(error)))}", err=True)
            ctx.exit(3)
        except click.ClickException as error:
            # click's own refusals (a missing file argument, a bad option value) quote the input too.
            # (click declares ``message`` Final for its readers; its show() prints this attribute)
            setattr(error, "message", _shown(error.message))  # noqa: B010
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


def _shown(message: str) -> str:
    """An error line as the terminal gets it: secrets redacted (terminals and CI logs are published
    too), control characters and escape sequences from the input stripped (output.terminal_safe)."""
    from recipe_ledger.cli.output import terminal_safe
    from recipe_ledger.redact import redact_text

    return terminal_safe(redact_text(message))


def _raise_interrupt(signum: int, frame: object) -> None:
    raise Terminated(f"signal {signum}")


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI timeout, a scheduler, `kill`) takes the Ctrl-C path: every server stopped, a
    failure entry written, exit 130. Python's default would end the process at once, and a server
    started in its own session would outlive it with no entry saying why the run stopped."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    except ValueError:  # not the main thread (an embedding caller): leave its signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="ledger", message="%(prog)s %(version)s")
def main() -> None:
    """Recipe Ledger: launch commands, memory fit, measured runs and an append-only ledger."""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
