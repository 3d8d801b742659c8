"""Waiting on a condition with a deadline: what tests do instead of sleeping a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], bool], timeout_s: float = 15.0, interval_s: float = 0.05) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout_s`` passes (False).

    The deadline only bounds a wait that would otherwise hang; the test asserts on the returned
    condition, never on how long it took.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)
    return True
