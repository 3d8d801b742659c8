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
import re
import shlex
import shutil
import sqlite3
import tempfile
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

MAX_PARAM = 6000  # MLflow's limits on a param and a tag value; longer values are cut here, visibly
MAX_TAG = 8000
BATCH = 100  # MLflow takes at most 100 params, 100 tags and 1000 entities in all per log_batch call

T = TypeVar("T")


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
    out: dict[str, float] = {}
    for bar in bars:
        fields = {name: bar.get(name) for name in ("effect", "ci_low", "ci_high", "mde", "control", "value")}
        out.update(numbers(fields, bar_key(bar)))
    return out


def result_spec(entry: Mapping[str, Any], runs_dir: Path) -> RunSpec:
    payload = entry["payload"]
    record = payload.get("experiment")
    tags = common_tags(entry)
    params = {key("condition", k): str(v) for k, v in (payload.get("conditions") or {}).items()}
    metrics = numbers(payload.get("metrics") or {})
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


def calibration_spec(entry: Mapping[str, Any], runs_dir: Path) -> RunSpec:
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


def failure_spec(entry: Mapping[str, Any], runs_dir: Path) -> RunSpec:
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
    runs_dir: Path,
    records_file: str | None,
    *,
    instrument: str | None = None,
) -> RunSpec:
    """Attach the run folder (its files and, from ``records_file``, the children) when it is here.

    Lines that cannot be read are not skipped in silence: they travel as ``problems`` to the sync
    report and to a tag on the run (runs.py's reading policy)."""
    folder = run_folder(entry)
    run_dir = runs_dir / folder if folder else None
    if run_dir is None or not run_dir.is_dir():
        return spec
    calibration = records_file == runs.CALIBRATION
    children: list[RunSpec] = []
    problems: list[str] = []
    if records_file and (run_dir / records_file).is_file():
        fingerprints = {**plan_fingerprints(run_dir, problems), **_param_fingerprints(spec.params)}
        children = measurement_specs(
            read_records(run_dir / records_file, problems),
            spec,
            fingerprints,
            instrument=instrument,
            phase="calibration" if calibration else "measurement",
        )
    files = _files_for(run_dir, calibration_only=calibration)
    return replace(
        spec, run_dir=run_dir, files=tuple(files), children=tuple(children), problems=tuple(problems)
    )


def _files_for(run_dir: Path, *, calibration_only: bool) -> list[str]:
    """Every file of the run folder; for a calibration only what the A/A launches wrote."""
    files = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())
    if not calibration_only:
        return files
    return [f for f in files if f in (runs.PLAN, runs.CALIBRATION) or f.startswith(("server-aa-", "raw/aa-"))]


def plan_fingerprints(run_dir: Path, problems: list[str] | None = None) -> dict[str, str]:
    """Arm name -> fingerprint from plan.json (a calibration entry does not list the arms itself);
    an unreadable plan gives none, and says why in ``problems``."""
    if not (run_dir / runs.PLAN).is_file():
        return {}
    try:
        arms = runs.read_json(run_dir / runs.PLAN).get("arms", {})
        return {
            name: arm["fingerprint"] for name, arm in arms.items() if isinstance(arm.get("fingerprint"), str)
        }
    except LedgerError as error:
        _add_problem(problems, error.one_line())
    except (OSError, AttributeError, TypeError) as error:
        _add_problem(problems, f"{run_dir / runs.PLAN}: unreadable arms ({type(error).__name__})")
    return {}


def _add_problem(problems: list[str] | None, text: str) -> None:
    if problems is not None:
        problems.append(text)


def _param_fingerprints(params: Mapping[str, str]) -> dict[str, str]:
    found = (re.fullmatch(r"arm\.(.+)\.fingerprint", name) for name in params)
    return {m.group(1): params[m.group(0)] for m in found if m}


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
    fingerprints: Mapping[str, str],
    *,
    instrument: str | None,
    phase: str,
) -> list[RunSpec]:
    """One child per (arm, repeat, point, instrument): the numbers of one launch at one point."""
    several = len({r.get("instrument") for r in records}) > 1
    return [
        measurement_spec(r, parent, fingerprints, phase, several)
        for r in records
        if instrument is None or r.get("instrument") == instrument
    ]


def measurement_spec(
    record: Mapping[str, Any],
    parent: RunSpec,
    fingerprints: Mapping[str, str],
    phase: str,
    name_instrument: bool,
) -> RunSpec:
    arm = str(record.get("arm", "?"))
    prefix = "A/A " if phase == "calibration" else ""
    name = f"{prefix}{arm}#{record.get('repeat')} c{record.get('point')}"
    if name_instrument:
        name += f" {record.get('instrument')}"
    params = {
        k: str(record.get(k, ""))
        for k in (
            "arm",
            "repeat",
            "point",
            "seed",
            "instrument",
            "instrument_version",
            "raw_file",
            "raw_sha256",
        )
    }
    params["phase"] = phase
    params["arm_fingerprint"] = fingerprints.get(arm, "-")
    metrics = {
        **numbers(record.get("metrics") or {}),
        **numbers(record.get("server") or {}, "server"),
        **numbers({"wall_s": record.get("wall_s")}),
    }
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
        name=name,
        tags=tags,
        status_tags={},
        params=params,
        metrics=metrics,
        start_ms=parent.start_ms,
        end_ms=parent.end_ms,
    )


# -- from an entry to its run


def entry_spec(entry: Mapping[str, Any], runs_dir: Path, status: str = "active", note: str = "") -> RunSpec:
    """The redacted RunSpec of one indexed entry (result, calibration or failure)."""
    build = {"result": result_spec, "calibration": calibration_spec, "failure": failure_spec}[entry["kind"]]
    spec = build(entry, runs_dir)
    spec = replace(
        spec,
        status_tags=status_tags(status, note, _headline(entry)),
        children=tuple(replace(c, status_tags={STATUS_TAG: status}) for c in spec.children),
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
    finished: bool
    start_ms: int
    tags: dict[str, str]


class TrackingClient(Protocol):
    """The few store operations sync needs; MlflowTrackingClient implements them, tests fake them."""

    def indexed_runs(self) -> list[IndexedRun]: ...
    def create_run(self, spec: RunSpec, parent_run_id: str | None = None) -> str: ...
    def upload_dir(self, run_id: str, local_dir: Path) -> None: ...
    def finish(self, run_id: str, end_ms: int) -> None: ...
    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None: ...
    def child_run_ids(self, run_id: str) -> list[str]: ...
    def delete_run(self, run_id: str) -> None: ...


@dataclass
class SyncReport:
    tracking_uri: str
    experiment: str
    created: int = 0
    updated: int = 0
    skipped: int = 0  # already indexed, nothing changed
    repaired: int = 0  # unfinished or duplicate runs removed (a sync killed half-way, two syncs at once)
    runs: dict[str, str] = field(default_factory=dict)  # ledger entry id -> parent run id
    problems: list[str] = field(default_factory=list)  # run-folder lines not read (file:line: why)

    @property
    def parent_run_ids(self) -> list[str]:
        return list(self.runs.values())

    def __str__(self) -> str:
        repaired = f", {self.repaired} unfinished runs rebuilt" if self.repaired else ""
        text = (
            f"{self.created} created, {self.updated} updated, {self.skipped} unchanged{repaired} "
            f"({len(self.runs)} entries in experiment {self.experiment!r} at {safe_uri(self.tracking_uri)})"
        )
        if self.problems:
            more = f" and {len(self.problems) - 1} more" if len(self.problems) > 1 else ""
            text += f"; run-folder lines not indexed: {self.problems[0]}{more}"
        return text


def safe_uri(uri: str) -> str:
    """A tracking URI fit to print: no user:password@ part, nothing token-shaped."""
    parts = urllib.parse.urlsplit(uri)
    if parts.password or parts.username:  # (urlunsplit would also turn sqlite://// into sqlite://)
        uri = urllib.parse.urlunsplit(
            parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else ""))
        )
    return redact_text(uri)


def sync_entries(
    client: TrackingClient, entries: Sequence[Mapping[str, Any]], runs_dir: Path, report: SyncReport
) -> SyncReport:
    """Index every result, calibration and failure entry once; refresh the status tags of the rest."""
    statuses = fold_statuses(entries)
    notes = status_notes(entries, statuses)
    indexed = _group_by_entry(client.indexed_runs())
    for entry in entries:
        if entry["kind"] not in INDEXED_KINDS:
            continue
        status = (statuses.get(entry["id"], "active"), notes.get(entry["id"], ""))
        keep = _keep_one(client, indexed.get(entry["id"], []), report)
        if keep is None:
            spec = entry_spec(entry, runs_dir, *status)
            report.problems += spec.problems
            report.runs[entry["id"]] = create_tree(client, spec)
            report.created += 1
            continue
        report.runs[entry["id"]] = keep.run_id
        if _update(client, keep, entry, runs_dir, status, report):
            report.updated += 1
        else:
            report.skipped += 1
    return report


def _update(
    client: TrackingClient,
    existing: IndexedRun,
    entry: Mapping[str, Any],
    runs_dir: Path,
    status: tuple[str, str],
    report: SyncReport,
) -> bool:
    """Refresh an indexed entry's status tags, and attach its run folder if it has arrived since.

    The full RunSpec (the folder's records read, every string redacted) is built only when the
    folder is to be attached: a sync of a large, already indexed ledger stays cheap.
    """
    changed = refresh_status(client, existing, entry_status_tags(entry, *status))
    folder = run_folder(entry)
    if existing.tags.get(FILES_TAG) != "attached" and folder and (runs_dir / folder).is_dir():
        spec = entry_spec(entry, runs_dir, *status)
        report.problems += spec.problems
        attach_late_files(client, existing, spec)
        changed = True
    return changed


def _group_by_entry(runs: Iterable[IndexedRun]) -> dict[str, list[IndexedRun]]:
    grouped: dict[str, list[IndexedRun]] = {}
    for run in sorted(runs, key=lambda r: r.start_ms):
        grouped.setdefault(run.entry_id, []).append(run)
    return grouped


def _keep_one(client: TrackingClient, runs: list[IndexedRun], report: SyncReport) -> IndexedRun | None:
    """The finished run that stands for an entry; unfinished ones and duplicates are removed."""
    finished = [r for r in runs if r.finished]
    keep = finished[0] if finished else None
    for run in runs:
        if run is not keep:
            delete_tree(client, run.run_id)
            report.repaired += 1
    return keep


def create_tree(client: TrackingClient, spec: RunSpec) -> str:
    """The parent run, its children and files; marked FINISHED only when all of it is logged."""
    run_id = client.create_run(
        replace(
            spec, tags={**spec.tags, **spec.status_tags, FILES_TAG: "pending" if spec.run_dir else "absent"}
        )
    )
    for name, text in spec.texts.items():
        upload_text(client, run_id, name, text)
    if spec.run_dir:
        attach_files(client, run_id, spec)
    client.finish(run_id, spec.end_ms)
    return run_id


def attach_files(client: TrackingClient, run_id: str, spec: RunSpec) -> None:
    """Children from the run folder's records, and its files (redacted copies) as artifacts."""
    for child in spec.children:
        child_id = client.create_run(
            replace(child, tags={**child.tags, **child.status_tags}), parent_run_id=run_id
        )
        client.finish(child_id, child.end_ms)
    assert spec.run_dir is not None
    with tempfile.TemporaryDirectory(prefix="ledger-mlflow-") as staging:
        withheld = stage_redacted(spec.run_dir, spec.files, Path(staging))
        client.upload_dir(run_id, Path(staging))
    tags = {FILES_TAG: "attached"}
    if spec.problems:
        tags[PROBLEMS_TAG] = _text(redact_text("; ".join(spec.problems)), MAX_TAG)
    if withheld:
        tags["ledger.files_withheld"] = _text(", ".join(withheld), MAX_TAG)
    client.set_tags(run_id, tags)


def attach_late_files(client: TrackingClient, existing: IndexedRun, spec: RunSpec) -> None:
    """A run indexed on a box without the run folder gets the folder once a box that has it syncs."""
    for child_id in client.child_run_ids(existing.run_id):  # a half-finished earlier attach
        client.delete_run(child_id)
    attach_files(client, existing.run_id, spec)


def refresh_status(client: TrackingClient, existing: IndexedRun, tags: Mapping[str, str]) -> bool:
    """Mirror a new ledger status into the tags (children first: the parent's tags say it is done)."""
    if all(existing.tags.get(k) == v for k, v in tags.items()):
        return False
    for child_id in client.child_run_ids(existing.run_id):
        client.set_tags(child_id, {STATUS_TAG: tags[STATUS_TAG]})
    client.set_tags(existing.run_id, tags)
    return True


def delete_tree(client: TrackingClient, run_id: str) -> None:
    for child_id in client.child_run_ids(run_id):
        client.delete_run(child_id)
    client.delete_run(run_id)


def upload_text(client: TrackingClient, run_id: str, name: str, text: str) -> None:
    with tempfile.TemporaryDirectory(prefix="ledger-mlflow-") as staging:
        (Path(staging) / name).write_text(text)
        client.upload_dir(run_id, Path(staging))


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
        client = require_mlflow().MlflowClient(tracking_uri)
        experiment = client.get_experiment_by_name(experiment_name)
        if experiment is not None:
            return cls(client, experiment.experiment_id)
        root = artifact_root(tracking_uri)
        experiment_id = client.create_experiment(
            experiment_name,
            artifact_location=str(root / key(experiment_name)) if root else None,
            # "custom_model_development" makes the 3.x UI open on the runs table, not on traces.
            tags={
                "mlflow.experimentKind": "custom_model_development",
                "mlflow.note.content": "Indexed from the Recipe Ledger by `ledger mlflow sync`. "
                "The ledger (ledger/*.jsonl) is the record; this is its index.",
            },
        )
        return cls(client, experiment_id)

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
        return [
            IndexedRun(
                run.info.run_id,
                run.data.tags[ENTRY_TAG],
                run.info.status == "FINISHED",
                run.info.start_time or 0,
                dict(run.data.tags),
            )
            for run in self._search(f"tags.`{ROLE_TAG}` = 'entry'")
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

    def finish(self, run_id: str, end_ms: int) -> None:
        self.client.set_terminated(run_id, "FINISHED", end_time=end_ms)

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        for chunk in _chunks([RunTag(k, v) for k, v in tags.items()], BATCH):
            self.client.log_batch(run_id, tags=chunk)

    def child_run_ids(self, run_id: str) -> list[str]:
        return [run.info.run_id for run in self._search(f"tags.`{PARENT_TAG}` = '{run_id}'")]

    def delete_run(self, run_id: str) -> None:
        self.client.delete_run(run_id)


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
    """Index the ledger under ``repo`` (and its ``runs/`` folder) into an MLflow store, idempotently."""
    repo = Path(repo)
    entries = Ledger.open(repo).entries()
    uri = tracking_uri or default_tracking_uri(repo)
    mlflow = require_mlflow()
    check_reachable(uri)
    report = SyncReport(tracking_uri=uri, experiment=experiment_name)
    try:
        client = MlflowTrackingClient.open(uri, experiment_name)
        return sync_entries(client, entries, runs.runs_dir(repo), report)
    except mlflow.exceptions.MlflowException as error:
        done = f"{report.created} created, {report.updated} updated before it"
        raise TrackingError(
            f"MLflow refused the sync ({redact_text(str(error))[:300]}); {done}",
            where=safe_uri(uri),
            hint=_hint_for(str(error), uri),
        ) from None


def _hint_for(message: str, uri: str) -> str:
    if "Invalid Host header" in message:
        # MLflow 3 servers accept only localhost and private IPs in the Host header unless told otherwise.
        parts = urllib.parse.urlsplit(uri)
        host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
        return (
            f"start the server with --allowed-hosts {host} (the Host header this box sends), then sync again"
        )
    return "ledger mlflow sync (it resumes where it stopped)"


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
