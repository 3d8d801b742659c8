"""A ledger entry as its MLflow run (pure): name, tags, params, metrics and texts of a ``result``,
``calibration`` or ``failure`` entry, its status mirrored into tags, every string redacted.

- a ``result``: its bars by position as columns (``compare.bar_columns``), the verdict of every bar
  as tags, the arms' fingerprints, images and model hashes, instrument versions and the spec as
  params, its summary children (``compare.summary_specs``);
- a ``calibration``: its instrument, metric and the noise per point;
- a ``failure``: its cause as tags and ``failure.txt`` (cause and log tail).

The run folder, when it is on this box, adds files and children (``runfolder``). What other entries
say about it (its status, the notes about it, the calibrations it used: ``links``) are its mutable
tags, refreshed by every sync.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from recipe_ledger import metrics as metric_table
from recipe_ledger import runs
from recipe_ledger.redact import redact_obj, redact_text
from recipe_ledger.tracking.compare import bar_columns, summary_specs
from recipe_ledger.tracking.links import NO_LINKS, Links, link_tags, note_text, short
from recipe_ledger.tracking.runfolder import Roots, run_folder, with_run_folder
from recipe_ledger.tracking.runspec import (
    ENTRY_TAG,
    MAX_PARAM,
    MAX_TAG,
    RETRACTED_PREFIX,
    ROLE_TAG,
    STATUS_TAG,
    UNITS_TAG,
    RunSpec,
    as_text,
    bar_key,
    finite_number,
    key,
    numbers,
    run_status,
    ts_ms,
)

INDEXED_KINDS = ("result", "calibration", "failure")  # the entries that get a run (entry_spec)


def common_tags(entry: Mapping[str, Any]) -> dict[str, str]:
    """Tags every indexed entry carries: its identity in the ledger, the git state, the box."""
    payload, git = entry["payload"], entry.get("git") or {}
    tags = {
        ENTRY_TAG: entry["id"],
        ROLE_TAG: "entry",
        "ledger.kind": entry["kind"],
        "ledger.writer": entry["writer"],
        "ledger.seq": str(entry["seq"]),
        "ledger.ts": entry["ts"],
        "ledger.origin": (payload.get("origin") or {}).get("how", ""),
        "mlflow.user": entry["writer"],  # the UI's "User" column: the box whose chain holds the entry
    }
    if payload.get("subject"):
        tags["ledger.subject"] = payload["subject"]
    if git.get("commit"):
        tags.update(
            {
                "git.commit": git["commit"],
                "git.dirty": str(bool(git.get("dirty"))).lower(),
                "mlflow.source.git.commit": git["commit"],
            }
        )
        if git.get("diff_sha256"):  # an allowed dirty run: the diff it ran with, by hash
            tags["git.diff_sha256"] = str(git["diff_sha256"])
    box = (payload.get("conditions") or {}).get("box") or (payload.get("experiment") or {}).get("box")
    if box:
        tags["box"] = str(box)
    return tags


def script_params(entry: Mapping[str, Any]) -> dict[str, str]:
    scripts = (entry.get("git") or {}).get("scripts") or {}
    return {key("script", path): blob for path, blob in scripts.items()}


def status_tags(status: str, note: str, headline: str, notes: Sequence[str] = ()) -> dict[str, str]:
    """The status tags: status, why, and the run description the UI shows on top of the run (with
    the notes about the entry under the headline)."""
    description = headline if status == "active" else f"**{status.upper()}**: {note}\n\n{headline}"
    if notes:
        description += "\n\nNotes:\n" + "\n".join(f"- {line}" for line in notes)
    return {STATUS_TAG: status, "ledger.status_note": note or "-", "mlflow.note.content": description}


def mutable_tags(entry: Mapping[str, Any], status: str, note: str, links: Links) -> dict[str, str]:
    """Every tag a sync refreshes: the status tags and the links (calibrations, notes, used by)."""
    notes = [f"`{short(n['id'])}` ({n['writer']}): {note_text(n, links)}" for n in links.notes]
    return {**status_tags(status, note, _headline(entry), notes), **link_tags(entry, links)}


# -- result entries


def experiment_params(record: Mapping[str, Any]) -> dict[str, str]:
    """The experiment as launched: spec, sweep, schedule, every arm's pins, instrument versions."""
    params = {
        "experiment.name": record["name"],
        "experiment.spec": record["spec"],
        "experiment.spec_sha256": record["spec_sha256"],
        "experiment.points": as_text(record.get("points", []), MAX_PARAM),
        "experiment.repeats": str(record.get("repeats", "")),
        "experiment.schedule": ", ".join(record.get("schedule", [])),
        "experiment.method": record.get("method", ""),
        "experiment.calibration": record.get("calibration") or "-",
        "experiment.calibration_inline": str(record.get("calibration_inline", False)).lower(),
    }
    for arm_name, arm in record.get("arms", {}).items():
        params.update(arm_params(arm_name, arm))
    for instrument, version in record.get("instruments", {}).items():
        params[key("instrument", instrument, "version")] = version
    for bar in record.get("bars", []):
        params[bar_key(bar) + ".direction"] = bar["direction"]
        params[bar_key(bar) + ".min_effect"] = str(bar["min_effect"])
    return params


def arm_params(name: str, arm: Mapping[str, Any]) -> dict[str, str]:
    return {
        key("arm", name, "fingerprint"): arm["fingerprint"],
        key("arm", name, "source"): arm.get("source", ""),
        key("arm", name, "image"): arm.get("image") or "-",
        key("arm", name, "model_sha256"): arm.get("model_sha256") or "-",
        key("arm", name, "argv"): as_text(shlex.join(arm.get("argv", [])), MAX_PARAM),
        key("arm", name, "env"): as_text(arm.get("env", {}), MAX_PARAM),
    }


def bar_tags(bars: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """``verdict.<candidate>.<metric>.c<point>`` = outcome, and its one-line reason."""
    tags = {}
    for bar in bars:
        tags[bar_key(bar)] = bar["outcome"]
        if bar.get("reason"):
            tags[bar_key(bar) + ".reason"] = bar["reason"]
        if bar.get("decision"):  # the sequential design's words: "decided after 6 launches: win"
            tags[bar_key(bar) + ".decision"] = bar["decision"]
    return tags


def design_tags(record: Mapping[str, Any]) -> dict[str, str]:
    """``ledger.design`` = how the run spent its launches, in words ("rl-sequential/1: decided after 6
    launches: win"), and ``ledger.design.method``; none for results recorded before designs were."""
    design = record.get("design")
    if not isinstance(design, Mapping):
        return {}
    method = str(design.get("method", ""))
    return {"ledger.design": f"{method}: {design.get('summary', '')}", "ledger.design.method": method}


def design_metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """``design.launches`` and ``design.looks``: what the decision cost."""
    design = record.get("design")
    if not isinstance(design, Mapping):
        return {}
    return numbers({f"design.{name}": design.get(name) for name in ("launches", "looks", "cap")})


def quality_key(bar: Mapping[str, Any]) -> str:
    """``quality.<candidate>.<metric>.c<point>``: a quality bar, beside its candidate's verdicts."""
    return key("quality", bar["candidate"], bar["metric"], f"c{bar['point']}")


def quality_tags(record: Mapping[str, Any]) -> dict[str, str]:
    """``quality.<candidate>.<metric>.c<point>`` = non-inferior / worse / not-shown, and its reason."""
    tags = {}
    for bar in record.get("quality") or []:
        tags[quality_key(bar)] = bar["outcome"]
        if bar.get("reason"):
            tags[quality_key(bar) + ".reason"] = bar["reason"]
    return tags


def quality_metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """Per quality bar the shares of items kept (``.control``, ``.value``), the difference and its
    interval in percentage points (``.difference_pt``), and the items it paired."""
    out: dict[str, float] = {}
    for bar in record.get("quality") or []:
        points = {
            f"{name}_pt": bar[name] * 100
            for name in ("difference", "ci_low", "ci_high")
            if finite_number(bar.get(name)) is not None
        }
        out.update(numbers(points, quality_key(bar)))
        out.update(numbers({name: bar.get(name) for name in ("control", "value", "items")}, quality_key(bar)))
    return out


def headline_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """Of a result's summary medians (``<arm>.c<point>.<metric>``), only the headline metrics'.

    The rest (often 200+ names) stay on the per-repeat child runs, under their plain names, where
    the arms are a param and not a prefix."""
    metric_of = {name: _summary_metric(name) for name in summary}
    chosen = set(metric_table.headline(m for m in metric_of.values() if m))
    return numbers({n: v for n, v in summary.items() if not metric_of[n] or metric_of[n] in chosen})


def _summary_metric(name: str) -> str:
    """The metric of a ``<arm>.c<point>.<metric>`` name; empty for any other name."""
    parsed = metric_table.parse_summary_key(name)
    return parsed[2] if parsed else ""


def units_tag(metric_names: Iterable[str]) -> dict[str, str]:
    """``ledger.units`` = "metric=unit, ..." for the metrics whose unit is known (MLflow has no units)."""
    units = [f"{name}={unit}" for name in sorted(metric_names) if (unit := _unit_of(name))]
    return {UNITS_TAG: as_text(", ".join(units), MAX_TAG)} if units else {}


def _unit_of(name: str) -> str:
    if name.endswith("_pct"):
        return "%"
    summary = metric_table.parse_summary_key(name)
    if summary:
        return metric_table.unit(summary[2])
    parts = name.split(".")
    if parts[0] == "verdict" and len(parts) >= 5:  # verdict.<candidate>.<metric>.c<point>.<field>
        return metric_table.unit(".".join(parts[2:-2]))
    return metric_table.unit(name) if name != "wall_s" else "s"


def result_spec(entry: Mapping[str, Any], runs_dir: Roots) -> RunSpec:
    payload = entry["payload"]
    record = payload.get("experiment")
    tags = common_tags(entry)
    params = {key("condition", k): str(v) for k, v in (payload.get("conditions") or {}).items()}
    bars = (record or {}).get("bars") or []
    # With bars, the arms' medians are on the summary children (compare), not 200 columns here.
    metrics = {} if bars else headline_metrics(payload.get("metrics") or {})
    if payload.get("verdict"):
        tags["verdict"] = payload["verdict"]
    if record:
        tags.update({"ledger.experiment": record["name"], "ledger.run_id": record["run_id"]})
        tags.update({key("host", k): v for k, v in (record.get("host") or {}).items()})
        tags.update(bar_tags(bars))
        columns, bar_numbers = bar_columns(bars)
        tags.update(columns)
        tags.update(design_tags(record))
        tags.update(quality_tags(record))
        params.update(experiment_params(record))
        metrics.update(bar_numbers)
        metrics.update(quality_metrics(record))
        metrics.update(design_metrics(record))
        metrics.update(numbers({"duration_s": record.get("duration_s")}))
    params.update(script_params(entry))
    spec = _entry_spec(entry, _result_name(payload), tags, params, metrics, record)
    if record and bars:
        summaries, compared = summary_specs(record, payload.get("metrics") or {}, spec)
        spec = replace(spec, summaries=summaries, compared=compared)
    return with_run_folder(spec, entry, runs_dir, runs.MEASUREMENTS)


def _result_name(payload: Mapping[str, Any]) -> str:
    record = payload.get("experiment")
    if not record:
        return payload["subject"]
    # A run id is "<experiment>-<UTC stamp>-<hex>" already; say the name once.
    run_id, name = record["run_id"], record["name"]
    return run_id if run_id.startswith(name) else f"{name} {run_id}"


def _entry_spec(
    entry: Mapping[str, Any],
    name: str,
    tags: dict[str, str],
    params: dict[str, str],
    metrics: dict[str, float],
    record: Mapping[str, Any] | None = None,
) -> RunSpec:
    end = ts_ms(entry["ts"])  # entries are written when the work ends
    duration = finite_number((record or {}).get("duration_s")) or 0.0
    return RunSpec(
        name=name,
        tags=tags,
        status_tags={},
        params=params,
        metrics=metrics,
        start_ms=end - int(duration * 1000),
        end_ms=end,
    )


# -- calibration and failure entries


def calibration_spec(entry: Mapping[str, Any], runs_dir: Roots) -> RunSpec:
    payload = entry["payload"]
    tags = {
        **common_tags(entry),
        "ledger.instrument": payload["instrument"],
        "ledger.metric": payload["metric"],
    }
    params = {
        "calibration.instrument": payload["instrument"],
        "calibration.metric": payload["metric"],
        "calibration.unit": payload.get("unit") or metric_table.unit(payload["metric"]) or "-",
        "calibration.method": payload.get("method") or "-",
        "calibration.fingerprint": payload.get("fingerprint") or "-",
        "calibration.repeats": as_text(payload.get("repeats", []), MAX_PARAM),
        **{key("condition", k): str(v) for k, v in (payload.get("conditions") or {}).items()},
    }
    metrics = numbers({"sigma": payload.get("sigma"), "spread": payload.get("spread")})
    for point, noise in (payload.get("points") or {}).items():
        metrics.update(numbers({k: v for k, v in noise.items() if k != "samples"}, f"c{point}"))
    name = f"calibration {payload['instrument']} {payload['metric']}"
    folder = run_folder(entry)
    spec = _entry_spec(entry, f"{name} {folder}" if folder else name, tags, params, metrics)
    spec = replace(spec, texts={"calibration.txt": payload["text"]} if payload.get("text") else {})
    return with_run_folder(spec, entry, runs_dir, runs.CALIBRATION, instrument=payload["instrument"])


def failure_spec(entry: Mapping[str, Any], runs_dir: Roots) -> RunSpec:
    payload = entry["payload"]
    conditions = payload.get("conditions") or {}
    tags = {
        **common_tags(entry),
        "ledger.cause_class": payload["cause_class"],
        "ledger.cause": as_text(payload["cause"], 500),
    }
    if conditions.get("stage"):
        tags["ledger.stage"] = str(conditions["stage"])
    params = {key("condition", k): str(v) for k, v in conditions.items()}
    params.update(script_params(entry))
    metrics = numbers({"minutes_lost": payload.get("minutes_lost")})
    folder = run_folder(entry)
    name = f"failed ({payload['cause_class']}): {payload['subject']}" + (f" {folder}" if folder else "")
    spec = replace(
        _entry_spec(entry, name, tags, params, metrics), texts={"failure.txt": failure_text(payload)}
    )
    return with_run_folder(spec, entry, runs_dir, None)


def failure_text(payload: Mapping[str, Any]) -> str:
    parts = [
        f"subject: {payload['subject']}",
        f"cause class: {payload['cause_class']}",
        f"cause: {payload['cause']}",
    ]
    if payload.get("fix"):
        parts.append(f"fix: {payload['fix']}")
    if payload.get("log_tail"):
        parts.append("log tail:\n" + payload["log_tail"])
    return "\n".join(parts) + "\n"


# -- from an entry to its run


def entry_spec(
    entry: Mapping[str, Any],
    runs_dir: Roots,
    status: str = "active",
    note: str = "",
    links: Links = NO_LINKS,
) -> RunSpec:
    """The redacted RunSpec of one indexed entry (result, calibration or failure)."""
    build = {"result": result_spec, "calibration": calibration_spec, "failure": failure_spec}[entry["kind"]]
    spec = build(entry, runs_dir)
    final = run_status(entry["kind"], status)

    def nested(runs: Iterable[RunSpec]) -> tuple[RunSpec, ...]:
        return tuple(
            replace(
                c,
                tags={**c.tags, **units_tag(c.metrics)},
                status="KILLED" if final == "KILLED" else "FINISHED",
                status_tags={STATUS_TAG: status},
            )
            for c in runs
        )

    spec = replace(
        spec,
        name=RETRACTED_PREFIX + spec.name if status == "retracted" else spec.name,
        tags={**spec.tags, **units_tag(spec.metrics)},
        status=final,
        status_tags=mutable_tags(entry, status, note, links),
        children=nested(spec.children),
        summaries=nested(spec.summaries),
    )
    return redact_spec(spec)


def entry_status_tags(
    entry: Mapping[str, Any], status: str, note: str, links: Links = NO_LINKS
) -> dict[str, str]:
    """Only the mutable tags of an entry's run, redacted as entry_spec would have them."""
    return _limited(redact_obj(mutable_tags(entry, status, note, links)), MAX_TAG)


def _headline(entry: Mapping[str, Any]) -> str:
    payload = entry["payload"]
    text = payload.get("text") or payload.get("cause") or payload.get("subject") or ""
    return f"{text}\n\nledger entry `{entry['id']}` ({entry['kind']}, {entry['writer']} #{entry['seq']})"


def redact_spec(spec: RunSpec) -> RunSpec:
    """Every string bound for MLflow, redacted and cut to MLflow's limits."""
    return replace(
        spec,
        name=redact_text(spec.name)[:250],
        tags=_limited(redact_obj(spec.tags), MAX_TAG),
        status_tags=_limited(redact_obj(spec.status_tags), MAX_TAG),
        params=_limited(redact_obj(spec.params), MAX_PARAM),
        metrics={key(redact_text(name)): value for name, value in spec.metrics.items()},
        texts={name: redact_text(text) for name, text in spec.texts.items()},
        children=tuple(redact_spec(child) for child in spec.children),
        summaries=tuple(redact_spec(summary) for summary in spec.summaries),
    )


def _limited(values: Mapping[str, Any], limit: int) -> dict[str, str]:
    return {key(name): as_text(str(value), limit) for name, value in values.items()}


def status_notes(entries: Sequence[Mapping[str, Any]], statuses: Mapping[str, str]) -> dict[str, str]:
    """Why an entry has its folded status: the retraction's id and reason, the superseding or
    reproducing entry's id (the latest one that explains the status, as folding does)."""
    notes: dict[str, str] = {}
    for entry in entries:
        for ref in entry.get("refs", ()):
            note = _note(ref.get("rel"), entry, statuses.get(ref.get("id"), ""))
            if note:
                notes[ref["id"]] = note
    return notes


def _note(rel: str | None, source: Mapping[str, Any], target_status: str) -> str | None:
    payload, short = source["payload"], source["id"][:12]
    if rel == "retracts" and target_status == "retracted":
        return f"retracted by {short}: {payload.get('reason', '')}"
    if rel == "supersedes" and target_status == "superseded":
        return f"superseded by {short}"
    if rel == "reproduces" and payload.get("outcome") == target_status:
        return f"{target_status} by {short}"
    return None
