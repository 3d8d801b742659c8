"""What every launcher test shares: no test may leave a server running."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recipe_ledger.launch import live_servers, stop_all


@pytest.fixture(autouse=True)
def no_server_left_behind() -> Iterator[None]:
    """Import it into a test module (``from helpers.launching import no_server_left_behind``)."""
    yield
    leftovers = live_servers()
    stop_all()
    assert not leftovers, f"a test left servers running: {leftovers}"
