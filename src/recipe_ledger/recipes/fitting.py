"""`ledger fit` glue: resolve the recipe for a box, then run the pure fit arithmetic on it; with
``--predict``, the decode step's modelled parts: the host link (recipes.ceiling) and what tensor and
expert parallelism pay between GPUs (recipes.parallel_cost)."""

from __future__ import annotations

import dataclasses
from typing import Any

from recipe_ledger.errors import InputError
from recipe_ledger.recipes.boxes import load_box
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.ceiling import Ceiling, Routing, ceiling_assumptions, decode_ceiling
from recipe_ledger.recipes.command import CommandRequest, ResolvedCommand, resolve_for_people
from recipe_ledger.recipes.fit import FitInputs, FitReport, compute_fit, verdict_lines
from recipe_ledger.recipes.parallel_cost import (
    GpuPath,
    ModelShape,
    ParallelSizes,
    StepCost,
    decode_step,
    parallel_assumptions,
)
from recipe_ledger.recipes.sglang_flags import VllmArgs, parallel_sizes


def fit_recipe(
    root: RecipeRoot,
    name: str,
    box_id: str,
    *,
    context: int | None = None,
    offload_gib: float | None = None,
    gpu_utilization: float | None = None,
    strategy: str | None = None,
) -> tuple[FitReport, ResolvedCommand]:
    """The fit of recipe ``name`` on box ``box_id`` (its default strategy unless ``strategy``), with
    the command it was computed from."""
    box = load_box(root.boxes_dirs, box_id)
    resolved = resolve_for_people(root, CommandRequest(name, hardware=box.hardware, strategy=strategy))
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


@dataclasses.dataclass(frozen=True)
class Prediction:
    """``ledger fit --predict``: per (batch, window), the host link's ceiling (empty when nothing is
    offloaded) and the step with the cross-GPU terms (empty when the command runs on one GPU or they
    cannot be counted), the layout and path they assume, and every assumption in words."""

    ceilings: list[Ceiling]
    steps: list[StepCost]
    sizes: ParallelSizes
    path: GpuPath | None
    assumptions: list[str]


def command_parallel_sizes(resolved: ResolvedCommand) -> ParallelSizes:
    """The resolved command's parallel layout as vLLM reads its argv (one GPU when it says none)."""
    return parallel_sizes(VllmArgs.read(resolved.argv)) or ParallelSizes()


def gpu_path(report: FitReport) -> GpuPath | None:
    """The box's GPU-to-GPU path as the collectives see it, with where its numbers come from."""
    if report.cross_gpu_gbps is None:
        return None
    if report.cross_gpu_measured_in:
        source = f"measured: ledger entry {report.cross_gpu_measured_in[:12]}"
    else:
        source = f"sourced: box profile {report.box_id}'s sources"
    kind = report.cross_gpu_kind or "unnamed kind"
    return GpuPath(report.cross_gpu_gbps, report.cross_gpu_latency_us or 0.0, f"{kind}, {source}")


def model_shape(resolved: ResolvedCommand) -> ModelShape | None:
    """The recipe's memory.shape with its top-k (memory.routing), or None when it states no shape."""
    memory = resolved.loaded.recipe.memory
    if memory is None or memory.shape is None:
        return None
    top_k = memory.routing.experts_per_token if memory.routing else 0
    return ModelShape(
        layers=memory.shape.layers,
        hidden=memory.shape.hidden_size,
        moe_layers=memory.shape.moe_layers,
        experts_per_token=top_k,
    )


def cross_gpu_gap(report: FitReport, resolved: ResolvedCommand) -> str | None:
    """Why what a parallel command pays between GPUs cannot be counted (the recipe states no shape,
    or the box no GPU-to-GPU path), or None when it can or there is nothing to count."""
    sizes = command_parallel_sizes(resolved)
    if not sizes.crosses_gpus:
        return None
    if model_shape(resolved) is None:
        return (
            f"the command runs {sizes.label()} but recipe {resolved.loaded.ref} states no memory.shape "
            "(layers, hidden_size, moe_layers): what it pays between GPUs is not counted"
        )
    if gpu_path(report) is None:
        return (
            f"the command runs {sizes.label()} but box profile {report.box_id} names no GPU-to-GPU path "
            "(link.cross_gpu_bandwidth_gbps): what it pays between GPUs is not counted"
        )
    return None


def _path_notes(report: FitReport, sizes: ParallelSizes) -> list[str]:
    notes = []
    if report.cross_gpu_latency_us is None:
        notes.append(
            f"box profile {report.box_id} gives no small-message latency (link.cross_gpu_latency_us): "
            "calls x latency is not counted"
        )
    group = max(sizes.tp, sizes.ep)
    if report.cross_gpu_latency_us is not None and 1 < group < report.gpu_count:
        notes.append(
            f"the latency is box {report.box_id}'s small all-reduce across all its {report.gpu_count} "
            f"GPUs: a group of {group} takes fewer ring steps, so calls x latency overstates it"
        )
    if sizes.gpus > report.gpu_count:
        notes.append(
            f"the command asks for {sizes.gpus} GPUs ({sizes.label()}) and box {report.box_id} has "
            f"{report.gpu_count}: the terms are the command's as written"
        )
    return notes


def cross_gpu_steps(
    report: FitReport,
    resolved: ResolvedCommand,
    ceilings: list[Ceiling],
    *,
    batches: list[int],
    windows: list[int],
) -> tuple[list[StepCost], list[str]]:
    """Per (batch, window), in ``predict_ceilings``' order: the host link's step time (0 without
    ``ceilings``) plus what the command's TP and EP pay between GPUs, with their assumptions."""
    sizes = command_parallel_sizes(resolved)
    shape, path = model_shape(resolved), gpu_path(report)
    if not sizes.crosses_gpus or shape is None or path is None:
        gap = cross_gpu_gap(report, resolved)
        return [], [gap] if gap else []
    host_ms = {(c.batch, c.window): c.step_ms for c in ceilings}
    steps = [
        decode_step(shape, sizes, path, batch, window, host_ms.get((batch, window), 0.0))
        for window in windows
        for batch in batches
    ]
    return steps, _path_notes(report, sizes) + parallel_assumptions(shape, sizes, path)


def predict_decode(
    report: FitReport,
    resolved: ResolvedCommand,
    *,
    batches: list[int],
    windows: list[int],
    measured_multiplier: float | None = None,
    multiplier_source: str = "given with --window-multiplier",
) -> Prediction:
    """Everything ``--predict`` states: the host link's ceilings when experts are offloaded, and the
    step with what TP and EP pay between GPUs when the command spreads over several. Refused in one
    line when neither can be said."""
    sizes = command_parallel_sizes(resolved)
    ceilings: list[Ceiling] = []
    notes: list[str] = []
    if report.expert_offload_gib > 0 or not sizes.crosses_gpus:
        ceilings, notes = predict_ceilings(
            report,
            resolved,
            batches=batches,
            windows=windows,
            measured_multiplier=measured_multiplier,
            multiplier_source=multiplier_source,
        )
    steps, parallel_notes = cross_gpu_steps(report, resolved, ceilings, batches=batches, windows=windows)
    if not ceilings and not steps:
        no_shape = model_shape(resolved) is None
        raise InputError(
            f"nothing is offloaded for {resolved.loaded.ref} on {report.box_id}, and {parallel_notes[0]}",
            where=resolved.loaded.doc.where() if no_shape else None,
            hint=("add memory.shape to the recipe (recipes/README.md)" if no_shape else "another --box")
            + ", or --offload-gb GIB for the host link alone",
        )
    return Prediction(ceilings, steps, sizes, gpu_path(report), notes + parallel_notes)


def step_dict(step: StepCost) -> dict[str, Any]:
    """One step for JSON: each part's milliseconds, what binds each collective, the shares."""
    return {
        "batch": step.batch,
        "window": step.window,
        "tokens": step.tokens,
        "host_link_ms": step.host_link_ms,
        "collectives": [
            {**dataclasses.asdict(cost), "ms": cost.ms, "binds": cost.binds} for cost in step.collectives
        ],
        "step_ms": step.ms,
        "tok_s": step.tok_s,
        "shares": {("host link" if name == "base" else name): share for name, share in step.shares().items()},
    }


def prediction_dict(prediction: Prediction) -> dict[str, Any]:
    """What ``ledger fit --predict --json`` adds to the fit report."""
    sizes = prediction.sizes
    return {
        "ceilings": [dataclasses.asdict(c) for c in prediction.ceilings],
        "parallel": {"tp": sizes.tp, "dp": sizes.dp, "ep": sizes.ep, "layout": sizes.label()},
        "gpu_path": dataclasses.asdict(prediction.path) if prediction.path else None,
        "steps": [step_dict(step) for step in prediction.steps],
        "ceiling_assumptions": prediction.assumptions,
    }
