"""What every launcher test shares: no test may leave a server running."""

from __future__ import annotations

from collections.abc import Iterator
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
