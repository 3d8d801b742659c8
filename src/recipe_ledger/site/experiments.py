"""What an experiment page says beyond the raw record: which arm is the control, exactly what
differs between the arms, each repeat's value (from the run folder, when its hash matches the
ledger), the instrument's tight/loose class, and reproductions in words.

Pure functions over plain dicts, except ``repeat_values`` and ``spec_data``, which read a file
only after checking its content hash against the one the ledger entry recorded: a file that has
changed since is ignored, never shown as if it were the measured one.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

from recipe_ledger import metrics as metric_table
from recipe_ledger.errors import LedgerError
from recipe_ledger.recipes.flags import LaunchCommand
from recipe_ledger.spec.yamlfile import parse_yaml_text

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
    if words := command.loose_words():
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


def reproduction_lines(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """A reproduction's ``<number>.<field>`` metrics as one record per number: published and now,
    with units, the effect and its CI as signed percentages, the tolerance, in words."""
    fields: dict[str, dict[str, float]] = defaultdict(dict)
    for key, value in (payload.get("metrics") or {}).items():
        number, _, field = str(key).rpartition(".")
        if number and isinstance(value, (int, float)):
            fields[number][field] = float(value)
    out = []
    for number, f in sorted(fields.items()):
        fmt = metric_table.lookup(number)  # `output_tps_c4`: described by its name (tok/s)
        effect = metric_table.format_effect(f.get("effect"))
        words = (
            f"{number}: {fmt.format(f.get('reproduced'))} now (n={int(f.get('n_reproduced', 0))}) vs "
            f"{fmt.format(f.get('published'))} published (n={int(f.get('n_published', 0))}): "
            f"{effect or 'no effect computed'}{_ci_text(f)}{_tolerance_text(f)}"
        )
        out.append({"number": number, "words": words})
    return out


def _ci_text(f: dict[str, float]) -> str:
    if "ci_low" not in f or "ci_high" not in f:
        return ""
    low, high = metric_table.format_effect(f["ci_low"]), metric_table.format_effect(f["ci_high"])
    return f", 95% CI [{low}, {high}]"


def _tolerance_text(f: dict[str, float]) -> str:
    return f", tolerance ±{f['tolerance'] * 100:.0f}%" if "tolerance" in f else ""
