"""How big an experiment's result entry will be, known before any launch.

A ledger entry is at most ``MAX_ENTRY_BYTES`` (16 KiB) of canonical JSON, and the result entry of
a run carries text of the spec: the hypothesis, the names (of the experiment, arms, bars' metrics),
every arm's argv and env. A 20,000-character hypothesis passes the schema, so without this check
it would pass ``--plan`` too and lose a finished run at record time, hours of machine time later.

The estimate counts the spec's text as the ledger stores it (canonical JSON escapes every non-ASCII
character as ``\\uXXXX``: 6 bytes, 12 beyond the BMP), each as often as the entry repeats it, plus
the least a record holds beyond it (a bar verdict's numbers, the provenance), and keeps
``HEADROOM_BYTES`` free for what only the run knows (summary numbers, refused points). The field
to shorten is the one that takes the most bytes.

At load the arms' commands are known only as written (a recipe arm's resolved argv is not); at
``--plan`` (``pipeline.plan``) the resolved argv and env of each arm are counted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from recipe_ledger.errors import SpecError
from recipe_ledger.spec.bounds import MAX_ENTRY_BYTES
from recipe_ledger.spec.yamlfile import PathKey

# ``experiment`` below is an ``experiment.spec.Experiment``; that module imports this one (to check
# at load), so the type is not imported here: the package's modules import no cycle, even for types.
Experiment = Any

# What every result entry holds around the spec's text, at least (envelope, git, box and host
# fingerprints, artifact hashes, the design; measured on a study's entry, the smallest kind).
BASE_BYTES = 1_900
PER_ARM_BYTES = 110  # the arm's fingerprint and its record's keys
PER_VERDICT_BYTES = 280  # one bar's verdict for one candidate at one point: numbers, outcome, reason
PER_LAUNCH_BYTES = 4  # one "arm#repeat" of the schedule, around the arm's name
# What a run adds beyond that and cannot be known before it (summary numbers: none for a study, a
# few dozen per arm and point for a serving sweep; refused points; a sequential design's looks):
# this project's result entries hold 0.5 to 3.0 KB of it. Refusing a spec near the limit costs a
# minute of editing; recording a run that does not fit costs the run, so a quarter is kept.
HEADROOM_BYTES = 4_096
RUN_ID_TIMES = 3  # conditions.run_id, origin.source, experiment.run_id: "<name>-<stamp>-<hex>"


class ArmText(Protocol):
    """What of a planned arm the entry records (pipeline.plan.ArmPlan has these)."""

    @property
    def argv(self) -> list[str]: ...
    @property
    def env(self) -> dict[str, str]: ...
    @property
    def source(self) -> str: ...
    @property
    def image(self) -> str | None: ...


@dataclass(frozen=True)
class Part:
    """One field of the spec inside the entry: where it is in the file, how long it is as written,
    and the bytes it takes in the entry (its stored size times the times it appears)."""

    path: PathKey
    characters: int
    entry_bytes: int
    times: int = 1


@dataclass(frozen=True)
class Estimate:
    total: int
    parts: list[Part]

    @property
    def over(self) -> int:
        """Bytes to cut for the entry and its headroom to fit (positive: refused)."""
        return self.total + HEADROOM_BYTES - MAX_ENTRY_BYTES

    @property
    def largest(self) -> Part:
        return max(self.parts, key=lambda part: part.entry_bytes)


def stored_bytes(value: object) -> int:
    """The bytes ``value`` takes in a canonical ledger line (ASCII JSON, escapes included)."""
    return len(json.dumps(value, ensure_ascii=True, separators=(",", ":")))


def _text_length(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(str(k)) + len(str(v)) for k, v in value.items())
    if isinstance(value, list):
        return sum(len(str(item)) for item in value)
    return len(str(value))


def _part(path: PathKey, value: object, times: int = 1) -> Part:
    return Part(path, _text_length(value), stored_bytes(value) * times, times)


def estimate(experiment: Experiment, arms: Mapping[str, ArmText] | None = None) -> Estimate:
    """The result entry's size; ``arms``: the planned arms (their resolved commands), when known."""
    exp = experiment
    points = len(exp.points)
    launches = exp.repeats if not exp.sequential else 2  # a sequential run stops after 2 pairs at least
    parts = [
        _part(("name",), exp.name, 2 + RUN_ID_TIMES),
        _part(("hypothesis",), exp.hypothesis),
        _part(("box",), exp.box, 2),
    ]
    for name in exp.arm_names:
        at: PathKey = ("control",) if name == "control" else ("candidates", name)
        times = 1 + launches  # the arms' key, the schedule
        parts.append(Part((*at,), len(name), stored_bytes(name) * times, times))
        parts += _arm_parts(at, exp, name, arms)
    for number, bar in enumerate(exp.bars):
        covered = points if bar.point == "all" else 1
        parts.append(_part(("bars", number, "metric"), bar.metric, len(exp.candidates) * covered))
    for number, instrument in enumerate(exp.instruments):
        parts.append(_part(("instruments", number, "name"), instrument.name))
    measured = (
        BASE_BYTES
        + PER_ARM_BYTES * len(exp.arm_names)
        + PER_VERDICT_BYTES * sum(len(exp.candidates) * (points if b.point == "all" else 1) for b in exp.bars)
        + PER_LAUNCH_BYTES * len(exp.arm_names) * launches
    )
    return Estimate(measured + sum(part.entry_bytes for part in parts), parts)


def _arm_parts(at: PathKey, exp: Experiment, name: str, arms: Mapping[str, ArmText] | None) -> list[Part]:
    """The arm's command text: resolved when planned, else as written in the spec."""
    if arms is not None and name in arms:
        planned = arms[name]
        return [
            _part((*at, "argv"), planned.argv),
            _part((*at, "env"), planned.env),
            _part((*at, "source"), planned.source),
            *([_part((*at, "image"), planned.image)] if planned.image else []),
        ]
    arm = exp.arm(name)
    found = [_part((*at, key), getattr(arm, key)) for key in ("argv", "env") if getattr(arm, key, None)]
    overrides = getattr(arm, "overrides", None)
    if overrides is not None:
        for key in ("args", "env"):
            value = getattr(overrides, key)
            if value:
                found.append(_part((*at, "overrides", key), value))
    return found


def problem(found: Estimate) -> str | None:
    """The sentence that refuses ``found`` (naming the field to shorten), or None when it fits."""
    if found.over <= 0:
        return None
    part = found.largest
    field = ".".join(str(p) for p in part.path)
    copies = f" in {part.times} places" if part.times > 1 else ""
    cut = -(-found.over // part.times)  # ceiling: every copy shrinks by this much
    return (
        f"the result entry would be about {found.total:,} bytes and the limit is "
        f"{MAX_ENTRY_BYTES:,} (with {HEADROOM_BYTES:,} kept for what the run measures): "
        f"{field} ({part.characters:,} characters) takes {part.entry_bytes:,} "
        f"of them{copies}; shorten it by at least {cut:,} bytes as stored (a non-ASCII character "
        "takes 6)"
    )


SHORTEN_HINT = "keep the long text in a file beside the spec and say less here"


def refuse_oversized(
    experiment: Experiment, where: Callable[[PathKey], str], arms: Mapping[str, ArmText] | None = None
) -> None:
    """A SpecError at the field to shorten (``where`` gives its file:line) when the result entry
    could not be recorded; nothing when it fits."""
    found = estimate(experiment, arms)
    sentence = problem(found)
    if sentence is not None:
        raise SpecError(sentence, where=where(found.largest.path), hint=SHORTEN_HINT)
