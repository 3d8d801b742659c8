"""Where a run's wall time goes: the tool's own steps (planning, warm-up, counter scrapes, records)
beside the launches and client calls it shares with a run by hand.

`ledger run` writes the totals to ``runs/<run_id>/timings.json``; benchmarks/run_overhead.py reads
them to name what the tool adds over the same launches and client calls made by hand (issue 18).
Timings are not evidence: the entry does not pin them, and nothing reads them to decide.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

# The steps a run by hand also takes; every other step is the tool's own.
SHARED_STEPS = ("boot", "client", "teardown")


@dataclass
class StepClock:
    """Wall seconds and counts per named step, summed over a run."""

    seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            self.counts[name] = self.counts.get(name, 0) + 1

    def to_json(self) -> dict[str, dict[str, float]]:
        """``{step: {"s": seconds, "n": count}}``."""
        return {name: {"s": round(s, 4), "n": self.counts[name]} for name, s in self.seconds.items()}
