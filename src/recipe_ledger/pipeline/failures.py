"""Every stage that spends machine time (calibrate, run, reproduce) fails the same way.

``recording_failure`` wraps a stage: on any error (Ctrl-C included) it stops every server this
process started, writes the ``failure`` entry (cause, log tail, minutes lost) and raises a
``RunFailed`` (exit 5) or ``RunInterrupted`` (exit 130) that carries that entry. A run that never
started (a bad spec, a missing recipe, a preflight refusal) goes through ``recording_setup_failure``
and keeps its own exit code (2 or 3): the trace is written either way, and the next person sees the
door that was closed.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipe_ledger import runs
from recipe_ledger.errors import LedgerError, Terminated
from recipe_ledger.instruments.base import InstrumentError
from recipe_ledger.launch.failures import BootFailure
from recipe_ledger.launch.registry import stop_all
from recipe_ledger.ledger.models import current_version
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.pipeline.events import Notice
from recipe_ledger.pipeline.run import RunContext
from recipe_ledger.redact import redact_text

RUN_FAILED_EXIT = 5
INTERRUPTED_EXIT = 130


class FailureRecorded(LedgerError):
    """An error after which a ``failure`` entry was written; ``entry`` is that entry."""

    def __init__(
        self, message: str, *, entry: dict[str, Any], where: str | None = None, hint: str | None = None
    ):
        self.entry = entry
        super().__init__(message, where=where, hint=hint)

    @property
    def short_id(self) -> str:
        return self.entry["id"][:12]


class RunFailed(FailureRecorded):
    """A server did not boot or died, an instrument failed, or anything else broke mid-run."""

    exit_code = RUN_FAILED_EXIT


class RunInterrupted(FailureRecorded):
    """Ctrl-C during a run: every server was stopped and the interruption recorded."""

    exit_code = INTERRUPTED_EXIT


class SetupFailed(FailureRecorded):
    """Planning or preflight refused the run; keeps the exit code of the refusal (2 or 3)."""

    def __init__(self, cause: LedgerError, entry: dict[str, Any]):
        self.exit_code = cause.exit_code
        super().__init__(
            f"{cause.message} — failure entry {entry['id'][:12]} recorded",
            entry=entry,
            where=cause.where,
            hint=cause.hint,
        )


# ------------------------------------------------------------------------------ the failure entry


def cause_class_of(error: BaseException) -> str:
    if isinstance(error, KeyboardInterrupt):
        return "other"
    if isinstance(error, BootFailure):
        return {
            "out_of_memory": "oom",
            "timeout": "hang",  # it answered, never ready
            "no_answer": "no-boot",  # nothing ever answered its health URL
            "crash": "no-boot",
            "rejected_flag": "config",
            "port_in_use": "config",
            "image_missing": "config",
            "docker_unavailable": "config",
            "impostor": "config",  # another process held the port: the machine, not the server
            # /health answered but a real generation did not: the server is up and wrong.
            "generate_failed": "bad-output",
        }.get(error.cause, "no-boot")
    if isinstance(error, InstrumentError):
        return "crash"
    return "other"


def describe(error: BaseException) -> str:
    if isinstance(error, KeyboardInterrupt):
        return "interrupted (SIGTERM)" if isinstance(error, Terminated) else "interrupted (Ctrl-C)"
    if isinstance(error, LedgerError):
        return error.one_line()
    return f"{type(error).__name__}: {error}"


# Where this host's own paths live, beyond the project: a sibling checkout (the project's parent
# folder), the home folder, the temporary folder. A path elsewhere (/model inside a container,
# /v1/completions in a server log, /usr/lib in a traceback) says the same on every host: kept.
_PATH = re.compile(r"(?<![\w.:/~-])/[\w.+@%~-]+(?:/[\w.+@%~-]+)*/?")
OUTSIDE_PROJECT = "<outside project>"


def host_prefixes(root: Path) -> list[Path]:
    """The folders whose paths name this host rather than the project (see ``_PATH``'s comment)."""
    parent = root.parent
    found = [Path.home(), Path(tempfile.gettempdir()), Path("/tmp")]
    return [p for p in (parent, *found) if p != Path(p.anchor)]


def project_paths(text: str, root: Path) -> str:
    """``text`` with each absolute path of this host made portable: one inside the project (as
    given or resolved) relative to it, one elsewhere on this host ``<outside project>/NAME``. An
    entry is read on other hosts, forever: /work/alice/... means nothing there, and names a person."""
    roots = sorted({root, root.resolve()}, key=lambda p: -len(p.parts))
    hosts = host_prefixes(root)

    def portable(match: re.Match[str]) -> str:
        path = Path(os.path.normpath(match.group(0)))
        for base in roots:
            if path.is_relative_to(base):
                return path.relative_to(base).as_posix() or "."
        if any(path.is_relative_to(base) for base in hosts):
            return f"{OUTSIDE_PROJECT}/{path.name}"
        return match.group(0)

    return _PATH.sub(portable, text)


def _entry_text(text: str, root: Path) -> str:
    """Text for a failure entry: secrets redacted, this host's paths made portable."""
    return project_paths(redact_text(text), root)


def record_failure(ctx: RunContext, error: BaseException, where: str) -> dict:
    tail = getattr(error, "log_tail", None) or getattr(error, "output_tail", None) or ""
    conditions = {
        "box": ctx.plan.box.id,
        "run_id": ctx.run_id,
        "stage": where,
        **(ctx.progress() if ctx.progress else {}),
    }
    payload = {
        "schema_version": current_version("failure"),
        "subject": ctx.plan.experiment.name,
        "cause_class": cause_class_of(error),
        "cause": _entry_text(f"{where}: {describe(error)}", ctx.repo)[:2000],
        "log_tail": _entry_text(tail, ctx.repo)[-3900:] or None,
        "minutes_lost": round((time.monotonic() - ctx.started) / 60, 2),
        "conditions": {
            k: project_paths(v, ctx.repo) if isinstance(v, str) else v for k, v in conditions.items()
        },
        "origin": {"how": "measured", "source": ctx.run_id},
        "artifacts": runs.artifact_hashes(ctx.run_dir),
    }
    return ctx.ledger.append("failure", payload, writer=ctx.writer, git=ctx.git)


def record_setup_failure(
    ledger: Ledger, writer: str, subject: str, error: LedgerError, stage: str, git: Any = None
) -> dict:
    payload = {
        "schema_version": current_version("failure"),
        "subject": subject,
        "cause_class": "config",
        "cause": _entry_text(f"{stage}: {error.one_line()}", ledger.root)[:2000],
        "minutes_lost": 0.0,
        "conditions": {"stage": stage},
        "origin": {"how": "measured"},
    }
    extra = {} if git is None else {"git": git}
    return ledger.append("failure", payload, writer=writer, **extra)


# ------------------------------------------------------------------------------ the contexts


@dataclass
class StageTracker:
    """Where a wrapped stage is now; the failure entry names it."""

    stage: str


@contextmanager
def recording_failure(ctx: RunContext, stage: str) -> Iterator[StageTracker]:
    """Run the body; on any error stop every server, record the failure and raise it typed.

    Either way the run folder's logs are redacted once the body is over (runs.redact_logs): the
    servers and clients wrote them as they pleased, they were parsed as written, and the folder
    is committed as evidence/."""
    tracker = StageTracker(stage)
    try:
        yield tracker
    except BaseException as error:
        stop_all()
        ctx.events(Notice(f"run failed during {tracker.stage}: recording a failure entry"))
        entry = record_failure(ctx, error, tracker.stage)
        typed = _typed(error, entry)
        if typed is None:
            raise  # SystemExit and friends go on as they are, the entry written
        raise typed from error
    finally:
        runs.redact_logs(ctx.run_dir, _launched_env(ctx))
        ctx.release_lock()  # its entry is written (or this stage ended): no longer under way


def _launched_env(ctx: RunContext) -> dict[str, str]:
    """Every arm's env, each name prefixed by its arm: two arms that set one variable to different
    values keep both values (the redactor hunts each verbatim)."""
    arms = enumerate(ctx.plan.arms.values())
    return {f"ARM{i}_{name}": value for i, arm in arms for name, value in arm.env.items()}


def _typed(error: BaseException, entry: dict) -> FailureRecorded | None:
    short = entry["id"][:12]
    if isinstance(error, KeyboardInterrupt):
        return RunInterrupted(
            f"interrupted: servers stopped; failure entry {short} recorded",
            entry=entry,
            hint=f"ledger show {short}",
        )
    if isinstance(error, Exception):
        return RunFailed(
            f"{describe(error)} — failure entry {short} recorded", entry=entry, hint=f"ledger show {short}"
        )
    return None


@dataclass
class SetupTracker:
    """What the setup failure entry will name: the subject (the experiment's name once it is
    known, its file name before) and the stage (planning, preflight)."""

    subject: str
    stage: str


@contextmanager
def recording_setup_failure(
    ledger: Ledger | None, writer: str, subject: str, stage: str, git: Any = None
) -> Iterator[SetupTracker]:
    """Run the body; a LedgerError is recorded (when a ledger is given) and raised as SetupFailed."""
    tracker = SetupTracker(subject, stage)
    try:
        yield tracker
    except LedgerError as error:
        if ledger is None:
            raise
        entry = record_setup_failure(ledger, writer, tracker.subject, error, tracker.stage, git)
        raise SetupFailed(error, entry) from error
