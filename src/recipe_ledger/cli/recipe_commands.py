"""`ledger recipe ...` and `ledger fit`: the recipe engine's commands."""

from __future__ import annotations

import click


@click.group()
def recipe() -> None:
    """Recipes in the vLLM recipes schema: list, show, command, render, lint, schema."""


@click.command()
@click.argument("recipe_ref")
@click.option("--box", required=True, help="Box profile id (see `ledger fit --list-boxes`).")
def fit(recipe_ref: str, box: str) -> None:
    """Memory arithmetic for RECIPE on BOX before any download."""
    raise click.ClickException("not implemented yet")
