"""Why a server did not boot: one exception, and a pure classifier over its log.

The cause is what the ledger records in a ``failure`` entry, so it has to mean the same thing for
every launcher: it is read from the server's own words (its log) and its exit status, never from
which launcher happened to run it.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, get_args

from recipe_ledger.errors import LedgerError, StateError
from recipe_ledger.launch.spec import ServedEngine
from recipe_ledger.redact import redact_text

BootCause = Literal[
    "out_of_memory",
    "timeout",  # the health URL answered (a 503 while loading) but never 200 in time
    "no_answer",  # nothing ever answered the health URL in time: the server never came up
    "crash",
    "rejected_flag",
    "port_in_use",
    "image_missing",
    "docker_unavailable",
    "generate_failed",  # /health said 200, the engine's first real request did not succeed (SGLang)
    "impostor",  # something else bound the port while the server loaded, and answered in its stead
]
BOOT_CAUSES: frozenset[str] = frozenset(get_args(BootCause))
# Causes that say the machine is not ready rather than the server is wrong: outside a run (where
# every boot failure is RunFailed, exit 5) they exit as a StateError does, 3 (`release publish`
# with the docker daemon down, a preflight that finds the port taken).
NOT_READY_CAUSES = frozenset({"docker_unavailable", "image_missing", "port_in_use", "impostor"})
TAIL_LINES = 80

# The exit statuses of a SIGKILL: the kernel's OOM killer (or a container memory limit) sends it.
# A process launcher sees -9 from Popen; docker reports 128 + 9.
_OOM_EXIT_CODES = frozenset({137, -9})

# Out of memory in the words of torch, ROCm and the kernel, whatever the engine; each engine adds
# its own (``ServedEngine.oom_patterns``: vLLM's KV budget, SGLang's static pool).
_OOM_PATTERNS = (
    r"CUDA out of memory",
    r"CUDA error: out of memory",
    r"HIP out of memory",
    r"OutOfMemoryError",  # torch.OutOfMemoryError, torch.cuda.OutOfMemoryError
    r"Cannot allocate memory",  # ENOMEM from pinning / mmap of host offload
)
# argparse's own words: vLLM, SGLang's launch_server (and most Python servers) reject flags through
# it; click's (typer's: transformers serve): "No such option '--x'." (click 8.2+; "No such option:
# --x" before), "Invalid value for '--port': ...", "Got unexpected extra argument (x)".
_REJECTED_FLAG = re.compile(
    r"error: unrecognized arguments|invalid choice:|error: argument --"
    r"|error: the following arguments are required"
    r"|No such option:? '?-|Invalid value for '-|Got unexpected extra arguments? \("
)
# uvicorn's bind error (vLLM and SGLang both serve through it), docker's, and ZeroMQ's: SGLang's
# processes talk over TCP ports of their own, and a leftover server holding them fails the same way.
_PORT_IN_USE = re.compile(r"address already in use|\[Errno 98\]|port is already allocated", re.IGNORECASE)


@functools.lru_cache(maxsize=16)
def _oom(engine_patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join((*_OOM_PATTERNS, *engine_patterns)), re.IGNORECASE)


def classify_boot_failure(
    log_text: str, exit_code: int | None, timed_out: bool, engine: ServedEngine, *, answered: bool = True
) -> BootCause:
    """The cause of a failed boot from the server's log (read with its engine's words too), its
    exit status and whether time ran out.

    Memory comes first: an OOM often surfaces later as a hang or an unrelated-looking crash, and it
    is the cause a person can act on. A deadline that passed only explains the failure when the log
    names nothing more specific.
    """
    if exit_code in _OOM_EXIT_CODES or _oom(tuple(engine.oom_patterns)).search(log_text):
        return "out_of_memory"
    if _REJECTED_FLAG.search(log_text):
        return "rejected_flag"
    if _PORT_IN_USE.search(log_text):
        return "port_in_use"
    if timed_out:
        return "timeout" if answered else "no_answer"
    return "crash"


class BootFailure(LedgerError):
    """The server did not answer its health check: ``cause`` says why, ``log_tail`` shows it."""

    def __init__(
        self,
        cause: BootCause,
        message: str,
        *,
        log_tail: str = "",
        where: str | None = None,
        hint: str | None = None,
        server_exit_code: int | None = None,
    ):
        if cause not in BOOT_CAUSES:
            raise ValueError(f"unknown boot failure cause {cause!r}; expected one of {sorted(BOOT_CAUSES)}")
        self.cause = cause
        self.log_tail = log_tail
        # Not ``exit_code``: that class attribute is the CLI's exit status for every LedgerError.
        self.server_exit_code = server_exit_code
        if cause in NOT_READY_CAUSES:
            self.exit_code = StateError.exit_code
        super().__init__(f"{cause}: {message}", where=where, hint=hint)


def redacted_tail(text: str, lines: int = TAIL_LINES, *, extra_env: Mapping[str, str] | None = None) -> str:
    """The last ``lines`` lines of ``text`` with secrets hidden, including values the launch passed in env."""
    tail = "\n".join(text.splitlines()[-lines:])
    environ = {**os.environ, **(extra_env or {})}
    return redact_text(tail, environ=environ)


def read_log(path: Path, start_offset: int = 0, max_bytes: int = 1 << 20) -> str:
    """This launch's part of a log file (from ``start_offset``), at most its last ``max_bytes``.

    Logs are opened in append mode so a retried launch never overwrites an earlier one's log;
    the offset keeps one launch from being judged by another's words.
    """
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(start_offset, size - max_bytes))
            return handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def hint_for(cause: BootCause, log_path: Path, port: int, engine: ServedEngine) -> str:
    """The next command a person should run for each cause (for memory, in the engine's knobs)."""
    return {
        "out_of_memory": f"tail -n 80 {log_path}  # then {engine.memory_hint}",
        "generate_failed": f"tail -n 80 {log_path}  # /health answered, the first real request failed",
        "rejected_flag": f"tail -n 80 {log_path}  # the flag is not known to this server version",
        "port_in_use": f"ss -ltnp 'sport = :{port}'",
        "impostor": f"ss -ltnp 'sport = :{port}'  # stop what holds the port, then run again",
        "timeout": f"tail -n 80 {log_path}  # or raise health_timeout_s if the boot was still progressing",
        "no_answer": f"tail -n 80 {log_path}  # nothing answered on port {port}: a wrong --port, a"
        " server that serves no health path, or one still loading (raise health_timeout_s)",
        "crash": f"tail -n 200 {log_path}",
    }.get(cause, f"tail -n 80 {log_path}")
