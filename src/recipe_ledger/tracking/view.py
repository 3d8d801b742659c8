"""What the MLflow UI shows of the index: the experiment's view state and the links that open it.

The view is stored on the experiment as a tag MLflow's UI loads (``mlflow.sharedViewState.<key>``,
opened with ``?viewStateShareKey=<key>``): a few columns, not hundreds. Links are made for any
store: a tracking server's own address, or for a store without a server (a local SQLite file) the
address ``mlflow ui`` serves it at and the command that starts it (``ui_command``).
"""

from __future__ import annotations

import json
import shlex
import urllib.parse
from collections.abc import Sequence

from recipe_ledger.tracking.compare import BAR_METRICS, bar_name
from recipe_ledger.tracking.uri import safe_uri

VIEW_KEY = "ledger"
VIEW_TAG = "mlflow.sharedViewState." + VIEW_KEY
# MLflow 3.17's UI ignores `mlflow.experimentKind` while its workflow switch exists (the feature
# flag is hard-wired on in 3.17.2): the side bar's "GenAI / Machine learning" switch (browser-local,
# GenAI by default: an experiment opens on Traces) or the URL's `?workflowType=` decides.
UI_QUERY = f"workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"
LOCAL_UI = "http://127.0.0.1:5000"  # where `mlflow ui` serves a store (its default host and port)
SERVERS = ("http://", "https://")
DEFAULT_COLUMNS = (
    "tags.`ledger.status`",
    "tags.`ledger.kind`",
    "tags.`verdict`",
    f"tags.`{bar_name(1)}`",
    *(f"metrics.`{bar_name(1)}.{m}`" for m in BAR_METRICS if m != "mde_pct"),
    "tags.`ledger.calibrations`",
    "tags.`ledger.notes`",
    "params.`arm`",
    "params.`point`",
    "params.`repeat`",
    "metrics.`output_tps_total`",
    "metrics.`ttft_ms_p50`",
    "metrics.`tpot_ms_p50`",
)


def experiment_tags() -> dict[str, str]:
    """The experiment's description, its kind, and the view the printed links open (VIEW_TAG)."""
    view = {"selectedColumns": list(DEFAULT_COLUMNS), "runsExpanded": {}}
    return {
        # Read by MLflow 3.x UIs without the workflow switch (and shown as the experiment's type).
        "mlflow.experimentKind": "custom_model_development",
        "mlflow.note.content": "Indexed from the Recipe Ledger by `ledger mlflow sync`. "
        "The ledger (ledger/*.jsonl) is the record; this is its index. "
        f"Open with `?{UI_QUERY}` for the runs table and the ledger's columns (docs/mlflow.md); "
        "each result's `ledger.compare` tag opens its control against its candidate.",
        VIEW_TAG: json.dumps(view, separators=(",", ":")),
    }


def ui_base(tracking_uri: str) -> str | None:
    """The UI's address for a store: a server's own (without credentials), LOCAL_UI for a store
    `mlflow ui` serves (sqlite, file, a database); None for Databricks (its workspace has the UI)."""
    if tracking_uri.startswith(SERVERS):
        return safe_uri(tracking_uri).rstrip("/")
    if tracking_uri.startswith("databricks") or "://" not in tracking_uri:
        return None
    return LOCAL_UI


def ui_command(tracking_uri: str) -> str | None:
    """The command that serves a store without a server at LOCAL_UI; None for a server."""
    if ui_base(tracking_uri) != LOCAL_UI:
        return None
    return f"mlflow ui --backend-store-uri {shlex.quote(safe_uri(tracking_uri))} --port 5000"


def browse_url(tracking_uri: str, experiment_id: str) -> str | None:
    """The experiment's runs table, in the classic view with the ledger's columns."""
    base = ui_base(tracking_uri)
    if not experiment_id or base is None:
        return None
    return f"{base}/#/experiments/{experiment_id}/runs?{UI_QUERY}"


def compare_url(tracking_uri: str, experiment_id: str, run_ids: Sequence[str]) -> str | None:
    """MLflow's compare view of ``run_ids`` (the UI's own route, ``#/compare-runs?runs=[...]``;
    the JSON percent-encoded: the UI decodes it, and a terminal keeps the link whole)."""
    base = ui_base(tracking_uri)
    if not experiment_id or base is None or not run_ids:
        return None
    query = urllib.parse.urlencode(
        {
            "runs": json.dumps(list(run_ids), separators=(",", ":")),
            "experiments": json.dumps([experiment_id], separators=(",", ":")),
            "workflowType": "machine_learning",
        },
        quote_via=urllib.parse.quote,
    )
    return f"{base}/#/compare-runs?{query}"


def browse_lines(tracking_uri: str, experiment_id: str) -> list[str]:
    """What sync prints to open the index: the command to serve a local store, then the link."""
    url = browse_url(tracking_uri, experiment_id)
    if url is None:
        return []
    command = ui_command(tracking_uri)
    return ([f"Serve: {command}"] if command else []) + [f"Browse: {url}"]
