"""`ledger site`: the verified ledger, the recipes and the tables -> a static site under ``out``.

Each page is built from one plain dict (its data), rendered with jinja2 (autoescape on,
StrictUndefined: a missing field is an error, never an empty cell) and written with the same
data as JSON beside it (``x.html`` + ``x.json``). Output is deterministic: sorted inputs, fixed
number formats, relative links, no build time and no absolute path, so `dvc repro` regenerates
it byte for byte.

Trust rules: the ledger must verify (as for the tables); every entry passes ``redact_obj``
before anything of it is shown; a retracted entry stays, struck through, linked to its notice.
A recipe that does not load still gets a page, showing its error.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import time
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from markdown_it import MarkdownIt

from recipe_ledger import metrics as metric_table
from recipe_ledger import tables as tables_mod
from recipe_ledger.errors import InputError, LedgerError
from recipe_ledger.ledger.published import LedgerView, load_verified
from recipe_ledger.ledger.views import dirty_flag, image_text, summarize
from recipe_ledger.paths import contained
from recipe_ledger.recipes.boxes import Box, list_boxes
from recipe_ledger.recipes.catalog import LoadedRecipe, RecipeRoot
from recipe_ledger.recipes.command import CommandRequest, resolve_for_people
from recipe_ledger.site import experiments as experiments_mod
from recipe_ledger.site import plots, timeline
from recipe_ledger.site.recipes import (
    CachedRoot,
    error_text,
    fit_rows,
    recipe_name,
    redact,
    redact_all,
    refresh_secret_env,
    start_builders,
)

MARKER = ".recipe-ledger-site"  # a folder holding this file may be emptied and rebuilt
TIMELINE_PAGE = 1000  # entries per ledger timeline page
RECIPE_LEDGER_ROWS = 50  # newest entries naming a recipe listed on its page (the timeline has all)
EVIDENCE_LINKS = 3  # newest entries linked per recipe x hardware cell
TABLE_ROWS_SHOWN = 500  # rows of each table on tables.html (the files under tables/ have them all)
Progress = Callable[[str, int, int], None]


@dataclass
class BuildReport:
    out: Path
    pages: int = 0
    files: int = 0
    bytes: int = 0
    recipes: int = 0
    broken_recipes: list[str] = field(default_factory=list)
    entries: int = 0
    seconds: float = 0.0


# -- small helpers -----------------------------------------------------------------------------


def slugify(text: str) -> str:
    """A file-name-safe ASCII slug (non-ASCII folded or dropped); never empty."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9.]+", "-", ascii_text.lower()).strip("-.")
    return slug[:80] or "x"


def short(entry_id: str) -> str:
    return entry_id[:12]


def value_unit(name: str) -> str:
    """The unit of metric ``name`` or of a summary key ``arm.cN.metric``."""
    parsed = metric_table.parse_summary_key(name)
    return metric_table.unit(parsed[2] if parsed else name)


def value_with_unit(value: Any, name: str) -> str:
    """A number of metric ``name`` (or of a summary key ``arm.cN.metric``) with its unit."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return tables_mod.fmt_number(value)
    parsed = metric_table.parse_summary_key(name)
    return metric_table.format_value(parsed[2] if parsed else name, value)


def markdown_html(text: str, link: Callable[[str], str] | None = None) -> str:
    """CommonMark with tables; raw HTML in the source is escaped (shown as text), never passed on.
    ``link`` rewrites each link's target (a guide's site-absolute links: see ``guide_link``)."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    if link is not None:
        for token in tokens:
            for child in token.children or ():
                href = child.attrs.get("href") if child.type == "link_open" else None
                if isinstance(href, str):
                    child.attrs["href"] = link(href)
    return md.renderer.render(tokens, md.options, {})


UPSTREAM = "https://recipes.vllm.ai"  # where the recipes' own site-absolute links point


def guide_link(pages: dict[str, str], root: str) -> Callable[[str], str]:
    """A guide's ``/org/model`` link (recipes.vllm.ai's form): this site's page of that recipe when
    it has one, else the same path on recipes.vllm.ai; other links unchanged."""

    def rewrite(href: str) -> str:
        if not href.startswith("/") or href.startswith("//"):
            return href
        path, _, fragment = href.partition("#")
        page = pages.get(path.strip("/").lower())
        if page:
            return root + quote(page) + (f"#{fragment}" if fragment else "")
        return UPSTREAM + href

    return rewrite


def dump_json(data: Any, *, compact: bool = False) -> str:
    """Indented for small pages (readable diffs); compact (C encoder, 10x faster) for big ones."""
    if compact:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


# -- the ledger side ---------------------------------------------------------------------------


@dataclass
class LedgerIndex:
    """The verified entries (as stored: redact what you show), their statuses and where each is shown."""

    entries: list[dict[str, Any]]
    statuses: dict[str, str]
    heads: list[tuple[str, int, str]]
    by_id: dict[str, dict[str, Any]]
    retracted_by: dict[str, str]  # target id -> the retraction's id
    page_of: dict[str, int]  # entry id -> timeline page number (1 = newest)
    referred_by: dict[str, list[tuple[str, str]]]  # entry id -> [(relation, referring entry id)]

    def href(self, entry_id: str, root: str) -> str:
        page = self.page_of.get(entry_id, 1)
        name = "index" if page == 1 else f"page-{page}"
        return f"{root}ledger/{name}.html#e-{short(entry_id)}"


def index_ledger(view: LedgerView) -> LedgerIndex:
    entries = view.entries  # redacted where shown (a row, a page): walking all 100k is the slow part
    retracted_by: dict[str, str] = {}
    referred_by: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for entry in entries:
        for ref in entry.get("refs", ()):
            referred_by[ref.get("id")].append((ref.get("rel"), entry["id"]))
            if ref.get("rel") == "retracts":
                retracted_by.setdefault(ref["id"], entry["id"])
    newest_first = [e["id"] for e in reversed(entries)]
    page_of = {entry_id: i // TIMELINE_PAGE + 1 for i, entry_id in enumerate(newest_first)}
    return LedgerIndex(
        entries,
        view.statuses,
        view.heads,
        {e["id"]: e for e in entries},
        retracted_by,
        page_of,
        dict(referred_by),
    )


def entry_ref(index: LedgerIndex, entry_id: str, root: str) -> dict[str, Any]:
    """How a page links to an entry: id, status, href, and its retraction notice if any."""
    notice = index.retracted_by.get(entry_id)
    return {
        "id": entry_id,
        "short": short(entry_id),
        "status": index.statuses.get(entry_id, "unknown"),
        "href": index.href(entry_id, root),
        "retracted_by": {"id": notice, "short": short(notice), "href": index.href(notice, root)}
        if notice
        else None,
    }


_TOKEN_SPLIT = re.compile(r"[\s,;:()\[\]{}\"'`]+")


def entry_tokens(entry: dict[str, Any]) -> set[str]:
    """Lower-case words of an entry's subject-like fields (to tie entries to recipes and hardware)."""
    p = entry.get("payload", {})
    model = p.get("model") if isinstance(p.get("model"), dict) else {}
    experiment = p.get("experiment") if isinstance(p.get("experiment"), dict) else {}
    conditions = p.get("conditions") if isinstance(p.get("conditions"), dict) else {}
    fields = [
        p.get("subject"),
        p.get("lane"),
        model.get("name"),
        experiment.get("box"),
        conditions.get("box"),
        conditions.get("hardware"),
        p.get("title"),
        # an arm resolved from a recipe names it: "models/org/name.yaml · cpu_x86 · single_node_tp ..."
        *(a.get("source") for a in (experiment.get("arms") or {}).values() if isinstance(a, dict)),
    ]
    words: set[str] = set()
    for text in fields:
        if isinstance(text, str):
            words.update(w.strip(".").lower() for w in _TOKEN_SPLIT.split(text) if w)
    return words


# -- page writer -------------------------------------------------------------------------------


class SiteWriter:
    """Renders templates and writes page + JSON pairs under ``out``; counts what it wrote."""

    def __init__(self, out: Path, report: BuildReport):
        self.out = out
        self.report = report
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

    def write_text(self, rel: str, text: str) -> None:
        self.write_bytes(rel, text.encode("utf-8"))  # rel is built from recipe and entry names

    def write_bytes(self, rel: str, data: bytes) -> None:
        path = contained(self.out, rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.report.files += 1
        self.report.bytes += len(data)

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
        self.report.pages += 1


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


# -- recipes -----------------------------------------------------------------------------------


@dataclass
class RecipeInfo:
    ref: str
    name: str
    page: str  # path under out
    loaded: LoadedRecipe | None
    error: str | None = None


def load_recipes(root: RecipeRoot) -> list[RecipeInfo]:
    infos: list[RecipeInfo] = []
    used: set[str] = set()
    for path in root.recipe_paths:
        ref = root.ref_of(path)
        name = recipe_name(ref)
        page = _unique(f"recipes/{'/'.join(slugify(p) for p in name.split('/'))}.html", used)
        try:
            infos.append(RecipeInfo(ref, name, page, root.load(str(path))))
        except LedgerError as error:
            infos.append(RecipeInfo(ref, name, page, None, error_text(error, root)))
    return infos


def _unique(path: str, used: set[str]) -> str:
    candidate, n = path, 2
    while candidate in used:
        candidate = path.replace(".html", f"-{n}.html")
        n += 1
    used.add(candidate)
    return candidate


def recipe_keys(info: RecipeInfo) -> set[str]:
    """Words that, in an entry's subject, mean this recipe's model."""
    keys = {info.name.lower(), info.name.split("/")[-1].lower(), info.ref.lower()}
    if info.loaded:
        keys |= {info.loaded.recipe.meta.slug.lower(), info.loaded.recipe.model.model_id.lower()}
    return keys


def hardware_of(entry_words: set[str], boxes: dict[str, Box], hardware_ids: Iterable[str]) -> set[str]:
    found = {hw for hw in hardware_ids if hw in entry_words or hw.replace("_", "-") in entry_words}
    found |= {box.hardware for word in entry_words if (box := boxes.get(word)) and box.hardware}
    return found


def recipe_evidence(
    infos: list[RecipeInfo], index: LedgerIndex, boxes: dict[str, Box], hardware_ids: list[str]
) -> dict[str, list[tuple[dict[str, Any], set[str]]]]:
    """recipe name -> [(entry, hardware ids it names)] for entries whose subject names the recipe."""
    by_key: dict[str, str] = {}
    for info in infos:
        for key in recipe_keys(info):
            by_key.setdefault(key, info.name)
    found: dict[str, list] = defaultdict(list)
    for entry in index.entries:
        if entry.get("kind") not in ("result", "failure", "release", "note", "reproduction"):
            continue
        words = entry_tokens(entry)
        names = {by_key[w] for w in words if w in by_key}
        for name in sorted(names):
            found[name].append((entry, hardware_of(words, boxes, hardware_ids)))
    return found


def recipe_page_data(
    info: RecipeInfo,
    root: RecipeRoot,
    boxes: list[Box],
    evidence: list,
    index: LedgerIndex,
    pages: dict[str, str] | None = None,
) -> tuple[dict[str, Any], str]:
    """(page data, guide HTML) of one recipe (its builder data is computed apart: start_builders)."""
    rel_root = "../" * info.page.count("/")
    shown = evidence[-RECIPE_LEDGER_ROWS:][::-1]
    ledger_rows = [_evidence_row(entry, hws, index, rel_root) for entry, hws in shown]
    base = {
        "name": info.name,
        "ref": info.ref,
        "error": info.error,
        "ledger": ledger_rows,
        "ledger_total": len(evidence),
    }
    if info.loaded is None:
        return base, ""
    recipe = info.loaded.recipe
    guide = redact(recipe.guide if isinstance(recipe.guide, str) else "")
    data: dict[str, Any] = {
        **base,
        "title": redact(recipe.meta.title),
        "provider": redact(recipe.meta.provider),
        "description": redact(recipe.meta.description),
        "model_id": recipe.model.model_id,
        "hardware": {hw: str(state) for hw, state in recipe.meta.hardware.items()},
        "evidence": evidence_cells(
            {hw: str(state) for hw, state in recipe.meta.hardware.items()}, evidence, index, rel_root
        ),
        "variants": [
            {
                "name": v,
                "precision": var.precision,
                "vram_minimum_gb": var.vram_minimum_gb,
                "description": redact(var.description or ""),
            }
            for v, var in recipe.variants.items()
        ],
        "fit": fit_rows(root, info.loaded, boxes),
        "guide_markdown": guide,
    }
    return data, markdown_html(guide, guide_link(pages or {}, rel_root))


def _evidence_row(entry: dict[str, Any], hardware: set[str], index: LedgerIndex, root: str) -> dict[str, Any]:
    return {
        **entry_ref(index, entry["id"], root),
        "kind": entry.get("kind"),
        "ts": entry.get("ts", ""),
        "summary": redact(summarize(entry, 140)),
        "hardware": sorted(hardware),
    }


EVIDENCE_KINDS = ("result", "release", "reproduction", "failure")


def evidence_cells(
    hardware: dict[str, str], evidence: list[tuple[dict[str, Any], set[str]]], index: LedgerIndex, root: str
) -> list[dict[str, Any]]:
    """Per hardware the recipe names (or the ledger ties to it): what the recipe claims, and the
    measured evidence behind it by kind, with the newest entries linked; or none."""
    names = list(hardware) + sorted({hw for _, hws in evidence for hw in hws} - set(hardware))
    cells = []
    for hw in names:
        here = [e for e, hws in evidence if hw in hws and e.get("kind") in EVIDENCE_KINDS]
        counts = {kind: sum(e.get("kind") == kind for e in here) for kind in EVIDENCE_KINDS}
        newest = [_evidence_row(e, {hw}, index, root) for e in here[-EVIDENCE_LINKS:][::-1]]
        cells.append({"hardware": hw, "claimed": hardware.get(hw, ""), "counts": counts, "newest": newest})
    return cells


def api_recipe(info: RecipeInfo, root: RecipeRoot) -> dict[str, Any]:
    """The recipes.vllm.ai JSON shape: hf_id, meta, recommended_command first, then the rest."""
    if info.loaded is None:
        return {"hf_id": info.name, "error": info.error}
    dumped = redact_all(info.loaded.recipe.model_dump(mode="json", exclude_none=True))
    out: dict[str, Any] = {"hf_id": info.name, "meta": dumped.pop("meta")}
    recommended = _recommended(info, root)
    if recommended is not None:
        out["recommended_command"] = recommended
    for key in ("strategy_overrides", "compatible_strategies", "default_strategy", "dependencies"):
        dumped.pop(key, None)
    return {**out, **dumped}


def _recommended(info: RecipeInfo, root: RecipeRoot) -> dict[str, Any] | None:
    """The default selection's builder result (recipes.vllm.ai's `recommended_command`)."""
    try:
        resolved = resolve_for_people(root, CommandRequest(info.name))
    except LedgerError:
        return None
    return redact_all(resolved.result)


# -- pages -------------------------------------------------------------------------------------


def index_page_data(infos: list[RecipeInfo], evidence: dict, hardware_order: list[str], counts: dict) -> dict:
    used = {hw for info in infos if info.loaded for hw in info.loaded.recipe.meta.hardware}
    used |= {hw for rows in evidence.values() for _, hws in rows for hw in hws}
    columns = [hw for hw in hardware_order if hw in used]
    rows = []
    for info in infos:
        declared = dict(info.loaded.recipe.meta.hardware) if info.loaded else {}
        cells = {}
        for hw in columns:
            measured = [e for e, hws in evidence.get(info.name, []) if hw in hws]
            cells[hw] = {
                "declared": str(declared.get(hw, "")),
                "results": sum(e.get("kind") in ("result", "release", "reproduction") for e in measured),
                "failures": sum(e.get("kind") == "failure" for e in measured),
            }
        title = redact(info.loaded.recipe.meta.title) if info.loaded else info.name
        provider = redact(info.loaded.recipe.meta.provider) if info.loaded else ""
        rows.append(
            {
                "name": info.name,
                "page": info.page,
                "title": title,
                "error": info.error,
                "cells": cells,
                "search": " ".join([info.name, title, provider, *declared]).lower(),
                "measured": any(c["results"] or c["failures"] for c in cells.values()),
            }
        )
    return {"hardware": columns, "recipes": rows, "counts": counts}


def timeline_rows(index: LedgerIndex, entries: list[dict[str, Any]], root: str) -> list[dict[str, Any]]:
    clean = _cached_redact()
    return [
        timeline.row_data(entry, entry_ref(index, entry["id"], root), _refs(index, entry, root), clean)
        for entry in entries
    ]


def _refs(index: LedgerIndex, entry: dict[str, Any], root: str) -> list[dict[str, Any]]:
    return [
        {"rel": r.get("rel"), **entry_ref(index, r["id"], root)}
        for r in entry.get("refs", ())
        if r.get("id") in index.by_id
    ]


def _cached_redact() -> Callable[[str], str]:
    """``redact`` of a shown string, cached: writers, kinds and subjects repeat on every page."""
    return lru_cache(maxsize=1 << 16)(redact)


def release_pages(index: LedgerIndex) -> list[tuple[str, dict[str, Any]]]:
    """[(path, data)] per release entry; each with its pins, numbers and diff to the previous one."""
    releases = [redact_all(e) for e in index.entries if e.get("kind") == "release"]
    by_lane: dict[str, list[dict]] = defaultdict(list)
    for entry in releases:
        by_lane[str(entry["payload"].get("lane", "?"))].append(entry)
    used: set[str] = set()
    paths = {
        e["id"]: _unique(
            f"releases/{slugify(str(e['payload'].get('lane')))}/"
            f"{slugify(str(e['payload'].get('version')))}.html",
            used,
        )
        for e in releases
    }
    out = []
    for lane_entries in by_lane.values():
        for i, entry in enumerate(lane_entries):
            previous = _previous_release(entry, lane_entries[:i], index)
            out.append((paths[entry["id"]], _release_data(entry, previous, index, paths)))
    return sorted(out)


def _previous_release(entry: dict, earlier: list[dict], index: LedgerIndex) -> dict | None:
    target = entry["payload"].get("supersedes")
    if target and target in index.by_id:
        return redact_all(index.by_id[target])
    return earlier[-1] if earlier else None


def _release_data(entry: dict, previous: dict | None, index: LedgerIndex, paths: dict[str, str]) -> dict:
    root = "../" * paths[entry["id"]].count("/")
    p = entry["payload"]
    git = entry.get("git") or {}
    return {
        "entry": entry_ref(index, entry["id"], root),
        "lane": p.get("lane"),
        "lane_title": p.get("lane_title"),
        "version": p.get("version"),
        "ts": entry.get("ts"),
        "writer": entry.get("writer"),
        "changes": p.get("changes", []),
        "command": p.get("command"),
        "flags": p.get("flags", []),
        "image": _with_keys(p.get("image"), ("ref", "digest", "pinned")),
        "model": _with_keys(p.get("model"), ("name", "path", "revision")),
        "spec_sha256": p.get("spec_sha256"),
        "metrics": [[k, v] for k, v in sorted(p.get("metrics", {}).items())],
        "scripts": sorted((git.get("scripts") or {}).items()),
        "git_commit": git.get("commit"),
        "git_dirty": git.get("dirty"),
        "git_flag": dirty_flag(entry),
        "origin": _with_keys(p.get("origin") or {}, ("how", "source", "item", "as_of")),
        "artifacts": sorted(p.get("artifacts", {}).items()),
        "previous": (
            {
                "version": previous["payload"].get("version"),
                "href": root + paths[previous["id"]],
                **_release_diff(previous["payload"], p),
            }
            if previous
            else None
        ),
        "referred_by": [
            {
                "rel": rel,
                **entry_ref(index, other, root),
                "outcome": (index.by_id.get(other) or {}).get("payload", {}).get("outcome"),
            }
            for rel, other in index.referred_by.get(entry["id"], [])
        ],
        "verified": p.get("verified"),
        "unverified": p.get("unverified") or release_doubts(entry, index),
        "reproductions": reproductions_of(index, entry["id"], root),
        "box": sorted((p.get("box") or {}).items()),
        "numbers": [_release_number(n, index, root) for n in p.get("numbers", [])],
    }


def release_doubts(entry: dict[str, Any], index: LedgerIndex) -> list[str]:
    """Why a release that records no verification (an imported or older one) is not verified,
    read from its own pins: the reasons `ledger release publish` would give today."""
    p = entry.get("payload") or {}
    origin, image, model = p.get("origin") or {}, p.get("image") or {}, p.get("model") or {}
    checks = [
        (origin.get("how") == "imported", f"imported from {origin.get('source')}, not measured here"),
        (not image.get("digest"), "the image has no digest (a tag can move)"),
        (not model.get("revision"), "the model revision is not recorded"),
        (not p.get("spec_sha256"), "no release spec hash"),
        (not p.get("numbers"), "no number is tied to a result entry of this ledger"),
        (bool(dirty_flag(entry)), "written from a dirty tree"),
    ]
    return [reason for failed, reason in checks if failed]


def reproductions_of(index: LedgerIndex, entry_id: str, root: str) -> list[dict[str, Any]]:
    """The reproduction entries that name ``entry_id`` (as their target or as `see`), in words."""
    out = []
    for _, other in index.referred_by.get(entry_id, []):
        found = index.by_id.get(other) or {}
        if found.get("kind") != "reproduction":
            continue
        payload = redact_all(found.get("payload") or {})
        out.append(
            {
                **entry_ref(index, other, root),
                "ts": found.get("ts", ""),
                "outcome": payload.get("outcome"),
                "lines": [r["words"] for r in experiments_mod.reproduction_lines(payload)],
            }
        )
    return list({r["id"]: r for r in out}.values())


def _release_number(number: dict, index: LedgerIndex, root: str) -> dict[str, Any]:
    """A v2 release number with the result entry that measured it (linked when the ledger has it)."""
    result = number.get("result")
    return {
        **_keys_filled(number, ("name", "metric", "point", "arm", "value", "unit", "tolerance", "verified")),
        "n": len(number.get("samples") or []),
        "result": entry_ref(index, result, root) if result and result in index.by_id else None,
    }


def _with_keys(value: Any, keys: tuple[str, ...]) -> dict[str, Any] | None:
    """``_keys_filled`` of a payload sub-object that may be absent (None then)."""
    if not isinstance(value, dict):
        return None
    return _keys_filled(value, keys)


def _keys_filled(value: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """A payload sub-object with every key a template reads (stored payloads omit None)."""
    return {**{k: None for k in keys}, **value}


def _release_diff(old: dict, new: dict) -> dict[str, Any]:
    old_flags, new_flags = list(old.get("flags", [])), list(new.get("flags", []))
    old_metrics, new_metrics = old.get("metrics", {}), new.get("metrics", {})
    command = list(
        difflib.unified_diff(
            (old.get("command") or "").splitlines(),
            (new.get("command") or "").splitlines(),
            "previous",
            "this",
            lineterm="",
        )
    )
    return {
        "flags_added": [f for f in new_flags if f not in old_flags],
        "flags_removed": [f for f in old_flags if f not in new_flags],
        "image": [image_text(old.get("image")), image_text(new.get("image"))],
        "model_revision": [
            (old.get("model") or {}).get("revision"),
            (new.get("model") or {}).get("revision"),
        ],
        "metrics": [
            [k, old_metrics.get(k), new_metrics.get(k)] for k in sorted(set(old_metrics) | set(new_metrics))
        ],
        "command_diff": command,
    }


def lane_history(index: LedgerIndex, pages: list[tuple[str, dict]]) -> list[dict[str, Any]]:
    """Per lane: its versions (oldest first) and the history chart of their numbers."""
    lanes: dict[str, list[dict]] = defaultdict(list)
    for path, data in pages:
        lanes[str(data["lane"])].append({"path": path, **data})
    out = []
    for lane, versions in sorted(lanes.items()):
        versions.sort(key=lambda d: (d["ts"] or "", d["entry"]["id"]))
        names = [str(v["version"]) for v in versions]
        by_unit: dict[str, list[str]] = defaultdict(list)
        for metric in sorted({k for v in versions for k, _ in v["metrics"]}):
            by_unit[value_unit(metric)].append(metric)
        charts = [
            plots.history_chart(
                names,
                {m: [dict(v["metrics"]).get(m) for v in versions] for m in metrics},
                title=f"{lane}: numbers across versions" + (f" ({unit})" if unit else ""),
                y_label=f"value ({unit})" if unit else "value (no unit recorded)",
            )
            for unit, metrics in sorted(by_unit.items())
        ] or [plots.history_chart(names, {}, title=f"{lane}: no numbers recorded")]
        out.append(
            {
                "lane": lane,
                "title": versions[-1]["lane_title"] or lane,
                "charts": charts,
                "versions": [
                    {
                        "version": v["version"],
                        "path": v["path"],
                        "status": v["entry"]["status"],
                        "retracted_by": v["entry"]["retracted_by"],
                        "ts": v["ts"],
                    }
                    for v in versions
                ],
            }
        )
    return out


ARM_KEYS = ("source", "engine", "fingerprint", "argv", "env", "image", "model_sha256")
BAR_KEYS = (
    "candidate",
    "metric",
    "point",
    "direction",
    "min_effect",
    "outcome",
    "effect",
    "ci_low",
    "ci_high",
    "mde",
    "control",
    "value",
    "reason",
)


def sweep_series(metrics: dict[str, float]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """``arm.cN.metric`` summary metrics -> metric -> arm -> [(N, value)]."""
    out: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for key, value in sorted(metrics.items()):
        parsed = metric_table.parse_summary_key(key)
        if parsed and isinstance(value, (int, float)):
            arm, point, metric = parsed
            out[metric][arm].append((float(point), float(value)))
    return {m: dict(arms) for m, arms in out.items()}


def experiment_pages(index: LedgerIndex, project: Path) -> list[tuple[str, dict[str, Any], list[str]]]:
    """[(path, data, svg plots)] per result entry carrying an experiment record."""
    out = []
    for entry in index.entries:
        experiment = (entry.get("payload") or {}).get("experiment")
        if entry.get("kind") != "result" or not isinstance(experiment, dict):
            continue
        entry = redact_all(entry)
        experiment = entry["payload"]["experiment"]
        path = f"experiments/{slugify(str(experiment.get('name', 'experiment')))}-{short(entry['id'])}.html"
        out.append((path, *_experiment_data(entry, experiment, index, "../", project)))
    return out


def experiment_charts(
    bars: list[dict[str, Any]],
    sweeps: dict,
    chosen: list[str],
    control: str | None,
    repeats: dict,
    point_axis: experiments_mod.PointAxis = experiments_mod.CONCURRENCY,
) -> list[str]:
    """The bar metrics first (each arm's median and repeats at the bar's point), then the verdict
    effects, then the sweeps against their points (``point_axis``: what they are, concurrency or a
    launch flag's value); every axis names its unit."""
    places = dict.fromkeys((str(b["metric"]), str(b["point"])) for b in bars)
    charts = [_bar_metric_chart(m, pt, bars, control, repeats.get((m, pt), {})) for m, pt in places]
    skew = _skew_values(sweeps)
    if skew:
        charts.append(
            plots.skew_chart(
                plots.skew_curves(skew),
                title="Routing skew: share of hits on the hottest experts, median per arm",
            )
        )
    if bars:
        charts.append(plots.effects_chart(bars))
    for metric in chosen:
        points = {x for values in sweeps[metric].values() for x, _ in values}
        if len(points) == 1:  # one point (a study's nominal one): arms side by side, not a line
            (point,) = points
            values = {arm: v for arm, pts in sweeps[metric].items() for _, v in pts}
            samples = repeats.get((metric, f"{point:g}"), {})
            charts.append(
                plots.arms_chart(
                    values,
                    title=f"{metric} at point {point:g}: median per arm, dots are repeats",
                    x_label=plots.axis_label(metric),
                    control=control,
                    samples=samples,
                )
            )
            continue
        samples = {
            arm: [
                (float(pt), v)
                for (name, pt), by_arm in repeats.items()
                if name == metric
                for v in by_arm.get(arm, [])
            ]
            for arm in sweeps[metric]
        }
        charts.append(
            plots.sweep_chart(
                sweeps[metric],
                title=f"{metric} against {point_axis.meaning} (line: median; hollow dots: repeats)",
                x_label=point_axis.label,
                y_label=plots.axis_label(metric, short=True),
                samples=samples,
            )
        )
    return charts


def _skew_values(sweeps: dict) -> dict[str, dict[int, float]]:
    """arm -> {expert share %: hit share} from a routing result's figures (first point of each)."""
    out: dict[str, dict[int, float]] = {}
    for share in plots.SKEW_SHARES:
        for arm, points in sweeps.get(f"routing_hit_share_top{share}", {}).items():
            if points:
                out.setdefault(arm, {})[share] = float(sorted(points)[0][1])
    return out


def _bar_metric_chart(
    metric: str, point: str, bars: list[dict[str, Any]], control: str | None, samples: dict[str, list[float]]
) -> str:
    """One bar metric at its point: the control's and each candidate's median, and the repeats."""
    here = [b for b in bars if (str(b["metric"]), str(b["point"])) == (metric, point)]
    values = {str(b["candidate"]): b["value"] for b in here if isinstance(b.get("value"), (int, float))}
    control_values = [b["control"] for b in here if isinstance(b.get("control"), (int, float))]
    if control and control_values:
        values[control] = control_values[0]
    direction = here[0].get("direction") if here else None
    better = f"; {direction} is better" if direction else ""
    return plots.arms_chart(
        values,
        title=f"{metric} at point {point}: median per arm, dots are repeats{better}",
        x_label=plots.axis_label(metric),
        control=control,
        samples=samples,
    )


def _experiment_data(
    entry: dict, experiment: dict, index: LedgerIndex, root: str, project: Path
) -> tuple[dict, list[str]]:
    p = entry["payload"]
    bars = [_keys_filled(b, BAR_KEYS) for b in experiment.get("bars", []) if isinstance(b, dict)]
    sweeps = sweep_series(p.get("metrics", {}))
    chosen = metric_table.headline(sweeps)
    control = experiments_mod.control_arm(experiment)
    arms = experiment.get("arms") or {}
    spec, params_note = experiments_mod.spec_data(project, experiment)
    params = experiments_mod.spec_params(spec)
    repeats = experiments_mod.repeat_values(project, experiment, p.get("artifacts") or {})
    charts = experiment_charts(bars, sweeps, chosen, control, repeats, experiments_mod.point_axis(spec))
    calibration = experiment.get("calibration")
    data = {
        "entry": entry_ref(index, entry["id"], root),
        "ts": entry.get("ts"),
        "writer": entry.get("writer"),
        "name": experiment.get("name"),
        "hypothesis": experiment.get("hypothesis", ""),
        "box": experiment.get("box"),
        "run_id": experiment.get("run_id"),
        "spec": experiment.get("spec"),
        "spec_sha256": experiment.get("spec_sha256"),
        "points": experiment.get("points", []),
        "repeats": experiment.get("repeats"),
        "schedule": experiment.get("schedule", []),
        "instruments": sorted((experiment.get("instruments") or {}).items()),
        "method": experiment.get("method"),
        "host": sorted((experiment.get("host") or {}).items()),
        "duration_s": experiment.get("duration_s"),
        # Every arm is an object: ExperimentRecord.arms was validated when the entry was written.
        "arms": [
            {"name": k, "params": sorted(params.get(k, {}).items()), **_keys_filled(v, ARM_KEYS)}
            for k, v in sorted(arms.items(), key=lambda kv: (kv[0] != control, kv[0]))
        ],
        "control": control,
        "differences": experiments_mod.arm_differences(arms, control, params),
        "params_note": params_note,
        "instrument_classes": experiments_mod.instrument_classes(p),
        "repeats_shown": bool(repeats),
        "reproductions": reproductions_of(index, entry["id"], root),
        "bars": bars,
        # Cross-engine experiments: the one client that measured both arms, per bar.
        "clients": sorted((experiment.get("clients") or {}).items()),
        "verdict": p.get("verdict"),
        "text": p.get("text", ""),
        "calibration": entry_ref(index, calibration, root) if calibration in index.by_id else None,
        "metrics": [[k, v] for k, v in sorted(p.get("metrics", {}).items())],
        "artifacts": sorted(p.get("artifacts", {}).items()),
        "traces": [
            {**t, "link": root + t["href"]}
            for t in experiments_mod.trace_files(project, experiment, p.get("artifacts") or {})
        ],
        "mlflow": sorted((p.get("mlflow") or {}).items()),
        "scripts": sorted(((entry.get("git") or {}).get("scripts") or {}).items()),
        "git_commit": (entry.get("git") or {}).get("commit"),
        "git_flag": dirty_flag(entry),
        "sweep_metrics": chosen,
    }
    return data, charts


# -- tables ------------------------------------------------------------------------------------


def read_tables(view: LedgerView) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(tables.html's data, the table files) computed by the same pure functions as the tables
    stage from the same verified ledger (reading back the json files costs more at 100k entries).
    The files are copied under the site's own tables/, so its links work when site/ is served alone."""
    out, files = {}, {}
    for table in tables_mod.build_tables(view):
        rows = [
            dict(zip(table.columns, (tables_mod.json_value(c) for c in row), strict=False))
            for row in table.rows[:TABLE_ROWS_SHOWN]
        ]
        out[table.name] = {
            "table": table.name,
            "title": table.title,
            "columns": list(table.columns),
            "provenance": tables_mod.provenance(view),
            "row_count": len(table.rows),
            "rows": rows,
        }
        files[f"{table.name}.csv"] = tables_mod.to_csv(table)
        files[f"{table.name}.json"] = tables_mod.to_json(table, view)
        files[f"{table.name}.md"] = tables_mod.to_markdown(table, view)
    return out, files


# -- llms.txt ----------------------------------------------------------------------------------


def llms_txt(infos: list[RecipeInfo], releases: list[tuple[str, dict]], experiments: list) -> str:
    lines = [
        "# Recipe Ledger",
        "",
        (
            "> Serving recipes for large models, with every published number tied to an append-only, "
            "verified ledger entry. Retracted numbers stay, struck through, linked to their notice."
        ),
        "",
        "## API",
        "",
        "- [models.json](api/models.json): every recipe (hf_id, title, provider, url, json)",
        "- [tables](tables.html): published tables (csv, json, md) regenerated by `dvc repro`",
        "",
        "## Recipes",
        "",
    ]
    lines += [f"- [{_one_line(i.name)}]({quote(i.page)}): {_one_line(_description(i))}" for i in infos]
    lines += ["", "## Releases", ""]
    lines += [
        f"- [{_one_line(str(d['lane']))} {_one_line(str(d['version']))}]({quote(p)}): {d['entry']['status']}"
        for p, d in releases
    ]
    lines += ["", "## Experiments", ""]
    lines += [
        f"- [{_one_line(str(d['name']))}]({quote(p)}): {_one_line(str(d['verdict'] or ''))}"
        for p, d, _ in experiments
    ]
    return "\n".join(lines) + "\n"


def _description(info: RecipeInfo) -> str:
    if info.loaded is None:
        return f"does not load: {info.error}"
    return redact(info.loaded.recipe.meta.description)[:300]


def _one_line(text: str) -> str:
    return " ".join(text.replace("[", "(").replace("]", ")").split())


# -- the build ---------------------------------------------------------------------------------


def build_site(
    project: Path, out: Path, *, recipes_dir: Path | None = None, progress: Progress | None = None
) -> BuildReport:
    """Build the whole site of ``project`` (ledger/, recipes/, tables/) into ``out``."""
    started = time.perf_counter()
    tick = progress or (lambda stage, done, total: None)
    view = load_verified(project)
    report = BuildReport(out=out, entries=len(view.entries))
    index = index_ledger(view)
    refresh_secret_env()
    root = CachedRoot(recipes_dir or project / "recipes")
    boxes = list_boxes(root.root / "boxes") if (root.root / "boxes").is_dir() else []
    prepare_out(out)
    writer = SiteWriter(out, report)
    copy_static(writer)
    infos = load_recipes(root)
    report.recipes = len(infos)
    report.broken_recipes = [i.name for i in infos if i.error]
    hardware_ids = root.hardware_ids() if (root.root / "taxonomy.yaml").is_file() else []
    builders = start_builders(root, [i.loaded for i in infos])  # in worker processes, meanwhile:
    evidence = recipe_evidence(infos, index, {b.id: b for b in boxes}, hardware_ids)
    releases = release_pages(index)
    experiments = experiment_pages(index, project)
    _write_releases(writer, releases, index)
    _write_experiments(writer, experiments, project)
    _write_timeline(writer, index, tick)
    _write_tables(writer, *read_tables(view))
    _write_recipes(writer, infos, builders(), root, boxes, evidence, index, tick)
    counts = _counts(index, infos, releases, experiments)
    writer.page("index.html", "index.html", index_page_data(infos, evidence, hardware_ids, counts))
    writer.write_text("api/models.json", dump_json(_models_index(infos)))
    writer.write_text("llms.txt", llms_txt(infos, releases, experiments))
    report.seconds = time.perf_counter() - started
    return report


def _write_recipes(
    writer: SiteWriter,
    infos: list[RecipeInfo],
    builders: list[dict[str, Any] | None],
    root: RecipeRoot,
    boxes: list[Box],
    evidence: dict,
    index: LedgerIndex,
    tick: Progress,
) -> None:
    pages = {i.name.lower(): i.page for i in infos}

    def one(i: int, out: SiteWriter) -> None:
        info = infos[i]
        data, guide_html = recipe_page_data(info, root, boxes, evidence.get(info.name, []), index, pages)
        page = {**data, "builder": builders[i]}
        out.page(info.page, "recipe.html", page, compact=True, guide_html=guide_html)
        out.write_text(f"api/{info.name}.json", dump_json(api_recipe(info, root)))

    run_tasks(len(infos), one, writer, "recipes", tick)


def _write_releases(writer: SiteWriter, releases: list, index: LedgerIndex) -> None:
    for path, data in releases:
        writer.page(path, "release.html", data)
    lanes = lane_history(index, releases)
    writer.page(
        "releases/index.html",
        "releases.html",
        {"lanes": [{k: v for k, v in lane.items() if k != "charts"} for lane in lanes]},
        charts={lane["lane"]: lane["charts"] for lane in lanes},
    )


def _write_experiments(writer: SiteWriter, experiments: list, project: Path) -> None:
    for path, data, charts in experiments:
        writer.page(path, "experiment.html", data, charts=charts)
        for trace in data["traces"]:  # copied so the page's links work when site/ is served alone
            writer.write_bytes(trace["href"], (project / trace["src"]).read_bytes())
    listing = [
        {
            "path": path,
            "name": d["name"],
            "box": d["box"],
            "ts": d["ts"],
            "verdict": d["verdict"],
            "entry": d["entry"],
        }
        for path, d, _ in experiments
    ]
    writer.page("experiments/index.html", "experiments.html", {"experiments": listing})


def _write_timeline(writer: SiteWriter, index: LedgerIndex, tick: Progress) -> None:
    newest_first = list(reversed(index.entries))
    pages = max(1, -(-len(newest_first) // TIMELINE_PAGE))
    kinds = sorted({e.get("kind", "") for e in newest_first})
    statuses = sorted({index.statuses[e["id"]] for e in newest_first})

    def one(i: int, out: SiteWriter) -> None:
        page = i + 1
        chunk = newest_first[i * TIMELINE_PAGE : page * TIMELINE_PAGE]
        name = "index" if page == 1 else f"page-{page}"
        entries = timeline_rows(index, chunk, "../")
        data = {
            "page": page,
            "pages": pages,
            "kinds": kinds,
            "statuses": statuses,
            "heads": [{"writer": w, "entries": n, "head": h} for w, n, h in index.heads],
            "entries": entries,
        }
        rows = timeline.rows_html(entries)
        out.page(f"ledger/{name}.html", "ledger.html", data, compact=True, rows_html=rows)

    run_tasks(pages, one, writer, "ledger", tick)


def _write_tables(writer: SiteWriter, published: dict[str, dict[str, Any]], files: dict[str, str]) -> None:
    """The first rows of each table, and the whole files under the site's tables/ (linked)."""
    for name, text in sorted(files.items()):
        writer.write_text(f"tables/{name}", text)
    writer.page(
        "tables.html",
        "tables.html",
        {
            "tables": list(published.values()),
            "rows_shown": TABLE_ROWS_SHOWN,
        },
    )


def _counts(index: LedgerIndex, infos: list, releases: list, experiments: list) -> dict[str, int]:
    kinds: dict[str, int] = defaultdict(int)
    for entry in index.entries:
        kinds[entry.get("kind", "")] += 1
    retracted = sum(1 for s in index.statuses.values() if s == "retracted")
    return {
        "entries": len(index.entries),
        "recipes": len(infos),
        "releases": len(releases),
        "experiments": len(experiments),
        "failures": kinds.get("failure", 0),
        "retracted": retracted,
    }


def _models_index(infos: list[RecipeInfo]) -> list[dict[str, Any]]:
    return [
        {
            "hf_id": info.name,
            "title": redact(info.loaded.recipe.meta.title) if info.loaded else info.name,
            "provider": redact(info.loaded.recipe.meta.provider) if info.loaded else "",
            "url": info.page,
            "json": f"api/{info.name}.json",
        }
        for info in infos
    ]
