"""`ledger recipe command`: a recipe resolved for people, with the site's defaults filled in.

The reference builder takes every choice explicitly; a person names a recipe and a hardware and
expects what recipes.vllm.ai shows before anything is clicked: the default variant, the
recommended strategy and node count, and the features that are on unless opted in. Ids are
checked first, so a typo is one clear error instead of an empty command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipe_ledger.errors import UnknownIdError
from recipe_ledger.recipes import resolve
from recipe_ledger.recipes.catalog import LoadedRecipe, RecipeRoot, suggest
from recipe_ledger.recipes.lint import declared_conflicts
from recipe_ledger.recipes.shell import shell_quote


@dataclass(frozen=True)
class CommandRequest:
    recipe: str
    hardware: str | None = None
    strategy: str | None = None
    variant: str | None = None
    features: list[str] | None = None  # None: the site's defaults
    node_count: int | None = None


@dataclass
class ResolvedCommand:
    loaded: LoadedRecipe
    hardware: str
    strategy: str
    variant: str
    features: list[str]
    node_count: int
    pd_nodes: Any
    result: dict
    warnings: list[str] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        """The server argv (the head node's for multi-node, the decode pool's for PD)."""
        if "argv" in self.result:
            return list(self.result["argv"])
        if "head_argv" in self.result:
            return list(self.result["head_argv"])
        return list(self.result.get("decode", {}).get("argv", []))

    @property
    def env(self) -> dict[str, str]:
        return dict(self.result.get("env") or {})


def _name(loaded: LoadedRecipe) -> str:
    return loaded.ref.removeprefix("models/").removesuffix(".yaml")


def _check_variant(loaded: LoadedRecipe, variant: str) -> None:
    variants = list(loaded.recipe.variants)
    if variant not in variants:
        raise UnknownIdError(
            f"recipe {loaded.ref} has no variant {variant!r}{suggest(variant, variants)}; "
            f"variants: {', '.join(variants)}",
            where=loaded.doc.where(("variants",)),
            hint=f"ledger recipe show {_name(loaded)}",
        )


def _check_features(loaded: LoadedRecipe, features: list[str]) -> None:
    known = list(loaded.recipe.features)
    for feature in features:
        if feature not in known:
            listing = ", ".join(known) or "none"
            raise UnknownIdError(
                f"recipe {loaded.ref} has no feature {feature!r}{suggest(feature, known)}; "
                f"features: {listing}",
                where=loaded.doc.where(("features",)),
                hint=f"ledger recipe show {_name(loaded)}",
            )


def conflict_warnings(loaded: LoadedRecipe, features: list[str]) -> list[str]:
    conflicts = declared_conflicts(loaded)
    chosen = set(features)
    pairs = {tuple(sorted((a, b))) for a in chosen for b in conflicts.get(a, ()) if b in chosen}
    return [
        f"features {a!r} and {b!r} are mutually exclusive; the command enables both" for a, b in sorted(pairs)
    ]


def resolve_for_people(root: RecipeRoot, request: CommandRequest) -> ResolvedCommand:
    """Resolve with the site's defaults for whatever the request leaves open."""
    loaded = root.load(request.recipe)
    corpus, raw = root.corpus, root.corpus.recipe(loaded.ref)
    variant = request.variant or resolve.default_variant(raw) or "default"
    _check_variant(loaded, variant)
    hardware = request.hardware or resolve.default_hardware(raw, variant, corpus.taxonomy)
    root.check_hardware(hardware, request.recipe)
    strategy, nodes = resolve.default_strategy(raw, variant, hardware, corpus.strategies, corpus.taxonomy)
    if request.strategy:
        root.check_strategy(request.strategy, request.recipe)
        strategy = request.strategy
    node_count = request.node_count or nodes
    features = (
        resolve.default_features(raw, hardware, variant) if request.features is None else request.features
    )
    _check_features(loaded, features)
    pd_nodes = None
    if strategy == "pd_cluster":
        pd_nodes = resolve.default_pd_nodes(raw, variant, hardware, corpus.strategies, corpus.taxonomy)
        pd_nodes = None if pd_nodes == "skip" else pd_nodes
    result = corpus.resolve(loaded.ref, variant, strategy, hardware, features, node_count, pd_nodes)
    return ResolvedCommand(
        loaded,
        hardware,
        strategy,
        variant,
        features,
        node_count,
        pd_nodes,
        result,
        warnings=conflict_warnings(loaded, features),
    )


def env_lines(env: dict[str, str]) -> list[str]:
    return [f"export {key}={shell_quote(str(value))}" for key, value in env.items()]


def text_for_people(resolved: ResolvedCommand, *, docker: bool) -> str:
    """The command as a person copies it: a comment naming the selection, env, then the command."""
    r = resolved.result
    header = (
        f"# {resolved.loaded.recipe.meta.title} · {resolved.hardware} · {resolved.strategy} · "
        f"{resolved.variant} · features: {', '.join(resolved.features) or 'none'}"
    )
    lines = [header]
    if "command" in r:
        lines += ([] if docker else env_lines(resolved.env)) + [
            r["docker_command"] if docker else r["command"]
        ]
    elif "head_command" in r:
        lines += [] if docker else env_lines(resolved.env)
        lines += ["# head node", r["head_docker_command"] if docker else r["head_command"]]
        for rank, worker in enumerate(
            r["worker_docker_commands"] if docker else r["worker_commands"], start=1
        ):
            lines += [f"# worker node {rank}", worker]
    else:
        for role in ("prefill", "decode"):
            block = r[role]
            lines += [f"# {role} pool"] + ([] if docker else env_lines(block.get("env") or {}))
            lines.append(block["docker_command"] if docker else block["command"])
        lines += ["# router", r["router"]["command"]]
    return "\n".join(lines)
