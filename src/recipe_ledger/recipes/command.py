"""`ledger recipe command`: a recipe resolved for people, with the site's defaults filled in.

The reference builder takes every choice explicitly; a person names a recipe and a hardware and
expects what recipes.vllm.ai shows before anything is clicked: the default variant, the
recommended strategy and node count, and the features that are on unless opted in. Ids are
checked first, so a typo is one clear error instead of an empty command.

``engine="sglang"`` resolves the same selection for vLLM first, then turns it into SGLang's
``python -m sglang.launch_server`` (``recipes.sglang``): the recipe's ``sglang`` blocks, else the
vLLM flags translated. The vLLM path is untouched by it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipe_ledger.errors import InputError, ResolutionError, UnknownIdError
from recipe_ledger.recipes import resolve
from recipe_ledger.recipes.catalog import LoadedRecipe, RecipeRoot, suggest
from recipe_ledger.recipes.lint import declared_conflicts
from recipe_ledger.recipes.sglang import ENGINES, RECIPE_ENGINE, resolve_sglang
from recipe_ledger.recipes.shell import shell_quote

VLLM_DEFAULT_PORT = 8000


@dataclass(frozen=True)
class CommandRequest:
    recipe: str
    hardware: str | None = None
    strategy: str | None = None
    variant: str | None = None
    features: list[str] | None = None  # None: the site's defaults
    node_count: int | None = None
    engine: str = RECIPE_ENGINE  # one of ENGINES
    recipes: str | None = None  # the --recipes a person gave, repeated in the commands hints suggest


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
    engine: str = RECIPE_ENGINE

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

    @property
    def port(self) -> int:
        """The port the server listens on: SGLang's from its resolution, vLLM's default."""
        return int(self.result.get("port") or VLLM_DEFAULT_PORT)


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


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise InputError(
            f"unknown engine {engine!r}{suggest(engine, list(ENGINES))}; engines: {', '.join(ENGINES)}",
            where="--engine",
            hint="ledger recipe command RECIPE --engine sglang",
        )


def resolve_for_people(root: RecipeRoot, request: CommandRequest) -> ResolvedCommand:
    """Resolve with the site's defaults for whatever the request leaves open, for its engine."""
    check_engine(request.engine)
    resolved = _resolve_vllm(root, request)
    return resolved if request.engine == RECIPE_ENGINE else _as_sglang(root, resolved, request)


# The single-node strategy of the same parallel design as a multi-node one.
SINGLE_NODE_OF = {"multi_node_tep": "single_node_tep", "multi_node_dep": "single_node_dep"}


def _single_node_strategy(root: RecipeRoot, vllm: ResolvedCommand) -> str:
    """The single-node strategy closest to ``vllm.strategy`` that the recipe offers on its hardware."""
    raw = root.corpus.recipe(vllm.loaded.ref)
    hw = resolve.hardware_for(root.corpus.taxonomy, vllm.hardware)
    offered = resolve.effective_compatible_strategies(raw)
    for name in (SINGLE_NODE_OF.get(vllm.strategy, "single_node_tp"), "single_node_tp"):
        if name in offered and resolve.is_strategy_supported_on_hardware(raw, name, hw):
            return name
    return "single_node_tp"


def same_selection_command(
    root: RecipeRoot, vllm: ResolvedCommand, request: CommandRequest, strategy: str
) -> str:
    """``ledger recipe command`` for the selection ``vllm`` resolved, with ``strategy``: the same
    recipe, hardware, variant, features (``--no-features`` when there are none but the site would
    enable some), engine and recipes root, so that following it changes nothing else."""
    words = ["ledger", "recipe", "command", _name(vllm.loaded), "-H", vllm.hardware, "-v", vllm.variant]
    words += ["-s", strategy]
    for feature in vllm.features:
        words += ["-f", feature]
    raw = root.corpus.recipe(vllm.loaded.ref)
    if not vllm.features and resolve.default_features(raw, vllm.hardware, vllm.variant):
        words.append("--no-features")
    words += ["--engine", request.engine]
    words += ["--recipes", request.recipes] if request.recipes else []
    return " ".join(shell_quote(word) for word in words)


def _as_sglang(root: RecipeRoot, vllm: ResolvedCommand, request: CommandRequest) -> ResolvedCommand:
    """The same selection served by SGLang (single-node strategies only)."""
    if "argv" not in vllm.result:
        single = _single_node_strategy(root, vllm)
        raise ResolutionError(
            f"{vllm.strategy} is a multi-node or PD strategy; SGLang commands are single-node here",
            where=vllm.loaded.ref,
            hint=same_selection_command(root, vllm, request, single),
        )
    corpus = root.corpus
    sel = resolve.Selection(
        recipe=corpus.recipe(vllm.loaded.ref),
        variant_key=vllm.variant,
        strategy_name=vllm.strategy,
        hw=resolve.hardware_for(corpus.taxonomy, vllm.hardware),
        features=vllm.features,
        strategies=corpus.strategies,
        taxonomy=corpus.taxonomy,
        node_count=vllm.node_count,
    )
    launch = resolve_sglang(sel, vllm.result)
    keys = ("hardware", "strategy", "variant", "node_count", "deploy_type")
    result = launch.result({key: vllm.result[key] for key in keys if key in vllm.result})
    return ResolvedCommand(
        vllm.loaded,
        vllm.hardware,
        vllm.strategy,
        vllm.variant,
        vllm.features,
        vllm.node_count,
        vllm.pd_nodes,
        result,
        warnings=vllm.warnings + launch.warnings,
        engine="sglang",
    )


def _resolve_vllm(root: RecipeRoot, request: CommandRequest) -> ResolvedCommand:
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
    if resolved.engine != RECIPE_ENGINE:  # a translation: say which engine, and from what
        header += f" · engine: {resolved.engine} ({r['source']})"
        if docker and r.get("docker_command") is None:
            raise InputError(
                f"no {resolved.engine} image for {resolved.hardware}",
                where=resolved.loaded.ref,
                hint="set docker_image in the recipe's sglang block",
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
