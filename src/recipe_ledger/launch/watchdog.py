"""The watchdog: a small process that stops a launch when the ``ledger`` that started it dies.

    python -m recipe_ledger.launch.watchdog --parent PID --fd N --tag TAG [--grace S] [-- CLEANUP...]

``launch.guard`` starts one per launch, *before* the server, in a session of its own (a kill of
ledger's process group or a Ctrl-C in its terminal does not reach it), holding the read end of a
pipe whose write end only ledger holds. It waits for one of two things:

- a byte on the pipe: ledger stopped the server itself and releases the watchdog, which exits;
- end of file on the pipe, or its parent pid changing (it was reparented): ledger is gone, by
  ``kill -9`` as much as by a crash. Then it stops every process carrying the launch's tag in its
  environment (``procs.LAUNCH_TAG``: the server and every worker it spawned, whichever process
  group they moved to), SIGTERM first and SIGKILL after ``--grace`` seconds, keeps looking until
  the table stays clear (a server forked in the very moment ledger died is found too), then runs
  ``CLEANUP`` (the docker launcher's: remove the launch's labelled container) and exits.

Why not ``PR_SET_PDEATHSIG`` alone: that signal reaches only the direct child, fires when the
*thread* that forked it ends (a launch from a worker thread would kill the server when that thread
returns), is lost by a set-uid exec, and means nothing to a container, whose processes are the
docker daemon's children. A pipe's end of file is what the kernel guarantees on every kind of death.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import time

from recipe_ledger.launch import procs

POLL_S = 0.5  # how often the parent pid is looked at when the pipe is silent
QUIET_ROUNDS = 3  # empty scans in a row before the launch counts as stopped
SCAN_PAUSE_S = 0.2
CLEANUP_TIMEOUT_S = 120.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="recipe_ledger.launch.watchdog", description=__doc__)
    parser.add_argument("--parent", type=int, required=True, help="the ledger process's pid")
    parser.add_argument("--fd", type=int, required=True, help="read end of the pipe ledger holds open")
    parser.add_argument("--tag", default=None, help="the launch tag its processes carry")
    parser.add_argument("--grace", type=float, default=15.0, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("cleanup", nargs=argparse.REMAINDER, help="-- a command to run once stopped")
    options = parser.parse_args(argv)
    if options.cleanup[:1] == ["--"]:
        options.cleanup = options.cleanup[1:]
    return options


def released(fd: int, parent: int) -> bool:
    """Block until ledger releases the watchdog (True) or is gone (False)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while True:
        if os.getppid() != parent:
            return False
        if poller.poll(int(POLL_S * 1000)):
            try:
                return bool(os.read(fd, 64))
            except OSError:
                return False


def _signal(stat: procs.ProcStat, signum: int) -> None:
    # The group too: a worker that cleared its environment is still in its leader's group. The
    # watchdog's own group is never signalled (it is a session of its own; the server is another).
    for target, kill in ((stat.pgid, os.killpg), (stat.pid, os.kill)):
        if target <= 1 or target == os.getpgrp():
            continue
        try:
            kill(target, signum)
        except (ProcessLookupError, PermissionError):
            pass


def reap(tag: str, grace_s: float) -> int:
    """Stop every process of the launch; returns how many were found. SIGTERM once each, SIGKILL
    to what is left after ``grace_s``; done after ``QUIET_ROUNDS`` empty scans in a row."""
    kill_at = time.monotonic() + grace_s
    termed: set[int] = set()
    quiet = 0
    while quiet < QUIET_ROUNDS:
        found = procs.tagged(tag)
        quiet = 0 if found else quiet + 1
        late = time.monotonic() >= kill_at
        for stat in found:
            if late:
                _signal(stat, signal.SIGKILL)
            elif stat.pid not in termed:
                _signal(stat, signal.SIGTERM)
        termed |= {stat.pid for stat in found}
        time.sleep(SCAN_PAUSE_S)
    return len(termed)


def main(argv: list[str]) -> int:
    options = parse_args(argv)
    # Terminal and hang-up signals are ledger's to handle (it stops its servers and releases us).
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_IGN)
    if released(options.fd, options.parent):
        return 0
    if options.tag:
        reap(options.tag, options.grace)
    if options.cleanup:
        try:
            subprocess.run(
                options.cleanup,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=CLEANUP_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
