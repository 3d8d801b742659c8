"""The experiment pages (``experiments/<name>-<id>.html``, one per result entry carrying an
experiment record) and their listing (``experiments/index.html``).

Beyond the raw record a page says which arm is the control, exactly what differs between the arms,
each repeat's value (from the run folder, when its hash matches the ledger), the instrument's
tight/loose class, the verdicts and their plots, and reproductions in words.

Files are read only after checking their content hash against the one the ledger entry recorded
(``repeat_values``, ``spec_data``, ``trace_files``): a file that has changed since is ignored,
never shown as if it were the measured one.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

from recipe_ledger import metrics as metric_table
from recipe_ledger.errors import LedgerError
from recipe_ledger.ledger.views import design_text, dirty_flag
from recipe_ledger.recipes.flags import LaunchCommand
from recipe_ledger.site import plots
from recipe_ledger.site.entries import LedgerIndex, entry_ref, short
from recipe_ledger.site.reproductions import reproductions_of
from recipe_ledger.site.shown import keys_filled, redact_all
from recipe_ledger.site.writer import SiteWriter, slugify
from recipe_ledger.spec.yamlfile import parse_yaml_text

ARM_KEYS = ("source", "engine", "fingerprint", "argv", "env", "image", "model_sha256")
BAR_KEYS = (
    "candidate",
    "metric",
    "point",
    "direction",
    "min_effect",
    "outcome",
    "effect",
    "ci_low",
    "ci_high",
    "mde",
    "control",
    "value",
    "reason",
    "decision",
)


# -- the pages ---------------------------------------------------------------------------------


def experiment_pages(index: LedgerIndex, project: Path) -> list[tuple[str, dict[str, Any], list[str]]]:
    """[(path, data, svg plots)] per result entry carrying an experiment record."""
    out = []
    for entry in index.entries:
        experiment = (entry.get("payload") or {}).get("experiment")
        if entry.get("kind") != "result" or not isinstance(experiment, dict):
            continue
        entry = redact_all(entry)
        experiment = entry["payload"]["experiment"]
        path = f"experiments/{slugify(str(experiment.get('name', 'experiment')))}-{short(entry['id'])}.html"
        out.append((path, *_experiment_data(entry, experiment, index, "../", project)))
    return out


def _experiment_data(
    entry: dict, experiment: dict, index: LedgerIndex, root: str, project: Path
) -> tuple[dict, list[str]]:
    p = entry["payload"]
    bars = [keys_filled(b, BAR_KEYS) for b in experiment.get("bars", []) if isinstance(b, dict)]
    sweeps = sweep_series(p.get("metrics", {}))
    chosen = metric_table.headline(sweeps)
    control = control_arm(experiment)
    arms = experiment.get("arms") or {}
    spec, params_note = spec_data(project, experiment)
    params = redact_all(spec_params(spec))  # read from the experiment file: never shown raw
    repeats = repeat_values(project, experiment, p.get("artifacts") or {})
    charts = experiment_charts(bars, sweeps, chosen, control, repeats, point_axis(spec))
    calibration = experiment.get("calibration")
    data = {
        "entry": entry_ref(index, entry["id"], root),
        "ts": entry.get("ts"),
        "writer": entry.get("writer"),
        "name": experiment.get("name"),
        "hypothesis": experiment.get("hypothesis", ""),
        "box": experiment.get("box"),
        "run_id": experiment.get("run_id"),
        "spec": experiment.get("spec"),
        "spec_sha256": experiment.get("spec_sha256"),
        "points": experiment.get("points", []),
        "repeats": experiment.get("repeats"),
        "schedule": experiment.get("schedule", []),
        "instruments": sorted((experiment.get("instruments") or {}).items()),
        "method": experiment.get("method"),
        "host": sorted((experiment.get("host") or {}).items()),
        "duration_s": experiment.get("duration_s"),
        # Every arm is an object: ExperimentRecord.arms was validated when the entry was written.
        "arms": [
            {"name": k, "params": sorted(params.get(k, {}).items()), **keys_filled(v, ARM_KEYS)}
            for k, v in sorted(arms.items(), key=lambda kv: (kv[0] != control, kv[0]))
        ],
        "control": control,
        "differences": arm_differences(arms, control, params),
        "params_note": params_note,
        "instrument_classes": instrument_classes(p),
        "repeats_shown": bool(repeats),
        "reproductions": reproductions_of(index, entry["id"], root),
        "bars": bars,
        "quality": [b for b in experiment.get("quality") or [] if isinstance(b, dict)],
        # Cross-engine experiments: the one client that measured both arms, per bar.
        "clients": sorted((experiment.get("clients") or {}).items()),
        "verdict": p.get("verdict"),
        "design": design_text(experiment),
        "text": p.get("text", ""),
        "calibration": entry_ref(index, calibration, root) if calibration in index.by_id else None,
        "metrics": [[k, v] for k, v in sorted(p.get("metrics", {}).items())],
        "artifacts": sorted(p.get("artifacts", {}).items()),
        "traces": [
            {**t, "link": root + t["href"]}
            for t in trace_files(project, experiment, p.get("artifacts") or {})
        ],
        "mlflow": sorted((p.get("mlflow") or {}).items()),
        "scripts": sorted(((entry.get("git") or {}).get("scripts") or {}).items()),
        "git_commit": (entry.get("git") or {}).get("commit"),
        "git_flag": dirty_flag(entry),
        "sweep_metrics": chosen,
    }
    return data, charts


def write_experiments(writer: SiteWriter, experiments: list, project: Path) -> None:
    """Each experiment's page (with its profiler traces copied beside it), then the listing."""
    for path, data, charts in experiments:
        writer.page(path, "experiment.html", data, charts=charts)
        for trace in data["traces"]:  # copied so the page's links work when site/ is served alone
            writer.write_bytes(trace["href"], (project / trace["src"]).read_bytes())
    listing = [
        {
            "path": path,
            "name": d["name"],
            "box": d["box"],
            "ts": d["ts"],
            "verdict": d["verdict"],
            "entry": d["entry"],
        }
        for path, d, _ in experiments
    ]
    writer.page("experiments/index.html", "experiments.html", {"experiments": listing})


# -- the arms ----------------------------------------------------------------------------------


ARM_FIELDS = (("engine", "engine"), ("image", "image"), ("model_sha256", "model (content hash)"))


def control_arm(experiment: dict[str, Any]) -> str | None:
    """The arm every bar compares against: the one named ``control``, else the only arm that is never
    a bar's candidate; None when the record does not say."""
    arms = list(experiment.get("arms") or {})
    if "control" in arms:
        return "control"
    candidates = {b.get("candidate") for b in experiment.get("bars", []) if isinstance(b, dict)}
    rest = [a for a in arms if a not in candidates]
    return rest[0] if len(rest) == 1 else None


def options_of(argv: list[str]) -> dict[str, str]:
    """A command line as ``{flag: value}`` (``"(set)"`` for a switch) read by the one argv reader
    (``LaunchCommand``: a flag's values are what the server would read), and the words no flag owns
    (the program, the model) under ``(command)``."""
    command = LaunchCommand.parse([str(token) for token in argv])
    out = command.option_texts()
    if words := command.positionals():
        out["(command)"] = " ".join(words)
    return out


def _changes(kind: str, before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, str]]:
    """Keys whose value differs between two mappings, as rows ``{what, control, arm}``."""
    rows = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old != new:
            rows.append(
                {
                    "what": f"{kind} {key}".strip(),
                    "control": "(absent)" if old is None else str(old),
                    "arm": "(absent)" if new is None else str(new),
                }
            )
    return rows


def arm_differences(
    arms: dict[str, dict[str, Any]], control: str | None, params: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per arm other than the control: every flag, environment variable, parameter, engine, image
    and model that differs from the control's (``params``: arm -> the spec's parameters)."""
    if control is None or control not in arms:
        return []
    base = arms[control]
    out = []
    for name, arm in sorted(arms.items()):
        if name == control:
            continue
        rows = _changes("param", params.get(control, {}), params.get(name, {}))
        rows += _changes("flag", options_of(base.get("argv") or []), options_of(arm.get("argv") or []))
        rows += _changes("env", base.get("env") or {}, arm.get("env") or {})
        for key, label in ARM_FIELDS:
            rows += _changes(label, _present(key, base), _present(key, arm))
        same = base.get("fingerprint") == arm.get("fingerprint")
        out.append({"arm": name, "differences": rows, "same_fingerprint": same})
    return out


def _present(key: str, arm: dict[str, Any]) -> dict[str, Any]:
    return {"": arm[key]} if arm.get(key) else {}


# -- what the run folder and the experiment file add (when their hash is the recorded one) -----


def sha256_matches(path: Path, recorded: str | None) -> bool:
    if not recorded or not path.is_file():
        return False
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest() == recorded


def spec_data(project: Path, experiment: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """(the experiment file as it was run, a note): read only when the file's hash is the one
    recorded; otherwise None and a note saying why."""
    spec = experiment.get("spec")
    path = project / str(spec or "")
    if not spec or not path.is_file():
        return None, "the experiment file is not in this repository"
    if not sha256_matches(path, experiment.get("spec_sha256")):
        return None, f"{spec} has changed since the run (its hash differs): parameters not shown"
    try:
        data = parse_yaml_text(path.read_text(encoding="utf-8"), str(spec))
    except LedgerError:
        return None, f"{spec} does not parse"
    return (data if isinstance(data, dict) else {}), ""


def spec_params(data: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """arm -> parameters from the experiment file (``spec_data``'s)."""
    params: dict[str, dict[str, Any]] = {}
    control = (data or {}).get("control") or {}
    if isinstance(control, dict):
        params["control"] = dict(control.get("params") or {})
    for name, candidate in ((data or {}).get("candidates") or {}).items():
        if isinstance(candidate, dict):
            params[str(name)] = dict(candidate.get("params") or {})
    return params


def _measurement_files(project: Path, experiment: dict[str, Any], artifacts: dict[str, str]) -> list[Path]:
    run_id = str(experiment.get("run_id") or "")
    evidence = project / "evidence"
    if not run_id or not evidence.is_dir():
        return []
    out = []
    for name, digest in artifacts.items():
        if not name.endswith("measurements.jsonl"):
            continue
        for folder in sorted(evidence.glob(f"*/{run_id}")):
            candidate = folder / Path(name).name
            if sha256_matches(candidate, digest):
                out.append(candidate)
    return out


TRACE_GLOB = "raw/**/*.trace.json.gz"  # what scripts/profile_probe.py keeps beside its {out}


def trace_files(project: Path, experiment: dict[str, Any], artifacts: dict[str, str]) -> list[dict[str, Any]]:
    """The profiler traces kept in the run folder under evidence/ whose measurements the entry pins:
    [{name, src (repository path), href (site path), mb}] for the experiment page to link."""
    run_id = str(experiment.get("run_id") or "")
    out = []
    for measurements in _measurement_files(project, experiment, artifacts):
        for trace in sorted(measurements.parent.glob(TRACE_GLOB)):
            name = trace.relative_to(measurements.parent / "raw").as_posix()
            out.append(
                {
                    "name": name,
                    "src": trace.relative_to(project).as_posix(),
                    "href": f"traces/{run_id}/{name}",
                    "mb": round(trace.stat().st_size / 1e6, 2),
                }
            )
    return out


def repeat_values(
    project: Path, experiment: dict[str, Any], artifacts: dict[str, str]
) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(metric, point) -> arm -> each repeat's value, from the run folder's measurements under
    evidence/ when its sha256 is the one the entry recorded; empty otherwise."""
    out: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for path in _measurement_files(project, experiment, artifacts):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else {}
            for metric, value in (row.get("metrics") or {}).items():
                if isinstance(value, (int, float)):
                    out[(metric, str(row.get("point")))][str(row.get("arm"))].append(float(value))
    return {k: dict(v) for k, v in out.items()}


CLASS_PREFIX = "instrument_class."


def instrument_classes(payload: dict[str, Any]) -> list[tuple[str, str]]:
    """[(what, "tight" | "loose")] from the calibration's classification a result carries:
    ``conditions["instrument_class.<instrument>.<metric>.p<point>"]`` (what `ledger run` records,
    per bar and point; the only place it is written: payloads forbid other fields)."""
    conditions = payload.get("conditions") or {}
    return [
        (_class_subject(key[len(CLASS_PREFIX) :]), str(value))
        for key, value in sorted(conditions.items())
        if isinstance(key, str) and key.startswith(CLASS_PREFIX)
    ]


def _class_subject(rest: str) -> str:
    """``placement.moe_step_ms_b1.p1`` -> ``placement: moe_step_ms_b1 at point 1``."""
    parts = rest.split(".")
    if len(parts) >= 3 and parts[-1].startswith("p"):
        return f"{parts[0]}: {'.'.join(parts[1:-1])} at point {parts[-1][1:]}"
    return rest


# -- the plots ---------------------------------------------------------------------------------


class PointAxis(NamedTuple):
    """What a sweep's points are: in a chart's title, and on its x axis."""

    meaning: str
    label: str


CONCURRENCY = PointAxis("concurrency", "concurrency (streams)")


def point_axis(data: dict[str, Any] | None) -> PointAxis:
    """Concurrency levels, or the values of a launch flag (``launch_sweep``)."""
    sweep = (data or {}).get("launch_sweep")
    if isinstance(sweep, dict) and isinstance(sweep.get("args"), list):
        return PointAxis(
            "the launch value {point} in " + " ".join(str(a) for a in sweep["args"]), "launch value"
        )
    return CONCURRENCY


def sweep_series(metrics: dict[str, float]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """``arm.cN.metric`` summary metrics -> metric -> arm -> [(N, value)]."""
    out: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for key, value in sorted(metrics.items()):
        parsed = metric_table.parse_summary_key(key)
        if parsed and isinstance(value, (int, float)):
            arm, point, metric = parsed
            out[metric][arm].append((float(point), float(value)))
    return {m: dict(arms) for m, arms in out.items()}


def experiment_charts(
    bars: list[dict[str, Any]],
    sweeps: dict,
    chosen: list[str],
    control: str | None,
    repeats: dict,
    point_axis: PointAxis = CONCURRENCY,
) -> list[str]:
    """The bar metrics first (each arm's median and repeats at the bar's point), then the verdict
    effects, then the sweeps against their points (``point_axis``: what they are, concurrency or a
    launch flag's value); every axis names its unit."""
    places = dict.fromkeys((str(b["metric"]), str(b["point"])) for b in bars)
    # a bar metric at its point is drawn once, as the verdict saw it (geometric means): a median
    # chart of it would be a second, different picture of the same numbers
    charts = [_bar_metric_chart(m, pt, bars, control, repeats.get((m, pt), {})) for m, pt in places]
    skew = _skew_values(sweeps)
    if skew:
        charts.append(
            plots.skew_chart(
                plots.skew_curves(skew),
                title="Routing skew: share of hits on the hottest experts, median per arm",
            )
        )
    if bars:
        charts.append(plots.effects_chart(bars))
    for metric in chosen:
        points = {x for values in sweeps[metric].values() for x, _ in values}
        if len(points) == 1:  # one point (a study's nominal one): arms side by side, not a line
            (point,) = points
            if (metric, f"{point:g}") in places:
                continue
            values = {arm: v for arm, pts in sweeps[metric].items() for _, v in pts}
            samples = repeats.get((metric, f"{point:g}"), {})
            charts.append(
                plots.arms_chart(
                    values,
                    title=f"{metric} at {point:g}: median per arm; dots: repeats",
                    x_label=plots.axis_label(metric),
                    control=control,
                    samples=samples,
                )
            )
            continue
        samples = {
            arm: [
                (float(pt), v)
                for (name, pt), by_arm in repeats.items()
                if name == metric
                for v in by_arm.get(arm, [])
            ]
            for arm in sweeps[metric]
        }
        charts.append(
            plots.sweep_chart(
                sweeps[metric],
                title=f"{metric} against {point_axis.meaning} (line: median per arm; dots: repeats)",
                x_label=point_axis.label,
                y_label=plots.axis_label(metric, short=True),
                samples=samples,
            )
        )
    return charts


def _skew_values(sweeps: dict) -> dict[str, dict[int, float]]:
    """arm -> {expert share %: hit share} from a routing result's figures (first point of each)."""
    out: dict[str, dict[int, float]] = {}
    for share in plots.SKEW_SHARES:
        for arm, points in sweeps.get(f"routing_hit_share_top{share}", {}).items():
            if points:
                out.setdefault(arm, {})[share] = float(sorted(points)[0][1])
    return out


def _bar_metric_chart(
    metric: str, point: str, bars: list[dict[str, Any]], control: str | None, samples: dict[str, list[float]]
) -> str:
    """One bar metric at its point: the control's and each candidate's geometric mean over its
    launches (the values the verdict compares, as its table shows them), and the repeats."""
    here = [b for b in bars if (str(b["metric"]), str(b["point"])) == (metric, point)]
    values = {str(b["candidate"]): b["value"] for b in here if isinstance(b.get("value"), (int, float))}
    control_values = [b["control"] for b in here if isinstance(b.get("control"), (int, float))]
    if control and control_values:
        values[control] = control_values[0]
    direction = here[0].get("direction") if here else None
    better = f"; {direction} is better" if direction else ""
    return plots.arms_chart(
        values,
        title=f"{metric} at {point}: geometric mean per arm (the verdict's); dots: repeats{better}",
        x_label=plots.axis_label(metric),
        control=control,
        samples=samples,
    )
