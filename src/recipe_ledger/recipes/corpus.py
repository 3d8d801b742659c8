"""A recipes root directory (taxonomy.yaml, strategies/*.yaml, models/**.yaml), loaded lazily.

The root is flat or layered (a lab's overlay over its upstream snapshot): ``recipes.layers`` says
which file a ref names.

Each file is parsed and preprocessed at most once per Corpus, so resolving thousands of
selections against the same root costs one YAML load per recipe. Recipes are addressed by their
path relative to the root (e.g. "models/Qwen/Qwen3-8B.yaml"), as in the compat case files.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from recipe_ledger.errors import InputError
from recipe_ledger.recipes import resolve
from recipe_ledger.recipes.layers import Layers, layers_of
from recipe_ledger.recipes.preprocess import preprocess_plain, preprocess_recipe
from recipe_ledger.spec.yamlfile import YamlDoc, load_yaml


class Corpus:
    """Loaded taxonomy, strategies and (on demand) recipes of one recipes root."""

    def __init__(self, root: Path | str, layers: Layers | None = None):
        self.root = Path(root)
        if layers is None and not self.root.is_dir():
            raise InputError(
                "recipes root is not a directory",
                where=str(self.root),
                hint="pass --recipes DIR containing taxonomy.yaml and strategies/",
            )
        self.layers = layers or layers_of(self.root) or Layers(self.root, False, (self.root,), (self.root,))
        self._recipes: dict[str, dict] = {}
        self._docs: dict[str, YamlDoc] = {}
        self._taxonomy: dict | None = None
        self._strategies: dict | None = None

    @property
    def taxonomy(self) -> dict:
        if self._taxonomy is None:
            self._taxonomy = preprocess_plain(self._load("taxonomy.yaml")) or {}
        return self._taxonomy

    @property
    def strategies(self) -> dict:
        """Strategy specs keyed by their `name` (not their file name), in file-name order."""
        if self._strategies is None:
            found: dict[str, Any] = {}
            for ref in self.layers.strategy_files():
                spec = preprocess_plain(self._load(ref))
                if isinstance(spec, dict):
                    found[str(spec.get("name"))] = spec
            self._strategies = found
        return self._strategies

    def recipe(self, rel_path: str) -> dict:
        """The loaded form of the recipe at `rel_path` (relative to the root)."""
        key = _normal_path(rel_path)
        if key not in self._recipes:
            self._recipes[key] = preprocess_recipe(self._load(key), key)
        return self._recipes[key]

    def recipe_paths(self) -> list[str]:
        """Every recipe under models/, byte-sorted like the reference's path list."""
        return sorted(self.layers.model_files(), key=lambda p: p.encode())

    def doc(self, rel_path: str) -> YamlDoc:
        """The parsed file (data and line numbers), parsed once per Corpus."""
        key = str(PurePosixPath(rel_path))
        if key not in self._docs:
            path = self.layers.locate(key) or self.root / key
            # load_yaml refuses a missing file, a FIFO, a device or an oversized file on one line.
            self._docs[key] = load_yaml(path, display_path=str(path))
        return self._docs[key]

    def _load(self, rel_path: str) -> Any:
        return self.doc(rel_path).data

    # -- resolution shortcuts -------------------------------------------------

    def resolve(
        self,
        recipe: str,
        variant: str,
        strategy: str | None,
        hardware: str,
        features: list[str],
        node_count: int = 1,
        pd_nodes: Any = None,
    ) -> dict:
        """resolve.resolve_command against this corpus."""
        return resolve.resolve_command(
            self.recipe(recipe),
            variant,
            strategy,
            hardware,
            features,
            self.strategies,
            self.taxonomy,
            node_count,
            pd_nodes,
        )

    def resolve_omni(self, recipe: str, variant: str, omni_task: str, hardware: str) -> dict:
        return resolve.resolve_omni(self.recipe(recipe), variant, omni_task, hardware, self.taxonomy)


@lru_cache(maxsize=4096)
def _normal_path(rel_path: str) -> str:
    # Cached: a batch names the same few hundred paths thousands of times, and pathlib's
    # parsing costs more than the rest of a recipe lookup.
    return str(PurePosixPath(rel_path))


@lru_cache(maxsize=8)
def load_corpus(root: str) -> Corpus:
    """One shared Corpus per root path for the life of the process."""
    return Corpus(Path(root))


# -- compat case lines --------------------------------------------------------

CASE_FIELDS = ("recipe", "variant", "hardware")


def resolve_case(corpus: Corpus, case: dict) -> dict:
    """One compat case -> {"result": ...} or {"error": message}, the shape of the case files.

    A case with `omni_task` is an omni case; otherwise it is resolved like resolveCommand with
    its strategy, features, node_count and pd_nodes. Only ResolutionError becomes an "error"
    line; a missing recipe file or a malformed case is the caller's InputError.
    """
    missing = [name for name in CASE_FIELDS if name not in case]
    if missing:
        raise InputError(f"case lacks {', '.join(missing)}")
    try:
        if "omni_task" in case:
            return {
                "result": corpus.resolve_omni(
                    case["recipe"], case["variant"], case["omni_task"], case["hardware"]
                )
            }
        return {
            "result": corpus.resolve(
                case["recipe"],
                case["variant"],
                case.get("strategy"),
                case["hardware"],
                case.get("features") or [],
                case.get("node_count") or 1,
                case.get("pd_nodes"),
            )
        }
    except resolve.ResolutionError as exc:
        return {"error": exc.message}
