"""A project shared by several boxes through a bare git remote, with study experiments to sweep.

``sweep_project`` makes the seed repository (box profiles, a plain-command study script, one
experiment per (box, index)), the bare remote, and one clone per box plus the driver's clone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

STUDY = textwrap.dedent("""\
    import json, sys
    placement, seed = sys.argv[1], int(sys.argv[2])
    if placement == "crash":
        sys.exit("the study crashed")
    step = {"layer_copy": 330.0, "uva": 12.0}[placement] * (1 + 0.001 * (seed % 3))
    print(json.dumps({"moe_step_ms_b1": step}))
    """)


@dataclass(frozen=True)
class SweepProject:
    remote: Path  # the bare repository every clone pushes to
    driver: Path  # the driver's clone
    clones: dict[str, Path]  # box -> that box's clone


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def study_spec(name: str, box: str, candidate: str = "uva") -> dict:
    return {
        "name": name,
        "hypothesis": "reading rows over UVA beats copying the layer",
        "box": box,
        "engine": "none",
        "server": {"needs_server": False},
        "control": {"params": {"placement": "layer_copy"}},
        "candidates": {"uva": {"params": {"placement": candidate}}},
        "instruments": [
            {
                "name": "bench",
                "kind": "command",
                "command": ["python3", "scripts/study.py", "{placement}", "{seed}"],
            }
        ],
        "points": [1],
        "repeats": 2,
        "bars": [{"metric": "moe_step_ms_b1", "point": 1, "direction": "lower", "min_effect": 0.1}],
        "calibration": {"repeats": 2},
    }


def sweep_project(tmp: Path, boxes: list[str], specs: dict[str, dict]) -> SweepProject:
    """``specs``: experiments/<name>.yaml -> spec (JSON is YAML)."""
    seed = tmp / "seed"
    (seed / "recipes" / "boxes").mkdir(parents=True)
    (seed / "recipes" / "models").mkdir()
    (seed / "recipes" / "models" / ".gitkeep").write_text("")  # git keeps no empty folder
    profile = (REPO / "recipes" / "boxes" / "cpu-only.yaml").read_text()
    for box in boxes:
        (seed / "recipes" / "boxes" / f"{box}.yaml").write_text(profile.replace("id: cpu-only", f"id: {box}"))
    (seed / "scripts").mkdir()
    (seed / "scripts" / "study.py").write_text(STUDY)
    (seed / "experiments").mkdir()
    for name, spec in specs.items():
        (seed / "experiments" / f"{name}.yaml").write_text(json.dumps(spec, indent=1))
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
    subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", "init", "--root", str(seed)],
        check=True,
        capture_output=True,
    )
    _identity(seed, "seed")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "experiments to sweep")
    remote = tmp / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(remote)], check=True)
    clones = {box: _clone(remote, tmp / box, box) for box in boxes}
    return SweepProject(remote, _clone(remote, tmp / "driver", "driver"), clones)


def _clone(remote: Path, path: Path, name: str) -> Path:
    subprocess.run(["git", "clone", "-q", str(remote), str(path)], check=True)
    _identity(path, name)
    return path


def _identity(root: Path, name: str) -> None:
    git(root, "config", "user.name", name)
    git(root, "config", "user.email", f"{name}@example.com")


def ledger_lines(clone: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted((clone / "ledger").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
