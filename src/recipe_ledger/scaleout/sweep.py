"""The driver of `ledger sweep`: every experiment to the box it names, one at a time per box.

One experiment per box at a time because a box measures: two runs sharing it would disturb each
other's numbers (and its checkout's ``ledger sync``). Boxes run in parallel.

Every experiment ends with an entry somewhere. The box writes its own result or failure to its own
chain; when a box comes back without one (it died, its worker crashed, ``ledger run`` could not
start), the driver writes the failure entry under its own writer, naming the box and the cause.

The cluster is anything with the ``Cluster`` shape: raycluster.RayCluster in real use, a fake in
unit tests.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.ledger import gitinfo
from recipe_ledger.ledger.models import current_version
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.redact import redact_text
from recipe_ledger.scaleout.onbox import BoxJob, BoxReport


@dataclass(frozen=True)
class SweepItem:
    spec: str  # relative to the project root, POSIX
    name: str  # the experiment's name
    box: str  # the experiment's box: the node label it is scheduled by


@dataclass(frozen=True)
class Lost:
    """A task that came back without a report: the box (or its worker) died, or it was never run."""

    cause: str


@dataclass(frozen=True)
class Outcome:
    item: SweepItem
    report: BoxReport | None  # None: lost
    entry_id: str  # the entry that records the experiment (the box's, or the driver's failure)
    entry_kind: str
    by_driver: bool  # the driver wrote the entry: the box left none
    writer: str  # the chain the entry is in
    seconds: float
    problem: str = ""  # what went wrong, empty when the box ran and synced

    @property
    def ok(self) -> bool:
        return not self.by_driver and self.entry_kind == "result" and not self.problem


@dataclass
class SweepSummary:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if not outcome.ok]


class Cluster(Protocol):
    def boxes(self) -> set[str]: ...
    def submit(self, box: str, job: BoxJob) -> Any: ...
    def next_done(self, handles: Sequence[Any]) -> tuple[Any, BoxReport | Lost]: ...


@dataclass(frozen=True)
class SweepEvent:
    box: str
    item: SweepItem
    state: str  # "started" | "finished"
    done: int  # experiments of this box finished so far
    total: int  # experiments of this box
    outcome: Outcome | None = None


def plan_sweep(root: Path, specs: Sequence[Path]) -> list[SweepItem]:
    """Each spec's name and box, its path relative to ``root`` (a box finds it in its own checkout)."""
    items = []
    top = root.resolve()
    for spec in specs:
        try:
            relative = spec.resolve().relative_to(top).as_posix()
        except ValueError:
            raise InputError(
                "experiment is outside the project: a box finds it in its own checkout only",
                where=str(spec),
                hint=f"move it under {root}/experiments/, commit and push it",
            ) from None
        experiment = load_experiment(spec)
        items.append(SweepItem(relative, experiment.name, experiment.box))
    if not items:
        raise InputError("no experiment to sweep", hint="ledger sweep experiments/*.yaml --cluster ADDRESS")
    return items


def check_committed(root: Path, items: Sequence[SweepItem]) -> None:
    """Refuse a spec whose bytes are not in HEAD: the boxes run what the remote holds, not this file."""
    top = Path(gitinfo.top_level(root)).resolve()
    for item in items:
        path = root.resolve() / item.spec
        if gitinfo.head_blob(top, path.relative_to(top).as_posix()) != gitinfo.blob_hash(path.read_bytes()):
            raise InputError(
                "experiment differs from the last commit: the boxes would run the committed one",
                where=item.spec,
                hint=f"git commit {item.spec}, then ledger sweep again (it pushes before fanning out)",
            )


def check_boxes(items: Sequence[SweepItem], cluster: Cluster, address: str) -> None:
    """Refuse, before anything runs, a sweep naming a box no live node is labelled with."""
    live = cluster.boxes()
    missing = sorted({item.box for item in items} - live)
    if missing:
        names = ", ".join(item.spec for item in items if item.box == missing[0])
        raise StateError(
            f"no live node labelled box={missing[0]} in the Ray cluster at {address} (needed by {names};"
            f" labelled: {', '.join(sorted(live)) or 'none'})",
            where=address,
            hint=f"on that box: ray start --address {address} --labels box={missing[0]}",
        )


def run_sweep(
    root: Path,
    items: Sequence[SweepItem],
    cluster: Cluster,
    *,
    writer: str,
    job: Callable[[SweepItem], BoxJob],
    events: Callable[[SweepEvent], None] = lambda event: None,
    clock: Callable[[], float] = time.monotonic,
) -> SweepSummary:
    """Run ``items`` on their boxes and return what each left in the ledger."""
    queues: dict[str, deque[SweepItem]] = {}
    for item in items:
        queues.setdefault(item.box, deque()).append(item)
    totals = {box: len(queue) for box, queue in queues.items()}
    started_at = clock()
    summary = SweepSummary()
    in_flight: dict[Any, tuple[SweepItem, float]] = {}

    def finish(item: SweepItem, report: BoxReport | Lost, seconds: float) -> None:
        outcome = _settle(root, item, report, writer, seconds)
        summary.outcomes.append(outcome)
        done = sum(1 for o in summary.outcomes if o.item.box == item.box)
        events(SweepEvent(item.box, item, "finished", done, totals[item.box], outcome))

    def start_next(box: str) -> None:
        # A box whose node died between two experiments: the rest of its queue would wait forever.
        while queues[box] and box not in cluster.boxes():
            finish(queues[box].popleft(), Lost(f"no live node labelled box={box} any more"), 0.0)
        if queues[box]:
            item = queues[box].popleft()
            in_flight[cluster.submit(box, job(item))] = (item, clock())
            events(SweepEvent(box, item, "started", totals[box] - len(queues[box]) - 1, totals[box]))

    for box in queues:
        start_next(box)
    while in_flight:
        handle, report = cluster.next_done(list(in_flight))
        item, began = in_flight.pop(handle)
        finish(item, report, clock() - began)
        start_next(item.box)
    summary.seconds = clock() - started_at
    return summary


def _settle(root: Path, item: SweepItem, report: BoxReport | Lost, writer: str, seconds: float) -> Outcome:
    """The outcome of one experiment; a failure entry by the driver when the box left no entry."""
    if isinstance(report, BoxReport) and report.entries:
        last = report.entries[-1]  # a run's last entry is its result (or its failure)
        problem = ""
        if report.run_exit != 0:
            problem = f"ledger run exited {report.run_exit}"
        elif report.sync_exit not in (0, None):  # the entry is safe on the box; it syncs next time
            last_line = (report.tail.splitlines() or ["no output"])[-1]
            problem = (
                f"ledger sync on {report.host} exited {report.sync_exit} (the entry waits there): {last_line}"
            )
        return Outcome(item, report, last.id, last.kind, False, report.writer, seconds, problem)
    if isinstance(report, BoxReport):
        cause = f"ledger run on {report.host} ({report.writer}) exited {report.run_exit} without an entry"
        problem, tail = cause, report.tail
    else:
        problem, tail = f"box {item.box} came back without a report: {report.cause}", ""
    entry = _record_lost(root, item, problem, tail, writer, seconds)
    box_report = report if isinstance(report, BoxReport) else None
    return Outcome(item, box_report, entry["id"], "failure", True, writer, seconds, problem)


def _record_lost(root: Path, item: SweepItem, cause: str, tail: str, writer: str, seconds: float) -> dict:
    payload = {
        "schema_version": current_version("failure"),
        "subject": item.name,
        "cause_class": "crash",
        "cause": redact_text(f"sweep: {cause}")[:2000],
        "log_tail": redact_text(tail)[-3900:] or None,
        "minutes_lost": round(seconds / 60, 2),
        "conditions": {"box": item.box, "stage": "sweep", "spec": item.spec},
        "origin": {"how": "measured"},
    }
    return Ledger.open(root).append("failure", payload, writer=writer)
