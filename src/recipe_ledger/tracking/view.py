"""What the MLflow UI shows of the index: the experiment's view state and the links that open it.

The view is stored on the experiment as a tag MLflow's UI loads (``mlflow.sharedViewState.<key>``,
opened with ``?viewStateShareKey=<key>``): a few columns, not 250.
"""

from __future__ import annotations

import json

from recipe_ledger.tracking.uri import safe_uri

VIEW_KEY = "ledger"
VIEW_TAG = "mlflow.sharedViewState." + VIEW_KEY
# MLflow 3.17's UI ignores `mlflow.experimentKind` while its workflow switch exists: the side bar's
# "GenAI / Machine learning" switch (browser-local, GenAI by default) or `?workflowType=` decides.
UI_QUERY = f"workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"
DEFAULT_COLUMNS = (
    "tags.`ledger.status`",
    "tags.`ledger.kind`",
    "tags.`verdict`",
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
        f"Open with `?{UI_QUERY}` for the runs table and the ledger's columns (docs/mlflow.md).",
        VIEW_TAG: json.dumps(view, separators=(",", ":")),
    }


def browse_url(tracking_uri: str, experiment_id: str) -> str | None:
    """The experiment's runs in a tracking server's UI, in the classic view with the ledger's columns."""
    if not experiment_id or not tracking_uri.startswith(("http://", "https://")):
        return None
    return f"{safe_uri(tracking_uri).rstrip('/')}/#/experiments/{experiment_id}/runs?{UI_QUERY}"
