"""docs/cli.md, written from the commands themselves: every command, argument and option with its help.

The reference is generated, not written by hand, so it cannot drift from what `--help` says; a test
regenerates it and compares (run `./dev docs` after changing a command). Loading it imports every
command module, which is fine for a documentation build and never happens on `ledger --help`.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

HEADER = """# Command reference

Every `ledger` command, its arguments and options, as `--help` prints them. Generated from the
commands by `./dev docs` (tests/unit/test_docs.py fails when it is out of date). Exit codes are the
same everywhere: 0 done, 1 a finding (lint warnings with `--strict`, a failed verify, a reproduction
that did not confirm), 2 bad input, 3 the machine or the tree is not ready, 5 a run failed (a
`failure` entry was written), 130 interrupted (Ctrl-C or SIGTERM).

Output for people fits the terminal (`$COLUMNS` when set; 200 columns when piped): ids, digests,
recipe names, versions and image references are never cut. Free text (summaries, titles,
descriptions) folds, and when even the whole columns do not fit side by side the rows are stacked
or printed one `field: value` line each. Text is printed as written: brackets are not markup, and
terminal escapes in stored text are shown (`\\x1b`), not obeyed. Verdicts, statuses and errors are
coloured on a terminal only (`FORCE_COLOR=1` forces it, `NO_COLOR=1` turns it off). `--json`, where
a command has it, prints data for machines instead.
"""


def walk(group: click.Group) -> Iterator[tuple[list[str], click.Command]]:
    """Every command under ``group``, depth first in name order, with its path of names."""
    ctx = click.Context(group, info_name="ledger")

    def visit(command: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
        yield path, command
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    yield from visit(sub, [*path, name])

    yield from visit(group, ["ledger"])


def markdown(group: click.Group) -> str:
    sections = [HEADER]
    for path, command in walk(group):
        sections.append(_section(path, command))
    return "\n".join(sections)


def _section(path: list[str], command: click.Command) -> str:
    ctx = click.Context(command, info_name=" ".join(path))
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [f"## `{' '.join(path)}`", "", f"```\n{' '.join(path)} {usage}\n```", ""]
    lines += [_help_text(command), ""]
    rows = [_option_row(param, ctx) for param in command.params if _documented(param)]
    if rows:
        lines += ["| option | what it does |", "|---|---|", *rows, ""]
    return "\n".join(lines)


def _help_text(command: click.Command) -> str:
    text = (command.help or "").split("\f")[0].strip()
    return "\n".join(line.strip() for line in text.splitlines())


def _documented(param: click.Parameter) -> bool:
    return isinstance(param, click.Option) and not param.hidden


def _option_row(param: click.Parameter, ctx: click.Context) -> str:
    record = param.get_help_record(ctx)
    names, text = record if record else ("/".join(param.opts), "")
    return f"| `{names}` | {_cell(text)} |"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


if __name__ == "__main__":  # `./dev docs`: python -m recipe_ledger.cli.reference > docs/cli.md
    from recipe_ledger.cli import main

    click.echo(markdown(main), nl=False)
