"""What a run reports while it works, as typed events delivered to one callback.

The CLI draws its progress bar from these (a phase adds its launches x points to the total, each
measured point advances it) and prints notices; nothing reacts to the wording of a message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from recipe_ledger.experiment.spec import Experiment
from recipe_ledger.pipeline.plan import RunPlan


@dataclass(frozen=True)
class Planned:
    """Every arm is resolved to its exact command; shown before any machine time is spent."""

    plan: RunPlan


@dataclass(frozen=True)
class PhaseStarted:
    """A phase of launches begins: ``launches`` fresh launches of ``points`` sweep points each."""

    name: str  # "calibration", "measurement", "reproduction"
    launches: int
    points: int
    total: int | None = None  # the phase's points when arms differ in theirs (arm ``points:``)

    @property
    def total_points(self) -> int:
        return self.launches * self.points if self.total is None else self.total

    @classmethod
    def of_launches(cls, name: str, experiment: Experiment, arms: list[str]) -> PhaseStarted:
        """A phase that launches ``arms`` in turn (an arm once per launch), each at its own points."""
        counts = [len(experiment.arm_points(arm)) for arm in arms]
        return cls(name, len(arms), max(counts, default=0), sum(counts))


@dataclass(frozen=True)
class PointMeasured:
    """One sweep point of one launch is measured (every instrument ran on it)."""

    arm: str
    repeat: int
    point: int


@dataclass(frozen=True)
class Notice:
    """Something a person should read (which calibration is used, that a failure is recorded...)."""

    text: str


Event = Planned | PhaseStarted | PointMeasured | Notice
Events = Callable[[Event], None]


def print_notices(event: Event) -> None:
    """The default listener: print the notices, ignore the progress."""
    if isinstance(event, Notice):
        print(event.text)


def ignore(event: Event) -> None:
    """A listener for callers that want no output (tests, library use)."""
