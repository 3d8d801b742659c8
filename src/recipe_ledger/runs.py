"""The run folder, ``runs/<run_id>/``: its paths, its versioned files, and how they are read.

A run (``ledger run``, ``ledger calibrate``, ``ledger reproduce``) keeps its raw outputs here; the
ledger entry references them by content hash. The folder holds:

- ``plan.json``: what was going to run (experiment, box, arms, schedule);
- ``measurements.jsonl``: one record per (arm, repeat, point, instrument), rewritten whole after
  every launch so that a failed run keeps what it measured;
- ``calibration.jsonl``: the same records for the A/A launches of the control;
- ``summary.json``: the experiment record of the result entry;
- ``raw/`` and ``server-*.log``: the instruments' own files and the server logs (their writers own
  their format; this module only names the folder);
- ``lock.json``: while the run is under way, who runs it (pid, the process's start identity, host,
  writer, git stamp), held with ``flock`` by that process for its whole life and removed when the
  run has its entry. A lock whose process is gone (``kill -9``, a crash, a reboot) marks an
  **abandoned** run: ``claim_abandoned`` hands it to the one command that records its failure.

**Secrets and paths.** Every file this module writes is redacted first (``redact``): plan.json and
summary.json hold the arms' argv and env, and evidence/ commits exactly these files. The server and
client logs reach their files through ``redact.LogPipe`` (each line redacted as it is written, so a
run killed with -9 leaves nothing raw); ``redact_logs`` rewrites every log once more when the run is
over, for the files a client wrote itself (its own log folder) and rules that came later. Every
path built from a name that came from a spec (an arm, a run id) goes through ``paths.contained``,
which refuses one that would leave its folder.

**Versions.** A JSONL file starts with a header line ``{"format": "recipe-ledger/measurements",
"version": 1}``; a JSON file carries a top-level ``format_version``. Files written before the run
folder had an owner (the committed ``evidence/*/`` folders) have no header: they read as
**version 0**, whose records have exactly the layout of version 1. A version newer than this tool
is refused, never half-read.

**Reading policy** (one for every reader): a line that is not a JSON object, a torn last line
included (a run killed mid-write), is never skipped silently. ``read_records`` returns the good
records *and* a ``Problem`` per bad line (file:line and why); a caller either raises
(``RecordsFile.raise_if_problems``) or shows them to the person (``ledger mlflow sync`` does).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import re
import socket
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.instruments.base import sha256_file
from recipe_ledger.launch import procs
from recipe_ledger.paths import contained, no_links, write_text_atomic
from recipe_ledger.redact import redact_obj, redact_text

RUNS_DIRNAME = "runs"
PLAN = "plan.json"
MEASUREMENTS = "measurements.jsonl"
CALIBRATION = "calibration.jsonl"
SUMMARY = "summary.json"
SEQUENCE = "sequence.json"  # the sequential design's state: every launch and look (pipeline.sequence)
TIMINGS = "timings.json"  # where the wall time went, per step; not pinned by the entry
LOCK = "lock.json"  # who runs it, while it runs (not pinned: it is gone once the run has its entry)
RAW = "raw"
HASHED_FILES = (PLAN, MEASUREMENTS, CALIBRATION, SEQUENCE, SUMMARY)  # what an entry's ``artifacts`` pins

RECORDS_FORMAT = "recipe-ledger/measurements"
RECORDS_VERSION = 1
JSON_VERSION = 1  # plan.json and summary.json
LEGACY_VERSION = 0  # no header: written before the run folder was versioned (same layout as 1)

# A run id names a folder: entries arrive from other boxes through git, so one must never name a
# path outside runs/ ("..", "a/b", an absolute path).
_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def runs_dir(repo: Path) -> Path:
    """Where the run folders of the repository ``repo`` live."""
    return repo / RUNS_DIRNAME


def is_run_id(name: object) -> bool:
    """Whether ``name`` can name a run folder (a plain name, no path parts)."""
    return isinstance(name, str) and _RUN_ID.fullmatch(name) is not None


def run_dir(repo: Path, run_id: str) -> Path:
    """The folder of run ``run_id`` under ``repo``; an InputError for a name that is not a run id,
    or when ``runs/`` or the folder is a symlink (paths.no_links)."""
    if not is_run_id(run_id):
        raise InputError(f"{run_id!r} is not a run id", where=str(runs_dir(repo)))
    return no_links(repo, RUNS_DIRNAME, run_id, what="a run folder")


def create(runs_root: Path, run_id: str) -> Path:
    """Make ``runs_root/run_id`` (and its ``raw/``) and return it. ``runs_root`` (``runs/``), the
    run folder and ``raw/`` are real folders of the project (``runs_root``'s parent) or refused:
    a ``runs/`` linked elsewhere would receive the run's logs and raw outputs outside the project."""
    if not is_run_id(run_id):
        raise InputError(f"{run_id!r} is not a run id", where=str(runs_root))
    project = runs_root.parent
    no_links(project, runs_root.name, run_id, RAW, what="a run folder")
    folder = contained(runs_root, run_id)
    (folder / RAW).mkdir(parents=True, exist_ok=True)
    no_links(project, runs_root.name, run_id, RAW, what="a run folder")  # none appeared meanwhile
    return folder


# -- writing -----------------------------------------------------------------------------------


def records_text(records: Iterable[str | Mapping[str, Any]]) -> str:
    """A records file's content: the header line, then one JSON object per line."""
    header = json.dumps({"format": RECORDS_FORMAT, "version": RECORDS_VERSION}, sort_keys=True)
    # Redacted as objects, not as text: a marker must never land inside the JSON syntax.
    objects = (json.loads(r) if isinstance(r, str) else r for r in records)
    lines = [json.dumps(redact_obj(r), sort_keys=True) for r in objects]
    return "".join(line + "\n" for line in [header, *lines])


def write_records(path: Path, records: Iterable[str | Mapping[str, Any]]) -> None:
    """Write ``measurements.jsonl`` / ``calibration.jsonl``: records as JSON text or as mappings."""
    write_text_atomic(path, records_text(records))


def write_json(path: Path, document: Mapping[str, Any]) -> None:
    """Write ``plan.json`` / ``summary.json`` (redacted) with this tool's ``format_version``."""
    redacted = redact_obj(dict(document))
    write_text_atomic(
        path, json.dumps({**redacted, "format_version": JSON_VERSION}, indent=2, sort_keys=True)
    )


LOG_SUFFIX = ".log"


def redact_logs(folder: Path, launched_env: Mapping[str, str] | None = None) -> list[Path]:
    """Rewrite every ``*.log`` under the run folder redacted; return those that changed.

    A log whose hash a record pins (``raw_file``: the ``command`` instrument's stdout) is left as
    it is, since rewriting it would break the hash; the server and client logs are pinned by
    nothing. A log that is not UTF-8 is redacted with its odd bytes replaced: a log is for
    reading, and a secret must not survive in it. ``launched_env`` is the environment the servers
    were given (the arms' env): a value of a secret-named variable there is hunted verbatim too,
    since a server may print it without its name."""
    environ = {**os.environ, **(launched_env or {})}
    pinned = _pinned_files(folder)
    changed = []
    for path in sorted(folder.rglob(f"*{LOG_SUFFIX}")):
        if not path.is_file() or path.is_symlink() or path.relative_to(folder).as_posix() in pinned:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        clean = redact_text(text, environ=environ)
        if clean != text:
            write_text_atomic(path, clean)
            changed.append(path)
    return changed


def _pinned_files(folder: Path) -> set[str]:
    """The run-folder-relative paths the records pin by hash (their ``raw_file``)."""
    pinned = set()
    for name in (MEASUREMENTS, CALIBRATION):
        if (folder / name).is_file():
            pinned |= {str(r.get("raw_file")) for r in read_records(folder / name).records}
    return pinned


def artifact_hashes(folder: Path) -> dict[str, str]:
    """The content hashes of the run folder's own files that exist: what an entry pins."""
    return {name: sha256_file(folder / name) for name in HASHED_FILES if (folder / name).is_file()}


# -- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One line of a run-folder file that could not be read."""

    path: Path
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.why}"


@dataclass
class RecordsFile:
    """What ``read_records`` found: the good records, the bad lines, and the file's version."""

    path: Path
    version: int
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def raise_if_problems(self) -> list[dict[str, Any]]:
        """The records, or an InputError naming the first bad line (and how many more there are)."""
        if self.problems:
            first = self.problems[0]
            more = f" (and {len(self.problems) - 1} more bad lines)" if len(self.problems) > 1 else ""
            raise InputError(
                f"{first.why}{more}",
                where=f"{first.path}:{first.line}",
                hint=f"look at {first.path}: a run killed mid-write leaves a torn last line",
            )
        return self.records


def _newer(path: Path, version: int, where: str) -> StateError:
    return StateError(
        f"run-folder format version {version} is newer than this tool reads; nothing was read",
        where=where,
        hint="pip install -U recipe-ledger",
    )


def _header_version(path: Path, first: object) -> int | None:
    """The version a header line gives; None when the line is a record (a file with no header)."""
    if not isinstance(first, dict) or first.get("format") != RECORDS_FORMAT:
        return None
    version = first.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(f"header has no valid version: {version!r}", where=f"{path}:1")
    if version > RECORDS_VERSION:
        raise _newer(path, version, f"{path}:1")
    return version


def _json_reason(error: ValueError) -> str:
    """Why a text is not JSON. Most failures are a JSONDecodeError (its message, without the
    position); a few are a plain ValueError (an integer over Python's digit limit) or a
    UnicodeDecodeError (a file that is not UTF-8), which carry only their text."""
    if isinstance(error, json.JSONDecodeError):
        return error.msg
    return str(error)


def _parse_line(path: Path, number: int, line: str, last: bool) -> tuple[Any, Problem | None]:
    try:
        value = json.loads(line)
    except ValueError as error:
        why = "torn last line (the run stopped mid-write?)" if last else f"not JSON ({_json_reason(error)})"
        return None, Problem(path, number, why)
    if not isinstance(value, dict):
        return None, Problem(path, number, f"expected a JSON object, got {type(value).__name__}")
    return value, None


def read_records(path: Path) -> RecordsFile:
    """Every record of a ``measurements.jsonl`` / ``calibration.jsonl``, with its bad lines.

    Blank lines are not records and not problems. A file with no header is version 0."""
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    ends_with_newline = lines[-1] == ""
    if ends_with_newline:
        lines.pop()
    out = RecordsFile(path, LEGACY_VERSION)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        last = index == len(lines) - 1 and not ends_with_newline
        value, problem = _parse_line(path, index + 1, line, last)
        if problem:
            out.problems.append(problem)
            continue
        if index == 0:
            version = _header_version(path, value)
            if version is not None:
                out.version = version
                continue
        out.records.append(value)
    return out


def read_json(path: Path) -> dict[str, Any]:
    """``plan.json`` / ``summary.json`` as a dict (``format_version`` removed); an InputError
    naming the file when it is not a JSON object, a StateError when it is newer than this tool."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise InputError(f"not JSON ({error.msg}, line {error.lineno})", where=str(path)) from None
    except ValueError as error:
        raise InputError(f"not JSON ({error})", where=str(path)) from None
    if not isinstance(document, dict):
        raise InputError(f"expected a JSON object, got {type(document).__name__}", where=str(path))
    version = document.pop("format_version", LEGACY_VERSION)
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(f"format_version must be an integer, got {version!r}", where=str(path))
    if version > JSON_VERSION:
        raise _newer(path, version, str(path))
    return document


# -- the lock of a run under way ---------------------------------------------------------------


@dataclass(frozen=True)
class Owner:
    """What a run's lock says about the process running it."""

    pid: int
    identity: str  # procs.identity(pid) when the lock was taken: a reused pid does not match
    host: str
    writer: str
    started: str  # UTC, ISO 8601
    git: dict[str, Any] | None

    def is_gone(self) -> bool:
        """Whether the process that took the lock is gone (only judged on the host that took it)."""
        return self.host == socket.gethostname() and procs.is_same_process(self.pid, self.identity) is False


class RunLock:
    """A lock file held open (and ``flock``-ed) by the process that owns it; ``release`` removes it."""

    def __init__(self, path: Path, fd: int, owner: Owner):
        self.path = path
        self.owner = owner
        self._fd: int | None = fd

    def release(self) -> None:
        """Remove the lock: the run has its entry (or another command recorded it abandoned)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)  # closing releases the flock

    def let_go(self) -> None:
        """Stop holding the lock but leave it in place (a claim whose recording failed: the next
        command tries again)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def take_lock(folder: Path, writer: str, git: Mapping[str, Any] | None) -> RunLock:
    """Lock the run folder for this process until ``release`` (or its death, which the next
    command notices). A StateError when another live process holds it."""
    path = folder / LOCK
    if path.exists():
        # A live owner, or an abandoned try whose failure is not recorded yet (pipeline.abandoned
        # records it at the start of every command that runs, before any lock is taken).
        raise StateError(
            "this run folder is locked by another run (live, or abandoned and not yet recorded)",
            where=str(path),
            hint=f"cat {path}  # `ledger show` or `ledger run` record an abandoned one first",
        )
    # Written whole and locked under a temporary name, then renamed: a reader never sees a lock file
    # that is empty or not yet held (the flock belongs to the inode, which the rename keeps).
    temp = folder / f".{LOCK}.{os.getpid()}.tmp"
    fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    owner = Owner(
        pid=os.getpid(),
        identity=procs.identity(os.getpid()) or "",
        host=socket.gethostname(),
        writer=writer,
        started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        git=dict(git) if git is not None else None,
    )
    document = {**owner.__dict__, "format_version": JSON_VERSION}
    try:
        os.pwrite(fd, json.dumps(redact_obj(document), indent=2, sort_keys=True).encode(), 0)
        os.fsync(fd)
        os.replace(temp, path)
    except BaseException:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    return RunLock(path, fd, owner)


def _owner_of(fd: int, path: Path) -> Owner | None:
    """The owner a lock file names, or None when it cannot be read as one."""
    try:
        document = json.loads(os.pread(fd, 1 << 16, 0).decode("utf-8"))
        return Owner(
            pid=int(document["pid"]),
            identity=str(document["identity"]),
            host=str(document["host"]),
            writer=str(document["writer"]),
            started=str(document["started"]),
            git=document.get("git"),
        )
    except (ValueError, KeyError, TypeError):
        return None


def locked_runs(runs_root: Path) -> Iterator[Path]:
    """Every run folder under ``runs_root`` that holds a lock (a run under way, or abandoned)."""
    if not runs_root.is_dir() or runs_root.is_symlink():
        return
    for lock in sorted(runs_root.glob(f"*/{LOCK}")):
        if lock.is_file() and not lock.is_symlink() and is_run_id(lock.parent.name):
            yield lock.parent


def claim_abandoned(folder: Path) -> RunLock | None:
    """The lock of ``folder`` when its owner is gone, now held by this process (which records the
    failure and then releases it); None when the run is alive, already claimed by another command,
    or already recorded. Two commands racing for one abandoned run: exactly one gets it."""
    path = folder / LOCK
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None  # its owner runs, or another command is recording it now
    try:
        current = os.stat(path)
    except FileNotFoundError:
        current = None
    if current is None or current.st_ino != os.fstat(fd).st_ino:
        os.close(fd)  # released (removed) by whoever held it before us: recorded already
        return None
    owner = _owner_of(fd, path)
    if owner is None or not owner.is_gone():
        os.close(fd)  # alive, on another host, or a lock nobody can read: never judged abandoned
        return None
    return RunLock(path, fd, owner)
