"""`ledger site`: the static site, what the dvc stage `site` runs (see dvc.yaml and docs/site.md).

It refuses a ledger that does not verify. Paths given relative are kept relative in what the pages
record, so the output never depends on where the repository was cloned.
"""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import root_option, under_root


@click.command("site")
@root_option
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("site"),
    show_default=True,
    help="Folder for the static site, relative to --root (emptied first).",
)
@click.option("--progress/--no-progress", default=None, help="A progress bar (default: on a terminal).")
def site_cmd(root: Path, out: Path, progress: bool | None) -> None:
    """Build the static site: recipes with their command builder, releases, experiments, the ledger."""
    from recipe_ledger.site import build_site

    show = click.get_text_stream("stderr").isatty() if progress is None else progress
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
        self.progress = None
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        if not self.show:
            return lambda stage, done, total: None
        from rich.progress import Progress

        self.progress = Progress(transient=True)
        self.progress.start()
        return self._tick

    def _tick(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=total)
        self.progress.update(self.tasks[stage], completed=done)

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()
