"""Indexing the ledger into MLflow: the index and the UI, never the record.

The ledger (``ledger/*.jsonl``) and the raw files under ``runs/<run_id>/`` are the record. This
package copies what they hold into an MLflow tracking store so people can browse, filter and plot:

- one parent run per ``result`` entry (``ledger run``: named after the experiment's run id), with
  its bars by position as columns that line up across experiments (``bar<n>``, ``bar<n>.verdict``,
  ``bar<n>.effect_pct`` / ``.ci_low_pct`` / ``.ci_high_pct`` / ``.candidate`` / ``.control``), the
  verdict of every bar as tags, the arms' fingerprints, images and model hashes, instrument
  versions and the spec as params; one summary child per (arm, point) a bar compares (the arm's
  medians), the link to MLflow's compare view of control against candidate (``ledger.compare``),
  and one nested child run per arm x repeat x point read from ``measurements.jsonl``;
- one run per ``calibration`` entry (nested children from the A/A ``calibration.jsonl``) and per
  ``failure`` entry (its cause and log tail as ``failure.txt``);
- links as tags, refreshed by every sync with the status: every calibration a result's verdicts
  used (``ledger.calibrations``, ``calibration.<instrument>.<metric>`` with its noise), the results
  that used a calibration (``ledger.used_by``), the notes about an entry (``ledger.notes``,
  ``ledger.note.<id>``);
- the run folder's files as artifacts when the folder is on this box. An entry written on another
  box (no ``runs/`` folder here) is still indexed from the entry itself; its files and children are
  attached by a later sync on a box that has them.

Secrets never reach MLflow: every tag, param, name and text goes through ``redact_obj`` /
``redact_text``, and text artifacts are redacted copies (a file that is not UTF-8 is not uploaded;
the tag ``ledger.files_withheld`` names it). The ledger's content hashes stay those of the
originals on the box.

Package map (from the ledger to the store; each module imports only those above it in this list,
and ``mlflow`` / ``sqlite3`` each have one importer):
  runspec      what one run holds (RunSpec), the tag names sync reads back, MLflow's name rule and limits
  links        what other entries say about an entry: a result's calibrations, a calibration's results,
               the notes about it (tags every sync refreshes)
  runfolder    a run folder on this box: its files, one child run per (arm, repeat, point), what
               sets the arms apart
  compare      a result's bars as columns by position (bar<n>.*), its summary children (one per arm
               and point a bar compares) and which of them its saved comparison opens
  entries      a result / calibration / failure entry as its run; status tags; redaction (pure)
  tree         an entry's run tree in a store (TrackingClient): create, complete, refresh, delete;
               SyncSession, the tag that says who is building a RUNNING run
  uri          tracking URIs: accepted schemes, printed without credentials
  view         the experiment's view state in MLflow's UI (columns) and the links that open it, for
               any store (a local one: the `mlflow ui` command and the address it serves)
  localstore   the local SQLite store: its file and artifact folder, WAL commits, backup, relocation
               (the only user of sqlite3)
  mlflowstore  MLflow itself, imported lazily: MlflowTrackingClient, what it raises, server reachable
               (the only user of mlflow)
  sync         `ledger mlflow sync`: each entry indexed once, statuses refreshed, several boxes at once
  export       `ledger mlflow export`: a local store as a self-contained folder

What callers outside the package use is imported here; everything else from its module.
"""

from recipe_ledger.tracking.export import export_local_store
from recipe_ledger.tracking.mlflowstore import TrackingUnavailable
from recipe_ledger.tracking.sync import DEFAULT_EXPERIMENT, sync_ledger

__all__ = ["DEFAULT_EXPERIMENT", "TrackingUnavailable", "export_local_store", "sync_ledger"]
