"""What every launcher test shares: no test may leave a server running."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from recipe_ledger.launch import live_servers, stop_all


@pytest.fixture(autouse=True)
def no_server_left_behind() -> Iterator[None]:
    """Import it into a test module (``from helpers.launching import no_server_left_behind``)."""
    yield
    leftovers = live_servers()
    stop_all()
    assert not leftovers, f"a test left servers running: {leftovers}"


def group_members(pgid: int) -> set[int]:
    """Every live process whose process group is ``pgid`` (a server and the workers it spawned)."""
    members = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it exited while we looked
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            members.add(int(stat.parent.name))
    return members


class FakeServer:
    """A running server as the pipeline's sweep uses it, with nothing behind it (unit tests that
    monkeypatch ``launcher_for`` and ``measure_point``)."""

    base_url = "http://fake"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def reset_prefix_cache(self):
        return True

    def stop(self):
        pass

    def stop_quietly(self):
        pass


def log_when(server, holds: Callable[[str], bool], within_s: float = 30.0) -> str:
    """The server's log once ``holds(log)`` is true. The launcher copies a server's output into
    its log on a thread, so a line the server printed before it answered may land a moment after
    the answer: a check made at once would race that copy. Fails the test after ``within_s``."""
    deadline = time.monotonic() + within_s
    while not holds(text := server.log_text()):
        if time.monotonic() > deadline:
            pytest.fail(
                f"the server's log did not show what was expected within {within_s:.0f} s:\n{text[-2000:]}"
            )
        time.sleep(0.05)
    return text
