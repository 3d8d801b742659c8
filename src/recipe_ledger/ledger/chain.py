"""One writer's hash chain: the byte layout of a line, atomic appends, tail repair.

A line is the canonical JSON of the entry *body* (sorted keys, no spaces, ASCII only, no NaN)
with the entry's id spliced in front::

    {"id":"<64 hex>","git":...,"kind":"note","payload":{...},"prev":"<id>|null","refs":[...],"seq":7,...}\\n

and ``id = sha256(canonical body)``. Because the id always sits at the same byte offsets, a
verifier hashes the exact stored bytes (``"{" + line[73:]``) without re-serializing anything, so
number formatting or a JSON library's whims can never make a valid ledger fail to verify, and a
single changed byte anywhere in a line changes the hash. ``prev`` links every line to the one
before it in the same file and ``seq`` counts from 0, so a removed, reordered or inserted line
breaks the chain.

Appends are serialized across processes with ``flock`` on the chain file, written with
``O_APPEND`` and made durable with ``fsync`` before the lock is released. A process killed in the
middle of a write leaves a prefix of one line without its newline (a *torn tail*); the next append
refuses to build on it and ``repair_tail`` moves those bytes to a quarantine file, deleting none.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import hashlib
import json
import os
import signal
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson  # parses a line ~3x faster than json: verify and log at 100k entries are mostly parsing

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.spec.bounds import MAX_ENTRY_BYTES

ID_HEX = 64
ID_PREFIX = b'{"id":"'
ID_START = len(ID_PREFIX)  # 7
ID_END = ID_START + ID_HEX  # 71
BODY_START = ID_END + 2  # after the '",' that closes the id
# Entries stay small: raw outputs are files referenced by content hash, never inlined.
MAX_LINE_BYTES = MAX_ENTRY_BYTES  # the experiment spec's text is checked against it at load

# Test hook, set only by the crash tests in a child process: (chunk_size, fraction in [0, 1]).
# The appender then writes its line in chunks and SIGKILLs itself once round(fraction * length)
# bytes are out (1.0: the whole line, before fsync), which is how the tests prove that a kill at
# any byte offset leaves either the whole entry or a torn tail.
_fault: tuple[int, float] | None = None


def canonical(obj: Any) -> bytes:
    """The one serialization the ledger hashes: sorted keys, compact, ASCII, finite numbers."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode(
        "ascii"
    )


def encode_line(body: dict[str, Any]) -> tuple[str, bytes]:
    """The id and the stored line (newline included) of an entry body."""
    raw = canonical(body)
    entry_id = hashlib.sha256(raw).hexdigest()
    return entry_id, ID_PREFIX + entry_id.encode("ascii") + b'",' + raw[1:] + b"\n"


def line_hash_problem(line: bytes) -> str | None:
    """Why a stored line (without its newline) does not match its own id, or None if it does."""
    if not line.startswith(ID_PREFIX) or line[ID_END:BODY_START] != b'",':
        return "not an entry line (it does not start with its id)"
    digest = hashlib.sha256(b"{" + line[BODY_START:]).hexdigest()
    if digest.encode("ascii") != line[ID_START:ID_END]:
        return "content does not match its id (a byte of this line was changed)"
    return None


_DECODER = json.JSONDecoder()


def parse_line(text: str | bytes) -> object:
    """One stored line as a JSON value (ValueError if it is not exactly one JSON value).

    orjson first; json for what orjson refuses but JSON allows (integers beyond 64 bits), so the
    two agree on every line this tool writes and json has the last word on hand-made ones.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    value, end = _DECODER.raw_decode(text)
    if end != len(text):
        raise ValueError("trailing data after the JSON value")
    return value


def split_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """(complete lines without their newlines, torn bytes after the last newline).

    Lines stay bytes: the hash is over bytes and orjson parses bytes, so nothing is decoded twice.
    """
    lines = data.split(b"\n")
    torn = lines.pop()
    return lines, torn


class _Pause:
    keep = False


@contextlib.contextmanager
def no_gc() -> Iterator[_Pause]:
    """Pause the cyclic garbage collector while loading many small dicts.

    JSON entries hold no reference cycles; without this, CPython re-scans every live entry each
    time a generation fills, which halves read speed at 100k entries. A caller that keeps a large
    load alive sets ``pause.keep``: the objects are then moved out of the collector's sight with
    ``gc.freeze`` so re-enabling it does not set off one full scan of them all (refcounting still
    frees them).
    """
    pause = _Pause()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield pause
    finally:
        if pause.keep:
            gc.freeze()
        if was_enabled:
            gc.enable()


def read_locked(path: Path, also: Callable[[], Any]) -> tuple[bytes, Any]:
    """A chain's bytes and ``also()`` read under a shared lock: no append is half-way meanwhile
    (verify reads a chain with its signed head this way, so the two always match)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0) if size else b""
        return data, also()
    finally:
        os.close(fd)


def utc_now() -> str:
    """The timestamp format of every entry: UTC, microseconds, a trailing Z."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def read_tail(fd: int) -> tuple[bytes, bytes]:
    """(last complete line without its newline, torn bytes after the last newline) of an open file."""
    size = os.fstat(fd).st_size
    block = 64 * 1024
    while True:
        start = max(0, size - block)
        data = os.pread(fd, size - start, start)
        last_nl = data.rfind(b"\n")
        prev_nl = data.rfind(b"\n", 0, max(last_nl, 0))
        # Read further back until the last complete line is wholly inside the block.
        if start > 0 and (last_nl == -1 or prev_nl == -1):
            block *= 4
            continue
        if last_nl == -1:
            return b"", data
        return data[prev_nl + 1 : last_nl], data[last_nl + 1 :]


def head_of(line: bytes, where: str) -> dict[str, Any]:
    """The parsed last line of a chain, checked against its id so nobody chains onto a forgery."""
    problem = line_hash_problem(line)
    if problem:
        raise StateError(f"last line {problem}", where=where, hint="ledger verify")
    return json.loads(line)


def append_line(
    path: Path,
    make_line: Callable[[dict[str, Any] | None], bytes],
    *,
    durable: bool = True,
    after_write: Callable[[bytes], None] | None = None,
) -> bytes:
    """Append the line ``make_line(last_entry_or_None)`` to the chain at ``path``, atomically.

    ``make_line`` runs under the lock, so the seq/prev it reads from the last entry cannot be taken
    by a concurrent appender: two processes can never fork a chain. ``after_write(line)`` runs
    under the same lock once the line is durable (signing the new head: two appenders must not
    sign their heads out of order).
    """
    created = not path.exists()
    fd = _open_no_follow(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        line = make_line(_current_head(fd, path))
        _write_all(fd, line)
        if durable:
            os.fsync(fd)
        if after_write is not None:
            after_write(line)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
    if created and durable:
        fsync_dir(path.parent)
    return line


def _open_no_follow(path: Path, flags: int) -> int:
    """``os.open`` for writing that refuses a symlink as the file itself (O_NOFOLLOW): the store
    checks the path first, and this closes the gap between that check and the open."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
        raise InputError(
            f"{path} is a symlink: the ledger is written only into its own files, never through a link",
            where=str(path),
            hint="replace the link by the real file, then run the command again",
        ) from None


def _current_head(fd: int, path: Path) -> dict[str, Any] | None:
    last, torn = read_tail(fd)
    if torn:
        raise StateError(
            f"torn last line ({len(torn)} bytes without a newline): an earlier append was interrupted",
            where=str(path),
            hint="ledger verify --repair",
        )
    return head_of(last, f"{path}:last line") if last else None


def _write_all(fd: int, data: bytes) -> None:
    if _fault is not None:
        _write_with_fault(fd, data, *_fault)
        return
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_with_fault(fd: int, data: bytes, chunk: int, fraction: float) -> None:
    kill_after, written = round(fraction * len(data)), 0
    while True:
        if written >= kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        if written >= len(data):
            return
        written += os.write(fd, data[written : written + min(chunk, kill_after - written)])


def fsync_dir(directory: Path) -> None:
    """Make a file's creation (its directory entry) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def repair_tail(path: Path, quarantine: Path) -> int:
    """Move a torn tail of ``path`` to the end of ``quarantine``; return how many bytes moved.

    The bytes are written and fsynced to the quarantine file *before* the chain is truncated, so a
    crash in between leaves them in both places, never in neither.
    """
    fd = _open_no_follow(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _, torn = read_tail(fd)
        if not torn:
            return 0
        size = os.fstat(fd).st_size
        _quarantine(quarantine, path, size - len(torn), torn)
        os.ftruncate(fd, size - len(torn))
        os.fsync(fd)
        return len(torn)
    finally:
        os.close(fd)


def _quarantine(quarantine: Path, source: Path, offset: int, torn: bytes) -> None:
    # A header line, then the raw bytes and a newline. Torn bytes never hold a newline (they are
    # what follows the last one), so every record stays unambiguous and byte-exact.
    quarantine.parent.mkdir(parents=True, exist_ok=True)
    header = f"# {utc_now()} torn tail of {source.name} at offset {offset}, {len(torn)} bytes\n"
    fd = _open_no_follow(quarantine, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        _write_all(fd, header.encode("utf-8") + torn + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(quarantine.parent)
