"""An entry's run tree in a tracking store: the parent run, its files, its children (summaries and
measurements) and the link to its comparison, written, completed later, refreshed and removed
through the few operations of ``TrackingClient``.

A parent run stays RUNNING until everything under it is logged, so a sync killed half-way leaves
a run the next sync recognizes as unfinished (``SyncSession.abandoned``), deletes and rebuilds.
Files are uploaded as redacted copies; a file that is not UTF-8 is withheld and named in a tag.
"""

from __future__ import annotations

import os
import secrets
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from recipe_ledger.redact import redact_text
from recipe_ledger.tracking.entries import entry_spec, entry_status_tags
from recipe_ledger.tracking.links import NO_LINKS, Links
from recipe_ledger.tracking.runspec import (
    COMPARE_TAG,
    FILES_TAG,
    MAX_TAG,
    PROBLEMS_TAG,
    STATUS_TAG,
    SYNC_TAG,
    RunSpec,
    as_text,
    run_status,
    ts_ms,
)

STALE_MS = 3600 * 1000  # a RUNNING run whose sync left no trace for this long was abandoned
# The link to MLflow's compare view of some runs of the experiment (view.compare_url, bound by sync).
CompareLink = Callable[[Sequence[str]], str | None]


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


def create_tree(
    client: TrackingClient,
    spec: RunSpec,
    session: SyncSession | None = None,
    compare: CompareLink | None = None,
) -> str:
    """The parent run, its files, children and summaries, and (with ``compare``) the link to the
    comparison of its summaries as a tag; given its final status only when all of it is logged."""
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
    _create_children(client, run_id, spec, compare)
    client.finish(run_id, spec.end_ms, spec.status)
    return run_id


def _folder_tags(spec: RunSpec, withheld: Sequence[str]) -> dict[str, str]:
    tags = {}
    if spec.problems:
        tags[PROBLEMS_TAG] = as_text(redact_text("; ".join(spec.problems)), MAX_TAG)
    if withheld:
        tags["ledger.files_withheld"] = as_text(", ".join(withheld), MAX_TAG)
    return tags


def _create_children(
    client: TrackingClient, run_id: str, spec: RunSpec, compare: CompareLink | None = None
) -> None:
    """The summaries, then the measurement children; then the parent's COMPARE_TAG (the
    summaries' run ids are known only now)."""
    summary_ids = [_create_child(client, run_id, summary) for summary in spec.summaries]
    for child in spec.children:
        _create_child(client, run_id, child)
    link = compare([summary_ids[i] for i in spec.compared]) if compare and spec.compared else None
    if link:
        client.set_tags(run_id, {COMPARE_TAG: link})


def _create_child(client: TrackingClient, run_id: str, child: RunSpec) -> str:
    child_id = client.create_run(
        replace(child, tags={**child.tags, **child.status_tags}), parent_run_id=run_id
    )
    client.finish(child_id, child.end_ms, child.status)
    return child_id


def stage_files(spec: RunSpec, staging: Path) -> list[str]:
    """The run's texts and its folder's files (redacted copies) under ``staging``; returns the
    files withheld (not UTF-8 text)."""
    for name, text in spec.texts.items():
        (staging / name).write_text(text, encoding="utf-8")
    return stage_redacted(spec.run_dir, spec.files, staging) if spec.run_dir else []


def attach_late_files(
    client: TrackingClient, existing: IndexedRun, spec: RunSpec, compare: CompareLink | None = None
) -> None:
    """A run indexed on a box without the run folder gets the folder once a box that has it syncs
    (its summaries are made again with the children, and the comparison's link with them)."""
    for child_id in client.child_run_ids(existing.run_id):  # a half-finished earlier attach
        client.delete_run(child_id)
    _create_children(client, existing.run_id, spec, compare)
    with tempfile.TemporaryDirectory(prefix="ledger-mlflow-") as staging:
        assert spec.run_dir is not None
        withheld = stage_redacted(spec.run_dir, spec.files, Path(staging))
        client.upload_dir(existing.run_id, Path(staging))
    client.set_tags(existing.run_id, {FILES_TAG: "attached", **_folder_tags(spec, withheld)})


def refresh_status(
    client: TrackingClient,
    existing: IndexedRun,
    entry: Mapping[str, Any],
    status: str,
    note: str,
    links: Links = NO_LINKS,
) -> bool:
    """Mirror what the ledger now says about the entry into the tags (its status, the notes about
    it, its calibrations: ``entries.mutable_tags``), and a retraction into the run's status and
    name (children first: the parent's tags say it is done). Only the tags that differ are written;
    the children only when the status changed."""
    tags = entry_status_tags(entry, status, note, links)
    final = run_status(entry["kind"], status)
    changed = {k: v for k, v in tags.items() if existing.tags.get(k) != v}
    if not changed and existing.status == final:
        return False
    end_ms = ts_ms(entry["ts"])
    if STATUS_TAG in changed or existing.status != final:
        for child_id in client.child_run_ids(existing.run_id):
            client.set_tags(child_id, {STATUS_TAG: tags[STATUS_TAG]})
            if final == "KILLED":
                client.finish(child_id, end_ms, final)
    client.set_tags(existing.run_id, changed)
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
