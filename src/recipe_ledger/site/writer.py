"""Writing the site: the output folder, each page rendered with jinja2 and its data as JSON beside
it, the static files, and the names pages get under ``out``.

Every page is one plain dict (its data) rendered from ``templates/`` (autoescape on,
StrictUndefined: a missing field is an error, never an empty cell) and written with the same dict
as JSON beside it (``x.html`` + ``x.json``). Links are relative (``root``), nothing records the
build time or an absolute path, so `dvc repro` writes the same bytes again.
"""

from __future__ import annotations

import json
import re
import shutil
import unicodedata
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

from recipe_ledger import metrics as metric_table
from recipe_ledger import tables as tables_mod
from recipe_ledger.errors import InputError
from recipe_ledger.paths import contained
from recipe_ledger.recipes.lab import DEFAULT_TITLE

MARKER = ".recipe-ledger-site"  # a folder holding this file may be emptied and rebuilt
Progress = Callable[[str, int, int], None]  # (stage, done, total): the CLI's progress bar


def slugify(text: str) -> str:
    """A file-name-safe ASCII slug (non-ASCII folded or dropped); never empty."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9.]+", "-", ascii_text.lower()).strip("-.")
    return slug[:80] or "x"


def unique_path(path: str, used: set[str]) -> str:
    """``path``, or ``path`` with ``-2``, ``-3``... before ``.html`` when a page already has it."""
    candidate, n = path, 2
    while candidate in used:
        candidate = path.replace(".html", f"-{n}.html")
        n += 1
    used.add(candidate)
    return candidate


def value_with_unit(value: Any, name: str) -> str:
    """A number of metric ``name`` (or of a summary key ``arm.cN.metric``) with its unit."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return tables_mod.fmt_number(value)
    parsed = metric_table.parse_summary_key(name)
    return metric_table.format_value(parsed[2] if parsed else name, value)


def dump_json(data: Any, *, compact: bool = False) -> str:
    """Indented for small pages (readable diffs); compact (C encoder, 10x faster) for big ones."""
    if compact:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


class SiteWriter:
    """Renders templates and writes page + JSON pairs under ``out``; counts what it wrote."""

    def __init__(self, out: Path, site_title: str = DEFAULT_TITLE):
        self.out = out
        self.site_title = site_title
        self.pages = 0
        self.files = 0
        self.bytes = 0
        loader = jinja2.PackageLoader("recipe_ledger.site", "templates")
        self.env = jinja2.Environment(
            loader=loader,
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
        self.env.filters["num"] = tables_mod.fmt_number
        self.env.filters["pct"] = metric_table.format_effect
        self.env.filters["url"] = lambda v: quote(str(v))
        self.env.filters["unit"] = value_with_unit
        self.env.filters["percent"] = tables_mod.percent_text
        self.env.globals["site_title"] = site_title  # a lab's (lab.yaml), in every page's head and nav

    def write_text(self, rel: str, text: str) -> None:
        self.write_bytes(rel, text.encode("utf-8"))  # rel is built from recipe and entry names

    def write_bytes(self, rel: str, data: bytes) -> None:
        path = contained(self.out, rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.files += 1
        self.bytes += len(data)

    def page(
        self, rel: str, template: str, data: dict[str, Any], *, compact: bool = False, **extra: Any
    ) -> None:
        """``rel`` (x.html) from ``template`` with ``data``, and ``data`` as x.json beside it."""
        root = "../" * rel.count("/")
        html = self.env.get_template(template).render(
            data=data, root=root, json_href=Path(rel).stem + ".json", **extra
        )
        self.write_text(rel, html)
        self.write_text(rel[: -len(".html")] + ".json", dump_json(data, compact=compact))
        self.pages += 1


def run_tasks(
    count: int, task: Callable[[int, SiteWriter], None], writer: SiteWriter, stage: str, tick: Progress
) -> None:
    """``task(i, writer)`` for i in range(count), ticking the progress bar. Serial on purpose: a
    forked pool measured slower here (2 shared cores, copy-on-write of the loaded ledger)."""
    for i in range(count):
        task(i, writer)
        tick(stage, i + 1, count)


def prepare_out(out: Path) -> None:
    """Empty ``out`` for a fresh build, refusing to touch a folder that is not a site."""
    if out.exists():
        if not out.is_dir():
            raise InputError("the site output is not a folder", where=str(out))
        if any(out.iterdir()) and not (out / MARKER).is_file():
            raise InputError(
                f"{out} holds files but no {MARKER} marker: not emptying a folder this tool did not build",
                where=str(out),
                hint="pass --out to an empty or generated folder",
            )
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("generated by `ledger site`; this folder is emptied on every build\n")


def copy_static(writer: SiteWriter) -> None:
    static = resources.files("recipe_ledger.site") / "static"
    for item in sorted(static.iterdir(), key=lambda p: p.name):
        if item.is_file():
            writer.write_text(f"static/{item.name}", item.read_text(encoding="utf-8"))
