"""`ledger recipe ...` and `ledger fit`: the recipe engine's commands."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.output import print_json, print_table
from recipe_ledger.recipes.catalog import RecipeRoot, default_root
from recipe_ledger.recipes.models import Recipe

ROOT_OPTION = click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Recipes root (models/, taxonomy.yaml, strategies/). Default: this project's recipes/.",
)


def open_root(root: Path | None) -> RecipeRoot:
    return RecipeRoot(root or default_root())


@click.group()
def recipe() -> None:
    """Recipes in the vLLM recipes schema: list, show, command, render, lint, schema."""


@recipe.command("list")
@ROOT_OPTION
@click.option("--json", "as_json", is_flag=True, help="One JSON object per recipe.")
def list_recipes(root: Path | None, as_json: bool) -> None:
    """List the recipes under the root."""
    recipes = open_root(root).load_all()
    rows = [_summary(item.ref, item.recipe) for item in recipes]
    if as_json:
        print_json(rows)
        return
    print_table(["recipe", "title", "hardware", "variants", "strategies"],
                [[r["name"], r["title"], ", ".join(r["hardware"]), ", ".join(r["variants"]),
                  len(r["strategies"])] for r in rows])


def _summary(ref: str, recipe: Recipe) -> dict:
    return {
        "name": ref.removeprefix("models/").removesuffix(".yaml"),
        "path": ref,
        "title": recipe.meta.title,
        "model_id": recipe.model.model_id,
        "hardware": list(recipe.meta.hardware),
        "variants": list(recipe.variants),
        "strategies": recipe.compatible_strategies,
        "features": list(recipe.features),
    }


@recipe.command("show")
@click.argument("name")
@ROOT_OPTION
@click.option("--json", "as_json", is_flag=True, help="The validated recipe as JSON.")
def show_recipe(name: str, root: Path | None, as_json: bool) -> None:
    """Show one recipe: model, variants, features, strategies, hardware."""
    loaded = open_root(root).load(name)
    recipe = loaded.recipe
    if as_json:
        print_json(recipe.model_dump(mode="json", exclude_none=True))
        return
    click.echo(f"{recipe.meta.title}  ({loaded.ref})")
    click.echo(f"model: {recipe.model.model_id}   {recipe.model.parameter_count or ''} "
               f"{recipe.model.architecture or ''}".rstrip())
    click.echo(recipe.meta.description)
    hardware = ", ".join(f"{hw} ({state})" for hw, state in recipe.meta.hardware.items()) or "-"
    click.echo(f"hardware: {hardware}")
    click.echo(f"strategies: {', '.join(recipe.compatible_strategies) or '-'}")
    print_table(["variant", "precision", "vram_minimum_gb", "model"],
                [[v, var.precision, var.vram_minimum_gb, var.model_id or recipe.model.model_id]
                 for v, var in recipe.variants.items()])
    print_table(["feature", "opt-in", "conflicts with", "description"],
                [[f, "yes" if f in recipe.opt_in_features else "", ", ".join(feat.conflicts_with),
                  feat.description] for f, feat in recipe.features.items()])
    if recipe.memory:
        total = sum(c.stored_gib for c in recipe.memory.components)
        click.echo(f"memory: {len(recipe.memory.components)} components, {total:.1f} GiB "
                   f"(ledger fit {name} --box BOX)")


@recipe.command("schema")
def recipe_schema() -> None:
    """Print the JSON Schema of the recipe format (the vLLM schema plus our additions)."""
    schema = Recipe.model_json_schema()
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://recipe-ledger.dev/schema/recipe.json",
        **schema,
        "title": "Recipe Ledger recipe (vLLM recipes schema + superset)",
    }
    print_json(schema)


@click.command()
@click.argument("recipe_ref")
@click.option("--box", required=True, help="Box profile id (see `ledger fit --list-boxes`).")
def fit(recipe_ref: str, box: str) -> None:
    """Memory arithmetic for RECIPE on BOX before any download."""
    raise click.ClickException("not implemented yet")


from recipe_ledger.cli.render_command import render

recipe.add_command(render)
