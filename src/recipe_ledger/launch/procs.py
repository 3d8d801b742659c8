"""The process table as Linux shows it in /proc: who a pid is, who its children are, what it holds.

Stdlib only and free of the package's other modules: the watchdog (``launch.watchdog``) imports it
in a process of its own, and the run folder's lock (``runs``) asks it whether a pid is still the
process that took the lock. Every reader tolerates a process that exits while it is being read
(it simply is not there); on a system without /proc the answers are "unknown" (None), never a guess.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# The environment variable every process of one launch carries (the launcher sets it, children
# inherit it): what finds a server's workers after its launcher died, whichever group they are in.
LAUNCH_TAG = "RECIPE_LEDGER_LAUNCH"


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat this package reads."""

    pid: int
    state: str  # R, S, D, Z (zombie), ...
    ppid: int
    pgid: int
    start_ticks: int  # when it started, in clock ticks after boot: with the pid, who it is


def stat_of(pid: int) -> ProcStat | None:
    """The process's stat line, or None when there is no such (readable) process."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields after it follow the last ')'.
    try:
        fields = text.rsplit(")", 1)[1].split()
        return ProcStat(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def boot_id() -> str:
    """This boot's id: start ticks count from boot, so a lock taken before a reboot names nobody now."""
    try:
        return (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return ""


def identity(pid: int) -> str | None:
    """``<boot id>:<start ticks>`` of a live process: equal for the same process, different for a
    later one that reuses its pid; None when there is no such process (or no /proc)."""
    stat = stat_of(pid)
    if stat is None or stat.state == "Z":
        return None
    return f"{boot_id()}:{stat.start_ticks}"


def is_same_process(pid: int, recorded_identity: str) -> bool | None:
    """Whether ``pid`` is still the process whose ``identity`` was recorded: False when it is gone
    or its pid was reused; None when this system cannot tell (no /proc)."""
    if not PROC.is_dir():
        return None
    return identity(pid) == recorded_identity


def all_stats() -> Iterator[ProcStat]:
    """Every live (non-zombie) process readable now."""
    try:
        entries = list(PROC.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.isdigit():
            stat = stat_of(int(entry.name))
            if stat is not None and stat.state != "Z":
                yield stat


def carries_tag(pid: int, tag: str) -> bool:
    """Whether the process's environment holds ``RECIPE_LEDGER_LAUNCH=<tag>`` (as it started)."""
    try:
        environ = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return f"\0{LAUNCH_TAG}={tag}\0".encode() in b"\0" + environ + b"\0"


def tagged(tag: str) -> list[ProcStat]:
    """Every live process of the launch ``tag``, wherever its group or parent is now."""
    me = os.getpid()
    return [s for s in all_stats() if s.pid != me and carries_tag(s.pid, tag)]


def tree(roots: Iterable[int], tag: str | None = None) -> set[int]:
    """The launched processes: ``roots``, every descendant of them, every member of their process
    groups, and (with ``tag``) every process carrying the launch's tag."""
    stats = list(all_stats())
    members = {r for r in roots}
    groups = {s.pgid for s in stats if s.pid in members}
    members |= {s.pid for s in stats if s.pgid in groups}
    if tag is not None:
        members |= {s.pid for s in stats if carries_tag(s.pid, tag)}
    children: dict[int, list[int]] = {}
    for s in stats:
        children.setdefault(s.ppid, []).append(s.pid)
    todo = list(members)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in members:
                members.add(child)
                todo.append(child)
    return members


def socket_inodes(pid: int) -> set[int] | None:
    """The inodes of the sockets process ``pid`` holds open; None when its fds cannot be read
    (another user's process, or it exited)."""
    fd_dir = PROC / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return None
    inodes = set()
    for name in names:
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def command_line(pid: int) -> str:
    """The process's argv as one line (for messages), or "" when it cannot be read."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", errors="replace").strip()
