"""A launch's guard: the watchdog process (``launch.watchdog``) that stops it if this process dies.

    guard = Guard.start(tag="...", cleanup=[...])   # before the server starts
    ...                                               # the server runs, this process may die any way
    guard.release()                                   # after this process stopped the server itself

The guard holds the write end of a pipe and nothing else does (os.pipe's descriptors are not
inherited by exec'd children, and the watchdog gets only the read end), so the watchdog sees end
of file exactly when this process is gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

from recipe_ledger.launch import procs

WATCHDOG_MODULE = "recipe_ledger.launch.watchdog"
_RELEASE_WAIT_S = 5.0


def new_tag() -> str:
    """A fresh launch tag (the value of ``procs.LAUNCH_TAG`` in the server's environment)."""
    return os.urandom(12).hex()


class Guard:
    """One watchdog process and the pipe that keeps it waiting."""

    def __init__(self, popen: subprocess.Popen[bytes], write_fd: int, tag: str | None):
        self._popen = popen
        self._write_fd: int | None = write_fd
        self.tag = tag

    @property
    def pid(self) -> int:
        return self._popen.pid

    @classmethod
    def start(cls, tag: str | None, cleanup: Sequence[str] = (), grace_s: float = 15.0) -> Guard:
        """Start the watchdog of one launch: processes carrying ``tag`` are stopped and ``cleanup``
        runs once this process is gone without having called ``release``."""
        read_fd, write_fd = os.pipe()
        argv = [sys.executable, "-m", WATCHDOG_MODULE, "--parent", str(os.getpid()), "--fd", str(read_fd)]
        argv += ["--grace", f"{grace_s:g}"]
        if tag:
            argv += ["--tag", tag]
        if cleanup:
            argv += ["--", *cleanup]
        try:
            popen = subprocess.Popen(
                argv,
                pass_fds=(read_fd,),
                start_new_session=True,  # not in ledger's group: a kill of that group spares it
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={k: v for k, v in os.environ.items() if k != procs.LAUNCH_TAG},
            )
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        return cls(popen, write_fd, tag)

    def is_watching(self) -> bool:
        return self._write_fd is not None and self._popen.poll() is None

    def release(self) -> None:
        """Tell the watchdog the launch was stopped here; it exits without touching anything."""
        if self._write_fd is None:
            return
        fd, self._write_fd = self._write_fd, None
        try:
            os.write(fd, b"r")
        except OSError:
            pass  # it is gone already (killed by someone): nothing to tell
        finally:
            os.close(fd)
        try:
            self._popen.wait(timeout=_RELEASE_WAIT_S)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.wait()
