"""Printing for people: readable tables, JSON lines for machines."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table


def console() -> Console:
    # Piped output (a file, less, CI logs) gets a wide page rather than rich's 80 columns, and
    # soft_wrap keeps long commands copy-pasteable instead of folding them.
    probe = Console()
    return Console(soft_wrap=True, highlight=False, width=None if probe.is_terminal else 200)


def print_table(headers: list[str], rows: list[list[Any]], title: str | None = None) -> None:
    table = Table(title=title, show_edge=False, header_style="bold")
    for header in headers:
        table.add_column(header)
    for row in rows:
        table.add_row(*("" if cell is None else str(cell) for cell in row))
    console().print(table)


def print_json(obj: Any, *, indent: int | None = 2) -> None:
    click.echo(json.dumps(obj, indent=indent, ensure_ascii=False, default=str))


def print_json_line(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str))
