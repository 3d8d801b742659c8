"""Printing for people: tables that never cut an id, colour that carries meaning, user text never
read as markup; JSON lines for machines.

Three rules hold at every width:

- A ``whole`` column (ids, digests, recipe names, versions, references) is never cut: a person
  copies these. When the whole columns and a little of the free text do not fit side by side, the
  rows are *stacked* (the whole cells on one line, the free text folded below them) or, narrower
  still, printed *vertically* (one ``header: value`` line per cell).
- Every cell and title is a ``rich.text.Text``: a recipe description holding ``[/THINK]`` or a note
  holding ``[link=...]`` prints as those characters, never as markup or a terminal hyperlink.
- Colour comes from ``STYLES`` (verdicts, statuses, verification) and appears only on a terminal,
  never with ``NO_COLOR`` set (rich reads both), so piped output and CI logs stay plain text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # rich is imported when something is printed: `ledger --help` need not load it
    from rich.console import Console
    from rich.text import Text

# The style of a word that carries a judgement, wherever it is printed.
STYLES: dict[str, str] = {
    # verdict outcomes
    "win": "bold green",
    "regression": "bold red",
    "no-change": "cyan",
    "inconclusive": "yellow",
    "not-comparable": "magenta",
    # folded ledger statuses
    "active": "green",
    "reproduced": "bold green",
    "not-reproduced": "bold red",
    "superseded": "yellow",
    "retracted": "red",
    # release verification and reproduction outcomes
    "verified": "green",
    "unverified": "yellow",
    "UNVERIFIED": "bold yellow",
}

PIPED_WIDTH = 200  # piped output (a file, less, CI logs) gets a wide page, not rich's 80 columns
MIN_FREE = 20  # the narrowest a free-text column may fold to before the rows are stacked instead
GAP = 2  # spaces between columns


@dataclass(frozen=True)
class Column:
    """A table column. ``whole``: never cut (ids, digests, names, versions); otherwise free text
    that folds to fit the width. ``key``: part of what names a row (see ``_print_vertical``)."""

    header: str
    whole: bool = True
    key: bool = False  # heads each row in the vertical layout (default: the first column)


def free(header: str) -> Column:
    """A free-text column (titles, summaries, descriptions): folded, never the reason to stack."""
    return Column(header, whole=False)


def console(*, stderr: bool = False) -> Console:
    """A console at the terminal's width, or at $COLUMNS, or at ``PIPED_WIDTH`` when piped.

    soft_wrap keeps long lines (commands, references) whole for copying: the terminal wraps them."""
    from rich.console import Console

    probe = Console(stderr=stderr)
    wide = probe.is_terminal or os.environ.get("COLUMNS", "").isdigit()
    return Console(stderr=stderr, soft_wrap=True, highlight=False, width=None if wide else PIPED_WIDTH)


def text(value: Any, style: str | None = None) -> Text:
    """``value`` as plain text (never markup), styled by ``style`` or by what the word means."""
    from rich.text import Text

    if isinstance(value, Text):
        return value
    plain = "" if value is None else str(value)
    return Text(plain, style=style or STYLES.get(plain) or STYLES.get(plain.lower(), ""))


def styled(word: str) -> str:
    """``word`` coloured by ``STYLES`` for click.echo lines (click drops the colour when piped)."""
    style = STYLES.get(word)
    if not style or os.environ.get("NO_COLOR"):
        return word
    return click.style(word, fg=style.split()[-1], bold="bold" in style)


def print_table(
    headers: Sequence[str | Column],
    rows: Sequence[Sequence[Any]],
    title: str | None = None,
    *,
    row_styles: Sequence[str | None] | None = None,
) -> None:
    """``rows`` under ``headers`` (a plain string header is a whole column), as a table when it
    fits the width, else stacked, else one ``header: value`` line per cell."""
    columns = [h if isinstance(h, Column) else Column(h) for h in headers]
    cells = [[text(cell) for cell in row] for row in rows]
    styles = list(row_styles) if row_styles is not None else [None] * len(cells)
    out = console()
    if title:
        out.print(text(title, "bold"))
    layout = choose_layout(columns, cells, out.width)
    if layout == "table":
        out.print(_table(columns, cells, styles))
    elif layout == "stacked":
        _print_stacked(out, columns, cells, styles)
    else:
        _print_vertical(out, columns, cells, styles)


def choose_layout(columns: Sequence[Column], cells: Sequence[Sequence[Text]], width: int) -> str:
    """ "table" when every whole column fits at full length beside the free ones (each at least
    ``MIN_FREE`` wide or its longest cell); "stacked" when at least the whole cells fit on one line;
    else "vertical"."""
    widths = [max([len(c.header), *(row[i].cell_len for row in cells)]) for i, c in enumerate(columns)]
    whole = [w for w, c in zip(widths, columns, strict=True) if c.whole]
    needed = sum(whole) + sum(min(w, MIN_FREE) for w, c in zip(widths, columns, strict=True) if not c.whole)
    if needed + GAP * (len(columns) - 1) <= width:
        return "table"
    if sum(whole) + GAP * (len(whole) - 1) <= width:
        return "stacked"
    return "vertical"


def _table(columns: Sequence[Column], cells: Sequence[Sequence[Text]], styles: Sequence[str | None]):
    from rich.table import Table

    table = Table(box=None, pad_edge=False, padding=(0, GAP // 2), header_style="bold")
    for i, column in enumerate(columns):
        if column.whole:
            longest = max([len(column.header), *(row[i].cell_len for row in cells)])
            table.add_column(text(column.header), no_wrap=True, min_width=longest)
        else:
            table.add_column(
                text(column.header), overflow="fold", min_width=min(MIN_FREE, len(column.header))
            )
    for row, style in zip(cells, styles, strict=True):
        table.add_row(*row, style=style)
    return table


def _print_stacked(out: Console, columns, cells, styles) -> None:
    """Per row: the whole cells on one line, then each free cell folded below it, indented."""
    import textwrap

    from rich.text import Text

    labelled = sum(not c.whole for c in columns) > 1  # one free column needs no label
    for row, style in zip(cells, styles, strict=True):
        line = Text(" " * GAP).join(cell for cell, c in zip(row, columns, strict=True) if c.whole)
        line.stylize(style or "")
        out.print(line)
        for cell, column in zip(row, columns, strict=True):
            if column.whole or not cell.plain:
                continue
            label = f"{column.header}: " if labelled else ""
            for folded in textwrap.wrap(
                label + cell.plain, max(MIN_FREE, out.width - 4), break_on_hyphens=False
            ):
                out.print(Text(f"    {folded}", style=style or ""))


def _print_vertical(out: Console, columns, cells, styles) -> None:
    """Per row: its key cells on a heading line, then ``header: value`` for every other non-empty
    cell, each on its own line and never cut (the terminal wraps what is wider than it)."""
    from rich.text import Text

    keys = [i for i, c in enumerate(columns) if c.key] or [0]
    for number, (row, style) in enumerate(zip(cells, styles, strict=True)):
        if number:
            out.print()
        heading = Text(" " * GAP).join(row[i] for i in keys)
        heading.stylize(f"bold {style or ''}")
        out.print(heading)
        for i, (cell, column) in enumerate(zip(row, columns, strict=True)):
            if i not in keys and cell.plain:
                line = Text(f"  {column.header}: ", style="dim").append_text(cell)
                line.stylize(style or "")
                out.print(line)


def print_lines(lines: Sequence[Any]) -> None:
    """Each of ``lines`` (text or rich renderables) on the width-aware console, never as markup."""
    out = console()
    for line in lines:
        out.print(text(line) if isinstance(line, str) else line)


def print_json(obj: Any, *, indent: int | None = 2) -> None:
    click.echo(json.dumps(obj, indent=indent, ensure_ascii=False, default=str))


def print_json_line(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str))
