"""Is the process answering on a port the one we launched? The listening socket's owner, from /proc.

A server binds its port only once it has loaded (vLLM: after the weights), so for seconds to
minutes after a launch the port is free for anyone: a stray server, a forgotten ``http.server``,
an earlier run's leftover. Whatever binds it first answers /health, and without this check it
would be warmed up, scraped and measured as the launched server.

The check: every socket listening on the port (``/proc/net/tcp`` and ``tcp6``, on an address a
client of ``host`` reaches) must be held open by a process of the launched tree (its root, its
descendants and group, the processes carrying its launch tag: ``procs.tree``), as
``/proc/<pid>/fd/* -> socket:[inode]`` shows. A listener held by anyone else is named with its pid
and command line. Where the tree's processes cannot be read (a container's root processes, for a
user in the docker group) a listener held by no process this user can read is given the benefit of
the doubt; one held by a readable process outside the tree never is.
"""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from recipe_ledger.launch import procs

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
_WILDCARDS = (ipaddress.ip_address("0.0.0.0"), ipaddress.ip_address("::"))


@dataclass(frozen=True)
class Listener:
    address: str
    port: int
    inode: int


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} prints it: 32-bit words in this machine's byte order."""
    raw = bytes.fromhex(hex_address)
    if sys.byteorder == "little":
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(raw)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def parse_listeners(text: str) -> list[Listener]:
    """The listening sockets of one /proc/net/tcp or tcp6 file."""
    out = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _LISTEN:
            continue
        hex_address, _, hex_port = fields[1].partition(":")
        try:
            out.append(Listener(str(_address(hex_address)), int(hex_port, 16), int(fields[9])))
        except ValueError:
            continue
    return out


def listeners(port: int, net_dir: Path = procs.PROC / "net") -> list[Listener]:
    """Every socket listening on ``port`` in this network namespace."""
    found = []
    for name in ("tcp", "tcp6"):
        try:
            text = (net_dir / name).read_text()
        except OSError:
            continue
        found += [listener for listener in parse_listeners(text) if listener.port == port]
    return found


def reaches(listener: Listener, host: str) -> bool:
    """Whether a client connecting to ``host`` (the address a server on it is reached at) may land on
    ``listener``: its address is that one or a wildcard. A host name is compared by any address."""
    address = ipaddress.ip_address(listener.address)
    if address in _WILDCARDS:
        return True
    try:
        wanted = ipaddress.ip_address(host)
    except ValueError:
        return True  # a name (localhost, the box's name): any listener on the port may be it
    if isinstance(wanted, ipaddress.IPv6Address) and wanted.ipv4_mapped is not None:
        wanted = wanted.ipv4_mapped
    return address == wanted


def holder_of(inode: int, skip: set[int]) -> int | None:
    """A readable process outside ``skip`` that holds socket ``inode``, or None."""
    for stat in procs.all_stats():
        if stat.pid in skip:
            continue
        held = procs.socket_inodes(stat.pid)
        if held is not None and inode in held:
            return stat.pid
    return None


def ownership_problem(host: str, port: int, roots: Iterable[int], tag: str | None = None) -> str | None:
    """None when whatever listens on ``host:port`` belongs to the launched tree; otherwise one
    sentence naming what listens instead. ``host`` is the address clients connect to. On a system
    without /proc nothing can be told and None is returned (documented in docs/launchers.md)."""
    if not procs.PROC.is_dir():
        return None
    candidates = [listener for listener in listeners(port) if reaches(listener, host)]
    roots = list(roots)
    if not candidates:
        return (
            f"nothing in this machine's socket table listens on {host}:{port}, yet something answered"
            f" there: not the launched server (pid {', '.join(map(str, roots))})"
        )
    members = procs.tree(roots, tag)
    ours: set[int] = set()
    unreadable = False
    for pid in members:
        held = procs.socket_inodes(pid)
        if held is None:
            unreadable = unreadable or procs.stat_of(pid) is not None
        else:
            ours |= held
    for listener in candidates:
        if listener.inode in ours:
            continue
        holder = holder_of(listener.inode, members)
        if holder is None and unreadable:
            continue  # a container's processes this user cannot read, and no one else holds it
        who = (
            f"pid {holder} ({procs.command_line(holder)[:200]})"
            if holder
            else "a process this user cannot see"
        )
        return (
            f"{listener.address}:{port} is held by {who}, not by the launched server"
            f" (pid {', '.join(map(str, roots))}) or its workers"
        )
    return None
