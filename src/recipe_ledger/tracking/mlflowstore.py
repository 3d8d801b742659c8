"""MLflow itself: the only module that imports ``mlflow``, lazily.

Importing the package costs nothing on a bare GPU box, and using it without MLflow installed
raises ``TrackingUnavailable`` with the install command. ``MlflowTrackingClient`` is the
``TrackingClient`` the sync writes through, bound to one experiment (created with the ledger's
view, ``view.experiment_tags``); ``store_failures`` names what MLflow raises when a store refuses.
"""

from __future__ import annotations

import logging
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from itertools import zip_longest
from pathlib import Path
from typing import Any, TypeVar

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.tracking.localstore import artifact_root, lighten_sqlite_commits
from recipe_ledger.tracking.runspec import ENTRY_TAG, PARENT_TAG, ROLE_TAG, TERMINAL, RunSpec, key
from recipe_ledger.tracking.tree import IndexedRun
from recipe_ledger.tracking.uri import safe_uri
from recipe_ledger.tracking.view import experiment_tags

INSTALL_HINT = "pip install 'recipe-ledger[tracking]'"
BATCH = 100  # MLflow takes at most 100 params, 100 tags and 1000 entities in all per log_batch call

T = TypeVar("T")


class TrackingUnavailable(StateError):
    """MLflow is not installed, or the tracking store does not answer."""


class TrackingError(StateError):
    """MLflow refused or failed an operation; the ledger is untouched."""


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


def store_failures() -> tuple[type[Exception], ...]:
    """What a store raises when it refuses or fails: MLflow's own exception, and the errors of
    ``requests`` (MLflow's HTTP client: artifact uploads raise those, not MlflowException)."""
    mlflow = require_mlflow()
    import requests

    return (mlflow.exceptions.MlflowException, requests.RequestException)


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


def _chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
