"""`ledger recipe list|show|schema|command|lint|render`: the recipe engine's commands."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click

from recipe_ledger.cli.options import json_option, recipes_given, recipes_option
from recipe_ledger.cli.output import (
    echo_line,
    free,
    print_json,
    print_json_line,
    print_table,
    terminal_safe,
)
from recipe_ledger.cli.recipe_update import update_cmd
from recipe_ledger.errors import InputError, LedgerError

# Each command imports the part of the recipe engine it uses: `render` (the batch resolver, timed
# against recipes.vllm.ai's builder) needs neither the pydantic recipe models nor the linter.
if TYPE_CHECKING:
    from recipe_ledger.recipes.corpus import Corpus
    from recipe_ledger.recipes.lint import LintWarning
    from recipe_ledger.recipes.models import Recipe


@click.group()
def recipe() -> None:
    """Recipes in the vLLM recipes schema: list, show, command, render, lint, schema, update."""


@recipe.command("list")
@recipes_option
@json_option("A JSON list of the recipes.")
def list_recipes(recipes: Path, as_json: bool) -> None:
    """List the recipes under the recipes root."""
    from recipe_ledger.recipes.catalog import RecipeRoot

    rows = [_summary(item.ref, item.recipe) for item in RecipeRoot(recipes).load_all()]
    if as_json:
        print_json(rows)
        return
    print_table(
        ["recipe", free("title"), free("hardware"), free("variants"), free("strategies")],
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
@recipes_option
@json_option("The validated recipe as JSON.")
def show_recipe(name: str, recipes: Path, as_json: bool) -> None:
    """Show one recipe: model, variants, features, strategies, hardware."""
    from recipe_ledger.recipes.catalog import RecipeRoot
    from recipe_ledger.redact import redact_obj, redact_text

    loaded = RecipeRoot(recipes).load(name)
    recipe = loaded.recipe
    if as_json:
        # A recipe is a file anyone may have pasted a token into (an env value, a description).
        print_json(redact_obj(recipe.model_dump(mode="json", exclude_none=True)))
        return
    echo_line(redact_text(f"{recipe.meta.title}  ({loaded.ref})"))
    echo_line(
        redact_text(
            f"model: {recipe.model.model_id}   {recipe.model.parameter_count or ''} "
            f"{recipe.model.architecture or ''}".rstrip()
        )
    )
    echo_line(redact_text(recipe.meta.description))
    measured = _measured_here(loaded.ref)
    echo_line(f"hardware: {hardware_text(recipe.meta.hardware, measured) or '-'}")
    echo_line(f"  (claimed: what the recipe says; measured: {MEASURED_MEANS})")
    echo_line(f"strategies: {', '.join(recipe.compatible_strategies) or '-'}")
    print_table(
        ["variant", "precision", "vram_minimum_gb", "model"],
        [
            [v, var.precision, var.vram_minimum_gb, redact_text(var.model_id or recipe.model.model_id)]
            for v, var in recipe.variants.items()
        ],
    )
    print_table(
        ["feature", "opt-in", free("conflicts with"), free("description")],
        [
            [
                f,
                "yes" if f in recipe.opt_in_features else "",
                ", ".join(feat.conflicts_with),
                redact_text(feat.description),
            ]
            for f, feat in recipe.features.items()
        ],
    )
    if recipe.memory:
        total = sum(c.stored_gib for c in recipe.memory.components)
        echo_line(
            f"memory: {len(recipe.memory.components)} components, {total:.1f} GiB "
            f"(ledger fit {name} --box BOX)"
        )


MEASURED_MEANS = "results this ledger recorded from this recipe on that hardware"
_SOURCE_SEPARATOR = " · "  # an arm resolved from a recipe: "REF · HARDWARE · STRATEGY · ..." (pipeline.plan)


def measured_hardware(rows: list[tuple[dict, str]], ref: str) -> Counter[str]:
    """Per hardware id, the result entries (measured by this tool, not retracted) with an arm the
    plan resolved from recipe ``ref`` on that hardware: the arm's recorded source names both."""
    found: Counter[str] = Counter()
    for entry, status in rows:
        payload = entry.get("payload") or {}
        origin = payload.get("origin") or {}
        if entry.get("kind") != "result" or status == "retracted" or origin.get("how") != "measured":
            continue
        arms = ((payload.get("experiment") or {}).get("arms") or {}).values()
        sources = [
            str(arm.get("source") or "").split(_SOURCE_SEPARATOR) for arm in arms if isinstance(arm, dict)
        ]
        for hardware in sorted({parts[1] for parts in sources if len(parts) > 1 and parts[0] == ref}):
            found[hardware] += 1
    return found


def hardware_text(claimed: dict[str, str], measured: Counter[str]) -> str:
    """Each hardware as ``id (claimed STATE)``, ``id (claimed STATE; measured: N results)`` or, for
    hardware the recipe does not name, ``id (not claimed; measured: N results)``: what the recipe
    says is not what the ledger measured."""
    parts = []
    for hardware in [*claimed, *sorted(set(measured) - set(claimed))]:
        said = f"claimed {claimed[hardware]}" if hardware in claimed else "not claimed"
        count = measured.get(hardware, 0)
        seen = f"; measured: {count} result{'s' if count != 1 else ''}" if count else ""
        parts.append(f"{hardware} ({said}{seen})")
    return ", ".join(parts)


def _measured_here(ref: str) -> Counter[str]:
    """``measured_hardware`` over the project's ledger; nothing measured where there is no ledger."""
    from recipe_ledger.cli.options import given_root
    from recipe_ledger.ledger import views
    from recipe_ledger.ledger.store import Ledger

    try:
        ledger = Ledger.open(given_root())
    except LedgerError:  # no ledger here (a recipes checkout of its own): nothing was measured
        return Counter()
    return measured_hardware(views.query(ledger), ref)


@recipe.command("schema")
def recipe_schema() -> None:
    """Print the JSON Schema of the recipe format (the vLLM schema plus our additions)."""
    from recipe_ledger.recipes.models import Recipe

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
@click.option(
    "--engine",
    "-e",
    default="vllm",
    show_default=True,
    metavar="ENGINE",
    help="vllm or sglang (sglang.launch_server: the recipe's sglang blocks, else vLLM's flags translated).",
)
@json_option("The builder's result object as JSON.")
@recipes_option
def command_cmd(
    name: str,
    hardware: str | None,
    strategy: str | None,
    variant: str | None,
    features: tuple[str, ...],
    no_features: bool,
    nodes: int | None,
    docker: bool,
    engine: str,
    as_json: bool,
    recipes: Path,
) -> None:
    """Print the exact launch command for recipe NAME, as recipes.vllm.ai builds it.

    With --engine sglang, the same selection as SGLang's launch_server command; flags that do not
    carry over from vLLM are named on stderr."""
    from recipe_ledger.recipes.catalog import RecipeRoot
    from recipe_ledger.recipes.command import CommandRequest, resolve_for_people, text_for_people

    chosen = [] if no_features else (list(features) if features else None)
    given = str(recipes) if recipes_given() else None  # repeated in a next: command
    request = CommandRequest(name, hardware, strategy, variant, chosen, nodes, engine, recipes=given)
    from recipe_ledger.redact import redact_obj, redact_text

    resolved = resolve_for_people(RecipeRoot(recipes), request)
    # A recipe's env may hold a literal token (HF_TOKEN: hf_...): never printed as it is. A
    # reference (`HF_TOKEN=$HF_TOKEN`) stays, as it is what a person copies.
    for warning in resolved.warnings:
        click.echo(f"warning: {terminal_safe(redact_text(warning))}", err=True)
    if as_json:
        print_json(redact_obj(resolved.result))
    else:
        click.echo(redact_text(text_for_people(resolved, docker=docker)))


LINT_LIMIT = 50  # a 50,000-item list in a recipe made 6 MB of warnings; the first fifty say it
LINT_LINE_CHARS = 400


def lint_line(text: str) -> str:
    """One warning as printed: control characters stripped, a line past ``LINT_LINE_CHARS`` cut
    (a flag name can be any string the recipe holds)."""
    safe = terminal_safe(text)
    return safe if len(safe) <= LINT_LINE_CHARS else safe[: LINT_LINE_CHARS - 3] + "..."


@recipe.command("lint")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, exists=True))
@recipes_option
@json_option("One JSON object per warning, one per line.")
@click.option("--summary", is_flag=True, help="Only the count of warnings per check.")
@click.option("--strict", is_flag=True, help="Exit 1 when there is any warning.")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=LINT_LIMIT,
    show_default=True,
    help="Print the first N warnings and the count of the others (0: all of them).",
)
def lint_cmd(
    paths: tuple[Path, ...], recipes: Path, as_json: bool, summary: bool, strict: bool, limit: int
) -> None:
    """Warn about the schema's silent traps in recipe files (default: every recipe of the root).

    PATHS may be recipe files or folders; their recipes root (the folder holding taxonomy.yaml)
    is found from them unless --recipes (or --root) is given.
    """
    warnings = run_lint(list(paths), recipes if recipes_given() or not paths else None)
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
        shown = warnings[:limit] if limit else warnings
        for w in shown:
            click.echo(lint_line(str(w)))
        if len(shown) < len(warnings):
            rest = len(warnings) - len(shown)
            click.echo(f"... and {rest} more (--limit 0 prints them all, --summary counts them)")
        click.echo(f"{len(warnings)} warning(s)", err=True)
    if strict and warnings:
        raise SystemExit(1)


def run_lint(paths: list[Path], recipes: Path | None) -> list[LintWarning]:
    """Lint ``paths`` (every recipe when none) against ``recipes``, or the one root the paths lie under."""
    from recipe_ledger.recipes.catalog import RecipeRoot
    from recipe_ledger.recipes.lint import find_root_of, items_for_paths, lint_items

    if recipes is None:
        found = {find_root_of(p) for p in paths}
        only = found.pop() if len(found) == 1 else None
        if only is None:
            raise click.UsageError(
                "the paths must lie under one recipes root (a folder with taxonomy.yaml); or pass --recipes"
            )
        recipes = only
    root = RecipeRoot(recipes)
    return lint_items(root, items_for_paths(root, paths))


def _open_cases(batch: str) -> tuple[IO[str], str]:
    """The case stream and the name errors should show for it ("-" is stdin)."""
    if batch == "-":
        return sys.stdin, "<stdin>"
    try:
        return open(batch, encoding="utf-8"), batch
    except OSError as exc:
        raise InputError(f"cannot read case file ({exc.strerror})", where=batch) from None


def _cases(stream: IO[str], name: str) -> Iterator[tuple[int, dict]]:
    """(line number, case) for every non-blank line; a bad line is an InputError at name:line."""
    try:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                case = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"not a JSON case line ({exc.msg})", where=f"{name}:{number}") from None
            if not isinstance(case, dict):
                raise InputError("a case line must be a JSON object", where=f"{name}:{number}")
            yield number, case
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", where=name) from None


def _render_one(corpus: Corpus, case: dict, where: str) -> dict:
    from recipe_ledger.recipes.corpus import resolve_case

    try:
        return resolve_case(corpus, case)
    except LedgerError as exc:
        # A case naming a missing recipe, or lacking fields, is bad input at this line.
        raise InputError(exc.one_line(), where=where) from None


@recipe.command("render")
@click.option(
    "--batch",
    "batch",
    required=True,
    metavar="CASES.jsonl",
    help="Case lines (JSON) to resolve; '-' reads stdin.",
)
@recipes_option
def render(batch: str, recipes: Path) -> None:
    """Resolve every case of CASES.jsonl to the site's launch command (one JSON line each).

    Each line is a case in the compat format (recipe path relative to the recipes root, variant,
    strategy, hardware, features, node_count, pd_nodes, or omni_task for omni recipes); any
    `result`/`error` fields are ignored. Each output line is `{"result": {...}}` or
    `{"error": "..."}`, in input order, with the reference builder's key order.
    """
    if not recipes.is_dir():
        raise InputError(
            "no such recipes root directory",
            where=str(recipes),
            hint="pass --recipes DIR containing taxonomy.yaml and strategies/",
        )
    from recipe_ledger.recipes.corpus import Corpus

    corpus = Corpus(recipes)
    stream, name = _open_cases(batch)
    try:
        for number, case in _cases(stream, name):
            print_json_line(_render_one(corpus, case, f"{name}:{number}"))
    finally:
        if stream is not sys.stdin:
            stream.close()


recipe.add_command(update_cmd)  # a lab's upstream snapshot (cli/recipe_update.py)
