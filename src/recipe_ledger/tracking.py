"""Indexing the ledger into MLflow: the index and the UI, never the record.

The ledger (``ledger/*.jsonl``) and the raw files under ``runs/<run_id>/`` are the record. This
module copies what they hold into an MLflow tracking store so people can browse, filter and plot:

- one parent run per ``result`` entry (``ledger run``: named after the experiment's run id), with
  the verdict of every bar as tags and its effect / CI as metrics, the arms' fingerprints, images
  and model hashes, instrument versions and the spec as params, and one nested child run per
  arm x repeat x point x instrument read from ``measurements.jsonl``;
- one run per ``calibration`` entry (nested children from the A/A ``calibration.jsonl``) and per
  ``failure`` entry (its cause and log tail as ``failure.txt``);
- the run folder's files as artifacts when the folder is on this box. An entry written on another
  box (no ``runs/`` folder here) is still indexed from the entry itself; its files and children are
  attached by a later sync on a box that has them.

Sync is idempotent: a run carries the tag ``ledger.entry_id`` and is created once. A later sync
only refreshes the tags that mirror the status folded from later entries (``ledger.status``:
active / retracted / superseded / reproduced / not-reproduced). Params never change: MLflow
refuses to change a logged param, which suits entries that never change either.

A parent run stays RUNNING until everything under it is logged, so a sync killed half-way leaves
a run the next sync recognizes as unfinished, deletes and rebuilds.

Secrets never reach MLflow: every tag, param, name and text goes through ``redact_obj`` /
``redact_text``, and text artifacts are redacted copies (a file that is not UTF-8 is not uploaded;
the tag ``ledger.files_withheld`` names it). The ledger's content hashes stay those of the
originals on the box.

This is the only module that imports ``mlflow``, lazily: importing it costs nothing on a bare GPU
box, and using it without MLflow installed raises ``TrackingUnavailable`` with the install command.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import posixpath
import random
import re
import secrets
import shlex
import shutil
import socket
import sqlite3
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from pathlib import Path
from typing import Any, Protocol, TypeVar

from recipe_ledger import metrics as metric_table
from recipe_ledger import runs
from recipe_ledger.errors import InputError, LedgerError, StateError
from recipe_ledger.ledger.fold import fold_statuses
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.redact import redact_obj, redact_text

DEFAULT_EXPERIMENT = "recipe-ledger"
DB_FILE = "mlflow.db"
ARTIFACTS_DIR = "mlartifacts"
INSTALL_HINT = "pip install 'recipe-ledger[tracking]'"
INDEXED_KINDS = ("result", "calibration", "failure")

# ledger.status, ledger.status_note and the description mirror what later entries say about an
# entry (see status_tags); every other tag, param and metric is written once.
STATUS_TAG = "ledger.status"
ENTRY_TAG = "ledger.entry_id"
ROLE_TAG = "ledger.role"  # "entry" on the runs sync looks up, "measurement" on their children
FILES_TAG = "ledger.files"  # "attached" once the run folder's files and children are logged
PROBLEMS_TAG = "ledger.run_folder_problems"  # lines of the run folder that could not be read
PARENT_TAG = "mlflow.parentRunId"  # what makes the UI nest a run under another
UNITS_TAG = "ledger.units"  # "metric=unit, ..." for the run's metrics (recipe_ledger.metrics)
SYNC_TAG = "ledger.sync"  # "<host> <pid> <epoch ms>": which sync process is building the run

# MLflow's run status says what the ledger says: a failure entry is FAILED, a retracted entry KILLED
# (and its name starts with RETRACTED_PREFIX), everything else FINISHED. Any of them means the run
# is complete; RUNNING means a sync is still building it (or died doing so).
TERMINAL = ("FINISHED", "FAILED", "KILLED")
RETRACTED_PREFIX = "[retracted] "
STALE_MS = 3600 * 1000  # a RUNNING run whose sync left no trace for this long was abandoned
# A sync into a store it does not expect to share (a local file) looks for other syncs at work
# every WATCH_EVERY runs it makes; once it sees one, it looks each entry up before making its run.
WATCH_EVERY = 25
POST_CHECK_LOOKUPS = 100  # up to this many new entries, the post-check looks them up one by one

# What the experiment page shows, as a view MLflow's UI loads from an experiment tag
# (`mlflow.sharedViewState.<key>`, opened with `?viewStateShareKey=<key>`): a few columns, not 250.
VIEW_KEY = "ledger"
VIEW_TAG = "mlflow.sharedViewState." + VIEW_KEY
# MLflow 3.17's UI ignores `mlflow.experimentKind` while its workflow switch exists: the side bar's
# "GenAI / Machine learning" switch (browser-local, GenAI by default) or `?workflowType=` decides.
UI_QUERY = f"workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"
DEFAULT_COLUMNS = (
    "tags.`ledger.status`",
    "tags.`ledger.kind`",
    "tags.`verdict`",
    "params.`arm`",
    "params.`point`",
    "params.`repeat`",
    "metrics.`output_tps_total`",
    "metrics.`ttft_ms_p50`",
    "metrics.`tpot_ms_p50`",
)

MAX_PARAM = 6000  # MLflow's limits on a param and a tag value; longer values are cut here, visibly
MAX_TAG = 8000
BATCH = 100  # MLflow takes at most 100 params, 100 tags and 1000 entities in all per log_batch call

T = TypeVar("T")
Roots = Path | Sequence[Path]  # run-folder roots: runs/, then evidence/*/ (see run_roots)


class TrackingUnavailable(StateError):
    """MLflow is not installed, or the tracking store does not answer."""


class TrackingError(StateError):
    """MLflow refused or failed an operation; the ledger is untouched."""


# ------------------------------------------------------------------------------ what a run holds


@dataclass(frozen=True)
class RunSpec:
    """Everything one MLflow run should hold, computed from the ledger alone (pure, testable)."""

    name: str
    tags: dict[str, str]  # written once, at creation
    status_tags: dict[str, str]  # refreshed by every sync (the folded ledger status)
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    start_ms: int = 0
    end_ms: int = 0
    texts: dict[str, str] = field(default_factory=dict)  # artifact file name -> text
    run_dir: Path | None = None  # the run folder on this box, if it is here
    files: tuple[str, ...] = ()  # paths under run_dir to upload
    children: tuple[RunSpec, ...] = ()
    problems: tuple[str, ...] = ()  # run-folder lines that could not be read (file:line: why)
    status: str = "FINISHED"  # the MLflow status it ends in (run_status)


def key(*parts: object) -> str:
    """A metric/param/tag name MLflow accepts: letters, digits, ``_ - . /`` and spaces only.

    ``@`` and ``:`` are refused by the server (colon on Windows servers), and a name must not
    normalize to another path ("a//b", "../x"), so such parts are flattened to ``_``.
    """
    name = re.sub(r"[^\w.\- /]", "_", ".".join(str(p) for p in parts))
    if posixpath.normpath(name) != name or name.startswith(("/", ".")):
        name = name.replace("/", "_").lstrip(".") or "_"
    return name[:250]


def bar_key(bar: Mapping[str, Any]) -> str:
    """``verdict.<candidate>.<metric>.c<point>``: the summary metrics' ``<arm>.c<point>`` style."""
    return key("verdict", bar["candidate"], bar["metric"], f"c{bar['point']}")


def ts_ms(ts: str) -> int:
    return int(dt.datetime.fromisoformat(ts).timestamp() * 1000)  # Python 3.11 reads the trailing Z


def _text(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 15] + "...[truncated]"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def numbers(values: Mapping[str, Any], *prefix: object) -> dict[str, float]:
    """The finite numbers of a mapping as metrics, names prefixed; anything else is left out."""
    out = {}
    for name, value in values.items():
        number = _number(value)
        if number is not None:
            out[key(*prefix, name)] = number
    return out


def run_folder(entry: Mapping[str, Any]) -> str | None:
    """The ``runs/`` folder name of an entry written by ``ledger run`` / ``ledger calibrate``."""
    payload = entry["payload"]
    candidates = [
        (payload.get("experiment") or {}).get("run_id"),
        (payload.get("conditions") or {}).get("run_id"),
    ]
    if (payload.get("origin") or {}).get("how") == "measured":
        candidates.append(payload["origin"].get("source"))
    # Entries come from other boxes through git: never let one name a path outside runs/.
    return next((name for name in candidates if runs.is_run_id(name)), None)


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


def status_tags(status: str, note: str, headline: str) -> dict[str, str]:
    """The mutable tags: status, why, and the run description the UI shows on top of the run."""
    description = headline if status == "active" else f"**{status.upper()}**: {note}\n\n{headline}"
    return {STATUS_TAG: status, "ledger.status_note": note or "-", "mlflow.note.content": description}


# -- result entries


def experiment_params(record: Mapping[str, Any]) -> dict[str, str]:
    """The experiment as launched: spec, sweep, schedule, every arm's pins, instrument versions."""
    params = {
        "experiment.name": record["name"],
        "experiment.spec": record["spec"],
        "experiment.spec_sha256": record["spec_sha256"],
        "experiment.points": _text(record.get("points", []), MAX_PARAM),
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
        key("arm", name, "argv"): _text(shlex.join(arm.get("argv", [])), MAX_PARAM),
        key("arm", name, "env"): _text(arm.get("env", {}), MAX_PARAM),
    }


def bar_tags(bars: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """``verdict.<candidate>.<metric>.c<point>`` = outcome, and its one-line reason."""
    tags = {}
    for bar in bars:
        tags[bar_key(bar)] = bar["outcome"]
        if bar.get("reason"):
            tags[bar_key(bar) + ".reason"] = bar["reason"]
    return tags


def bar_metrics(bars: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per bar the effect, its CI and the detectable effect as signed percentages (``.effect_pct``
    = +3.1 for +3.1%), and the two medians compared, in the metric's own unit."""
    out: dict[str, float] = {}
    for bar in bars:
        percent = {
            f"{name}_pct": bar[name] * 100
            for name in ("effect", "ci_low", "ci_high", "mde")
            if _number(bar.get(name)) is not None
        }
        out.update(numbers(percent, bar_key(bar)))
        out.update(numbers({name: bar.get(name) for name in ("control", "value")}, bar_key(bar)))
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
    return {UNITS_TAG: _text(", ".join(units), MAX_TAG)} if units else {}


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
    metrics = headline_metrics(payload.get("metrics") or {})
    if payload.get("verdict"):
        tags["verdict"] = payload["verdict"]
    if record:
        tags.update({"ledger.experiment": record["name"], "ledger.run_id": record["run_id"]})
        tags.update({key("host", k): v for k, v in (record.get("host") or {}).items()})
        tags.update(bar_tags(record.get("bars", [])))
        params.update(experiment_params(record))
        metrics.update(bar_metrics(record.get("bars", [])))
        metrics.update(numbers({"duration_s": record.get("duration_s")}))
    params.update(script_params(entry))
    name = _result_name(payload)
    return _with_files(
        _entry_spec(entry, name, tags, params, metrics, record), entry, runs_dir, runs.MEASUREMENTS
    )


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
    duration = _number((record or {}).get("duration_s")) or 0.0
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
        "calibration.repeats": _text(payload.get("repeats", []), MAX_PARAM),
        **{key("condition", k): str(v) for k, v in (payload.get("conditions") or {}).items()},
    }
    metrics = numbers({"sigma": payload.get("sigma"), "spread": payload.get("spread")})
    for point, noise in (payload.get("points") or {}).items():
        metrics.update(numbers({k: v for k, v in noise.items() if k != "samples"}, f"c{point}"))
    name = f"calibration {payload['instrument']} {payload['metric']}"
    folder = run_folder(entry)
    spec = _entry_spec(entry, f"{name} {folder}" if folder else name, tags, params, metrics)
    spec = replace(spec, texts={"calibration.txt": payload["text"]} if payload.get("text") else {})
    return _with_files(spec, entry, runs_dir, runs.CALIBRATION, instrument=payload["instrument"])


def failure_spec(entry: Mapping[str, Any], runs_dir: Roots) -> RunSpec:
    payload = entry["payload"]
    conditions = payload.get("conditions") or {}
    tags = {
        **common_tags(entry),
        "ledger.cause_class": payload["cause_class"],
        "ledger.cause": _text(payload["cause"], 500),
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
    return _with_files(spec, entry, runs_dir, None)


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


# -- run folders: files and children


def _with_files(
    spec: RunSpec,
    entry: Mapping[str, Any],
    runs_dir: Roots,
    records_file: str | None,
    *,
    instrument: str | None = None,
) -> RunSpec:
    """Attach the run folder (its files and, from ``records_file``, the children) when it is here.

    Lines that cannot be read are not skipped in silence: they travel as ``problems`` to the sync
    report and to a tag on the run (runs.py's reading policy)."""
    run_dir = find_run_dir(runs_dir, run_folder(entry))
    if run_dir is None:
        return spec
    calibration = records_file == runs.CALIBRATION
    children: list[RunSpec] = []
    problems: list[str] = []
    if records_file and (run_dir / records_file).is_file():
        arms = {
            **plan_arms(run_dir, problems),
            **((entry["payload"].get("experiment") or {}).get("arms") or {}),
        }
        children = measurement_specs(
            read_records(run_dir / records_file, problems),
            spec,
            arms,
            instrument=instrument,
            phase="calibration" if calibration else "measurement",
        )
    files = _files_for(run_dir, calibration_only=calibration)
    return replace(
        spec, run_dir=run_dir, files=tuple(files), children=tuple(children), problems=tuple(problems)
    )


def run_roots(repo: Path) -> list[Path]:
    """Where run folders are looked for: ``runs/``, then the committed ``evidence/*/`` folders."""
    evidence = Path(repo) / "evidence"
    found = sorted(p for p in evidence.iterdir() if p.is_dir()) if evidence.is_dir() else []
    return [runs.runs_dir(Path(repo)), *found]


def find_run_dir(roots: Path | Sequence[Path], folder: str | None) -> Path | None:
    """The first ``<root>/<folder>`` that exists (``folder`` is a checked run id, never a path)."""
    if folder is None:
        return None
    for root in [roots] if isinstance(roots, Path) else roots:
        if (root / folder).is_dir():
            return root / folder
    return None


def _files_for(run_dir: Path, *, calibration_only: bool) -> list[str]:
    """Every file of the run folder; for a calibration only what the A/A launches wrote."""
    files = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())
    if not calibration_only:
        return files
    return [f for f in files if f in (runs.PLAN, runs.CALIBRATION) or f.startswith(("server-aa-", "raw/aa-"))]


def plan_arms(run_dir: Path, problems: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Arm name -> arm (fingerprint, argv, env) from plan.json (a calibration entry does not list the
    arms itself); an unreadable plan gives none, and says why in ``problems``."""
    if not (run_dir / runs.PLAN).is_file():
        return {}
    try:
        arms = runs.read_json(run_dir / runs.PLAN).get("arms", {})
        return {name: dict(arm) for name, arm in arms.items() if isinstance(arm.get("fingerprint"), str)}
    except LedgerError as error:
        _add_problem(problems, error.one_line())
    except (OSError, AttributeError, TypeError, ValueError) as error:
        _add_problem(problems, f"{run_dir / runs.PLAN}: unreadable arms ({type(error).__name__})")
    return {}


def _add_problem(problems: list[str] | None, text: str) -> None:
    if problems is not None:
        problems.append(text)


def read_records(path: Path, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """The records of measurements.jsonl / calibration.jsonl (runs.read_records); each bad line
    (a torn last line of a killed run included) is added to ``problems``, a newer file is one problem
    and gives no records."""
    try:
        found = runs.read_records(path)
    except LedgerError as error:
        _add_problem(problems, error.one_line())
        return []
    for problem in found.problems:
        _add_problem(problems, str(problem))
    return found.records


def measurement_specs(
    records: Sequence[Mapping[str, Any]],
    parent: RunSpec,
    arms: Mapping[str, Mapping[str, Any]],
    *,
    instrument: str | None,
    phase: str,
) -> list[RunSpec]:
    """One child per (arm, repeat, point): the numbers of one launch at one point, every
    instrument's together, with the arm's fingerprint and what sets the arm apart as params."""
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for r in records:
        if instrument is None or r.get("instrument") == instrument:
            groups.setdefault((str(r.get("arm", "?")), str(r.get("repeat")), str(r.get("point"))), []).append(
                r
            )
    differences = arm_differences(arms)
    return [
        measurement_spec(group, parent, arms.get(arm) or {}, differences.get(arm, {}), phase)
        for (arm, _repeat, _point), group in groups.items()
    ]


def measurement_spec(
    records: Sequence[Mapping[str, Any]],
    parent: RunSpec,
    arm_record: Mapping[str, Any],
    differences: Mapping[str, str],
    phase: str,
) -> RunSpec:
    first = records[0]
    arm = str(first.get("arm", "?"))
    prefix = "A/A " if phase == "calibration" else ""
    params = {
        "arm": arm,
        "repeat": str(first.get("repeat", "")),
        "point": str(first.get("point", "")),
        "seed": str(first.get("seed", "")),
        "phase": phase,
        "arm_fingerprint": str(arm_record.get("fingerprint") or "-"),
        **{k: ", ".join(str(r.get(k, "")) for r in records) for k in _PER_INSTRUMENT},
        **differences,
    }
    metrics: dict[str, float] = {}
    for r in records:
        # Two instruments measuring a metric of the same name keep both: the second is prefixed.
        found = {**numbers(r.get("metrics") or {}), **numbers(r.get("server") or {}, "server")}
        metrics.update({(key(r.get("instrument"), k) if k in metrics else k): v for k, v in found.items()})
    metrics.update(numbers({"wall_s": sum(_number(r.get("wall_s")) or 0.0 for r in records) or None}))
    tags = {
        ROLE_TAG: "measurement",
        "ledger.parent_entry": parent.tags[ENTRY_TAG],
        "ledger.kind": parent.tags["ledger.kind"],
        "ledger.arm": arm,
        "ledger.phase": phase,
    }
    if "box" in parent.tags:
        tags["box"] = parent.tags["box"]
    return RunSpec(
        name=f"{prefix}{arm}#{first.get('repeat')} c{first.get('point')}",
        tags=tags,
        status_tags={},
        params=params,
        metrics=metrics,
        start_ms=parent.start_ms,
        end_ms=parent.end_ms,
    )


_PER_INSTRUMENT = ("instrument", "instrument_version", "raw_file", "raw_sha256")


def arm_differences(arms: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Per arm, the settings whose values differ between the arms: ``flag.<name>`` from the launch
    command, ``env.<NAME>``, ``image``, ``model_sha256``, ``command`` (what precedes the flags).
    A setting an arm lacks is ``-``; what every arm shares is left out (it is on the parent)."""
    settings = {name: arm_settings(arm) for name, arm in arms.items()}
    names = sorted({k for values in settings.values() for k in values})
    differing = [n for n in names if len({values.get(n, "-") for values in settings.values()}) > 1]
    return {
        arm: {key(n): _text(values.get(n, "-"), MAX_PARAM) for n in differing}
        for arm, values in settings.items()
    }


def arm_settings(arm: Mapping[str, Any]) -> dict[str, str]:
    """An arm's launch as flat settings: every ``--flag [value]`` of its argv, its env, image, model."""
    out = {"image": str(arm.get("image") or "-"), "model_sha256": str(arm.get("model_sha256") or "-")}
    out.update({f"env.{k}": str(v) for k, v in (arm.get("env") or {}).items()})
    argv = [str(a) for a in arm.get("argv") or []]
    command: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("-") or token == "-":
            command.append(token)
            i += 1
            continue
        name, eq, value = token.lstrip("-").partition("=")
        if not eq:
            takes_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            value = argv[i + 1] if takes_value else "true"
            i += 1 if takes_value else 0
        out[f"flag.{name}"] = value
        i += 1
    out["command"] = " ".join(command) if command else "-"
    return out


# -- from an entry to its run


def entry_spec(entry: Mapping[str, Any], runs_dir: Roots, status: str = "active", note: str = "") -> RunSpec:
    """The redacted RunSpec of one indexed entry (result, calibration or failure)."""
    build = {"result": result_spec, "calibration": calibration_spec, "failure": failure_spec}[entry["kind"]]
    spec = build(entry, runs_dir)
    final = run_status(entry["kind"], status)
    spec = replace(
        spec,
        name=RETRACTED_PREFIX + spec.name if status == "retracted" else spec.name,
        tags={**spec.tags, **units_tag(spec.metrics)},
        status=final,
        status_tags=status_tags(status, note, _headline(entry)),
        children=tuple(
            replace(
                c,
                tags={**c.tags, **units_tag(c.metrics)},
                status="KILLED" if final == "KILLED" else "FINISHED",
                status_tags={STATUS_TAG: status},
            )
            for c in spec.children
        ),
    )
    return redact_spec(spec)


def entry_status_tags(entry: Mapping[str, Any], status: str, note: str) -> dict[str, str]:
    """Only the mutable tags of an entry's run, redacted as entry_spec would have them."""
    return _limited(redact_obj(status_tags(status, note, _headline(entry))), MAX_TAG)


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
    )


def _limited(values: Mapping[str, Any], limit: int) -> dict[str, str]:
    return {key(name): _text(str(value), limit) for name, value in values.items()}


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


# ------------------------------------------------------------------------------ the store, abstracted


@dataclass(frozen=True)
class IndexedRun:
    """A run already in the store that stands for a ledger entry."""

    run_id: str
    entry_id: str
    finished: bool  # complete: FINISHED, FAILED or KILLED (RUNNING: a sync is building it, or died)
    start_ms: int
    tags: dict[str, str]
    status: str = "FINISHED"


class TrackingClient(Protocol):
    """The few store operations sync needs; MlflowTrackingClient implements them, tests fake them."""

    def indexed_runs(self) -> list[IndexedRun]: ...
    def entry_runs(self, entry_id: str) -> list[IndexedRun]: ...
    def running_runs(self) -> list[IndexedRun]: ...
    def create_run(self, spec: RunSpec, parent_run_id: str | None = None) -> str: ...
    def upload_dir(self, run_id: str, local_dir: Path) -> None: ...
    def finish(self, run_id: str, end_ms: int, status: str = "FINISHED") -> None: ...
    def rename(self, run_id: str, name: str) -> None: ...
    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None: ...
    def child_run_ids(self, run_id: str) -> list[str]: ...
    def delete_run(self, run_id: str) -> None: ...


@dataclass(frozen=True)
class SyncSession:
    """One sync process, as the runs it is building say (tag ``ledger.sync``).

    Several boxes may sync into one server at once. A RUNNING run is someone's work in progress,
    unless it was abandoned: its process is gone from this host, or (from another host) it has
    not finished for STALE_MS."""

    host: str
    pid: int
    nonce: str
    started_ms: int

    @classmethod
    def here(cls) -> SyncSession:
        return cls(socket.gethostname(), os.getpid(), secrets.token_hex(4), int(time.time() * 1000))

    def tag(self) -> str:
        return f"{self.host} {self.pid} {self.nonce} {self.started_ms}"

    def abandoned(self, run: IndexedRun) -> bool:
        parts = run.tags.get(SYNC_TAG, "").split()
        if len(parts) != 4 or not parts[1].isdigit() or not parts[3].isdigit():
            return True  # written by a sync that did not say who it was: nobody is finishing it
        host, pid, nonce, started = parts[0], int(parts[1]), parts[2], int(parts[3])
        if host != self.host:
            return self.started_ms - started > STALE_MS
        if pid == self.pid:
            return nonce != self.nonce  # an earlier sync in this process stopped half-way
        return not _process_alive(pid)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class SyncReport:
    tracking_uri: str
    experiment: str
    created: int = 0
    updated: int = 0
    skipped: int = 0  # already indexed, nothing changed
    repaired: int = 0  # unfinished runs of a sync that died, and duplicates, removed
    raced: int = 0  # runs this sync made for entries another sync indexed at the same moment, removed
    elsewhere: int = 0  # entries another sync is indexing right now (left to it)
    runs: dict[str, str] = field(default_factory=dict)  # ledger entry id -> parent run id
    problems: list[str] = field(default_factory=list)  # run-folder lines not read (file:line: why)
    experiment_id: str = ""

    @property
    def parent_run_ids(self) -> list[str]:
        return list(self.runs.values())

    def __str__(self) -> str:
        extra = [
            f"{self.repaired} unfinished or duplicate runs rebuilt" if self.repaired else "",
            f"{self.raced} indexed by another sync at the same time" if self.raced else "",
            f"{self.elsewhere} being indexed by another sync now" if self.elsewhere else "",
        ]
        text = ", ".join(
            [f"{self.created} created, {self.updated} updated, {self.skipped} unchanged"]
            + [e for e in extra if e]
        )
        text += (
            f" ({len(self.runs)} entries in experiment {self.experiment!r} at {safe_uri(self.tracking_uri)})"
        )
        if self.problems:
            more = f" and {len(self.problems) - 1} more" if len(self.problems) > 1 else ""
            text += f"; run-folder lines not indexed: {self.problems[0]}{more}"
        url = browse_url(self.tracking_uri, self.experiment_id)
        return text + (f"\nBrowse: {url}" if url else "")


def browse_url(tracking_uri: str, experiment_id: str) -> str | None:
    """The experiment's runs in a tracking server's UI, in the classic view with the ledger's columns."""
    if not experiment_id or not tracking_uri.startswith(("http://", "https://")):
        return None
    return f"{safe_uri(tracking_uri).rstrip('/')}/#/experiments/{experiment_id}/runs?{UI_QUERY}"


def safe_uri(uri: str) -> str:
    """A tracking URI fit to print: no user:password@ part, nothing token-shaped."""
    parts = urllib.parse.urlsplit(uri)
    if parts.password or parts.username:  # (urlunsplit would also turn sqlite://// into sqlite://)
        uri = urllib.parse.urlunsplit(
            parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else ""))
        )
    return redact_text(uri)


def sync_entries(
    client: TrackingClient,
    entries: Sequence[Mapping[str, Any]],
    runs_dir: Roots,
    report: SyncReport,
    *,
    session: SyncSession | None = None,
    precheck: bool = False,
) -> SyncReport:
    """Index every result, calibration and failure entry once; refresh the status of the rest.

    Safe with other syncs at once (other boxes, same server): entries are taken in an order of this
    sync's own (so that two syncs rarely meet), with ``precheck`` (or, without it, once another
    sync is seen at work) each is looked up again just before its run is made, and after the sync
    a post-check keeps one run per entry (see keep_one_run). A sync that dies half-way leaves a
    RUNNING run that the next sync removes.
    """
    session = session or SyncSession.here()
    watch = not precheck  # an unshared store: look for other syncs now and then, precheck once seen
    statuses = fold_statuses(entries)
    notes = status_notes(entries, statuses)
    indexed = _group_by_entry(client.indexed_runs())
    created: dict[str, str] = {}
    todo = [e for e in entries if e["kind"] in INDEXED_KINDS]
    random.Random(session.nonce).shuffle(todo)
    for entry in todo:
        status = (statuses.get(entry["id"], "active"), notes.get(entry["id"], ""))
        found = indexed.get(entry["id"], [])
        if watch and not found and len(created) % WATCH_EVERY == 0 and _others_at_work(client, session):
            precheck, watch = True, False
        if precheck and not found:
            found = client.entry_runs(entry["id"])
        keep = _keep_one(client, found, report, session)
        if keep is None and any(not r.finished and not session.abandoned(r) for r in found):
            report.elsewhere += 1
            continue
        if keep is None:
            spec = entry_spec(entry, runs_dir, *status)
            report.problems += spec.problems
            created[entry["id"]] = report.runs[entry["id"]] = create_tree(client, spec, session)
            report.created += 1
            continue
        report.runs[entry["id"]] = keep.run_id
        if _update(client, keep, entry, runs_dir, status, report):
            report.updated += 1
        else:
            report.skipped += 1
    if created:
        _post_check(client, created, report)
    return report


def _others_at_work(client: TrackingClient, session: SyncSession) -> bool:
    """Whether another live sync is building runs in this store right now."""
    return any(
        run.tags.get(SYNC_TAG) != session.tag() and not session.abandoned(run)
        for run in client.running_runs()
    )


def _update(
    client: TrackingClient,
    existing: IndexedRun,
    entry: Mapping[str, Any],
    runs_dir: Roots,
    status: tuple[str, str],
    report: SyncReport,
) -> bool:
    """Refresh an indexed entry's status, and attach its run folder if it has arrived since.

    The full RunSpec (the folder's records read, every string redacted) is built only when the
    folder is to be attached: a sync of a large, already indexed ledger stays cheap.
    """
    changed = refresh_status(client, existing, entry, *status)
    if existing.tags.get(FILES_TAG) != "attached" and find_run_dir(runs_dir, run_folder(entry)):
        spec = entry_spec(entry, runs_dir, *status)
        report.problems += spec.problems
        attach_late_files(client, existing, spec)
        changed = True
    return changed


def _group_by_entry(runs: Iterable[IndexedRun]) -> dict[str, list[IndexedRun]]:
    grouped: dict[str, list[IndexedRun]] = {}
    for run in sorted(runs, key=lambda r: r.run_id):
        grouped.setdefault(run.entry_id, []).append(run)
    return grouped


def keep_one_run(runs: Sequence[IndexedRun]) -> IndexedRun | None:
    """The run that stands for an entry: the complete one with the smallest run id.

    The one rule every sync applies, before and after it creates runs. Two syncs that both made
    a run for an entry each remove the other complete runs once theirs is complete; whichever
    looks last sees both, so exactly the smallest survives, and nobody removes that one."""
    complete = sorted((r for r in runs if r.finished), key=lambda r: r.run_id)
    return complete[0] if complete else None


def _keep_one(
    client: TrackingClient, runs: list[IndexedRun], report: SyncReport, session: SyncSession
) -> IndexedRun | None:
    """keep_one_run; the other complete runs and the abandoned RUNNING ones are removed."""
    keep = keep_one_run(runs)
    for run in runs:
        if run is not keep and (run.finished or session.abandoned(run)):
            delete_tree(client, run.run_id)
            report.repaired += 1
    return keep


def _post_check(client: TrackingClient, created: Mapping[str, str], report: SyncReport) -> None:
    """After this sync's runs are complete: one run per entry it indexed (keep_one_run).

    A few new entries are looked up one by one; many, in one listing of the store."""
    if len(created) <= POST_CHECK_LOOKUPS:
        indexed = {entry_id: client.entry_runs(entry_id) for entry_id in created}
    else:
        indexed = _group_by_entry(client.indexed_runs())
    for entry_id, run_id in created.items():
        runs = indexed.get(entry_id, [])
        keep = keep_one_run(runs)
        for run in runs:
            if run.finished and run is not keep:
                delete_tree(client, run.run_id)
        if keep is not None and keep.run_id != run_id:
            report.runs[entry_id] = keep.run_id
            report.created -= 1
            report.raced += 1


def run_status(kind: str, status: str) -> str:
    """The MLflow status of an entry's run: FAILED for a failure, KILLED once retracted, else FINISHED."""
    if status == "retracted":
        return "KILLED"
    return "FAILED" if kind == "failure" else "FINISHED"


def create_tree(client: TrackingClient, spec: RunSpec, session: SyncSession | None = None) -> str:
    """The parent run, its files and children; given its final status only when all of it is logged."""
    tags = {
        **spec.tags,
        **spec.status_tags,
        FILES_TAG: "attached" if spec.run_dir else "absent",
        SYNC_TAG: (session or SyncSession.here()).tag(),
    }
    if not spec.texts and not spec.run_dir:  # nothing to upload (most entries from other boxes)
        run_id = client.create_run(replace(spec, tags=tags))
    else:
        with tempfile.TemporaryDirectory(prefix="ledger-mlflow-") as staging:
            withheld = stage_files(spec, Path(staging))
            run_id = client.create_run(replace(spec, tags={**tags, **_folder_tags(spec, withheld)}))
            client.upload_dir(run_id, Path(staging))
    _create_children(client, run_id, spec)
    client.finish(run_id, spec.end_ms, spec.status)
    return run_id


def _folder_tags(spec: RunSpec, withheld: Sequence[str]) -> dict[str, str]:
    tags = {}
    if spec.problems:
        tags[PROBLEMS_TAG] = _text(redact_text("; ".join(spec.problems)), MAX_TAG)
    if withheld:
        tags["ledger.files_withheld"] = _text(", ".join(withheld), MAX_TAG)
    return tags


def _create_children(client: TrackingClient, run_id: str, spec: RunSpec) -> None:
    for child in spec.children:
        child_id = client.create_run(
            replace(child, tags={**child.tags, **child.status_tags}), parent_run_id=run_id
        )
        client.finish(child_id, child.end_ms, child.status)


def stage_files(spec: RunSpec, staging: Path) -> list[str]:
    """The run's texts and its folder's files (redacted copies) under ``staging``; returns the
    files withheld (not UTF-8 text)."""
    for name, text in spec.texts.items():
        (staging / name).write_text(text, encoding="utf-8")
    return stage_redacted(spec.run_dir, spec.files, staging) if spec.run_dir else []


def attach_late_files(client: TrackingClient, existing: IndexedRun, spec: RunSpec) -> None:
    """A run indexed on a box without the run folder gets the folder once a box that has it syncs."""
    for child_id in client.child_run_ids(existing.run_id):  # a half-finished earlier attach
        client.delete_run(child_id)
    _create_children(client, existing.run_id, spec)
    with tempfile.TemporaryDirectory(prefix="ledger-mlflow-") as staging:
        assert spec.run_dir is not None
        withheld = stage_redacted(spec.run_dir, spec.files, Path(staging))
        client.upload_dir(existing.run_id, Path(staging))
    client.set_tags(existing.run_id, {FILES_TAG: "attached", **_folder_tags(spec, withheld)})


def refresh_status(
    client: TrackingClient, existing: IndexedRun, entry: Mapping[str, Any], status: str, note: str
) -> bool:
    """Mirror a new ledger status into the tags, and a retraction into the run's status and name
    (children first: the parent's tags say it is done)."""
    tags = entry_status_tags(entry, status, note)
    final = run_status(entry["kind"], status)
    if all(existing.tags.get(k) == v for k, v in tags.items()) and existing.status == final:
        return False
    end_ms = ts_ms(entry["ts"])
    for child_id in client.child_run_ids(existing.run_id):
        client.set_tags(child_id, {STATUS_TAG: tags[STATUS_TAG]})
        if final == "KILLED":
            client.finish(child_id, end_ms, final)
    client.set_tags(existing.run_id, tags)
    if existing.status != final:
        client.finish(existing.run_id, end_ms, final)
        if final == "KILLED":
            client.rename(existing.run_id, entry_spec(entry, (), status, note).name)
    return True


def delete_tree(client: TrackingClient, run_id: str) -> None:
    for child_id in client.child_run_ids(run_id):
        client.delete_run(child_id)
    client.delete_run(run_id)


def stage_redacted(run_dir: Path, files: Iterable[str], staging: Path) -> list[str]:
    """Redacted copies of ``files`` under ``staging``; returns the files withheld (not UTF-8 text).

    A log can hold what a server printed at start-up (an API key in its argv, a token in the
    environment): files are text-redacted like every other string bound for MLflow.
    """
    withheld = []
    for name in files:
        try:
            text = (run_dir / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            withheld.append(name)
            continue
        target = staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(redact_text(text), encoding="utf-8")
    return withheld


# ------------------------------------------------------------------------------ MLflow itself


def require_mlflow():
    """The ``mlflow`` module; TrackingUnavailable (with the install command) when it is not installed."""
    # MLflow 3 sends usage telemetry unless told not to; GPU boxes are often offline and a
    # measurement tool should not call home. The user's own setting wins.
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # Against a server, MLflow 3 prints two "View run ... at: URL" lines to stdout for every run it
    # finishes (and fetches the run again to do so): a hundred lines and calls for one sync.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    # A server answering 500 would be retried 7 times with doubling waits (minutes) before the sync
    # could say so; the sync resumes where it stopped, so fail within seconds instead.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    try:
        import mlflow
        import mlflow.exceptions
    except ImportError:
        raise TrackingUnavailable(
            "MLflow is not installed in this environment; the ledger is the record and nothing was lost",
            hint=INSTALL_HINT,
        ) from None
    # Creating a fresh SQLite store logs its schema migration at INFO in the middle of `ledger run`'s output.
    for name in ("mlflow.store.db.utils", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return mlflow


class MlflowTrackingClient:
    """TrackingClient over ``mlflow.MlflowClient``, bound to one experiment."""

    def __init__(self, client: Any, experiment_id: str):
        self.client = client
        self.experiment_id = experiment_id

    @classmethod
    def open(cls, tracking_uri: str, experiment_name: str) -> MlflowTrackingClient:
        mlflow = require_mlflow()
        if tracking_uri.startswith("sqlite:"):
            lighten_sqlite_commits()
        client = mlflow.MlflowClient(tracking_uri)
        experiment = client.get_experiment_by_name(experiment_name)
        if experiment is None:
            root = artifact_root(tracking_uri)
            try:
                client.create_experiment(
                    experiment_name,
                    artifact_location=str(root / key(experiment_name)) if root else None,
                    tags=experiment_tags(),
                )
            except mlflow.exceptions.MlflowException as error:
                if error.error_code != "RESOURCE_ALREADY_EXISTS":  # another box created it just now
                    raise
            experiment = client.get_experiment_by_name(experiment_name)
        for name, value in experiment_tags().items():  # stores made by older versions get the view too
            if experiment.tags.get(name) != value:
                client.set_experiment_tag(experiment.experiment_id, name, value)
        return cls(client, experiment.experiment_id)

    def _search(self, filter_string: str) -> Iterator[Any]:
        token = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], filter_string=filter_string, max_results=1000, page_token=token
            )
            yield from page
            token = page.token
            if not token:
                return

    def indexed_runs(self) -> list[IndexedRun]:
        return self._indexed(f"tags.`{ROLE_TAG}` = 'entry'")

    def entry_runs(self, entry_id: str) -> list[IndexedRun]:
        if not re.fullmatch(r"[0-9a-f]+", entry_id):  # ids are hex; nothing else enters a filter
            raise InputError(f"{entry_id!r} is not a ledger entry id")
        return self._indexed(f"tags.`{ENTRY_TAG}` = '{entry_id}' and tags.`{ROLE_TAG}` = 'entry'")

    def running_runs(self) -> list[IndexedRun]:
        return self._indexed(f"tags.`{ROLE_TAG}` = 'entry' and attributes.status = 'RUNNING'")

    def _indexed(self, filter_string: str) -> list[IndexedRun]:
        return [
            IndexedRun(
                run.info.run_id,
                run.data.tags[ENTRY_TAG],
                run.info.status in TERMINAL,
                run.info.start_time or 0,
                dict(run.data.tags),
                run.info.status,
            )
            for run in self._search(filter_string)
            if ENTRY_TAG in run.data.tags
        ]

    def create_run(self, spec: RunSpec, parent_run_id: str | None = None) -> str:
        from mlflow.entities import Metric, Param

        tags = {**spec.tags, **({PARENT_TAG: parent_run_id} if parent_run_id else {})}
        run = self.client.create_run(
            self.experiment_id, start_time=spec.start_ms, tags=tags, run_name=spec.name
        )
        params = [Param(k, v) for k, v in spec.params.items()]
        metrics = [Metric(k, v, spec.end_ms, 0) for k, v in spec.metrics.items()]
        # Params and metrics share calls (one round trip per child run over HTTP, not two).
        param_chunk: list[Param]
        metric_chunk: list[Metric]
        for param_chunk, metric_chunk in zip_longest(
            _chunks(params, BATCH), _chunks(metrics, 1000 - BATCH), fillvalue=[]
        ):
            self.client.log_batch(run.info.run_id, params=param_chunk, metrics=metric_chunk)
        return run.info.run_id

    def upload_dir(self, run_id: str, local_dir: Path) -> None:
        if any(local_dir.iterdir()):
            self.client.log_artifacts(run_id, str(local_dir))

    def finish(self, run_id: str, end_ms: int, status: str = "FINISHED") -> None:
        self.client.set_terminated(run_id, status, end_time=end_ms)

    def rename(self, run_id: str, name: str) -> None:
        self.client.update_run(run_id, name=name)

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        for chunk in _chunks([RunTag(k, v) for k, v in tags.items()], BATCH):
            self.client.log_batch(run_id, tags=chunk)

    def child_run_ids(self, run_id: str) -> list[str]:
        return [run.info.run_id for run in self._search(f"tags.`{PARENT_TAG}` = '{run_id}'")]

    def delete_run(self, run_id: str) -> None:
        self.client.delete_run(run_id)


def lighten_sqlite_commits() -> None:
    """SQLite stores commit in write-ahead-log mode without an fsync per commit.

    MLflow commits several times per run (params, metrics and tags each in their own session), and
    in SQLite's default mode every commit waits for the disk: most of a sync's time on a busy box.
    The store is an index the ledger rebuilds (``ledger mlflow sync``), so a power cut losing its
    last commits costs nothing; WAL with synchronous=NORMAL never corrupts it. Idempotent."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "connect", _sqlite_pragmas):
        event.listen(Engine, "connect", _sqlite_pragmas)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


def experiment_tags() -> dict[str, str]:
    """The experiment's description, its kind, and the view the printed links open (VIEW_TAG)."""
    view = {"selectedColumns": list(DEFAULT_COLUMNS), "runsExpanded": {}}
    return {
        # Read by MLflow 3.x UIs without the workflow switch (and shown as the experiment's type).
        "mlflow.experimentKind": "custom_model_development",
        "mlflow.note.content": "Indexed from the Recipe Ledger by `ledger mlflow sync`. "
        "The ledger (ledger/*.jsonl) is the record; this is its index. "
        f"Open with `?{UI_QUERY}` for the runs table and the ledger's columns (docs/mlflow.md).",
        VIEW_TAG: json.dumps(view, separators=(",", ":")),
    }


def _chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def default_tracking_uri(repo: Path) -> str:
    """The local default store: ``<repo>/mlflow.db`` (git-ignored), an SQLite file."""
    return "sqlite:///" + str(Path(repo).resolve() / DB_FILE)


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (relative paths are relative to the current directory)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    return Path(tracking_uri.removeprefix("sqlite:///")).resolve()


def artifact_root(tracking_uri: str) -> Path | None:
    """Where a local store keeps artifacts: ``mlartifacts/`` beside the database file.

    MLflow's own default for an SQLite store is ``./mlruns`` relative to wherever the process
    happens to run; beside the database is where ``ledger mlflow export`` finds them again. For a
    tracking server the server decides (its ``--default-artifact-root`` / artifact proxy).
    """
    db = sqlite_path(tracking_uri)
    return db.parent / ARTIFACTS_DIR if db else None


def check_reachable(tracking_uri: str, timeout_s: float = 5.0) -> None:
    """Fail fast when an HTTP tracking server does not answer: MLflow's own client retries for minutes."""
    if not tracking_uri.startswith(("http://", "https://")):
        return
    try:
        urllib.request.urlopen(tracking_uri.rstrip("/") + "/health", timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return  # it answered (an auth proxy, a server without /health): reachable
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise TrackingUnavailable(
            f"the tracking server at {safe_uri(tracking_uri)} does not answer ({reason}); "
            "the ledger is the record and nothing was lost",
            hint="ledger mlflow sync, once it is up",
        ) from None


def sync_ledger(
    repo: Path, tracking_uri: str | None = None, *, experiment_name: str = DEFAULT_EXPERIMENT
) -> SyncReport:
    """Index the ledger under ``repo`` (its ``runs/`` and ``evidence/*/`` run folders too) into an
    MLflow store, idempotently. The ledger is only read: whatever fails, nothing in it changes."""
    repo = Path(repo)
    entries = Ledger.open(repo).entries()
    uri = tracking_uri or default_tracking_uri(repo)
    check_tracking_uri(uri)
    mlflow = require_mlflow()
    import requests  # MLflow's own HTTP client: artifact uploads raise its errors, not MlflowException

    check_reachable(uri)
    report = SyncReport(tracking_uri=uri, experiment=experiment_name)
    try:
        client = MlflowTrackingClient.open(uri, experiment_name)
        report.experiment_id = client.experiment_id
        # A server is shared: look each entry up again just before indexing it (another box may
        # have done it since this sync listed the store). A local file rarely has company.
        shared = uri.startswith(("http://", "https://"))
        return sync_entries(client, entries, run_roots(repo), report, precheck=shared)
    except (mlflow.exceptions.MlflowException, requests.RequestException) as error:
        raise refusal(str(error), uri, report) from None


TRACKING_SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "file", "databricks")


def check_tracking_uri(uri: str) -> None:
    """An InputError for what is not a tracking URI (``mlflow.lab:5000``, a typo in the scheme)."""
    scheme = urllib.parse.urlsplit(uri).scheme.split("+")[0]
    if scheme not in TRACKING_SCHEMES or (
        scheme in ("http", "https") and not urllib.parse.urlsplit(uri).hostname
    ):
        raise InputError(
            f"{safe_uri(uri)} is not a tracking URI",
            where="--tracking-uri / MLFLOW_TRACKING_URI",
            hint="give http://HOST:PORT (a tracking server) or sqlite:///PATH (a local store)",
        )


# What a refusal's text says -> (what happened, what to do); the first match wins.
_REFUSALS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        # The server's artifact proxy (mlflow-artifacts/...) failing, or S3's own words for bad keys.
        ("mlflow-artifacts", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "NoSuchBucket"),
        "the tracking server could not store the run's files in its artifact store",
        "fix the server's S3 settings (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, the bucket) and restart it; "
        "then ledger mlflow sync (it resumes where it stopped)",
    ),
    (
        # A 5xx, answered at once or after MLflow's client retried it ("too many 500 error responses").
        ("error code 5", "500 error responses", "502 error responses", "503 error responses"),
        "the tracking server failed mid-sync",
        "ledger mlflow sync once the server is healthy again (it resumes where it stopped)",
    ),
    (
        (
            "Failed to establish a new connection",
            "Connection refused",
            "Read timed out",
            "RemoteDisconnected",
        ),
        "the tracking server stopped answering mid-sync",
        "ledger mlflow sync once it is up again (it resumes where it stopped)",
    ),
)


def refusal(message: str, uri: str, report: SyncReport) -> TrackingError:
    """One line for an MLflow refusal: what happened, what was done before it, what to run next."""
    text = " ".join(redact_text(message).split())  # server bodies carry newlines and XML
    done = f"{report.created} created, {report.updated} updated before it; the ledger is untouched"
    what, hint = "MLflow refused the sync", "ledger mlflow sync (it resumes where it stopped)"
    if "Invalid Host header" in text:
        # MLflow 3 servers accept only localhost and private IPs in the Host header unless told otherwise.
        parts = urllib.parse.urlsplit(uri)
        host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
        hint = (
            f"start the server with --allowed-hosts {host} (the Host header this box sends), then sync again"
        )
    elif "error code 404" in text and "/api/2.0/mlflow/experiments" in text:
        what = "the server answers, but not as an MLflow tracking server (404 on its API)"
        hint = (
            "check --tracking-uri / MLFLOW_TRACKING_URI: the MLflow server's address, e.g. http://HOST:5000"
        )
    else:
        for needles, found, advice in _REFUSALS:
            if any(n in text for n in needles):
                what, hint = found, advice
                break
    return TrackingError(f"{what} ({text[:240]}); {done}", where=safe_uri(uri), hint=hint)


# ------------------------------------------------------------------------------ export


@dataclass
class ExportReport:
    dest: Path
    runs: int
    artifact_files: int
    outside: int  # runs whose artifacts live outside this store's mlartifacts/ (left as they are)

    def __str__(self) -> str:
        outside = f"; {self.outside} runs keep artifacts stored elsewhere" if self.outside else ""
        return (
            f"exported {self.runs} runs and {self.artifact_files} artifact files to {self.dest}{outside}. "
            f"Browse: cd {shlex.quote(str(self.dest))} && mlflow ui --backend-store-uri sqlite:///{DB_FILE}"
        )


def export_local_store(repo: Path, dest: Path, tracking_uri: str | None = None) -> ExportReport:
    """Copy a local SQLite store and its artifacts into ``dest``, as a self-contained folder.

    The database is copied with SQLite's backup API (a consistent snapshot even while a sync
    writes) and its artifact locations are rewritten to ``mlartifacts/...`` relative paths, so the
    folder can be moved, archived, or served on another machine from inside it. Needs no MLflow.
    """
    uri = tracking_uri or default_tracking_uri(repo)
    db = sqlite_path(uri)
    if db is None:
        raise InputError(
            f"export copies a local SQLite store; {safe_uri(uri)} is not one",
            where="--tracking-uri",
            hint="a tracking server keeps its own backups; `ledger mlflow sync --tracking-uri URI` fills one",
        )
    if not db.is_file():
        raise StateError("no MLflow store here yet", where=str(db), hint="ledger mlflow sync")
    dest = Path(dest).resolve()
    if dest.exists() and any(dest.iterdir()):
        raise InputError("the export folder is not empty", where=str(dest), hint="give a new folder")
    dest.mkdir(parents=True, exist_ok=True)
    _backup_sqlite(db, dest / DB_FILE)
    root = artifact_root(uri)
    assert root is not None
    files = _copy_artifacts(root, dest / ARTIFACTS_DIR)
    runs, outside = _relocate_artifacts(dest / DB_FILE, root)
    (dest / "README.txt").write_text(_export_readme())
    return ExportReport(dest, runs, files, outside)


def _backup_sqlite(source: Path, target: Path) -> None:
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def _copy_artifacts(root: Path, target: Path) -> int:
    if not root.is_dir():
        target.mkdir()
        return 0
    shutil.copytree(root, target)
    return sum(1 for p in target.rglob("*") if p.is_file())


def _relocate_artifacts(db: Path, root: Path) -> tuple[int, int]:
    """Point experiments and runs under ``root`` at ``mlartifacts/...`` (relative: the folder moves)."""
    prefixes = (f"file://{root}", str(root))
    with sqlite3.connect(db) as conn:
        for table, column, id_column in (
            ("experiments", "artifact_location", "experiment_id"),
            ("runs", "artifact_uri", "run_uuid"),
        ):
            for row_id, location in conn.execute(f"SELECT {id_column}, {column} FROM {table}").fetchall():
                relocated = _relative_location(location, prefixes)
                if relocated is not None:
                    conn.execute(
                        f"UPDATE {table} SET {column} = ? WHERE {id_column} = ?", (relocated, row_id)
                    )
        runs = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        outside = conn.execute(
            "SELECT COUNT(*) FROM runs WHERE artifact_uri NOT LIKE ?", (ARTIFACTS_DIR + "/%",)
        ).fetchone()[0]
    conn.close()
    return runs, outside


def _relative_location(location: str | None, prefixes: Sequence[str]) -> str | None:
    for prefix in prefixes:
        if location and (location == prefix or location.startswith(prefix + "/")):
            return ARTIFACTS_DIR + location[len(prefix) :]
    return None


def _export_readme() -> str:
    return (
        "An MLflow index of a Recipe Ledger, exported by `ledger mlflow export`.\n"
        "The ledger (ledger/*.jsonl in the project's git repository) is the record; this is its index.\n\n"
        "Artifact paths are relative to this folder: start MLflow from inside it.\n\n"
        f"  cd {'<this folder>'}\n"
        f"  mlflow ui --backend-store-uri sqlite:///{DB_FILE} --port 5000\n"
        "  # or: mlflow server --backend-store-uri sqlite:///mlflow.db"
        " --host 127.0.0.1 --port 5000 --workers 1\n\n"
        "To fill a shared tracking server instead,"
        " run `ledger mlflow sync --tracking-uri URI` in the project.\n"
    )
