"""`ledger site`: the verified ledger, the recipes and the tables -> a static site under ``out``.

This module only orders the build: it loads the inputs once (the ledger through
``ledger.published``, the recipes and box profiles), empties ``out``, and hands each page kind
(``site/pages/``) what it shows; ``site/writer.py`` renders and writes every page with its JSON.

Trust rules: the ledger must verify (as for the tables); every entry passes ``redact_obj``
before anything of it is shown; a retracted entry stays, struck through, linked to its notice.
A recipe that does not load still gets a page, showing its error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from recipe_ledger.ledger.published import load_verified
from recipe_ledger.recipes.boxes import list_boxes
from recipe_ledger.recipes.lab import read_lab
from recipe_ledger.site.entries import index_ledger
from recipe_ledger.site.pages.experiments import experiment_pages, write_experiments
from recipe_ledger.site.pages.home import write_home
from recipe_ledger.site.pages.recipes import (
    CachedRoot,
    load_recipes,
    recipe_evidence,
    start_builders,
    write_recipes,
)
from recipe_ledger.site.pages.releases import release_pages, write_releases
from recipe_ledger.site.pages.tables import write_tables_page
from recipe_ledger.site.pages.timeline import write_timeline
from recipe_ledger.site.shown import refresh_secret_env
from recipe_ledger.site.writer import Progress, SiteWriter, copy_static, prepare_out


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
    boxes = list_boxes(root.boxes_dirs)  # a lab's boxes/ first, then its recipes' (recipes.layers)
    prepare_out(out)
    writer = SiteWriter(out, read_lab(project).site_title)
    copy_static(writer)
    infos = load_recipes(root)
    report.recipes = len(infos)
    report.broken_recipes = [i.name for i in infos if i.error]
    hardware_ids = root.hardware_ids() if (root.root / "taxonomy.yaml").is_file() else []
    builders = start_builders(root, [i.loaded for i in infos])  # in worker processes, meanwhile:
    evidence = recipe_evidence(infos, index, {b.id: b for b in boxes}, hardware_ids)
    releases = release_pages(index)
    experiments = experiment_pages(index, project)
    write_releases(writer, releases, index)
    write_experiments(writer, experiments, project)
    write_timeline(writer, index, tick)
    write_tables_page(writer, view)
    write_recipes(writer, infos, builders(), root, boxes, evidence, index, tick)
    write_home(writer, infos, evidence, hardware_ids, index, releases, experiments)
    report.pages, report.files, report.bytes = writer.pages, writer.files, writer.bytes
    report.seconds = time.perf_counter() - started
    return report
