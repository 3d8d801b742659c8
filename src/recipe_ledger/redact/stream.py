"""Logs redacted as they are written: a child's output reaches its file only through the redactor.

A server's log (``runs/<id>/server-*.log``) and a client's (``raw/*.stdout.log``, ``*.client.log``)
were once written by the processes themselves and redacted when the run ended; a run killed with
``kill -9`` never got there and left ``DB_PASSWORD=...`` on disk. Now the child writes into a pipe
(``LogPipe``), and a reader thread of this process hands every line to ``RedactedLog``, which
appends it redacted. Whatever the parent's death, the file never held a raw line: what was still in
the pipe or in memory is lost with it, which is the point.

What a line is redacted against: the rules of ``rules`` plus the values of the secret-named
variables of ``secrets`` (the arm's environment, given to the launched process) and of this
process's environment, hunted verbatim whatever their shape (a ``DB_PASSWORD`` of plain words).

Two things need more than one line, and are kept across lines:

- a token split by a line break: each line is redacted together with the next one (one line is
  held back until the next arrives, or ``HOLD_S`` of silence, or the end), and the marker a split
  token leaves keeps the line count (``rules._mask_joined``);
- a PEM private key block: from its ``BEGIN`` line to its ``END`` line every line is a marker.

A partial line (no newline yet) waits in memory for its end; one longer than ``MAX_LINE`` bytes is
cut there. Bytes that are not UTF-8 are replaced (a log is for reading).
"""

from __future__ import annotations

import os
import re
import select
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from recipe_ledger.redact.rules import MARK, text_redactor

HOLD_S = 0.2  # how long a complete line waits for the next one (a token split across the two)
MAX_LINE = 1 << 16  # a partial line longer than this is written out as a line of its own
_READ = 1 << 16
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")


class RedactedLog:
    """Appends text to ``path`` a line at a time, each line redacted before it is written.

    ``write(data)`` takes bytes in any chunking (a pipe's reads, docker's log stream); ``close()``
    writes what is held and closes the file. Not for two writers at once (one reader feeds it)."""

    def __init__(self, path: Path, secrets: Mapping[str, str] | None = None):
        self.path = path
        self._redact = text_redactor({**os.environ, **(secrets or {})})
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._partial = b""
        self._held: str | None = None
        self._in_pem = False

    def write(self, data: bytes) -> None:
        self._partial += data
        while True:
            end = self._partial.find(b"\n")
            if end < 0:
                if len(self._partial) > MAX_LINE:
                    end = MAX_LINE - 1
                else:
                    return
            line, self._partial = self._partial[: end + 1], self._partial[end + 1 :]
            self._line(line.rstrip(b"\n").decode("utf-8", errors="replace"))

    def flush_held(self) -> None:
        """Write the held line alone (nothing came after it for a while)."""
        if self._held is not None:
            held, self._held = self._held, None
            self._emit(self._redact(held))

    def close(self) -> None:
        if self._fd < 0:
            return
        if self._partial:
            self._line(self._partial.decode("utf-8", errors="replace"))
            self._partial = b""
        self.flush_held()
        os.close(self._fd)
        self._fd = -1

    def _line(self, line: str) -> None:
        if self._in_pem:
            end = _PEM_END.search(line)
            if end is None:
                self._emit(MARK)
                return
            self._in_pem = False
            line = MARK + line[end.end() :]  # what follows the block is a line like any other
        else:
            begin = _PEM_BEGIN.search(line)
            if begin is not None and not _PEM_END.search(line, begin.end()):
                self._joined(line[: begin.start()] + MARK)
                self.flush_held()
                self._in_pem = True
                return
        self._joined(line)

    def _joined(self, line: str) -> None:
        if self._held is None:
            self._held = line
            return
        pair = self._redact(self._held + "\n" + line)
        first, newline, second = pair.partition("\n")
        if not newline or "\n" in second:  # a rule changed the line count: redact them apart
            first, second = self._redact(self._held), line
        self._emit(first)
        self._held = second  # redacted with the line before it; redacted again with the next

    def _emit(self, line: str) -> None:
        data = (line + "\n").encode("utf-8")
        while data:
            data = data[os.write(self._fd, data) :]


class LogPipe:
    """A pipe for a child's stdout and stderr whose reader thread writes them to ``path`` redacted.

    Give ``child_fd`` to ``subprocess.Popen`` (``stdout=``), then call ``started()`` (this process
    closes its copy of the child's end and the reader starts), and ``close()`` once the child and
    every process that inherited the pipe have exited (the reader drains it to its end)."""

    def __init__(self, path: Path, secrets: Mapping[str, str] | None = None):
        self.log = RedactedLog(path, secrets)
        self._read_fd, self.child_fd = os.pipe()
        self._thread = threading.Thread(target=self._pump, name=f"log:{path.name}", daemon=True)

    def started(self) -> None:
        if self.child_fd >= 0:
            os.close(self.child_fd)
            self.child_fd = -1
        if self._thread.ident is None:
            self._thread.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Wait for the reader to reach the end of the pipe (``timeout_s``: a grandchild that kept
        the pipe open does not hold the run), then close the log."""
        self.started()
        self._thread.join(timeout_s)  # the reader closes the log at the pipe's end

    def _pump(self) -> None:
        poller = select.poll()  # not select.select: a busy process may hand out fds past 1024
        poller.register(self._read_fd, select.POLLIN)
        try:
            while True:
                if not poller.poll(HOLD_S * 1000):
                    self.log.flush_held()
                    continue
                data = os.read(self._read_fd, _READ)
                if not data:
                    break
                self.log.write(data)
        finally:
            os.close(self._read_fd)
            self.log.close()


class IdleFlushedLog:
    """A ``RedactedLog`` fed from a blocking source (docker's log stream, read in a loop that only
    returns when output comes): a ticker writes the held line after ``HOLD_S`` of silence, as
    ``LogPipe``'s reader does, so the log's last line is on disk while the server is quiet."""

    def __init__(self, path: Path, secrets: Mapping[str, str] | None = None):
        self.log = RedactedLog(path, secrets)
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._done = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name=f"log-idle:{path.name}", daemon=True)
        self._ticker.start()

    def write(self, data: bytes) -> None:
        with self._lock:
            self.log.write(data)
            self._last = time.monotonic()

    def close(self) -> None:
        self._done.set()
        self._ticker.join()
        with self._lock:
            self.log.close()

    def _tick(self) -> None:
        while not self._done.wait(HOLD_S):
            with self._lock:
                if time.monotonic() - self._last >= HOLD_S:
                    self.log.flush_held()
