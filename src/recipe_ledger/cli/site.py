"""`ledger site`: the static site, what the dvc stage `site` runs (see dvc.yaml and docs/site.md).

It refuses a ledger that does not verify. Paths given relative are kept relative in what the pages
record, so the output never depends on where the repository was cloned.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from recipe_ledger.cli.options import FOLDER, root_option, under_root

if TYPE_CHECKING:  # both imported when the command runs: `ledger --help` need not load rich or the site
    from rich.progress import Progress, TaskID

    from recipe_ledger.site.writer import Progress as SiteProgress


@click.command("site")
@root_option
@click.option(
    "--out",
    type=FOLDER,  # checked by under_root: one line, not click's usage block
    default=Path("site"),
    show_default=True,
    help="Folder for the static site, relative to --root (emptied first).",
)
@click.option("--progress/--no-progress", default=None, help="A progress bar (default: on a terminal).")
def site_cmd(root: Path, out: Path, progress: bool | None) -> None:
    """Build the static site: recipes with their command builder, releases, experiments, the ledger."""
    from recipe_ledger.site import build_site

    # sys.stderr, not click.get_text_stream: click 8.5 deprecates that (removed in 9.0) and it wraps the
    # same file, so whether it is a terminal reads the same.
    show = sys.stderr.isatty() if progress is None else progress
    with _progress_bar(show) as tick:
        report = build_site(root, under_root(root, out), progress=tick)
    broken = f", {len(report.broken_recipes)} recipe(s) that do not load" if report.broken_recipes else ""
    click.echo(
        f"{report.pages} pages, {report.files} files, {report.bytes / 1e6:.1f} MB in {out} "
        f"({report.recipes} recipes, {report.entries} ledger entries{broken}) in {report.seconds:.1f} s"
    )


class _progress_bar:
    """A rich progress bar fed by build_site's (stage, done, total) callback; silent when off."""

    def __init__(self, show: bool):
        self.show = show
        self.progress: Progress | None = None
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> SiteProgress:
        if not self.show:
            return lambda stage, done, total: None
        from rich.progress import Progress

        self.progress = Progress(transient=True)
        self.progress.start()
        return self._ticker(self.progress)

    def _ticker(self, progress: Progress) -> SiteProgress:
        def tick(stage: str, done: int, total: int) -> None:
            if stage not in self.tasks:
                from rich.markup import escape  # a stage name is never markup

                self.tasks[stage] = progress.add_task(escape(stage), total=total)
            progress.update(self.tasks[stage], completed=done)

        return tick

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
