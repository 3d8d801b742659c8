"""What a run folder on this box adds to an entry's run: its files, and one child run per
(arm, repeat, point) read from ``measurements.jsonl`` / ``calibration.jsonl``.

An entry written on another box has no folder here; its run is made from the entry alone and the
folder is attached by a later sync on a box that has it. Every read goes through ``runs`` (its
reading policy): a line that cannot be read is not skipped in silence but travels as a problem to
the sync report and to a tag on the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from recipe_ledger import runs
from recipe_ledger.errors import LedgerError
from recipe_ledger.recipes.flags import LaunchCommand
from recipe_ledger.tracking.runspec import (
    ENTRY_TAG,
    MAX_PARAM,
    ROLE_TAG,
    RunSpec,
    as_text,
    finite_number,
    key,
    numbers,
)

Roots = Path | Sequence[Path]  # run-folder roots: runs/, then evidence/*/ (see run_roots)


def run_folder(entry: Mapping[str, Any]) -> str | None:
    """The ``runs/`` folder name of an entry written by ``ledger run`` / ``ledger calibrate``."""
    payload = entry["payload"]
    candidates = [
        (payload.get("experiment") or {}).get("run_id"),
        (payload.get("conditions") or {}).get("run_id"),
    ]
    if (payload.get("origin") or {}).get("how") == "measured":
        candidates.append(payload["origin"].get("source"))
    # Entries come from other boxes through git: never let one name a path outside runs/.
    return next((name for name in candidates if runs.is_run_id(name)), None)


def run_roots(repo: Path) -> list[Path]:
    """Where run folders are looked for: ``runs/``, then the committed ``evidence/*/`` folders."""
    evidence = Path(repo) / "evidence"
    found = sorted(p for p in evidence.iterdir() if p.is_dir()) if evidence.is_dir() else []
    return [runs.runs_dir(Path(repo)), *found]


def find_run_dir(roots: Path | Sequence[Path], folder: str | None) -> Path | None:
    """The first ``<root>/<folder>`` that exists (``folder`` is a checked run id, never a path)."""
    if folder is None:
        return None
    for root in [roots] if isinstance(roots, Path) else roots:
        if (root / folder).is_dir():
            return root / folder
    return None


def with_run_folder(
    spec: RunSpec,
    entry: Mapping[str, Any],
    runs_dir: Roots,
    records_file: str | None,
    *,
    instrument: str | None = None,
) -> RunSpec:
    """Attach the run folder (its files and, from ``records_file``, the children) when it is here.

    Lines that cannot be read are not skipped in silence: they travel as ``problems`` to the sync
    report and to a tag on the run (runs.py's reading policy)."""
    run_dir = find_run_dir(runs_dir, run_folder(entry))
    if run_dir is None:
        return spec
    calibration = records_file == runs.CALIBRATION
    children: list[RunSpec] = []
    problems: list[str] = []
    if records_file and (run_dir / records_file).is_file():
        arms = {
            **plan_arms(run_dir, problems),
            **((entry["payload"].get("experiment") or {}).get("arms") or {}),
        }
        children = measurement_specs(
            read_records(run_dir / records_file, problems),
            spec,
            arms,
            instrument=instrument,
            phase="calibration" if calibration else "measurement",
        )
    files = _files_for(run_dir, calibration_only=calibration)
    return replace(
        spec, run_dir=run_dir, files=tuple(files), children=tuple(children), problems=tuple(problems)
    )


def _files_for(run_dir: Path, *, calibration_only: bool) -> list[str]:
    """Every file of the run folder; for a calibration only what the A/A launches wrote."""
    files = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())
    if not calibration_only:
        return files
    return [f for f in files if f in (runs.PLAN, runs.CALIBRATION) or f.startswith(("server-aa-", "raw/aa-"))]


def plan_arms(run_dir: Path, problems: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Arm name -> arm (fingerprint, argv, env) from plan.json (a calibration entry does not list the
    arms itself); an unreadable plan gives none, and says why in ``problems``."""
    if not (run_dir / runs.PLAN).is_file():
        return {}
    try:
        arms = runs.read_json(run_dir / runs.PLAN).get("arms", {})
        return {name: dict(arm) for name, arm in arms.items() if isinstance(arm.get("fingerprint"), str)}
    except LedgerError as error:
        _add_problem(problems, error.one_line())
    except (OSError, AttributeError, TypeError, ValueError) as error:
        _add_problem(problems, f"{run_dir / runs.PLAN}: unreadable arms ({type(error).__name__})")
    return {}


def _add_problem(problems: list[str] | None, text: str) -> None:
    if problems is not None:
        problems.append(text)


def read_records(path: Path, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """The records of measurements.jsonl / calibration.jsonl (runs.read_records); each bad line
    (a torn last line of a killed run included) is added to ``problems``, a newer file is one problem
    and gives no records."""
    try:
        found = runs.read_records(path)
    except LedgerError as error:
        _add_problem(problems, error.one_line())
        return []
    for problem in found.problems:
        _add_problem(problems, str(problem))
    return found.records


def measurement_specs(
    records: Sequence[Mapping[str, Any]],
    parent: RunSpec,
    arms: Mapping[str, Mapping[str, Any]],
    *,
    instrument: str | None,
    phase: str,
) -> list[RunSpec]:
    """One child per (arm, repeat, point): the numbers of one launch at one point, every
    instrument's together, with the arm's fingerprint and what sets the arm apart as params."""
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for r in records:
        if instrument is None or r.get("instrument") == instrument:
            groups.setdefault((str(r.get("arm", "?")), str(r.get("repeat")), str(r.get("point"))), []).append(
                r
            )
    differences = arm_differences(arms)
    return [
        measurement_spec(group, parent, arms.get(arm) or {}, differences.get(arm, {}), phase)
        for (arm, _repeat, _point), group in groups.items()
    ]


# What each instrument's record of a point says about itself: listed side by side on the child.
_PER_INSTRUMENT = ("instrument", "instrument_version", "raw_file", "raw_sha256")


def measurement_spec(
    records: Sequence[Mapping[str, Any]],
    parent: RunSpec,
    arm_record: Mapping[str, Any],
    differences: Mapping[str, str],
    phase: str,
) -> RunSpec:
    first = records[0]
    arm = str(first.get("arm", "?"))
    prefix = "A/A " if phase == "calibration" else ""
    params = {
        "arm": arm,
        "repeat": str(first.get("repeat", "")),
        "point": str(first.get("point", "")),
        "seed": str(first.get("seed", "")),
        "phase": phase,
        "arm_fingerprint": str(arm_record.get("fingerprint") or "-"),
        **{k: ", ".join(str(r.get(k, "")) for r in records) for k in _PER_INSTRUMENT},
        **differences,
    }
    metrics: dict[str, float] = {}
    for r in records:
        # Two instruments measuring a metric of the same name keep both: the second is prefixed.
        found = {**numbers(r.get("metrics") or {}), **numbers(r.get("server") or {}, "server")}
        metrics.update({(key(r.get("instrument"), k) if k in metrics else k): v for k, v in found.items()})
    metrics.update(numbers({"wall_s": sum(finite_number(r.get("wall_s")) or 0.0 for r in records) or None}))
    tags = {
        ROLE_TAG: "measurement",
        "ledger.parent_entry": parent.tags[ENTRY_TAG],
        "ledger.kind": parent.tags["ledger.kind"],
        "ledger.arm": arm,
        "ledger.phase": phase,
    }
    if "box" in parent.tags:
        tags["box"] = parent.tags["box"]
    return RunSpec(
        name=f"{prefix}{arm}#{first.get('repeat')} c{first.get('point')}",
        tags=tags,
        status_tags={},
        params=params,
        metrics=metrics,
        start_ms=parent.start_ms,
        end_ms=parent.end_ms,
    )


def arm_differences(arms: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Per arm, the settings whose values differ between the arms: ``flag.<name>`` from the launch
    command, ``env.<NAME>``, ``image``, ``model_sha256``, ``command`` (the words no flag owns).
    A setting an arm lacks is ``-``; what every arm shares is left out (it is on the parent)."""
    settings = {name: arm_settings(arm) for name, arm in arms.items()}
    names = sorted({k for values in settings.values() for k in values})
    differing = [n for n in names if len({values.get(n, "-") for values in settings.values()}) > 1]
    return {
        arm: {key(n): as_text(values.get(n, "-"), MAX_PARAM) for n in differing}
        for arm, values in settings.items()
    }


def arm_settings(arm: Mapping[str, Any]) -> dict[str, str]:
    """An arm's launch as flat settings: ``flag.<name>`` per flag of its argv (its values joined by
    spaces, ``true`` for a switch, the last occurrence winning), its env, image, model, and
    ``command``: the words no flag owns. The argv is read by LaunchCommand, as planning reads it."""
    out = {"image": str(arm.get("image") or "-"), "model_sha256": str(arm.get("model_sha256") or "-")}
    out.update({f"env.{k}": str(v) for k, v in (arm.get("env") or {}).items()})
    command = LaunchCommand.parse([str(a) for a in arm.get("argv") or []])
    for flag, values in command.settings().items():
        out[f"flag.{flag.lstrip('-')}"] = " ".join(values) or "true"
    out["command"] = " ".join(command.positionals()) or "-"
    return out
