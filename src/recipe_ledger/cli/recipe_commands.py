"""`ledger recipe ...` and `ledger fit`: the recipe engine's commands."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from recipe_ledger.cli.output import print_json, print_json_line, print_table
from recipe_ledger.cli.render_command import render
from recipe_ledger.recipes.boxes import list_boxes as list_boxes_in
from recipe_ledger.recipes.catalog import RecipeRoot, default_root
from recipe_ledger.recipes.command import CommandRequest, resolve_for_people, text_for_people
from recipe_ledger.recipes.fit import GB, GIB, FitReport, verdict_lines
from recipe_ledger.recipes.fitting import fit_recipe, fit_report_dict
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
    print_table(
        ["recipe", "title", "hardware", "variants", "strategies"],
        [
            [r["name"], r["title"], ", ".join(r["hardware"]), ", ".join(r["variants"]), len(r["strategies"])]
            for r in rows
        ],
    )


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
    click.echo(
        f"model: {recipe.model.model_id}   {recipe.model.parameter_count or ''} "
        f"{recipe.model.architecture or ''}".rstrip()
    )
    click.echo(recipe.meta.description)
    hardware = ", ".join(f"{hw} ({state})" for hw, state in recipe.meta.hardware.items()) or "-"
    click.echo(f"hardware: {hardware}")
    click.echo(f"strategies: {', '.join(recipe.compatible_strategies) or '-'}")
    print_table(
        ["variant", "precision", "vram_minimum_gb", "model"],
        [
            [v, var.precision, var.vram_minimum_gb, var.model_id or recipe.model.model_id]
            for v, var in recipe.variants.items()
        ],
    )
    print_table(
        ["feature", "opt-in", "conflicts with", "description"],
        [
            [
                f,
                "yes" if f in recipe.opt_in_features else "",
                ", ".join(feat.conflicts_with),
                feat.description,
            ]
            for f, feat in recipe.features.items()
        ],
    )
    if recipe.memory:
        total = sum(c.stored_gib for c in recipe.memory.components)
        click.echo(
            f"memory: {len(recipe.memory.components)} components, {total:.1f} GiB "
            f"(ledger fit {name} --box BOX)"
        )


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


@recipe.command("command")
@click.argument("name")
@click.option(
    "--hardware", "-H", help="Taxonomy hardware id, e.g. h200, dgx_station_gb300. Default: the site's."
)
@click.option(
    "--strategy", "-s", help="Serving strategy, e.g. single_node_tp. Default: the site's recommendation."
)
@click.option("--variant", "-v", help="Variant, e.g. default, fp8. Default: the site's.")
@click.option(
    "--feature",
    "-f",
    "features",
    multiple=True,
    help="Enable a feature (repeatable). Giving any replaces the default features.",
)
@click.option("--no-features", is_flag=True, help="Enable no feature at all.")
@click.option("--nodes", type=click.IntRange(1, 16), help="Node count for multi-node strategies.")
@click.option("--docker", is_flag=True, help="Print the docker run form.")
@click.option("--json", "as_json", is_flag=True, help="Print the builder's result object as JSON.")
@ROOT_OPTION
def command_cmd(
    name, hardware, strategy, variant, features, no_features, nodes, docker, as_json, root
) -> None:
    """Print the exact launch command for recipe NAME, as recipes.vllm.ai builds it."""
    chosen = [] if no_features else (list(features) if features else None)
    request = CommandRequest(name, hardware, strategy, variant, chosen, nodes)
    resolved = resolve_for_people(open_root(root), request)
    for warning in resolved.warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        print_json(resolved.result)
    else:
        click.echo(text_for_people(resolved, docker=docker))


@click.command()
@click.argument("name", required=False)
@click.option("--box", help="Box profile id, e.g. dgx-station-gb300 (see --list-boxes).")
@click.option(
    "--context",
    type=click.IntRange(1),
    help="Context length in tokens (default: the command's --max-model-len).",
)
@click.option(
    "--offload-gb",
    type=click.FloatRange(0),
    help="Expert GiB offloaded per GPU (overrides --cpu-offload-gb).",
)
@click.option("--gpu-util", type=click.FloatRange(0.05, 1.0), help="Overrides --gpu-memory-utilization.")
@click.option("--list-boxes", is_flag=True, help="List the box profiles and exit.")
@click.option("--json", "as_json", is_flag=True, help="The fit report as JSON.")
@ROOT_OPTION
def fit(name, box, context, offload_gb, gpu_util, list_boxes, as_json, root) -> None:
    """Memory arithmetic for recipe NAME on BOX, before any download.

    Shows where each checkpoint component lives, the GPU-resident total against HBM x
    utilization, host RAM used, KV bytes per token x context, and what must be offloaded.
    """
    recipes = open_root(root)
    boxes_dir = recipes.root / "boxes"
    if list_boxes:
        print_table(
            ["box", "hardware", "GPUs", "HBM/GPU GiB", "host RAM GiB", "link GB/s"],
            [
                [b.id, b.hardware or "-", b.gpu.count, b.gpu.hbm_gib, b.host.ram_gib, b.link.bandwidth_gbps]
                for b in list_boxes_in(boxes_dir)
            ],
        )
        return
    if not name or not box:
        raise click.UsageError("give a recipe NAME and --box (or --list-boxes)")
    report, resolved = fit_recipe(
        recipes, name, box, context=context, offload_gib=offload_gb, gpu_utilization=gpu_util
    )
    if as_json:
        print_json(fit_report_dict(report))
        return
    print_fit(report, resolved)


def print_fit(report: FitReport, resolved) -> None:
    click.echo(
        f"# {resolved.loaded.recipe.meta.title} on {report.box_id} "
        f"({resolved.hardware}, {resolved.strategy}, {resolved.variant})"
    )
    print_table(
        ["component", "stored GiB", "on GPU GiB", "in host RAM GiB", "placement"],
        [
            [p.name, f"{p.stored_gib:.1f}", f"{p.gpu_gib:.1f}", f"{p.host_gib:.1f}", p.where]
            for p in report.placements
        ],
    )
    gb_total = report.checkpoint_gib * GIB / GB
    declared = f" (recipe: {report.vram_minimum_declared_gb:g})" if report.vram_minimum_declared_gb else ""
    rows = [
        ["checkpoint", f"{report.checkpoint_gib:.1f} GiB = {gb_total:.1f} GB (guide: {report.disk_gb:g} GB)"],
        [
            "vram_minimum_gb",
            f"{report.vram_minimum_computed_gb:g} = ceil(headroom x {report.disk_gb:g} GB){declared}",
        ],
        [
            "GPU budget",
            f"{report.budget_gib:.1f} GiB = {report.gpu_count} x HBM x {report.gpu_utilization:g}",
        ],
        ["GPU-resident weights", f"{report.resident_gib:.1f} GiB"],
        ["runtime reserve", f"{report.reserve_gib:g} GiB"],
        ["left for KV", f"{report.kv_room_gib:.2f} GiB"],
        ["KV per sequence", f"{report.kv_per_sequence_gib:.3f} GiB at {report.context:,} tokens"],
        [
            "KV capacity",
            f"{report.kv_capacity_tokens:,} tokens, {report.full_context_sequences} full-context sequence(s)",
        ],
        ["host RAM pinned", f"{report.host_used_gib:.1f} of {report.host_ram_gib:g} GiB"],
        ["expert offload", f"{report.expert_offload_gib:g} GiB (asked {report.expert_offload_asked_gib:g})"],
    ]
    print_table(["", ""], rows)
    for line in verdict_lines(report):
        click.echo(line)
    for problem in report.problems:
        click.echo(f"problem: {problem}")
    click.echo("assumptions:")
    for note in report.assumptions:
        click.echo(f"  - {note}")


recipe.add_command(render)


@recipe.command("lint")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, exists=True))
@ROOT_OPTION
@click.option("--json", "as_json", is_flag=True, help="One JSON object per warning.")
@click.option("--summary", is_flag=True, help="Only the count of warnings per check.")
@click.option("--strict", is_flag=True, help="Exit 1 when there is any warning.")
def lint_cmd(paths: tuple[Path, ...], root: Path | None, as_json: bool, summary: bool, strict: bool) -> None:
    """Warn about the schema's silent traps in recipe files (default: every recipe of the root).

    PATHS may be recipe files or folders; their recipes root (the folder holding taxonomy.yaml)
    is found from them unless --root is given.
    """
    warnings = run_lint(list(paths), root)
    if as_json:
        for w in warnings:
            print_json_line({"where": w.where, "code": w.code, "message": w.message})
    elif summary:
        counts = Counter(w.code for w in warnings)
        print_table(
            ["check", "warnings"],
            [[code, n] for code, n in sorted(counts.items())] + [["total", len(warnings)]],
        )
    else:
        for w in warnings:
            click.echo(str(w))
        click.echo(f"{len(warnings)} warning(s)", err=True)
    if strict and warnings:
        raise SystemExit(1)


def run_lint(paths: list[Path], root: Path | None):
    from recipe_ledger.recipes.lint import find_root_of, items_for_paths, lint_items

    if root is None and paths:
        found = {find_root_of(p) for p in paths}
        if None in found or len(found) != 1:
            raise click.UsageError(
                "the paths must lie under one recipes root (a folder with taxonomy.yaml); or pass --root"
            )
        root = found.pop()
    recipes = open_root(root)
    return lint_items(recipes, items_for_paths(recipes, paths))
