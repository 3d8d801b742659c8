"""Who holds a port: /proc/net/tcp{,6} parsed, and the ownership check against real sockets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from recipe_ledger.launch import owner, procs

# Lines of /proc/net/tcp and tcp6 as a little-endian machine writes them, cut after the inode
# column: 127.0.0.1:18766 listening, then an established connection on it (not a listener).
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:494E 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 59516
   1: 0100007F:494E 0100007F:D2C4 01 00000000:00000000 00:00000000 00000000     0        0 61000
"""
# :: (any address) on 8000 and ::ffff:127.0.0.1 (IPv4-mapped) on 8001.
ANY6 = "00000000000000000000000000000000"
TCP6 = f"""\
  sl  local_address remote_address st tx_queue rx_queue tr tm->when retrnsmt uid timeout inode
   0: {ANY6}:1F40 {ANY6}:0000 0A 00000000:00000000 00:00000000 00000000 0 0 7001
   1: 0000000000000000FFFF00000100007F:1F41 {ANY6}:0000 0A 00000000:00000000 00:00000000 00000000 0 0 7002
"""

needs_proc = pytest.mark.skipif(not Path("/proc/net/tcp").is_file(), reason="needs Linux /proc")


@pytest.mark.skipif(sys.byteorder != "little", reason="the fixture lines are a little-endian machine's")
def test_listeners_are_parsed_in_this_machines_byte_order() -> None:
    assert owner.parse_listeners(TCP) == [owner.Listener("127.0.0.1", 18766, 59516)]
    assert owner.parse_listeners(TCP6) == [
        owner.Listener("::", 8000, 7001),
        owner.Listener("127.0.0.1", 8001, 7002),  # the mapped address reads as its IPv4 form
    ]


def test_a_client_reaches_the_wildcard_and_its_own_address_only() -> None:
    assert owner.reaches(owner.Listener("0.0.0.0", 1, 1), "127.0.0.1")
    assert owner.reaches(owner.Listener("::", 1, 1), "127.0.0.1")
    assert owner.reaches(owner.Listener("127.0.0.1", 1, 1), "127.0.0.1")
    assert not owner.reaches(owner.Listener("10.1.2.3", 1, 1), "127.0.0.1")


@needs_proc
def test_a_socket_of_the_launched_tree_is_ours_and_anyone_elses_is_named() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert owner.ownership_problem("127.0.0.1", port, [os.getpid()]) is None
        # Seen from another launch (a session of its own holding nothing), this process is the impostor.
        other = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
        )
        try:
            problem = owner.ownership_problem("127.0.0.1", port, [other.pid])
        finally:
            other.kill()
            other.wait()
    assert problem is not None
    assert f"pid {os.getpid()}" in problem and f"pid {other.pid}" in problem


@needs_proc
def test_a_port_nobody_listens_on_is_not_ours_either() -> None:
    with socket.socket() as unbound:
        unbound.bind(("127.0.0.1", 0))
        port = unbound.getsockname()[1]  # bound, never listening: not in the socket table as a listener
        problem = owner.ownership_problem("127.0.0.1", port, [os.getpid()])
    assert problem is not None and "nothing" in problem


@needs_proc
def test_a_process_identity_changes_with_the_process_not_the_pid_number() -> None:
    me = procs.identity(os.getpid())
    assert me is not None and procs.is_same_process(os.getpid(), me)
    assert procs.is_same_process(os.getpid(), me + "0") is False  # a later process under this pid
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert procs.identity(child.pid) is None or procs.identity(child.pid) != me
