"""Launch a server as a local process group (``vllm serve ...`` from a venv, or any command).

Every launch has a guard (``launch.guard``): a watchdog started before the server that stops the
server's processes (found by the launch tag in their environment) if this process dies without
stopping them, ``kill -9`` included. Readiness ends with the ownership check (``launch.owner``):
the socket listening on the port must be held by a process of this launch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from recipe_ledger.errors import InputError
from recipe_ledger.launch import owner, procs
from recipe_ledger.launch.guard import Guard, new_tag
from recipe_ledger.launch.ports import connect_host, ensure_port_free
from recipe_ledger.launch.server import RunningServer
from recipe_ledger.launch.spec import LaunchSpec
from recipe_ledger.redact import LogPipe

DEFAULT_STOP_GRACE_S = 15.0
_KILL_CONFIRM_S = 5.0


class ProcessServer(RunningServer):
    """A server running as the leader of its own process group (its workers are in the group too)."""

    def __init__(
        self,
        spec: LaunchSpec,
        popen: subprocess.Popen[bytes],
        log_start_offset: int,
        stop_grace_s: float,
        guard: Guard | None = None,
    ):
        self._popen = popen
        self.pid = popen.pid
        self.pgid = popen.pid  # start_new_session=True: the leader's pid is the group id
        self._stop_grace_s = stop_grace_s
        self.guard = guard
        super().__init__(spec, log_start_offset)

    log_pipe: LogPipe | None = None  # the reader that writes the log (redacted), drained at stop

    def exit_code(self) -> int | None:
        return self._popen.poll()

    def ownership_problem(self) -> str | None:
        """Whether the socket on the port is held by this launch's processes (``launch.owner``)."""
        tag = self.guard.tag if self.guard is not None else None
        return owner.ownership_problem(connect_host(self.spec.host), self.spec.port, [self.pid], tag)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            if self.log_pipe is not None:
                self.log_pipe.close()  # the group is gone: the last lines reach the file before it is read

    def _terminate(self) -> None:
        # vLLM spawns engine and worker processes; signalling the group reaches them all, and
        # waiting for the group (not only the leader) is what "nothing of it remains" means.
        try:
            deadline = time.monotonic() + self._stop_grace_s
            _signal_group(self.pgid, signal.SIGTERM)
            _wait_leader(self._popen, deadline)
            if not _wait_group_gone(self.pgid, deadline):
                _signal_group(self.pgid, signal.SIGKILL)
            _wait_leader(self._popen, time.monotonic() + _KILL_CONFIRM_S)
            if not _wait_group_gone(self.pgid, time.monotonic() + _KILL_CONFIRM_S):
                raise ProcessLookupError(f"process group {self.pgid} survived SIGKILL")
        finally:
            if self.guard is not None:
                self.guard.release()  # stopped here (or unstoppable by anyone): the watchdog may go


class ProcessLauncher:
    """Starts ``spec.argv`` in a new session with ``spec.env`` over this process's environment."""

    def __init__(self, stop_grace_s: float = DEFAULT_STOP_GRACE_S):
        self.stop_grace_s = stop_grace_s

    def start(self, spec: LaunchSpec) -> ProcessServer:
        """A healthy server, or ``BootFailure`` (after teardown); never leaves a process behind."""
        if spec.is_docker:
            raise InputError(
                f"the spec names image {spec.image!r}: it is meant for the docker launcher",
                where="LaunchSpec.image",
                hint="use DockerLauncher, or set image=None for a local process",
            )
        ensure_port_free(spec.host, spec.port)
        # The guard first: a server that exists is always watched, even if this process dies
        # between starting it and noting its pid.
        guard = Guard.start(new_tag(), grace_s=self.stop_grace_s)
        server: ProcessServer | None = None
        try:
            server = self._spawn(spec, guard)
            server.wait_until_ready()
            return server
        except BaseException:
            # Also on KeyboardInterrupt while waiting: a half-started server must not outlive start().
            if server is not None:
                server.stop_quietly()
            else:
                guard.release()
            raise

    def _spawn(self, spec: LaunchSpec, guard: Guard) -> ProcessServer:
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_start_offset = _log_size(spec.log_path)
        # The tag every process of this launch inherits: what the watchdog finds them by.
        tagged_env = {procs.LAUNCH_TAG: guard.tag or ""}
        # Append, never truncate: a retried launch keeps the earlier attempt's log. The server
        # writes into a pipe whose reader redacts each line before it reaches the file
        # (redact.stream): a `ledger run` killed with -9 leaves no raw secret in the log.
        log_pipe = LogPipe(spec.log_path, spec.env)
        try:
            popen = subprocess.Popen(
                list(spec.argv),
                env=os.environ | dict(spec.env) | tagged_env,
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=log_pipe.child_fd,
                stderr=subprocess.STDOUT,
            )
        finally:
            log_pipe.started()
        server = ProcessServer(spec, popen, log_start_offset, self.stop_grace_s, guard)
        server.log_pipe = log_pipe
        return server


def group_is_gone(pgid: int) -> bool:
    """True when no live process is left in group ``pgid`` (zombies awaiting a reaper do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return not _live_members_in_proc(pgid)


def _live_members_in_proc(pgid: int) -> bool:
    proc = Path("/proc")
    if not proc.is_dir():
        return True  # no way to tell zombies apart: the group exists
    for stat_file in proc.glob("[0-9]*/stat"):
        try:
            # Fields after the command (which may hold spaces) start after the last ')'.
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            return True
    return False


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def _wait_leader(popen: subprocess.Popen[bytes], deadline: float) -> None:
    try:
        popen.wait(timeout=max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        pass


def _wait_group_gone(pgid: int, deadline: float) -> bool:
    delay = 0.01
    while not group_is_gone(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    return True


def _log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
