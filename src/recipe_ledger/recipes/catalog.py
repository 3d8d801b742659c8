"""A recipes root as people use it: find a recipe by name, validate it, list what is there.

A root is a folder holding ``models/<org>/<name>.yaml``, ``taxonomy.yaml`` and
``strategies/*.yaml`` (the layout of the vLLM recipes repository and of this project's
``recipes/``), or a lab's layered ``recipes/`` (``overlay/`` over ``upstream/``: recipes.layers).
A recipe is named by its path, by ``org/name`` or by its ``meta.slug``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from recipe_ledger.errors import SpecError, UnknownIdError
from recipe_ledger.recipes.corpus import Corpus, load_corpus
from recipe_ledger.recipes.layers import Layers, boxes_dirs, empty_layers, layers_of
from recipe_ledger.recipes.models import Recipe, Strategy, Taxonomy
from recipe_ledger.spec.validate import validate_doc
from recipe_ledger.spec.yamlfile import YamlDoc, is_regular_file, shorten


@dataclass(frozen=True)
class LoadedRecipe:
    ref: str  # path relative to the root, e.g. models/org/name.yaml
    doc: YamlDoc  # raw data and line numbers
    recipe: Recipe  # the validated model


def suggest(word: str, choices: list[str]) -> str:
    """' (did you mean x?)' when a close choice exists, else ''."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class RecipeRoot:
    """One recipes root folder, loaded lazily: validated models for people, and the shared
    ``Corpus`` (each file parsed once) for resolution."""

    def __init__(self, root: Path, layers: Layers | None = None):
        self.root = Path(root)
        found = layers or layers_of(self.root)
        if found is None:
            raise SpecError(
                "not a recipes root: no models/ folder (nor a lab's overlay/ or upstream/)",
                where=str(self.root),
                hint="pass --recipes pointing at a folder with models/, taxonomy.yaml, strategies/ "
                "(or run `ledger init` to make a lab)",
            )
        self.layers = found
        self.corpus: Corpus = load_corpus(str(self.root)) if layers is None else Corpus(self.root, found)

    @classmethod
    def of_project(cls, project: Path) -> RecipeRoot:
        """The project's recipes/ (flat or layered); a project without one has no recipe but still
        has its box profiles and the packaged taxonomy (a plain-command experiment needs no recipe)."""
        recipes = Path(project) / "recipes"
        return cls(recipes) if layers_of(recipes) else cls(recipes, empty_layers(recipes))

    @property
    def boxes_dirs(self) -> tuple[Path, ...]:
        """Where this project's box profiles are found, first wins (recipes.layers.boxes_dirs)."""
        return boxes_dirs(self.layers)

    @cached_property
    def recipe_paths(self) -> list[Path]:
        files = self.layers.model_files()
        return [files[ref] for ref in sorted(files) if ref.endswith(".yaml")]

    @cached_property
    def taxonomy(self) -> Taxonomy:
        return validate_doc(self.corpus.doc("taxonomy.yaml"), Taxonomy, what="taxonomy")

    @cached_property
    def strategies(self) -> dict[str, Strategy]:
        loaded = {}
        for ref in self.layers.strategy_files():
            doc = self.corpus.doc(ref)
            strategy = validate_doc(doc, Strategy, what="strategy")
            loaded[strategy.name] = strategy
        return loaded

    def ref_of(self, path: Path) -> str:
        """A file's path inside its layer (``models/org/x.yaml``): the root itself when flat."""
        layer = self.layers.layer_of(path) or self.root
        return path.resolve().relative_to(layer.resolve()).as_posix()

    def find(self, name: str) -> Path:
        """The recipe file for a path, an ``org/name`` or a slug (its file name, lower-cased)."""
        as_path = Path(name)
        if as_path.suffix in (".yaml", ".yml") and is_regular_file(as_path):
            return as_path
        for folder in (*self.layers.models, self.root):
            for candidate in (folder / name, folder / "models" / f"{name}.yaml"):
                if is_regular_file(candidate):
                    return candidate
        # Upstream names files after the model and slugs are the lower-cased name, so the
        # file stem finds a slug without reading every recipe.
        by_slug = self._stem_index().get(name.lower())
        if by_slug:
            return by_slug
        names = [self.ref_of(p)[len("models/") : -len(".yaml")] for p in self.recipe_paths]
        close = suggest(name, names) if len(name) <= 256 else ""
        raise UnknownIdError(
            f"no recipe {shorten(name)!r} under {self.root}{close}",
            where=shorten(name),
            hint=f"ledger recipe list --recipes {self.root}",
        )

    def _stem_index(self) -> dict[str, Path]:
        index: dict[str, Path] = {}
        for path in self.recipe_paths:
            index.setdefault(path.stem.lower(), path)
        return index

    def load(self, name: str) -> LoadedRecipe:
        """Find, parse and validate a recipe; errors name the file, the line and the field."""
        path = self.find(name)
        layer = self.layers.layer_of(path)
        if layer is None or layer not in self.layers.models:
            raise SpecError(
                "the recipe file is outside the recipes root",
                where=str(path),
                hint=f"move it under {self.layers.models[0] if self.layers.models else self.root}/models/ "
                "or pass --recipes",
            )
        ref = self.ref_of(path)
        winner = self.layers.locate(ref)
        if winner is not None and winner.resolve() != path.resolve():
            raise SpecError(
                f"this recipe is replaced by the lab's overlay ({winner})",
                where=str(path),
                hint=f"ledger recipe show {winner}",
            )
        doc = self.corpus.doc(ref)
        return LoadedRecipe(ref=ref, doc=doc, recipe=validate_doc(doc, Recipe, what="recipe"))

    def load_all(self) -> list[LoadedRecipe]:
        return [self.load(str(path)) for path in self.recipe_paths]

    def hardware_ids(self) -> list[str]:
        return list(self.taxonomy.hardware_profiles)

    def check_hardware(self, hardware: str, recipe: str = "RECIPE") -> None:
        known = self.hardware_ids()
        if hardware not in known:
            raise UnknownIdError(
                f"unknown hardware id {hardware!r}{suggest(hardware, known)}",
                where=str(self.root / "taxonomy.yaml"),
                hint=f"ledger recipe show {recipe} (lists the recipe's hardware)",
            )

    def check_strategy(self, strategy: str, recipe: str = "RECIPE") -> None:
        known = list(self.strategies)
        if strategy not in known:
            raise UnknownIdError(
                f"unknown strategy {strategy!r}{suggest(strategy, known)}",
                where=str(self.root / "strategies"),
                hint=f"ledger recipe show {recipe} (lists the compatible strategies)",
            )
