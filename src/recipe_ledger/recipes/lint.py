"""`ledger recipe lint`: the recipe schema's silent traps, as warnings with file:line.

The schema does what it is told, including things nobody meant: a flag written two ways that
both reach the command, an override that a later layer quietly replaces, an offload pattern that
matches nothing (seed 000: ``experts.*`` offloaded nothing and ended in an out-of-memory). Each
check below is a small function from a loaded recipe (and the vocabulary) to warnings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipe_ledger.errors import ResolutionError
from recipe_ledger.recipes import resolve
from recipe_ledger.recipes.catalog import LoadedRecipe, RecipeRoot
from recipe_ledger.recipes.fit import patterns_matching_nothing
from recipe_ledger.recipes.flags import parse_flags
from recipe_ledger.recipes.models import Taxonomy
from recipe_ledger.recipes.sglang import RESERVED_FLAGS, SGLANG_ONLY_FLAGS, VLLM_ONLY_FLAGS
from recipe_ledger.spec.yamlfile import PathKey, format_path

ARG_KEYS = ("args", "extra_args", "base_args", "vllm_args")
_PROSE_CONFLICT = re.compile(
    r"mutually exclusive with\s+(?:\*\*)?([A-Za-z][\w -]*?[\w])(?:\*\*)?(?=[.,;)]|$)", re.IGNORECASE
)


@dataclass(frozen=True, order=True)
class LintWarning:
    where: str  # file:line
    code: str  # a stable short name, e.g. flag-written-two-ways
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.code}: {self.message}"


@dataclass(frozen=True)
class Vocabulary:
    """The ids a recipe may name: hardware ids, their generations and brands, strategies."""

    hardware: frozenset[str]
    generations: frozenset[str]
    brands: frozenset[str]
    strategies: frozenset[str]

    @classmethod
    def from_taxonomy(cls, taxonomy: Taxonomy, strategies: list[str]) -> Vocabulary:
        profiles = taxonomy.hardware_profiles.values()
        return cls(
            hardware=frozenset(taxonomy.hardware_profiles),
            generations=frozenset(p.generation for p in profiles),
            brands=frozenset(p.brand.lower() for p in profiles),
            strategies=frozenset(strategies) | frozenset(taxonomy.strategies),
        )

    def hardware_selectors(self) -> frozenset[str]:
        # "nvidia" and "amd" are vendor selectors; "default" keys a fallback in tp maps.
        return self.hardware | self.generations | self.brands | {"default"}


def raw_arg_lists(data: Any, path: PathKey = ()) -> Iterator[tuple[PathKey, list[Any]]]:
    """Every vLLM flag list in a recipe as written (base args, extra args, feature args, role
    args...); the ``sglang`` blocks hold another engine's flags and are left out (``sglang_blocks``)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key in ARG_KEYS and isinstance(value, list):
                yield (*path, key), value
            elif key != SGLANG_KEY:
                yield from raw_arg_lists(value, (*path, key))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from raw_arg_lists(item, (*path, index))


def arg_lists(data: Any) -> Iterator[tuple[PathKey, list[str]]]:
    """``raw_arg_lists`` as tokens: a scalar as its text, a mapping, list or null (which no command
    line can hold, ``check_arg_items`` names it) as an empty token, so indexes still match the file."""
    for path, args in raw_arg_lists(data):
        yield path, [_token(arg) for arg in args]


def _token(arg: Any) -> str:
    return "" if arg is None or isinstance(arg, (dict, list)) else str(arg)


SGLANG_KEY = "sglang"


def sglang_blocks(data: Any, path: PathKey = ()) -> Iterator[tuple[PathKey, Any]]:
    """Every ``sglang`` key of a recipe, wherever it is (read or not)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key == SGLANG_KEY:
                yield (*path, key), value
            else:
                yield from sglang_blocks(value, (*path, key))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from sglang_blocks(item, (*path, index))


def _is_read_block(path: PathKey) -> bool:
    """The places recipes.sglang reads: model, variants.<v>, hardware_overrides.<hw>,
    variants.<v>.hardware_overrides.<hw>, strategy_overrides.<s>,
    strategy_overrides.<s>.hardware_overrides.<hw>."""
    shapes = {
        ("model", SGLANG_KEY),
        ("variants", "*", SGLANG_KEY),
        ("hardware_overrides", "*", SGLANG_KEY),
        ("variants", "*", "hardware_overrides", "*", SGLANG_KEY),
        ("strategy_overrides", "*", SGLANG_KEY),
        ("strategy_overrides", "*", "hardware_overrides", "*", SGLANG_KEY),
    }
    return any(
        len(shape) == len(path) and all(s in ("*", p) for s, p in zip(shape, path, strict=True))
        for shape in shapes
    )


def _warn(item: LoadedRecipe, path: PathKey, code: str, message: str) -> LintWarning:
    return LintWarning(item.doc.where(path), code, message)


# ----------------------------------------------------------------- flags


def check_arg_items(item: LoadedRecipe, vocab: Vocabulary) -> Iterator[LintWarning]:
    """A mapping, a list or a null inside an arg list: a command line holds words, so the builder
    would print it as ``[object Object]`` (or this tool as its Python text). Named at its line."""
    for path, args in raw_arg_lists(item.doc.data):
        for index, arg in enumerate(args):
            if arg is None or isinstance(arg, (dict, list)):
                kind = "null" if arg is None else "a mapping" if isinstance(arg, dict) else "a list"
                yield _warn(
                    item,
                    (*path, index),
                    "arg-not-text",
                    f"{format_path((*path, index))} is {kind}, not a flag or a value: an arg list "
                    "holds strings (quote it, e.g. '--speculative-config={...}' as one string)",
                )


def check_flag_forms(item: LoadedRecipe, vocab: Vocabulary) -> Iterator[LintWarning]:
    """One flag written as ``--x=1`` in one place and ``--x 1`` in another: dedupe compares the
    written tokens, so both can reach the same command and argparse keeps the later one."""
    forms: dict[str, dict[bool, PathKey]] = {}
    for path, args in arg_lists(item.doc.data):
        for flag in parse_flags(args):
            forms.setdefault(flag.name, {}).setdefault(flag.joined, (*path, flag.index))
    for name, seen in forms.items():
        if len(seen) == 2:
            joined, spaced = seen[True], seen[False]
            yield _warn(
                item,
                joined,
                "flag-written-two-ways",
                f"{name} is written as '{name}=...' here and as '{name} ...' at "
                f"{format_path(spaced)}; deduplication treats them as different flags",
            )


def check_offload_patterns(item: LoadedRecipe, vocab: Vocabulary) -> Iterator[LintWarning]:
    """--cpu-offload-params takes exact dot-separated name segments; a glob or a wrong segment
    matches nothing, nothing is offloaded, and the server runs out of memory instead."""
    components = item.recipe.memory.components if item.recipe.memory else []
    for path, args in arg_lists(item.doc.data):
        for flag in parse_flags(args):
            if flag.name != "--cpu-offload-params":
                continue
            where = (*path, flag.index)
            for pattern in flag.values:
                if any(ch in pattern for ch in "*?[]"):
                    yield _warn(
                        item,
                        where,
                        "offload-pattern-glob",
                        f"--cpu-offload-params {pattern!r}: vLLM matches whole name segments "
                        "and has no wildcards, so this matches nothing",
                    )
            for pattern in patterns_matching_nothing(flag.values, components):
                if not any(ch in pattern for ch in "*?[]"):
                    yield _warn(
                        item,
                        where,
                        "offload-pattern-unmatched",
                        f"--cpu-offload-params {pattern!r} matches none of the parameter "
                        "names listed in memory.components",
                    )


# ----------------------------------------------------------------- engines


def check_sglang_flags_in_vllm_args(item: LoadedRecipe, vocab: Vocabulary) -> Iterator[LintWarning]:
    """A flag only SGLang knows, in a vLLM arg list: vLLM refuses to start."""
    for path, args in arg_lists(item.doc.data):
        for flag in parse_flags([str(a) for a in args]):
            if flag.name in SGLANG_ONLY_FLAGS:
                yield _warn(
                    item,
                    (*path, flag.index),
                    "sglang-flag-in-vllm-args",
                    f"{flag.name} is an SGLang flag in a vLLM arg list; vLLM rejects it "
                    "(move it to an sglang: block's args)",
                )


def check_sglang_blocks(item: LoadedRecipe, vocab: Vocabulary) -> Iterator[LintWarning]:
    """An sglang block nobody reads, a vLLM flag in one, or a flag the resolver sets itself."""
    for path, block in sglang_blocks(item.doc.data):
        if not _is_read_block(path):
            yield _warn(
                item,
                path,
                "sglang-block-ignored",
                f"{format_path(path)} is never read: sglang blocks apply under model, variants.<v>, "
                "hardware_overrides.<hw>, variants.<v>.hardware_overrides.<hw>, strategy_overrides.<s> "
                "and strategy_overrides.<s>.hardware_overrides.<hw>",
            )
            continue
        args = block.get("args") if isinstance(block, dict) else None
        yield from _sglang_arg_warnings(item, (*path, "args"), args if isinstance(args, list) else [])


def _sglang_arg_warnings(item: LoadedRecipe, path: PathKey, args: list) -> Iterator[LintWarning]:
    for flag in parse_flags([str(a) for a in args]):
        where = (*path, flag.index)
        if flag.name in VLLM_ONLY_FLAGS:
            yield _warn(
                item,
                where,
                "vllm-flag-in-sglang-args",
                f"{flag.name} is a vLLM flag in an sglang block; SGLang rejects it",
            )
        elif flag.name in RESERVED_FLAGS:
            yield _warn(
                item,
                where,
                "sglang-reserved-flag",
                f"{flag.name} is set by the resolver (the model id, the block's port:); remove it from args",
            )


# ----------------------------------------------------------------- ids


def _hardware_keyed_maps(data: dict) -> Iterator[tuple[PathKey, dict]]:
    """Mappings whose keys are hardware selectors, wherever the schema puts them."""
    for key in ("hardware_overrides", "hardware_notes", "hardware_opt_in_features"):
        if isinstance(data.get(key), dict):
            yield (key,), data[key]
    if isinstance(data.get("meta", {}).get("hardware"), dict):
        yield ("meta", "hardware"), data["meta"]["hardware"]
    for section in ("variants", "features", "strategy_overrides"):
        for name, block in (data.get(section) or {}).items():
            if isinstance(block, dict):
                yield from _hardware_keyed_maps_of_block((section, name), block)
    for strategy, per_hw in (data.get("strategy_hardware") or {}).items():
        if isinstance(per_hw, dict):
            yield ("strategy_hardware", strategy), per_hw


def _hardware_keyed_maps_of_block(path: PathKey, block: dict) -> Iterator[tuple[PathKey, dict]]:
    """One variant, feature or strategy override: its own maps and its prefill/decode roles'."""
    for key in ("hardware_overrides", "tp"):
        if isinstance(block.get(key), dict):
            yield (*path, key), block[key]
    for role in ("prefill", "decode"):
        role_block = block.get(role)
        if isinstance(role_block, dict) and isinstance(role_block.get("hardware_overrides"), dict):
            yield (*path, role, "hardware_overrides"), role_block["hardware_overrides"]


def check_hardware_ids(item: LoadedRecipe, vocab: Vocabulary) -> Iterator[LintWarning]:
    """A hardware key that is not in the taxonomy never matches: its override is dead."""
    known = vocab.hardware_selectors()
    for path, mapping in _hardware_keyed_maps(item.doc.data):
        for key in mapping:
            if key not in known:
                yield _warn(
                    item,
                    (*path, key),
                    "unknown-hardware",
                    f"{format_path((*path, key))}: {key!r} is not a hardware id, generation or "
                    "brand of the taxonomy; this entry never applies",
                )


def check_strategy_ids(item: LoadedRecipe, vocab: Vocabulary) -> Iterator[LintWarning]:
    data = item.doc.data
    named: list[tuple[PathKey, str]] = [
        (("compatible_strategies", i), s) for i, s in enumerate(data.get("compatible_strategies") or [])
    ]
    for section in ("strategy_overrides", "strategy_hardware", "strategy_min_gpus"):
        named += [((section, s), s) for s in (data.get(section) or {})]
    for path, strategy in named:
        if strategy not in vocab.strategies and strategy not in vocab.hardware:
            yield _warn(item, path, "unknown-strategy", f"{strategy!r} is not a strategy of the taxonomy")


# ----------------------------------------------------------------- features


def _normalize_feature(name: str) -> str:
    return re.sub(r"[\s-]+", "_", name.strip().lower())


def declared_conflicts(item: LoadedRecipe) -> dict[str, set[str]]:
    """Conflicts from ``conflicts_with`` and from prose ("Mutually exclusive with text_only")."""
    features = item.recipe.features
    conflicts: dict[str, set[str]] = {name: set(f.conflicts_with) for name, f in features.items()}
    for name, feature in features.items():
        for match in _PROSE_CONFLICT.finditer(feature.description or ""):
            other = _normalize_feature(match.group(1))
            if other in features and other != name:
                conflicts[name].add(other)
    return conflicts


def check_feature_conflicts(item: LoadedRecipe, vocab: Vocabulary) -> Iterator[LintWarning]:
    conflicts = declared_conflicts(item)
    # On by default in the recipe as written: no hardware's opt-ins, no variant's forced modes.
    defaults = set(resolve.default_features(item.doc.data, hw_id=None, variant_key=None))
    reported: set[frozenset[str]] = set()
    for name, others in conflicts.items():
        for other in sorted(others):
            pair = frozenset((name, other))
            if pair in reported:
                continue
            reported.add(pair)
            if name in defaults and other in defaults:
                yield _warn(
                    item,
                    ("features", name),
                    "conflicting-defaults",
                    f"features {name!r} and {other!r} are mutually exclusive but both are on "
                    "by default (neither is in opt_in_features)",
                )
            if (
                other not in item.recipe.features[name].conflicts_with
                and name not in item.recipe.features[other].conflicts_with
            ):
                yield _warn(
                    item,
                    ("features", name),
                    "conflict-undeclared",
                    f"the description says {name!r} and {other!r} are mutually exclusive; "
                    f"add conflicts_with: [{other}] so tools can enforce it",
                )


Check = Callable[[LoadedRecipe, Vocabulary], Iterator[LintWarning]]

STATIC_CHECKS: list[Check] = [
    check_arg_items,
    check_flag_forms,
    check_offload_patterns,
    check_hardware_ids,
    check_strategy_ids,
    check_feature_conflicts,
    check_sglang_flags_in_vllm_args,
    check_sglang_blocks,
]


def lint_recipe(
    item: LoadedRecipe, vocab: Vocabulary, checks: list[Check] | None = None
) -> list[LintWarning]:
    found: list[LintWarning] = []
    for check in checks or STATIC_CHECKS:
        found.extend(check(item, vocab))
    return found


# ----------------------------------------------------------------- checks that need resolution


def layer_path(data: Any, name: str) -> PathKey:
    """A layer name such as ``variants.base-1.7b.hardware_overrides.h100.extra_args`` as a path
    into the recipe. Keys may hold dots, so the longest key that exists wins at each step."""
    parts, path, node = name.split("."), [], data
    while parts and isinstance(node, dict):
        for end in range(len(parts), 0, -1):
            key = ".".join(parts[:end])
            if key in node:
                path.append(key)
                node, parts = node[key], parts[end:]
                break
        else:
            break
    return tuple(path)


def _flag_values(args: tuple[Any, ...]) -> dict[str, tuple[str, ...]]:
    return {flag.name: flag.values for flag in parse_flags([str(a) for a in args])}


def _exact_layer_names(variant: str, hw_id: str, strategy: str) -> set[str]:
    return {
        f"variants.{variant}.hardware_overrides.{hw_id}.extra_args",
        f"strategy_overrides.{strategy}.hardware_overrides.{hw_id}.extra_args",
    }


def shadowed_exact_overrides(
    layers: list, variant: str, hw_id: str, strategy: str
) -> Iterator[tuple[str, str, str]]:
    """(exact layer, flag, later layer) where a later, non-feature layer sets the same flag to
    another value: last-wins dedupe means the exact-GPU override silently loses."""
    exact_names = _exact_layer_names(variant, hw_id, strategy)
    for index, layer in enumerate(layers):
        if layer.name not in exact_names:
            continue
        for flag, values in _flag_values(layer.args).items():
            for later in layers[index + 1 :]:
                if later.name.startswith("features.") or later.name in exact_names:
                    continue
                later_values = _flag_values(later.args).get(flag)
                if later_values is not None and later_values != values:
                    yield layer.name, flag, later.name


def hidden_vendor_fallbacks(
    item: LoadedRecipe, vocab_generations_by_brand: dict[str, set[str]]
) -> Iterator[tuple[PathKey, str]]:
    """The reference picks ``overrides[generation] || overrides.nvidia``: a generation block,
    even an empty one, means the ``nvidia`` block never applies on that generation."""
    data = item.doc.data
    containers: list[PathKey] = [()]
    containers += [("variants", v) for v in (data.get("variants") or {})]
    containers += [("strategy_overrides", s) for s in (data.get("strategy_overrides") or {})]
    for container in containers:
        block = data
        for key in container:
            block = block.get(key) if isinstance(block, dict) else None
        overrides = block.get("hardware_overrides") if isinstance(block, dict) else None
        if not isinstance(overrides, dict) or "nvidia" not in overrides:
            continue
        for generation in sorted(vocab_generations_by_brand.get("nvidia", set()) & set(overrides)):
            yield (*container, "hardware_overrides", generation), generation


@dataclass
class ResolutionContext:
    """What the resolution-based checks need: the loaded-form recipe and the root's vocabulary."""

    raw: dict
    strategies: dict
    taxonomy: dict


def _selections(item: LoadedRecipe, ctx: ResolutionContext) -> Iterator[tuple[str, str, str]]:
    """(variant, hardware, strategy) combinations worth resolving: every variant on every
    hardware the recipe names, for each single-node strategy it offers."""
    data = item.doc.data
    hardware = set((data.get("meta") or {}).get("hardware") or {})
    for variant in data.get("variants") or {}:
        hardware |= set((data["variants"][variant] or {}).get("hardware_overrides") or {})
    hardware &= set(ctx.taxonomy.get("hardware_profiles") or {})
    strategies = [s for s in data.get("compatible_strategies") or [] if str(s).startswith("single_node_")]
    for variant in data.get("variants") or {}:
        for hw_id in sorted(hardware):
            hw = resolve.hardware_for(ctx.taxonomy, hw_id)
            for strategy in strategies:
                # strategy_hardware can mark a strategy unsupported on a GPU: not a real selection.
                if resolve.is_strategy_supported_on_hardware(ctx.raw, strategy, hw):
                    yield variant, hw_id, strategy


def check_resolved(item: LoadedRecipe, ctx: ResolutionContext) -> Iterator[LintWarning]:
    """Warnings that only show once the layers are merged for a concrete selection."""
    seen: set[tuple[str, str, str]] = set()
    all_features = list(item.doc.data.get("features") or {})
    for variant, hw_id, strategy in _selections(item, ctx):
        sel = resolve.Selection(
            recipe=ctx.raw,
            variant_key=variant,
            strategy_name=strategy,
            hw=resolve.hardware_for(ctx.taxonomy, hw_id),
            features=all_features,
            strategies=ctx.strategies,
            taxonomy=ctx.taxonomy,
        )
        try:
            layers = resolve.build_layers(sel)
            survivors = resolve.explain_flags(sel)
        except ResolutionError:
            continue
        for exact, flag, later in shadowed_exact_overrides(layers, variant, hw_id, strategy):
            if (exact, flag, later) not in seen:
                seen.add((exact, flag, later))
                yield _warn(
                    item,
                    layer_path(item.doc.data, exact),
                    "exact-override-shadowed",
                    f"{flag} from {exact} is replaced by {later} on {hw_id} ({strategy}): "
                    "the exact-GPU override loses the last-wins dedupe",
                )
        yield from _duplicates_after_dedupe(item, survivors, hw_id, seen)


def _duplicates_after_dedupe(
    item: LoadedRecipe, survivors: list, hw_id: str, seen: set
) -> Iterator[LintWarning]:
    """One flag that reaches the command twice (``--x=1`` and ``--x 1``): dedupe compares the
    written token, so both survive and the server's argparse silently keeps the later one."""
    origin: dict[str, str] = {}
    for token, _value, layer in survivors:
        name = str(token).split("=", 1)[0]
        if not name.startswith("-"):
            continue
        if name in origin and (name, origin[name], layer) not in seen:
            seen.add((name, origin[name], layer))
            yield _warn(
                item,
                layer_path(item.doc.data, layer),
                "flag-survives-dedupe-twice",
                f"{name} reaches the {hw_id} command twice (from {origin[name]} and {layer}); "
                "the later one wins in vLLM",
            )
        origin.setdefault(name, layer)


def generations_by_brand(taxonomy: Taxonomy) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for profile in taxonomy.hardware_profiles.values():
        out.setdefault(profile.brand.lower(), set()).add(profile.generation)
    return out


def check_hidden_vendor_fallback(item: LoadedRecipe, taxonomy: Taxonomy) -> Iterator[LintWarning]:
    for path, generation in hidden_vendor_fallbacks(item, generations_by_brand(taxonomy)):
        yield _warn(
            item,
            path,
            "generation-hides-nvidia",
            f"on {generation} hardware this {generation} block replaces the 'nvidia' block beside it "
            "(the builder takes overrides[generation] || overrides.nvidia); repeat the nvidia flags "
            "here if they should apply",
        )


# ----------------------------------------------------------------- running the lint


def find_root_of(path: Path) -> Path | None:
    """The recipes root a file or folder belongs to: the nearest folder with taxonomy.yaml."""
    for folder in (path.resolve(), *path.resolve().parents):
        if (folder / "taxonomy.yaml").is_file() and (folder / "models").is_dir():
            return folder
    return None


def lint_items(root: RecipeRoot, items: list[LoadedRecipe]) -> list[LintWarning]:
    """All checks, static and resolved, over the given recipes of one root."""
    vocab = Vocabulary.from_taxonomy(root.taxonomy, list(root.strategies))
    corpus = root.corpus
    warnings: list[LintWarning] = []
    for item in items:
        warnings += lint_recipe(item, vocab)
        warnings += check_hidden_vendor_fallback(item, root.taxonomy)
        ctx = ResolutionContext(corpus.recipe(item.ref), corpus.strategies, corpus.taxonomy)
        warnings += check_resolved(item, ctx)
    return sorted(set(warnings), key=lambda w: (_file_of(w.where), _line_of(w.where), w.code, w.message))


def _file_of(where: str) -> str:
    return where.rsplit(":", 1)[0] if where.rsplit(":", 1)[-1].isdigit() else where


def _line_of(where: str) -> int:
    tail = where.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def items_for_paths(root: RecipeRoot, paths: list[Path]) -> list[LoadedRecipe]:
    """Recipes named by files or folders under ``root`` (all of them when no path is given)."""
    if not paths:
        return root.load_all()
    chosen: list[Path] = []
    for path in paths:
        chosen += sorted(path.glob("**/*.yaml")) if path.is_dir() else [path]
    models = (root.root / "models").resolve()
    return [root.load(str(p)) for p in chosen if p.resolve().is_relative_to(models)]
