"""Abandoned runs: a run folder whose lock names a ``ledger`` process that is gone, recorded once.

A run killed with ``kill -9`` (or lost to a crash, an OOM kill of ledger itself, a reboot) writes
nothing on its way out: its server is stopped by its watchdog (``launch.watchdog``), but the ledger
would hold no trace of it. Its lock (``runs.LOCK``) stays behind, naming the pid and the start
identity of the process that took it. The commands that start runs and ``ledger show`` call
``record_abandoned`` first: each run whose owner is gone gets one ``failure`` entry naming the
experiment, its arms and what was measured before it died, under the run's own writer and git
stamp; then its lock is removed.

Once, under concurrency: a command claims a run by taking the lock's ``flock`` (the owner held it
while alive), checks that the ledger has no terminal entry of the run (one written just before the
death), appends, and removes the lock while still holding it; a second command either fails to
take the flock or finds the lock file gone or replaced, and records nothing.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from recipe_ledger import runs
from recipe_ledger.errors import LedgerError
from recipe_ledger.launch.failures import read_log, redacted_tail
from recipe_ledger.ledger.models import current_version
from recipe_ledger.ledger.store import Ledger, default_writer
from recipe_ledger.redact import redact_text

# Entries that end a run: one of them with the run's id means it was recorded before it died.
TERMINAL_KINDS = frozenset({"result", "failure", "reproduction"})
STAGE = "abandoned"


def record_abandoned(repo: Path, ledger: Ledger | None = None) -> list[dict[str, Any]]:
    """One failure entry per abandoned run under ``repo/runs/``; the entries appended (often none)."""
    appended = []
    for folder in runs.locked_runs(runs.runs_dir(repo)):
        claim = runs.claim_abandoned(folder)
        if claim is None:
            continue
        try:
            ledger = ledger or Ledger.open(repo)
            if not _finished(folder) and not _recorded(ledger, folder.name):
                appended.append(_append(ledger, folder, claim.owner))
                runs.redact_logs(folder)  # the run died before its own end-of-run redaction
        except BaseException:
            claim.let_go()  # left in place: the next command tries again
            raise
        claim.release()
    return appended


def _finished(folder: Path) -> bool:
    """A run writes timings.json as the last step of its body, after its entries."""
    return (folder / runs.TIMINGS).is_file()


def _recorded(ledger: Ledger, run_id: str) -> bool:
    for entry in ledger.entries():
        payload = entry.get("payload") or {}
        if entry.get("kind") not in TERMINAL_KINDS:
            continue
        origin = payload.get("origin") or {}
        conditions = payload.get("conditions") or {}
        if run_id in (origin.get("source"), conditions.get("run_id")):
            return True
    return False


def _append(ledger: Ledger, folder: Path, owner: runs.Owner) -> dict[str, Any]:
    payload = abandoned_payload(folder, owner, dt.datetime.now(dt.UTC))
    return ledger.append("failure", payload, writer=owner.writer or default_writer(), git=owner.git)


def _plan(folder: Path) -> dict[str, Any]:
    try:
        return runs.read_json(folder / runs.PLAN)
    except (OSError, LedgerError):
        return {}


def measured_so_far(folder: Path) -> tuple[list[str], int]:
    """What the run's records hold: one phrase per launch ("control#1 p1 p4", A/A launches marked),
    and how many lines were torn or bad (a run killed mid-write)."""
    launches: dict[str, set[int]] = {}
    bad = 0
    for name, label in ((runs.CALIBRATION, "A/A "), (runs.MEASUREMENTS, "")):
        path = folder / name
        if not path.is_file():
            continue
        found = runs.read_records(path)
        bad += len(found.problems)
        for record in found.records:
            key = f"{label}{record.get('arm')}#{record.get('repeat')}"
            point = record.get("point")
            launches.setdefault(key, set()).update([point] if isinstance(point, int) else [])
    phrases = [
        f"{key} {' '.join(f'p{p}' for p in sorted(points))}".strip() for key, points in launches.items()
    ]
    return phrases, bad


def _last_server_log_tail(folder: Path) -> str | None:
    logs = sorted(folder.glob("server-*.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return None
    return redacted_tail(read_log(logs[-1]))[-3900:] or None


def _minutes_lost(folder: Path, started: str) -> float | None:
    """From the lock's start to the folder's last write: what the run spent before it died."""
    try:
        begun = dt.datetime.fromisoformat(started)
    except ValueError:
        return None
    last = max((p.stat().st_mtime for p in folder.rglob("*") if p.is_file()), default=begun.timestamp())
    return round(max(last - begun.timestamp(), 0) / 60, 2)


def abandoned_payload(folder: Path, owner: runs.Owner, now: dt.datetime) -> dict[str, Any]:
    """The failure entry of an abandoned run: who died, what it ran, what it measured."""
    plan = _plan(folder)
    experiment = plan.get("experiment") or {}
    name = str(experiment.get("name") or folder.name)
    arms = sorted(plan.get("arms") or {})
    phrases, bad = measured_so_far(folder)
    measured = "; ".join(phrases) if phrases else "nothing"
    torn = f" ({bad} torn or bad record line{'s' if bad != 1 else ''})" if bad else ""
    cause = (
        f"abandoned: the ledger process {owner.pid} died (run {folder.name} started {owner.started},"
        f" found {now.isoformat(timespec='seconds')}); experiment {name}, arms {', '.join(arms) or '?'};"
        f" measured so far: {measured}{torn}"
    )
    conditions: dict[str, str | int] = {
        "run_id": folder.name,
        "stage": STAGE,
        "ledger_pid": owner.pid,
        "arms": ",".join(arms),
        "launches_measured": len(phrases),
    }
    box = (plan.get("box") or {}).get("id")
    if box:
        conditions["box"] = str(box)
    return {
        "schema_version": current_version("failure"),
        "subject": name,
        "cause_class": "crash",
        "cause": redact_text(cause)[:2000],
        "log_tail": _last_server_log_tail(folder),
        "minutes_lost": _minutes_lost(folder, owner.started),
        "conditions": conditions,
        "origin": {"how": "measured", "source": folder.name},
        "artifacts": runs.artifact_hashes(folder),
    }
