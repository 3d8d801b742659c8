"""`ledger fit` glue: resolve the recipe for a box, then run the pure fit arithmetic on it."""

from __future__ import annotations

import dataclasses

from recipe_ledger.errors import InputError
from recipe_ledger.recipes.boxes import load_box
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.ceiling import Ceiling, Routing, ceiling_assumptions, decode_ceiling
from recipe_ledger.recipes.command import CommandRequest, ResolvedCommand, resolve_for_people
from recipe_ledger.recipes.fit import FitInputs, FitReport, compute_fit, verdict_lines


def fit_recipe(
    root: RecipeRoot,
    name: str,
    box_id: str,
    *,
    context: int | None = None,
    offload_gib: float | None = None,
    gpu_utilization: float | None = None,
) -> tuple[FitReport, ResolvedCommand]:
    """The fit of recipe ``name`` on box ``box_id``, with the command it was computed from."""
    box = load_box(root.boxes_dirs, box_id)
    resolved = resolve_for_people(root, CommandRequest(name, hardware=box.hardware))
    recipe = resolved.loaded.recipe
    if recipe.memory is None:
        raise InputError(
            f"recipe {resolved.loaded.ref} has no memory block to fit",
            where=resolved.loaded.doc.where(),
            hint="add memory.components (see recipes/README.md)",
        )
    variant = recipe.variants[resolved.variant]
    declared = variant.vram_minimum_gb
    report = compute_fit(
        FitInputs(
            memory=recipe.memory,
            box=box,
            argv=resolved.argv,
            context=context,
            offload_gib=offload_gib,
            gpu_utilization=gpu_utilization,
            declared_vram_minimum_gb=declared,
            default_context=recipe.model.context_length,
        )
    )
    if box.hardware is None:
        report.assumptions.append(
            f"the box has no taxonomy hardware id: the command was resolved for "
            f"{resolved.hardware}, the recipe's default"
        )
    return report, resolved


def fit_report_dict(report: FitReport) -> dict:
    data = dataclasses.asdict(report)
    data["fits"] = report.fits
    data["verdict"] = verdict_lines(report)
    return data


def predict_ceilings(
    report: FitReport,
    resolved: ResolvedCommand,
    *,
    batches: list[int],
    windows: list[int],
    measured_multiplier: float | None = None,
    multiplier_source: str = "given with --window-multiplier",
) -> tuple[list[Ceiling], list[str]]:
    """The link-bound decode ceilings of a fit's expert offload, one per (batch, window), with
    their assumptions. ``measured_multiplier`` replaces uniform routing's for the largest window."""
    memory = resolved.loaded.recipe.memory
    if memory is None or memory.routing is None:
        raise InputError(
            f"recipe {resolved.loaded.ref} has no memory.routing (experts per layer, top-k) to predict from",
            where=resolved.loaded.doc.where(),
            hint="add memory.routing: {experts_per_layer: E, experts_per_token: K} (see recipes/README.md)",
        )
    if report.expert_offload_gib <= 0:
        raise InputError(
            f"nothing is offloaded for {resolved.loaded.ref} on {report.box_id}: no link-bound ceiling",
            hint=f"ledger fit {resolved.loaded.ref} --box {report.box_id} --offload-gb GIB --predict",
        )
    measured = {max(windows): measured_multiplier} if measured_multiplier else {}
    routing = Routing(
        memory.routing.experts_per_layer,
        memory.routing.experts_per_token,
        measured,
        source=multiplier_source,
    )
    ceilings = [
        decode_ceiling(report.expert_offload_gib, report.link_gbps, routing, batch, window)
        for window in windows
        for batch in batches
    ]
    link_source = f"box profile {report.box_id}, {report.link_kind}"
    return ceilings, ceiling_assumptions(routing, report.link_gbps, link_source, windows)
