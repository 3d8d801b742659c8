"""`ledger fit`: memory arithmetic for a recipe on a box profile, before any download."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import given_root, json_option, recipes_option
from recipe_ledger.cli.output import Column, free, print_json, print_table
from recipe_ledger.recipes.boxes import list_boxes as list_boxes_in
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.ceiling import Ceiling
from recipe_ledger.recipes.command import ResolvedCommand
from recipe_ledger.recipes.fit import GB, GIB, FitReport, verdict_lines
from recipe_ledger.recipes.fitting import (
    Prediction,
    fit_recipe,
    fit_report_dict,
    predict_decode,
    prediction_dict,
)
from recipe_ledger.recipes.parallel_cost import StepCost


@click.command("fit")
@click.argument("name", required=False)
@click.option("--box", help="Box profile id, e.g. dgx-station-gb300 (see --list-boxes).")
@click.option(
    "--strategy",
    "-s",
    help="Serving strategy, e.g. single_node_dep (its parallel layout is what --predict charges between "
    "GPUs). Default: the site's recommendation.",
)
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
@click.option(
    "--predict",
    is_flag=True,
    help="Also state the decode tok/s the host link alone allows for the expert offload (an upper bound) "
    "and, for a tensor- or expert-parallel command, what each step pays between GPUs.",
)
@click.option(
    "--batch",
    "batches",
    type=click.IntRange(1, 4096),
    multiple=True,
    help="Sequences per decode step for --predict (repeatable; default 1, 8, 32).",
)
@click.option(
    "--window",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Tokens per sequence per step for --predict (a speculative verify window of k drafts).",
)
@click.option(
    "--window-multiplier",
    type=click.FloatRange(1.0, 64.0),
    help="Measured unique experts in a --window over one token's (seed 000: 3.7 at k=5); "
    "default: uniform routing.",
)
@click.option(
    "--routing-from",
    "routing_entry",
    metavar="ENTRY",
    help="A routing result in the ledger (scripts/routing_probe.py) whose measured experts per --window "
    "replace uniform routing's (its control arm, first point).",
)
@json_option("The fit report as JSON.")
@recipes_option
def fit(
    name: str | None,
    box: str | None,
    strategy: str | None,
    context: int | None,
    offload_gb: float | None,
    gpu_util: float | None,
    list_boxes: bool,
    predict: bool,
    batches: tuple[int, ...],
    window: int,
    window_multiplier: float | None,
    routing_entry: str | None,
    as_json: bool,
    recipes: Path,
) -> None:
    """Memory arithmetic for recipe NAME on BOX, before any download.

    Shows where each checkpoint component lives, the GPU-resident total against HBM x
    utilization, host RAM used, KV bytes per token x context, and what must be offloaded.
    """
    recipe_root = RecipeRoot(recipes)
    boxes_dir = recipe_root.boxes_dirs
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
        recipe_root,
        name,
        box,
        context=context,
        offload_gib=offload_gb,
        gpu_utilization=gpu_util,
        strategy=strategy,
    )
    prediction: Prediction | None = None
    if predict:
        windows = sorted({1, window})
        source = "given with --window-multiplier"
        if routing_entry:
            window_multiplier, source = measured_window_multiplier(given_root(), routing_entry, window)
        prediction = predict_decode(
            report,
            resolved,
            batches=list(batches) or [1, 8, 32],
            windows=windows,
            measured_multiplier=window_multiplier,
            multiplier_source=source,
        )
    if as_json:
        data = fit_report_dict(report)
        if prediction is not None:
            data.update(prediction_dict(prediction))
        print_json(data)
        return
    print_fit(report, resolved)
    if prediction is not None:
        print_prediction(prediction)


def print_fit(report: FitReport, resolved: ResolvedCommand) -> None:
    click.echo(
        f"# {resolved.loaded.recipe.meta.title} on {report.box_id} "
        f"({resolved.hardware}, {resolved.strategy}, {resolved.variant})"
    )
    print_table(
        # The component's name folds and the numbers' headers are short: a table at 80 columns.
        [free("component"), "GiB stored", "GiB on GPU", "GiB in host", "placement"],
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


def print_prediction(prediction: Prediction) -> None:
    """The host link's ceilings, the step with the cross-GPU terms, then every assumption."""
    if prediction.ceilings:
        print_ceilings(prediction.ceilings)
    if prediction.steps:
        print_steps(prediction)
    click.echo("ceiling assumptions:")
    for note in prediction.assumptions:
        click.echo(f"  - {note}")


def print_ceilings(ceilings: list[Ceiling]) -> None:
    offloaded = ceilings[0].offloaded_gib
    click.echo(f"decode ceiling from the host link alone ({offloaded:g} GiB of experts offloaded):")
    print_table(
        # Short headers: the six columns fit 80 as a table (units in the legend below).
        ["batch", "window", "experts touched", "GB/step on link", "step ms", "tok/s ceiling"],
        [
            [
                c.batch,
                c.window,
                f"{c.share_touched:.1%}",
                f"{c.bytes_per_step / GB:.2f}",
                f"{c.step_ms:.1f}",
                f"{c.tok_s:,.0f}",
            ]
            for c in ceilings
        ],
    )
    click.echo("  batch: sequences per decode step; window: tokens per sequence per step")
    click.echo("  GB/step on link: the offloaded expert bytes one step reads over the host link")


def _term_names(steps: list[StepCost]) -> list[str]:
    """The collectives the steps pay (TP all-reduce, EP all-to-all), in the order they come."""
    return list(dict.fromkeys(cost.name for step in steps for cost in step.collectives))


def _short(name: str) -> str:
    """``TP2 all-reduce`` -> ``TP2``: the column and share label."""
    return name.split()[0]


def _percent(share: float) -> str:
    """A share as a whole percent that never hides a term: ``<1%`` and ``>99%`` at the ends."""
    if 0 < share < 0.005:
        return "<1%"
    if 0.995 <= share < 1:
        return ">99%"
    return f"{share:.0%}"


def _share_text(step: StepCost) -> str:
    """Each part's share of the step, a collective's with what binds it: ``link 60%, TP2 40% (latency)``."""
    binds = {cost.name: cost.binds for cost in step.collectives}
    parts = []
    for name, share in step.shares().items():
        if name != "base":
            parts.append(f"{_short(name)} {_percent(share)} ({binds[name]})")
        elif step.host_link_ms > 0:
            parts.append(f"link {_percent(share)}")
    return ", ".join(parts)


def _step_row(step: StepCost, terms: list[str], with_link: bool) -> list[object]:
    ms = {cost.name: cost.ms for cost in step.collectives}
    link = [f"{step.host_link_ms:.2f}"] if with_link else []
    cells = [f"{ms[name]:.2f}" if name in ms else "-" for name in terms]
    return [step.batch, step.window, *link, *cells, f"{step.ms:.2f}", f"{step.tok_s:,.0f}", _share_text(step)]


def print_steps(prediction: Prediction) -> None:
    """The step with the cross-GPU terms: a table at 80 columns (short headers, the shares fold)."""
    steps, path = prediction.steps, prediction.path
    terms = _term_names(steps)
    with_link = any(step.host_link_ms > 0 for step in steps)
    where = f", {path.gbps:g} GB/s and {path.latency_us:g} us a call" if path else ""
    click.echo(f"decode step with what {prediction.sizes.label()} pays between GPUs{where}:")
    headers: list[str | Column] = ["batch", "window", *(["link ms"] if with_link else [])]
    headers += [f"{_short(name)} ms" for name in terms] + ["step ms", "tok/s", free("share of the step")]
    print_table(headers, [_step_row(step, terms, with_link) for step in steps])
    for name in terms:
        click.echo(f"  {_short(name)} ms: the {name}s of one step, max(bytes / bandwidth, calls x latency)")
    click.echo("  tok/s: batch x window over the modelled step (an upper bound: compute takes no time)")
    click.echo("  share of the step: of the modelled parts (host link and collectives), not the compute")


def measured_window_multiplier(root: Path, entry_id: str, window: int) -> tuple[float, str]:
    """The control arm's measured experts per ``window`` tokens (its lowest point) from a routing
    result, and where it came from (in words, for the assumptions)."""
    from recipe_ledger.errors import InputError
    from recipe_ledger.ledger.store import Ledger
    from recipe_ledger.metrics import parse_summary_key, summary_key

    entry = Ledger.open(root).get(entry_id)
    metrics = entry.get("payload", {}).get("metrics", {})
    wanted = f"routing_window_multiplier_k{window}"
    points = sorted(
        point
        for arm, point, metric in filter(None, map(parse_summary_key, metrics))
        if arm == "control" and metric == wanted
    )
    if not points:
        raise InputError(
            f"entry {entry['id'][:12]} has no {wanted} for its control arm",
            hint=f"ledger show {entry['id'][:12]}; a routing result comes from scripts/routing_probe.py",
        )
    key = summary_key("control", points[0], wanted)
    return float(metrics[key]), f"ledger result {entry['id'][:12]}, {key}"
