"""Per-recipe page data: the command builder's precomputed commands, the fit table, the guide.

The builder is static JS over precomputed text, so every command it shows is produced here by
the same functions `ledger recipe command` calls (``resolve_for_people`` + ``text_for_people``),
for the request the CLI builds from ``-H HW -s STRATEGY -v VARIANT -f F...`` (or
``--no-features``). Which combinations are precomputed (see docs/site.md):

- hardware: every id the recipe names under ``meta.hardware`` (its default hardware if none);
- strategies: the recipe's compatible *single-node* strategies that the hardware does not opt out of;
- variants: all;
- feature sets: all subsets when the recipe has at most ``ALL_SUBSETS_UP_TO`` features (every
  recipe of the vLLM corpus has at most 6); otherwise the site's default set, the default set with
  each one feature toggled, no feature, and every feature, and any other combination shows the CLI
  command to run instead of a command.

Commands share most of their lines, so each distinct line (and warning, and error) is stored once
in ``texts`` and a combination lists indices into it: all 32 feature sets of a 5-feature recipe on
11 hardware ids then fit in a page well under 2 MB.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Callable
from typing import Any

from recipe_ledger.errors import LedgerError
from recipe_ledger.ledger.published import secret_environ
from recipe_ledger.recipes import resolve
from recipe_ledger.recipes.boxes import Box
from recipe_ledger.recipes.catalog import LoadedRecipe, RecipeRoot
from recipe_ledger.recipes.command import (
    CommandRequest,
    ResolvedCommand,
    resolve_for_people,
    text_for_people,
)
from recipe_ledger.recipes.fit import FitReport, verdict_lines
from recipe_ledger.recipes.fitting import fit_recipe, predict_ceilings
from recipe_ledger.redact import redact_obj, redact_text

ALL_SUBSETS_UP_TO = 6
_secret_env: dict[str, str] = {}


def refresh_secret_env() -> None:
    """Snapshot the secret-named environment once per build (redact_text rescans it per call)."""
    _secret_env.clear()
    _secret_env.update(secret_environ())


def redact(text: str) -> str:
    return redact_text(text, environ=_secret_env)


def redact_all(obj: Any) -> Any:
    return redact_obj(obj, environ=_secret_env)


def recipe_name(ref: str) -> str:
    """``models/org/name.yaml`` -> ``org/name``: what `ledger recipe command` accepts."""
    return ref.removeprefix("models/").removesuffix(".yaml").removesuffix(".yml")


class CachedRoot(RecipeRoot):
    """A RecipeRoot that validates each recipe once: the builder resolves one recipe a hundred
    times, and `RecipeRoot.load` parses the model again on every call."""

    def __init__(self, root):
        super().__init__(root)
        self._loaded: dict[str, LoadedRecipe] = {}

    def load(self, name: str) -> LoadedRecipe:
        if name not in self._loaded:
            self._loaded[name] = super().load(name)
        return self._loaded[name]


def error_text(error: LedgerError, root: RecipeRoot) -> str:
    """An error's one line with the recipes root written as `recipes` (no absolute path on the site)."""
    text = error.one_line()
    for prefix in {str(root.root), str(root.root.resolve())}:
        text = text.replace(prefix, "recipes")
    return redact(text)


def feature_sets(features: list[str], default: list[str]) -> list[list[str]]:
    """The feature subsets the builder offers precomputed, each in the recipe's feature order."""
    if len(features) <= ALL_SUBSETS_UP_TO:
        chosen = [set(c) for n in range(len(features) + 1) for c in itertools.combinations(features, n)]
    else:
        base = set(default)
        chosen = [base, set(), set(features)] + [base ^ {f} for f in features]
    seen, out = set(), []
    for subset in chosen:
        ordered = [f for f in features if f in subset]
        if tuple(ordered) not in seen:
            seen.add(tuple(ordered))
            out.append(ordered)
    return out


def combo_key(hardware: str, strategy: str, variant: str, features: list[str]) -> str:
    return f"{hardware}|{strategy}|{variant}|{','.join(features)}"


def cli_line(name: str, hardware: str, strategy: str, variant: str, features: list[str]) -> str:
    flags = " ".join(f"-f {f}" for f in features) if features else "--no-features"
    return f"ledger recipe command {name} -H {hardware} -s {strategy} -v {variant} {flags}"


def single_node_strategies(raw: dict, hardware: str, strategies: dict, taxonomy: dict) -> list[str]:
    hw = resolve.hardware_for(taxonomy, hardware)
    return [
        s
        for s in resolve.effective_compatible_strategies(raw)
        if isinstance(s, str)
        and resolve.get(strategies, s, "deploy_type") == "single_node"
        and resolve.is_strategy_supported_on_hardware(raw, s, hw)
    ]


def command_for(
    root: RecipeRoot, name: str, hardware: str, strategy: str, variant: str, features: list[str]
) -> dict[str, Any]:
    """One builder cell: the text `ledger recipe command` prints for this request, or its error."""
    cli = cli_line(name, hardware, strategy, variant, features)
    try:
        resolved = resolve_for_people(root, CommandRequest(name, hardware, strategy, variant, list(features)))
    except LedgerError as error:
        return {"cli": cli, "error": error_text(error, root)}
    return {
        "cli": cli,
        "command": redact(text_for_people(resolved, docker=False)),
        "warnings": [redact(w) for w in resolved.warnings],
    }


class TextTable:
    """Distinct strings stored once; a cell refers to them by index (in first-seen order)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._index: dict[str, int] = {}

    def ref(self, text: str) -> int:
        if text not in self._index:
            self._index[text] = len(self.texts)
            self.texts.append(text)
        return self._index[text]


def packed_cell(cell: dict[str, Any], table: TextTable) -> dict[str, list[int]]:
    """A ``command_for`` cell as indices: command lines, warnings, or the error (the CLI line the
    page derives from the selection, as `cli_line` does)."""
    if "error" in cell:
        return {"error": [table.ref(cell["error"])]}
    return {
        "lines": [table.ref(line) for line in cell["command"].split("\n")],
        "warnings": [table.ref(w) for w in cell["warnings"]],
    }


def unpacked_cell(cell: dict[str, list[int]], texts: list[str]) -> dict[str, Any]:
    """The inverse of ``packed_cell`` (what the page's script does), for tests and tools."""
    if "error" in cell:
        return {"error": texts[cell["error"][0]]}
    return {
        "command": "\n".join(texts[i] for i in cell["lines"]),
        "warnings": [texts[i] for i in cell["warnings"]],
    }


def builder_data(root: RecipeRoot, loaded: LoadedRecipe) -> dict[str, Any]:
    name = recipe_name(loaded.ref)
    raw = root.corpus.recipe(loaded.ref)
    corpus = root.corpus
    variants = list(loaded.recipe.variants)
    features = list(loaded.recipe.features)
    default_variant = resolve.default_variant(raw) or (variants[0] if variants else "default")
    hardware = list(loaded.recipe.meta.hardware) or [
        resolve.default_hardware(raw, default_variant, corpus.taxonomy)
    ]
    default_hw = resolve.default_hardware(raw, default_variant, corpus.taxonomy)
    combos: dict[str, Any] = {}
    per_hw: dict[str, Any] = {}
    table = TextTable()
    for hw in hardware:
        strategies = single_node_strategies(raw, hw, corpus.strategies, corpus.taxonomy)
        recommended, _ = resolve.default_strategy(
            raw, default_variant, hw, corpus.strategies, corpus.taxonomy
        )
        defaults = {v: resolve.default_features(raw, hw, v) for v in variants}
        per_hw[hw] = {
            "strategies": strategies,
            "default_features": defaults,
            "default_strategy": recommended if recommended in strategies else (strategies or [""])[0],
        }
        for strategy, variant in itertools.product(strategies, variants):
            for subset in feature_sets(features, defaults[variant]):
                cell = command_for(root, name, hw, strategy, variant, subset)
                combos[combo_key(hw, strategy, variant, subset)] = packed_cell(cell, table)
    return {
        "recipe": name,
        "hardware": hardware,
        "default_hardware": default_hw if default_hw in hardware else hardware[0],
        "variants": variants,
        "default_variant": default_variant,
        "features": [
            {
                "name": f,
                "description": redact(loaded.recipe.features[f].description),
                "opt_in": f in loaded.recipe.opt_in_features,
            }
            for f in features
        ],
        "per_hardware": per_hw,
        "subset_rule": (
            f"all subsets (at most {ALL_SUBSETS_UP_TO} features)"
            if len(features) <= ALL_SUBSETS_UP_TO
            else "the default set, each feature toggled from it, none, and all"
        ),
        "all_subsets_up_to": ALL_SUBSETS_UP_TO,
        "combos": combos,
        "texts": table.texts,
    }


POOL_FROM = 50  # recipes; below this, starting worker processes costs more than it saves
_work: tuple[RecipeRoot, list[LoadedRecipe | None]] | None = None  # what forked workers read


def _builder_of(i: int) -> dict[str, Any] | None:
    assert _work is not None
    root, loaded = _work
    recipe = loaded[i]
    return builder_data(root, recipe) if recipe else None


def start_builders(root: RecipeRoot, loaded: list[LoadedRecipe | None]) -> Callable[[], list]:
    """Start computing every recipe's builder data; returns the function that waits for them (in
    ``loaded``'s order, None for a recipe that does not load).

    ~70 resolutions per recipe are most of a 1,000-recipe build, so they run in forked workers
    (which inherit the loaded recipes: nothing is pickled on the way in) while the caller writes
    the ledger pages. Small sites, or platforms without fork, compute them when asked instead."""
    global _work
    if len(loaded) < POOL_FROM or "fork" not in multiprocessing.get_all_start_methods():
        return lambda: [builder_data(root, one) if one else None for one in loaded]
    _work = (root, loaded)
    pool = multiprocessing.get_context("fork").Pool(processes=min(4, os.cpu_count() or 1))
    pending = pool.map_async(_builder_of, range(len(loaded)), chunksize=4)

    def finish() -> list:
        global _work
        try:
            return pending.get()
        finally:
            pool.close()
            pool.join()
            _work = None

    return finish


def fit_rows(root: RecipeRoot, loaded: LoadedRecipe, boxes: list[Box]) -> list[dict[str, Any]]:
    """`ledger fit` on every box profile, for a recipe with a memory block (else no rows)."""
    if loaded.recipe.memory is None:
        return []
    name = recipe_name(loaded.ref)
    return [_fit_row(root, name, box) for box in boxes]


CEILING_WINDOWS = [1, 5]  # one token per step, and a k=5 speculative verify window


def _ceiling_cells(report: FitReport, resolved: ResolvedCommand) -> dict[str, Any]:
    """The decode tok/s the box's host link alone allows for the fit's expert offload, one sequence
    (`ledger fit --predict`); nothing when nothing is offloaded or the recipe has no routing."""
    memory = resolved.loaded.recipe.memory
    if memory is None or memory.routing is None or report.expert_offload_gib <= 0:
        return {}
    ceilings, _ = predict_ceilings(report, resolved, batches=[1], windows=CEILING_WINDOWS)
    return {
        "ceilings": [
            {"window": c.window, "tok_s": c.tok_s, "gb_per_step": c.bytes_per_step / 1e9} for c in ceilings
        ],
        "ceiling_cli": (
            f"ledger fit {recipe_name(resolved.loaded.ref)} --box {report.box_id} --predict --window 5"
        ),
    }


def _fit_row(root: RecipeRoot, name: str, box: Box) -> dict[str, Any]:
    row: dict[str, Any] = {
        "box": box.id,
        "display_name": box.display_name,
        "hardware": box.hardware or "",
        "gpus": box.gpu.count,
        "hbm_gib": box.gpu.hbm_gib,
        "cli": f"ledger fit {name} --box {box.id}",
    }
    try:
        report, resolved = fit_recipe(root, name, box.id)
    except LedgerError as error:
        return {**row, "error": error_text(error, root)}
    return {
        **_ceiling_cells(report, resolved),
        **row,
        "fits": report.fits,
        "context": report.context,
        "budget_gib": report.budget_gib,
        "resident_gib": report.resident_gib,
        "kv_room_gib": report.kv_room_gib,
        "host_used_gib": report.host_used_gib,
        "min_expert_offload_gib": report.min_expert_offload_gib,
        "verdict": [redact(v) for v in verdict_lines(report)],
        "notes": [redact(a) for a in report.problems + report.assumptions],
    }
