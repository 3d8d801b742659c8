"""A new lab's files (``ledger init``): what a project needs besides its ledger.

::

    lab.yaml                      the lab's name and its site's title
    recipes/overlay/models/...    the lab's own recipes (starts with the packaged tiny recipe)
    recipes/upstream/             a recipes snapshot (``ledger recipe update --from PATH``)
    boxes/<this-machine>.yaml     this machine's profile, detected (recipes.boxdetect)
    experiments/example-sort.yaml a first study with no server, and scripts/example_probe.py
    dvc.yaml, .dvc/, .gitignore   ledger -> tables -> site (a DVC project: `dvc repro` works at once)

Every file comes from the package (``lab_template/``), so the tool works from a wheel outside this
repository. Nothing that exists is overwritten: running it again creates only what is missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from recipe_ledger.errors import SpecError
from recipe_ledger.paths import write_text_atomic
from recipe_ledger.recipes.layers import BOXES, OVERLAY, PACKAGED_RECIPES, TEMPLATE
from recipe_ledger.spec.yamlfile import load_yaml

EXAMPLE = "experiments/example-sort.yaml"
BOX_PLACEHOLDER = "__BOX__"
TINY_RECIPE = "models/recipe-ledger/tiny-qwen2.yaml"


@dataclass(frozen=True)
class LabFile:
    path: str  # relative to the project
    text: Callable[[], str]  # the content, read only when the file is made


def lab_files(name: str, title: str, box_id: str, box_text: str) -> list[LabFile]:
    """The files of a lab whose machine is ``box_id`` (profile text ``box_text``)."""

    def template(rel: str) -> Callable[[], str]:
        return lambda: (TEMPLATE / rel).read_text(encoding="utf-8")

    return [
        LabFile("lab.yaml", lambda: _lab_record(name, title)),
        LabFile(f"recipes/{OVERLAY}/{TINY_RECIPE}", lambda: (PACKAGED_RECIPES / TINY_RECIPE).read_text()),
        LabFile(f"{BOXES}/{box_id}.yaml", lambda: box_text),
        LabFile(EXAMPLE, lambda: template(EXAMPLE)().replace(BOX_PLACEHOLDER, box_id)),
        LabFile("scripts/example_probe.py", template("scripts/example_probe.py")),
        LabFile("dvc.yaml", template("dvc.yaml")),
        # What `dvc init` writes (analytics off): `dvc repro` works without a DVC step of its own.
        LabFile(".dvc/config", template("dvc/config")),
        LabFile(".dvc/.gitignore", template("dvc/gitignore.txt")),
        LabFile(".gitignore", template("gitignore.txt")),
    ]


def make_lab(project: Path, files: list[LabFile]) -> list[str]:
    """Write each file that does not exist yet (atomically); the ones written, in order."""
    made = []
    for item in files:
        target = project / item.path
        if target.exists() or target.is_symlink():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, item.text())
        made.append(item.path)
    return made


DEFAULT_TITLE = "Recipe Ledger"  # a project without lab.yaml: this tool's own repository


@dataclass(frozen=True)
class LabInfo:
    name: str
    site_title: str


def read_lab(project: Path) -> LabInfo:
    """The project's lab.yaml (its name and site title); the tool's defaults without one. A file
    that is not a mapping of strings is a SpecError at its line."""
    path = project / "lab.yaml"
    if not path.is_file():
        return LabInfo(name=project.resolve().name, site_title=DEFAULT_TITLE)
    doc = load_yaml(path, display_path="lab.yaml")
    data = doc.data if isinstance(doc.data, dict) else None
    if data is None or not all(isinstance(data.get(k, ""), str) for k in ("name", "site_title")):
        raise SpecError("expected name: and site_title: as text", where=doc.where())
    name = data.get("name") or project.resolve().name
    return LabInfo(name=name, site_title=data.get("site_title") or DEFAULT_TITLE)


def _lab_record(name: str, title: str) -> str:
    # JSON strings are YAML scalars: written without a YAML library (spec.yamlfile owns PyYAML).
    return (
        f"# This lab: written by `ledger init`.\nname: {json.dumps(name)}\nsite_title: {json.dumps(title)}\n"
    )
