"""Sync: the ledger indexed into a tracking store, idempotently, by several boxes at once.

A run carries the tag ``ledger.entry_id`` and is created once (``tree.create_tree``). A later sync
only refreshes the tags that mirror what other entries say about it (``ledger.status``: active /
retracted / superseded / reproduced / not-reproduced; the notes about it, its calibrations and
their status, the results that used it: ``links``), and attaches a run folder that has arrived
since. An entry counts as updated when one of those changed (a note written since: the runs it
refers to), unchanged otherwise. Params never change: MLflow refuses to change a logged param,
which suits entries that never change either. The ledger is only read: whatever fails, nothing in
it changes.
"""

from __future__ import annotations

import random
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipe_ledger.ledger.fold import fold_statuses
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.redact import redact_text
from recipe_ledger.tracking.entries import INDEXED_KINDS, entry_spec, status_notes
from recipe_ledger.tracking.links import NO_LINKS, Links, ledger_links
from recipe_ledger.tracking.localstore import default_tracking_uri
from recipe_ledger.tracking.mlflowstore import (
    MlflowTrackingClient,
    TrackingError,
    check_reachable,
    store_failures,
)
from recipe_ledger.tracking.runfolder import Roots, find_run_dir, run_folder, run_roots
from recipe_ledger.tracking.runspec import COMPARE_TAG, FILES_TAG, SYNC_TAG
from recipe_ledger.tracking.tree import (
    CompareLink,
    IndexedRun,
    SyncSession,
    TrackingClient,
    attach_late_files,
    create_tree,
    delete_tree,
    refresh_status,
)
from recipe_ledger.tracking.uri import check_tracking_uri, safe_uri
from recipe_ledger.tracking.view import browse_lines, compare_url

DEFAULT_EXPERIMENT = "recipe-ledger"
# A sync into a store it does not expect to share (a local file) looks for other syncs at work
# every WATCH_EVERY runs it makes; once it sees one, it looks each entry up before making its run.
WATCH_EVERY = 25
POST_CHECK_LOOKUPS = 100  # up to this many new entries, the post-check looks them up one by one
COMPARES_PRINTED = 5  # a sync prints the comparison links of this many new results (all are tags)


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
    # A new result's entry id -> when it was written, its run's name and the link to its comparison
    # (COMPARE_TAG): the newest are printed first (a first sync indexes a whole ledger, and the run
    # a person just made is the one they came for).
    compares: dict[str, tuple[str, str, str]] = field(default_factory=dict)

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
        lines = [text, *browse_lines(self.tracking_uri, self.experiment_id)]
        for _, name, url in sorted(self.compares.values(), reverse=True)[:COMPARES_PRINTED]:
            lines.append(f"Compare {name}: {url}")
        if len(self.compares) > COMPARES_PRINTED:
            unprinted = len(self.compares) - COMPARES_PRINTED
            lines.append(f"(and {unprinted} more new results: their tag {COMPARE_TAG} has the link)")
        return "\n".join(lines)

    def compare_link(self, entry: Mapping[str, Any], run_name: str) -> CompareLink:
        """The link to the comparison of a result's summaries, kept to be printed."""

        def link(run_ids: Sequence[str]) -> str | None:
            url = compare_url(self.tracking_uri, self.experiment_id, run_ids)
            if url:
                self.compares[entry["id"]] = (str(entry.get("ts", "")), run_name, url)
            return url

        return link


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
    links = ledger_links(entries, statuses)
    indexed = _group_by_entry(client.indexed_runs())
    created: dict[str, str] = {}
    todo = [e for e in entries if e["kind"] in INDEXED_KINDS]
    random.Random(session.nonce).shuffle(todo)
    for entry in todo:
        status = (
            statuses.get(entry["id"], "active"),
            notes.get(entry["id"], ""),
            links.get(entry["id"], NO_LINKS),
        )
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
            run_id = create_tree(client, spec, session, report.compare_link(entry, spec.name))
            created[entry["id"]] = report.runs[entry["id"]] = run_id
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
    status: tuple[str, str, Links],
    report: SyncReport,
) -> bool:
    """Refresh an indexed entry's status and links, and attach its run folder if it has arrived since.

    The full RunSpec (the folder's records read, every string redacted) is built only when the
    folder is to be attached: a sync of a large, already indexed ledger stays cheap.
    """
    changed = refresh_status(client, existing, entry, *status)
    if existing.tags.get(FILES_TAG) != "attached" and find_run_dir(runs_dir, run_folder(entry)):
        spec = entry_spec(entry, runs_dir, *status)
        report.problems += spec.problems
        attach_late_files(client, existing, spec, report.compare_link(entry, spec.name))
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
            report.compares.pop(entry_id, None)  # its link is the other sync's to print
            report.created -= 1
            report.raced += 1


def sync_ledger(
    repo: Path, tracking_uri: str | None = None, *, experiment_name: str = DEFAULT_EXPERIMENT
) -> SyncReport:
    """Index the ledger under ``repo`` (its ``runs/`` and ``evidence/*/`` run folders too) into an
    MLflow store, idempotently. The ledger is only read: whatever fails, nothing in it changes."""
    repo = Path(repo)
    entries = Ledger.open(repo).entries()
    uri = tracking_uri or default_tracking_uri(repo)
    check_tracking_uri(uri)
    failures = store_failures()  # TrackingUnavailable, with the install command, without MLflow
    check_reachable(uri)
    report = SyncReport(tracking_uri=uri, experiment=experiment_name)
    try:
        client = MlflowTrackingClient.open(uri, experiment_name)
        report.experiment_id = client.experiment_id
        # A server is shared: look each entry up again just before indexing it (another box may
        # have done it since this sync listed the store). A local file rarely has company.
        shared = uri.startswith(("http://", "https://"))
        return sync_entries(client, entries, run_roots(repo), report, precheck=shared)
    except failures as error:
        raise refusal(str(error), uri, report) from None


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
