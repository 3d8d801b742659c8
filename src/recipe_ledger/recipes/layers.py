"""A lab's layout: where a project's recipes and box profiles come from.

A recipes root has one of two forms:

- **flat**: ``models/``, ``taxonomy.yaml`` and ``strategies/`` directly in the folder (this
  repository's ``recipes/``, a checkout of the vLLM recipes repository). One folder, nothing else.
- **layered** (a lab that ``ledger init`` made): ``overlay/`` (the lab's own recipes) over
  ``upstream/`` (a snapshot of a recipes repository; ``UPSTREAM.yaml`` beside it records where it came
  from). A file is found in the first layer that holds it, so an overlay recipe at the same path
  (``models/org/name.yaml``) replaces the upstream one and any other path extends upstream.
  ``ledger recipe update`` replaces ``upstream/`` and never touches ``overlay/``. Where neither
  layer holds ``taxonomy.yaml`` or a strategy, the packaged defaults (``lab_template/recipes/``)
  answer: a lab with no upstream yet still resolves its overlay's recipes.

A recipe is addressed by its path inside its layer (``models/org/name.yaml``), in both forms: the
ref the compat case files, the site and the ledger use.

Box profiles are found in the project's ``boxes/``, then the recipes root's own ``boxes/`` (this
repository keeps them in ``recipes/boxes/``), then, for a lab, the packaged profiles
(``lab_template/boxes/``: this repository's, shipped in the wheel). A box needs no recipes root.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

UPSTREAM = "upstream"
OVERLAY = "overlay"
UPSTREAM_RECORD = "UPSTREAM.yaml"  # in recipes/: the snapshot's source, commit and content hash
BOXES = "boxes"
TEMPLATE = Path(__file__).resolve().parent.parent / "lab_template"  # package data (pyproject)
PACKAGED_RECIPES = TEMPLATE / "recipes"
PACKAGED_BOXES = TEMPLATE / BOXES
RECIPE_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Layers:
    """The folders a recipes root reads, first wins.

    ``models`` hold recipes; ``shared`` (``models`` plus the packaged defaults, for a lab) hold
    ``taxonomy.yaml`` and ``strategies/``."""

    root: Path
    layered: bool
    models: tuple[Path, ...]
    shared: tuple[Path, ...]

    def locate(self, ref: str) -> Path | None:
        """The file for ``ref`` (``taxonomy.yaml``, ``models/org/x.yaml``) in the first layer holding it."""
        folders = self.models if ref.startswith("models/") else self.shared
        return next((folder / ref for folder in folders if (folder / ref).is_file()), None)

    def layer_of(self, path: Path) -> Path | None:
        """The layer folder a file lies in (the first, for a folder nested in another)."""
        resolved = path.resolve()
        return next((f for f in self.shared if resolved.is_relative_to(f.resolve())), None)

    def model_files(self) -> dict[str, Path]:
        """Every recipe by ref, the first layer's file where two layers hold one ref."""
        found: dict[str, Path] = {}
        for folder in self.models:
            for path in (folder / "models").rglob("*") if (folder / "models").is_dir() else []:
                if path.suffix in RECIPE_SUFFIXES and path.is_file():
                    found.setdefault(path.relative_to(folder).as_posix(), path)
        return found

    def strategy_files(self) -> dict[str, Path]:
        """Every strategy file by ref (``strategies/x.yaml``), first layer wins, in ref order."""
        found: dict[str, Path] = {}
        for folder in self.shared:
            for path in sorted((folder / "strategies").glob("*.yaml")):
                found.setdefault(path.relative_to(folder).as_posix(), path)
        return dict(sorted(found.items()))


def is_layered(root: Path) -> bool:
    return (root / OVERLAY).is_dir() or (root / UPSTREAM).is_dir()


def layers_of(root: Path) -> Layers | None:
    """The layers of a recipes root, or None when the folder is neither form."""
    if (root / "models").is_dir():
        return Layers(root, layered=False, models=(root,), shared=(root,))
    if is_layered(root):
        models = tuple(root / name for name in (OVERLAY, UPSTREAM) if (root / name).is_dir())
        return Layers(root, layered=True, models=models, shared=(*models, PACKAGED_RECIPES))
    return None


def empty_layers(root: Path) -> Layers:
    """A project with no recipes yet: no recipe, the packaged taxonomy and strategies."""
    return Layers(root, layered=True, models=(), shared=(PACKAGED_RECIPES,))


def boxes_dirs(layers: Layers) -> tuple[Path, ...]:
    """Where box profiles are looked up, first wins (see the module's docstring)."""
    project = layers.root.parent
    if not layers.layered:
        return (layers.root / BOXES,)
    return (project / BOXES, layers.root / BOXES, PACKAGED_BOXES)
