"""Printing for people: tables that never cut an id, colour that carries meaning, user text never
read as markup; JSON lines for machines.

Three rules hold at every width:

- A ``whole`` column (ids, digests, recipe names, versions, references) is never cut: a person
  copies these. When the whole columns and a little of the free text do not fit side by side, the
  rows are *stacked* (the whole cells on one line, the free text folded below them) or, narrower
  still, printed *vertically* (one ``header: value`` line per cell).
- Text is printed as given: nothing here interprets markup, so a recipe description holding
  ``[/THINK]`` or a note holding ``[link=...]`` prints as those characters (rich, which would
  read them as markup, draws only the progress bars, with markup off).
- Colour comes from ``STYLES`` (verdicts, statuses, verification) and appears only on a terminal
  (or with FORCE_COLOR), never with NO_COLOR set (https://no-color.org), so piped output and CI
  logs stay plain text.

Plain click and the standard library, not rich: `ledger log` and `ledger show` start in about a
third less CPU without rich's import.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import click

if TYPE_CHECKING:
    from rich.console import Console

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
_COLOURS = {"black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"}
_EFFECTS = {"bold": "bold", "dim": "dim", "underline": "underline", "strike": "strikethrough"}

PIPED_WIDTH = 200  # piped output (a file, less, CI logs) gets a wide page, not 80 columns
MIN_FREE = 20  # the narrowest a free-text column may fold to before the rows are stacked instead
GAP = 2  # spaces between columns


class Cell(NamedTuple):
    """Text as printed (never interpreted) and the style it is painted with on a terminal."""

    plain: str
    style: str = ""

    @property
    def width(self) -> int:
        return cell_len(self.plain)


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


def cell_len(value: str) -> int:
    """Terminal columns ``value`` takes: wide (East Asian) characters count two, combining none."""
    if value.isascii():
        return len(value)
    import unicodedata  # only for text beyond ASCII: start-up stays light

    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in value
    )


_WHITESPACE = str.maketrans({"\t": " ", "\n": " ", "\r": " "})
_BLANKS = str.maketrans({"\t": " ", "\r": " "})


def printable(value: str, *, newlines: bool = False) -> str:
    """``value`` safe to write to a terminal: tabs and carriage returns become spaces, newlines
    too unless ``newlines``, and every other control character (ESC above all: ``ESC ]8;;URL`` is a
    terminal hyperlink, ``ESC [`` recolours the screen) is shown as its escape, ``\\x1b``,
    instead of being obeyed."""
    if value.isprintable():
        return value
    kept = "\n" if newlines else ""
    value = value.translate(_WHITESPACE if not newlines else _BLANKS)
    return "".join(
        ch if ch.isprintable() or ch in kept else ch.encode("unicode_escape").decode("ascii") for ch in value
    )


# A terminal escape sequence as a whole: CSI (ESC [ ... final byte, or the C1 byte 0x9b), OSC
# (ESC ] ... BEL or ESC \\: window titles, hyperlinks), and the two-byte ESC sequences. Removed
# whole, so no "[31m" is left behind once the ESC is gone.
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[@-Z\\-_ -/]?"
)
# Characters that end or break a line for someone (a terminal, an editor, a log viewer): a space.
_LINE_BREAKS = str.maketrans(dict.fromkeys("\t\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029", " "))


def terminal_safe(value: str) -> str:
    """``value`` safe to print as one error or warning line: escape sequences removed whole, line
    and paragraph breaks (U+2028/2029, NEL...) made spaces, every other control or format character
    removed (C0, C1, DEL, the BOM, bidirectional overrides, zero-width marks). Error messages quote
    input (a file's text, a path, a key); obeying its ESC would recolour, retitle or rewrite the
    reader's terminal. The one place the CLI's error lines pass through."""
    if value.isprintable():
        return value
    value = _ESCAPE_SEQUENCE.sub("", value).translate(_LINE_BREAKS)
    return "".join(ch for ch in value if ch.isprintable() or ch == " ")


def text(value: Any, style: str | None = None) -> Cell:
    """``value`` as a cell (printable: see ``printable``), styled by ``style`` or by what the word
    means (``STYLES``)."""
    if isinstance(value, Cell):
        return value
    plain = printable("" if value is None else str(value))
    return Cell(plain, style or STYLES.get(plain) or STYLES.get(plain.lower(), ""))


def colour_on() -> bool:
    """Colour on a terminal (or with FORCE_COLOR), never with NO_COLOR."""
    if os.environ.get("NO_COLOR"):
        return False
    return bool(os.environ.get("FORCE_COLOR")) or sys.stdout.isatty()


def width() -> int:
    """$COLUMNS, else the terminal's width, else ``PIPED_WIDTH`` when piped."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        try:
            return os.get_terminal_size(sys.stdout.fileno()).columns
        except (OSError, ValueError):  # a terminal that will not say its size
            return 80
    return PIPED_WIDTH


def paint(cell: Cell, colour: bool) -> str:
    """The cell's text, wrapped in its style's escape codes when ``colour``."""
    if not colour or not cell.style or not cell.plain:
        return cell.plain
    words = cell.style.split()
    fg = next((w for w in words if w in _COLOURS), None)
    effects = {_EFFECTS[w]: True for w in words if w in _EFFECTS}
    return click.style(cell.plain, fg=fg, **effects)


def styled(word: str) -> str:
    """``word`` coloured by ``STYLES`` for click.echo lines (plain when colour is off)."""
    return paint(text(word), colour_on())


def echo_line(*parts: str | Cell) -> None:
    """One line from plain strings (made printable, newlines kept) and styled cells."""
    colour = colour_on()
    click.echo(
        "".join(paint(Cell(printable(p, newlines=True)) if isinstance(p, str) else p, colour) for p in parts),
        color=colour,
    )


def print_table(
    headers: Sequence[str | Column],
    rows: Sequence[Sequence[Any]],
    title: str | None = None,
    *,
    row_styles: Sequence[str | None] | None = None,
) -> None:
    """``rows`` under ``headers`` (a plain string header is a whole column), as a table when it
    fits the width, else stacked, else one ``header: value`` line per cell."""
    grid = Grid(
        [h if isinstance(h, Column) else Column(h) for h in headers],
        [[text(cell) for cell in row] for row in rows],
        [s or "" for s in row_styles] if row_styles is not None else [""] * len(rows),
        colour_on(),
    )
    if title:
        echo_line(text(title, "bold"))
    page = width()
    layout = choose_layout(grid.columns, grid.cells, page)
    lines = {"table": grid.table, "stacked": grid.stacked, "vertical": grid.vertical}[layout](page)
    for start in range(0, len(lines), 1000):  # one write per thousand lines: `ledger log` at 100k entries
        click.echo("\n".join(lines[start : start + 1000]), color=grid.colour)


def choose_layout(columns: Sequence[Column], cells: Sequence[Sequence[Cell]], page: int) -> str:
    """ "table" when every whole column fits at full length beside the free ones (each at least
    ``MIN_FREE`` wide or its longest cell); "stacked" when at least the whole cells fit on one line;
    else "vertical"."""
    widths = _natural_widths(columns, [[c.width for c in row] for row in cells])
    whole = [w for w, c in zip(widths, columns, strict=True) if c.whole]
    needed = sum(whole) + sum(min(w, MIN_FREE) for w, c in zip(widths, columns, strict=True) if not c.whole)
    if needed + GAP * (len(columns) - 1) <= page:
        return "table"
    if sum(whole) + GAP * (len(whole) - 1) <= page:
        return "stacked"
    return "vertical"


def _natural_widths(columns: Sequence[Column], widths: Sequence[Sequence[int]]) -> list[int]:
    return [max([cell_len(c.header), *(row[i] for row in widths)]) for i, c in enumerate(columns)]


def _free_widths(columns: Sequence[Column], natural: list[int], page: int) -> list[int]:
    """Each column's width: whole ones at full length; free ones share what is left, the widest
    narrowed first, none below ``MIN_FREE`` (or its own length)."""
    widths = list(natural)
    free_ones = [i for i, c in enumerate(columns) if not c.whole]
    excess = sum(widths) + GAP * (len(columns) - 1) - page
    while excess > 0:
        narrowable = [i for i in free_ones if widths[i] > min(MIN_FREE, natural[i])]
        if not narrowable:
            break
        widths[max(narrowable, key=lambda i: widths[i])] -= 1
        excess -= 1
    return widths


def _fold(value: str, size: int) -> list[str]:
    """``value`` in lines of at most ``size`` terminal columns, broken at spaces (a longer word is
    cut into pieces). A greedy loop: textwrap costs 3x as much and counts characters, not columns."""
    measure = len if value.isascii() else cell_len
    lines: list[str] = []
    line, used = "", 0
    for word in value.split():
        width = measure(word)
        if width > size:
            if line:
                lines.append(line)
            pieces = _cut(word, size, measure)
            lines.extend(pieces[:-1])
            line, used = pieces[-1], measure(pieces[-1])
        elif not line:
            line, used = word, width
        elif used + 1 + width <= size:
            line, used = f"{line} {word}", used + 1 + width
        else:
            lines.append(line)
            line, used = word, width
    if line or not lines:
        lines.append(line)
    return lines


def _cut(word: str, size: int, measure: Callable[[str], int]) -> list[str]:
    """``word`` in pieces of at most ``size`` columns (at least one character each)."""
    if measure is len:
        return [word[i : i + size] for i in range(0, len(word), size)]
    pieces, piece, used = [], "", 0
    for ch in word:
        width = cell_len(ch)
        if piece and used + width > size:
            pieces.append(piece)
            piece, used = "", 0
        piece, used = piece + ch, used + width
    return [*pieces, piece]


@dataclass
class Grid:
    """Rows of cells laid out three ways, each giving the lines to print (painted when ``colour``)."""

    columns: list[Column]
    cells: list[list[Cell]]
    styles: list[str]
    colour: bool

    def __post_init__(self) -> None:
        self.widths = [[cell.width for cell in row] for row in self.cells]  # measured once

    def _paint(self, plain: str, style: str, pad: int = 0) -> str:
        padded = plain + " " * pad if pad > 0 else plain
        return paint(Cell(padded, style), self.colour) if self.colour and style else padded

    def table(self, page: int) -> list[str]:
        sizes = _free_widths(self.columns, _natural_widths(self.columns, self.widths), page)
        gap = " " * GAP
        headers = [
            self._paint(c.header, "bold", size - cell_len(c.header))
            for c, size in zip(self.columns, sizes, strict=True)
        ]
        lines = [gap.join(headers).rstrip()]
        for row, measured, style in zip(self.cells, self.widths, self.styles, strict=True):
            if all(
                w <= size for w, size in zip(measured, sizes, strict=True)
            ):  # the common case: nothing folds
                parts = [
                    self._paint(cell.plain, f"{cell.style} {style}".strip(), size - w)
                    for cell, w, size in zip(row, measured, sizes, strict=True)
                ]
                lines.append(gap.join(parts).rstrip())
                continue
            folded = [_fold(cell.plain, size) for cell, size in zip(row, sizes, strict=True)]
            for k in range(max(len(f) for f in folded)):
                parts = []
                for f, cell, size in zip(folded, row, sizes, strict=True):
                    piece = f[k] if k < len(f) else ""
                    parts.append(self._paint(piece, f"{cell.style} {style}".strip(), size - cell_len(piece)))
                lines.append(gap.join(parts).rstrip())
        return lines

    def stacked(self, page: int) -> list[str]:
        """Per row: the whole cells on one line, aligned under their headers, then each free cell
        folded below it, indented (with its header when there is more than one free column). The
        headers come first, as in the table: the whole ones, then the free one indented."""
        labelled = sum(not c.whole for c in self.columns) > 1
        natural = _natural_widths(self.columns, self.widths)
        whole = [i for i, c in enumerate(self.columns) if c.whole]
        gap = " " * GAP
        headers = ((self.columns[i].header, natural[i]) for i in whole)
        lines = [gap.join(self._paint(h, "bold", size - cell_len(h)) for h, size in headers).rstrip()]
        free_headers = [c.header for c in self.columns if not c.whole]
        if free_headers and not labelled:  # several free columns name themselves on every row
            lines.append(self._paint(f"    {free_headers[0]}", "bold"))
        for row, measured, style in zip(self.cells, self.widths, self.styles, strict=True):
            cells = (
                self._paint(row[i].plain, f"{row[i].style} {style}".strip(), natural[i] - measured[i])
                for i in whole
            )
            lines.append(gap.join(cells).rstrip())
            for cell, column in zip(row, self.columns, strict=True):
                if column.whole or not cell.plain:
                    continue
                label = f"{column.header}: " if labelled else ""
                for folded in _fold(label + cell.plain, max(MIN_FREE, page - 4)):
                    lines.append(self._paint(f"    {folded}", style))
        return lines

    @staticmethod
    def _heading(header: str, value: str) -> str:
        """A key cell on a row's heading line, named by its header (a bare "8" says nothing)."""
        return f"{header}: {value}" if header else value

    def vertical(self, page: int) -> list[str]:
        """Per row: its key cells on a heading line (``header: value``), then ``header: value`` for
        every other non-empty cell, each on its own line and never cut (the terminal wraps what is
        wider)."""
        keys = [i for i, c in enumerate(self.columns) if c.key] or [0]
        lines: list[str] = []
        for number, (row, style) in enumerate(zip(self.cells, self.styles, strict=True)):
            if number:
                lines.append("")
            heading = (self._heading(self.columns[i].header, row[i].plain) for i in keys)
            lines.append((" " * GAP).join(self._paint(part, f"bold {style}".strip()) for part in heading))
            for i, (cell, column) in enumerate(zip(row, self.columns, strict=True)):
                if i not in keys and cell.plain:
                    label = self._paint(f"  {column.header}: ", "dim")
                    lines.append(label + self._paint(cell.plain, f"{cell.style} {style}".strip()))
        return lines


# Outcomes that decide nothing and so must say why, wherever they are printed: a verdict's
# (inconclusive, not-comparable), a quality bar's (not-shown), a speed win held back by quality, and
# a reproduction's (inconclusive).
UNDECIDED = frozenset({"inconclusive", "not-comparable", "not-shown", "faster, quality not shown"})
REASON_INDENT = "    "  # a reason folded at the page's width continues under its own line


def reason_lines(label: str, outcome: str, reason: str, page: int | None = None) -> list[str]:
    """``label: outcome: reason`` as one logical line, folded at ``page`` columns (default: the
    terminal's) with the rest indented under it, the outcome painted by ``STYLES``. The one format
    `ledger run`, `ledger show` and `ledger reproduce` explain an outcome in. A reason that already
    opens with its outcome ("not comparable: ...") does not say it twice."""
    label, why = (" ".join(printable(value).split()) for value in (label, reason))
    for opening in (f"{outcome.replace('-', ' ')}: ", f"{outcome}: "):
        if why.lower().startswith(opening):
            why = why[len(opening) :]
    head = f"{label}: {outcome}"
    folded = _fold(
        f"{head}: {why}" if why else f"{head} (no reason recorded)", max(MIN_FREE, (page or width()) - 4)
    )
    first = folded[0]
    if first.startswith(head):  # the outcome coloured where it stands (plain when colour is off)
        first = f"{label}: {paint(text(outcome), colour_on())}{first[len(head) :]}"
    return ["  " + first, *(REASON_INDENT + line for line in folded[1:])]


def verdict_reasons(entry: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(label, outcome, reason)`` for each bar of a result entry, speed bars then quality bars,
    as ``echo_reasons`` takes them; empty for other kinds."""
    experiment = (entry.get("payload") or {}).get("experiment") or {}
    found = []
    for group, suffix in (("bars", ""), ("quality", " (quality)")):
        for bar in experiment.get(group) or []:
            if isinstance(bar, dict):
                label = (
                    f"{bar.get('candidate', '?')} {bar.get('metric', '?')}@{bar.get('point', '?')}{suffix}"
                )
                found.append((label, str(bar.get("outcome", "")), str(bar.get("reason") or "")))
    return found


def echo_reasons(
    explained: Sequence[tuple[str, str, str]], *, every: bool = False, title: str | None = None
) -> None:
    """Each ``(label, outcome, reason)`` through ``reason_lines``: the undecided ones (``UNDECIDED``),
    or all of them with ``every``; ``title`` (bold) above them when there is any."""
    shown = [
        line
        for label, outcome, reason in explained
        if every or outcome in UNDECIDED
        for line in reason_lines(label, outcome, reason)
    ]
    if shown and title:
        echo_line(text(title, "bold"))
    if shown:
        click.echo("\n".join(shown), color=colour_on())


def console() -> Console:
    """A rich console for the progress bars (the one place rich draws): at the terminal's width,
    or at $COLUMNS, or at ``PIPED_WIDTH`` when piped; soft_wrap keeps long lines whole."""
    from rich.console import Console

    wide = sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit()
    return Console(soft_wrap=True, highlight=False, markup=False, width=None if wide else PIPED_WIDTH)


def print_json(obj: Any, *, indent: int | None = 2) -> None:
    click.echo(json.dumps(obj, indent=indent, ensure_ascii=False, default=str))


def print_json_line(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str))
