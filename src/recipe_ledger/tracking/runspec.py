"""What one MLflow run holds, and MLflow's rules for names and values (pure).

``RunSpec`` is a run computed from the ledger alone: name, tags, params, metrics, files, children
and the status it ends in. The tag names the sync reads back, MLflow's size limits and the one
naming rule (``key``) live here, so that every module shaping or writing a run agrees on them.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# ledger.status, ledger.status_note, the description and the links (links.link_tags: calibrations,
# notes, used_by) mirror what other entries say about an entry (see entries.mutable_tags): every
# sync refreshes them. Every other tag, param and metric is written once.
STATUS_TAG = "ledger.status"
ENTRY_TAG = "ledger.entry_id"
ROLE_TAG = "ledger.role"  # "entry" on the runs sync looks up, "measurement" on their children
FILES_TAG = "ledger.files"  # "attached" once the run folder's files and children are logged
PROBLEMS_TAG = "ledger.run_folder_problems"  # lines of the run folder that could not be read
PARENT_TAG = "mlflow.parentRunId"  # what makes the UI nest a run under another
UNITS_TAG = "ledger.units"  # "metric=unit, ..." for the run's metrics (recipe_ledger.metrics)
SYNC_TAG = "ledger.sync"  # "<host> <pid> <nonce> <epoch ms>": which sync process is building the run
CALIBRATIONS_TAG = "ledger.calibrations"  # a result's calibrations: "<id12>, <id12>"
USED_BY_TAG = "ledger.used_by"  # a calibration's results: "<id12>, <id12>"
NOTES_TAG = "ledger.notes"  # the notes that refer to the entry: "<id12>, <id12>"
NOTE_TAG = "ledger.note"  # ledger.note.<id12> = the note's text, cut to NOTE_CHARS
COMPARE_TAG = "ledger.compare"  # a result's link to MLflow's compare view of control and candidate

# MLflow's run status says what the ledger says: a failure entry is FAILED, a retracted entry KILLED
# (and its name starts with RETRACTED_PREFIX), everything else FINISHED. Any of them means the run
# is complete; RUNNING means a sync is still building it (or died doing so).
TERMINAL = ("FINISHED", "FAILED", "KILLED")
RETRACTED_PREFIX = "[retracted] "

MAX_PARAM = 6000  # MLflow's limits on a param and a tag value; longer values are cut here, visibly
MAX_TAG = 8000
NOTE_CHARS = 500  # of a note's text on its tag (a column in the runs table); `ledger show` has it all


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
    children: tuple[RunSpec, ...] = ()  # one per (arm, repeat, point), from the run folder
    summaries: tuple[RunSpec, ...] = ()  # one per (arm, point) a bar compares, from the entry (compare)
    compared: tuple[int, ...] = ()  # the summaries the saved comparison opens (indexes)
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


def as_text(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 15] + "...[truncated]"


def finite_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def numbers(values: Mapping[str, Any], *prefix: object) -> dict[str, float]:
    """The finite numbers of a mapping as metrics, names prefixed; anything else is left out."""
    out = {}
    for name, value in values.items():
        number = finite_number(value)
        if number is not None:
            out[key(*prefix, name)] = number
    return out


def run_status(kind: str, status: str) -> str:
    """The MLflow status of an entry's run: FAILED for a failure, KILLED once retracted, else FINISHED."""
    if status == "retracted":
        return "KILLED"
    return "FAILED" if kind == "failure" else "FINISHED"
