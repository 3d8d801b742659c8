"""`ledger init`: make a lab (or, in a project that has its recipes, only its ledger), and this
box's writer signs from the start."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import FOLDER, root_option, writer_option
from recipe_ledger.ledger import actions, signing
from recipe_ledger.ledger.store import Ledger


@click.command("init")
@root_option
@writer_option
@click.option("--name", default=None, help="The lab's name (default: the project folder's name).")
@click.option("--title", default=None, help="The site's title (default: '<name> recipe ledger').")
@click.option(
    "--upstream",
    type=FOLDER,
    default=None,
    help="A recipes checkout or archive to take in as recipes/upstream/ (as `ledger recipe update --from`).",
)
@click.option("--ledger-only", is_flag=True, help="Make only ledger/ and the key, no lab files.")
def init(
    root: Path, writer: str, name: str | None, title: str | None, upstream: Path | None, ledger_only: bool
) -> None:
    """Make a lab: ledger/, recipes/ (overlay, upstream), boxes/, a first experiment; safe to run again.

    In a folder without recipes/ (a new lab), or one whose recipes/ is a lab's (overlay/, upstream/),
    it writes what is missing and never overwrites a file: lab.yaml (name, site title),
    recipes/overlay/ with the packaged tiny recipe, boxes/ with this machine's profile (read from
    nvidia-smi, /proc/meminfo, lscpu; what cannot be read is marked FILL IN),
    experiments/example-sort.yaml with scripts/example_probe.py, dvc.yaml and .gitignore. A project
    whose recipes/ holds models/ directly (this tool's own repository) gets only its ledger.

    A writer without a chain gets its key (~/.config/recipe-ledger/keys/WRITER.key, outside the
    repository) and a chain that starts with its key entry. An existing unsigned chain is left as
    it is (`ledger key init --adopt` signs it forward). $RECIPE_LEDGER_SIGNING=off makes no key.
    """
    ledger = Ledger.init(root)
    click.echo(f"ledger ready in {ledger.dir}")
    if not ledger_only:
        _make_lab(root, name, title, upstream)
    if not signing.signs_new_writers():
        return
    path = ledger.chain_path(writer)
    if path.exists() and path.stat().st_size and not _has_key_entry(ledger, path):
        click.echo(f"warning: {ledger.rel(path)} is unsigned; `ledger key init --adopt` signs it forward")
        return
    setup, head = actions.key_init(ledger, writer=writer)
    if head is not None and head.get("kind") == "key":
        click.echo(f"{writer} signs its chain: {signing.fingerprint(setup.public)} (key in {setup.key_file})")


def _make_lab(root: Path, name: str | None, title: str | None, upstream: Path | None) -> None:
    from recipe_ledger.recipes import boxdetect, lab
    from recipe_ledger.recipes.catalog import RecipeRoot
    from recipe_ledger.recipes.layers import layers_of

    existing = layers_of(root / "recipes")
    if existing is not None and not existing.layered:
        click.echo("recipes/ holds models/ directly (a flat recipes root): no lab files made")
        return
    profiles = RecipeRoot.of_project(root).corpus.taxonomy.get("hardware_profiles") or {}
    box = boxdetect.detect(boxdetect.probe_machine(), profiles)
    lab_name = name or root.resolve().name
    files = lab.lab_files(lab_name, title or f"{lab_name} recipe ledger", box.id, boxdetect.render_box(box))
    made = lab.make_lab(root, files)
    for path in made:
        click.echo(f"created {path}")
    if not made:
        click.echo("lab files: all present, none changed")
    if upstream is not None:
        from recipe_ledger.cli.recipe_update import take_in

        take_in(root / "recipes", upstream, dry_run=False)
    elif not (root / "recipes" / "upstream").is_dir():
        click.echo("no upstream recipes yet: `ledger recipe update --from PATH` takes in a recipes checkout")
    if (box.gpus is not None and box.link_gbps is None) or box.hardware is None:
        click.echo(f"check boxes/{box.id}.yaml: some numbers could not be read (marked FILL IN)")


def _has_key_entry(ledger: Ledger, path: Path) -> bool:
    return any(entry.get("kind") == "key" for entry in ledger.read_chain(path))
