"""Resolve a recipe selection to the launch command the recipes.vllm.ai builder would show.

Input is a recipe in its *loaded* form (see preprocess.py), the strategies and taxonomy, and a
selection (variant, strategy, hardware, features, node count, PD pool sizes). Output is the
JSON-API shape of the site's build script: the resolved command(s) plus `docker run` wrappers.

The arguments of one `vllm serve` are merged from ordered layers (see `Layer` / `build_layers`);
rendering dedupes them last-wins by flag name, so a later layer silently overrides an earlier
one. Values follow JavaScript semantics throughout because the reference is JavaScript: an
empty mapping `{}` is *truthy* (so an empty `hopper:` block still hides the `nvidia:` fallback),
`0` and `""` are falsy, and `a ?? b` only falls through on null.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeGuard

from recipe_ledger.errors import ResolutionError
from recipe_ledger.recipes import shell

NVL4_ONLY_ENV_KEYS = (
    "VLLM_USE_NCCL_SYMM_MEM",
    "NCCL_CUMEM_ENABLE",
    "NCCL_MNNVL_ENABLE",
    "NCCL_NVLS_ENABLE",
    "UCX_NET_DEVICES",
)
NVL4_HW_IDS = frozenset({"gb200", "gb300"})
PD_PORTS = {"prefill": 8001, "decode": 8002}
MAX_NODES = 16

# Precision -> hardware it needs unless the variant says otherwise (precision_hardware). Keyed
# by str, but looked up with a variant's raw `precision` (any YAML value, None when absent).
PRECISION_HARDWARE: dict[Any, dict[str, str]] = {
    "nvfp4": {"brand": "NVIDIA", "generation": "blackwell"},
    "fp4": {"brand": "NVIDIA", "generation": "blackwell"},
}

# Built-in vllm-omni task ids; a recipe task naming any other id is ignored by the site.
OMNI_TASK_IDS = ("t2i", "i2i", "t2v", "i2v", "ti2v", "t2a")


# ---------------------------------------------------------------------------
# JavaScript value helpers.


def truthy(value: Any) -> bool:
    """JS truthiness: {} and [] are true; None, False, 0, NaN and "" are false."""
    # The exact-type checks first: this runs ~50 times per resolution, nearly always on these.
    kind = value.__class__
    if kind is dict or kind is list:
        return True
    if kind is str:
        return value != ""
    if value is None or value is False:
        return False
    if kind is bool:
        return True
    if isinstance(value, (int, float)):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


def first_truthy(*values: Any) -> Any:
    """`a || b || c`: the first truthy value, else the last one."""
    for value in values:
        if truthy(value):
            return value
    return values[-1] if values else None


def coalesce(*values: Any) -> Any:
    """`a ?? b ?? c`: the first value that is not null/undefined."""
    for value in values:
        if value is not None:
            return value
    return None


def get(obj: Any, *keys: Any) -> Any:
    """Optional chaining `obj?.a?.b`: None as soon as a step is not an object or is missing."""
    for key in keys:
        if not isinstance(obj, dict) or key is None:
            return None
        obj = obj.get(key)
    return obj


def obj(value: Any) -> dict:
    """`value || {}` for something used as an object."""
    return value if isinstance(value, dict) else {}


def is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def spread(value: Any, where: str) -> list[Any]:
    """`...value` inside an array literal: lists spread, strings spread into characters."""
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return list(value)
    raise ResolutionError(f"{where} is not iterable")


def js_number(text: Any) -> float | int:
    """Number(text) for the strings recipes put in arg lists ("4" -> 4, "x" -> NaN)."""
    if is_number(text):
        return text
    try:
        number = float(str(text).strip() or "0")
    except ValueError:
        return math.nan
    return int(number) if number.is_integer() else number


def js_floor_div(a: float, b: float) -> float | int:
    """Math.floor(a / b), with JS's Infinity/NaN instead of a ZeroDivisionError."""
    if b == 0:
        return math.nan if a == 0 else math.inf
    value = a / b
    return math.floor(value) if math.isfinite(value) else value


class cached_once:  # noqa: N801 - used as a decorator, like the functools original
    """functools.cached_property without its lock: on Python 3.11 every first read takes an
    RLock, which costs more than most of the values cached here. Fine for objects that one
    thread builds and reads (a Selection lives for one resolution)."""

    def __init__(self, compute: Any):
        self.compute = compute
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        # Stored in the instance dict, which shadows this (non-data) descriptor from now on.
        value = instance.__dict__[self.name] = self.compute(instance)
        return value


# ---------------------------------------------------------------------------
# Hardware.


@dataclass(frozen=True)
class Hardware:
    """One taxonomy hardware profile plus the keys recipes use to address it.

    Frozen, so each derived key is computed once (cached_once) however often resolution asks.
    """

    id: str | None
    profile: dict

    @cached_once
    def generation(self) -> Any:
        # Consumer cards may list several generations; lookups use the first.
        gen = first_truthy(self.profile.get("generation"), self.profile.get("gpu_generation"))
        return gen[0] if isinstance(gen, list) else gen

    @cached_once
    def brand(self) -> Any:
        return self.profile.get("brand")

    @cached_once
    def is_nvidia(self) -> bool:
        return self.brand == "NVIDIA"

    @cached_once
    def gpu_count(self) -> Any:
        count = self.profile.get("gpu_count")
        return count if is_number(count) else 1

    @cached_once
    def is_cpu(self) -> bool:
        return self.profile.get("generation") == "cpu"

    @cached_once
    def lookup_keys(self) -> tuple[Any, ...]:
        """Keys of hardware-keyed maps that name this hardware, most specific first (before
        `default`): exact id, generation, lowercase brand; absent ones left out."""
        brand = self.brand.lower() if isinstance(self.brand, str) else None
        candidates = (self.id, self.generation if truthy(self.generation) else None, brand)
        return tuple(key for key in candidates if key is not None)


def hardware_for(taxonomy: dict, hw_id: str | None) -> Hardware:
    """The named profile; an unknown id resolves as an empty profile (1 GPU, no brand)."""
    return Hardware(hw_id, obj(get(taxonomy, "hardware_profiles", hw_id)))


def generation_block(overrides: Any, hw: Hardware) -> Any:
    """`overrides[gen] || (NVIDIA ? overrides.nvidia : null)` for `hardware_overrides` maps.

    The generation block wins whenever it exists, even empty: an empty `hopper: {}` hides the
    brand-wide `nvidia:` block. Exact GPU ids are *not* consulted here.
    """
    by_gen = get(overrides, hw.generation) if hw.generation is not None else None
    return first_truthy(by_gen, get(overrides, "nvidia") if hw.is_nvidia else None)


def hardware_keyed_value(mapping: Any, hw: Hardware) -> Any:
    """Exact GPU id > generation > brand (lowercase) > `default`; first non-null wins.

    Used by variant `tp` maps, `strategy_hardware` gates and feature/mode hardware overrides.
    """
    if not isinstance(mapping, dict):
        return None
    for key in hw.lookup_keys:
        value = mapping.get(key)
        if value is not None:
            return value
    return mapping.get("default")


# ---------------------------------------------------------------------------
# Strategy / feature gates (also used for site defaults).


def effective_compatible_strategies(recipe: dict) -> list[Any]:
    """compatible_strategies plus strategies granted `supported` somewhere in strategy_hardware."""
    listed = recipe.get("compatible_strategies") or []
    opt_ins = [
        name
        for name, gate in obj(recipe.get("strategy_hardware")).items()
        if name not in listed and isinstance(gate, dict) and "supported" in gate.values()
    ]
    return [*listed, *opt_ins] if opt_ins else listed


def is_strategy_supported_on_hardware(recipe: dict, strategy_name: str, hw: Hardware) -> bool:
    """A listed strategy runs everywhere unless opted out per hardware, and vice versa."""
    gate = hardware_keyed_value(get(recipe, "strategy_hardware", strategy_name), hw)
    if gate is not None:
        return gate != "unsupported"
    return strategy_name in (recipe.get("compatible_strategies") or [])


def is_feature_allowed_for_strategy(feature: dict, strategy_name: str | None) -> bool:
    allow = feature.get("strategies")
    return not isinstance(allow, list) or not allow or strategy_name in allow


# Strategy-name suffix -> PD pool mode, tried in this order.
_POOL_MODE_SUFFIXES = (
    ("dep", re.compile(r"(?:^|_)dep$")),
    ("tep", re.compile(r"(?:^|_)tep$")),
    ("tp", re.compile(r"(?:^|_)tp(?:_pp|_dp)?$")),
)


def pd_pool_modes(recipe: dict) -> list[str]:
    """PD pool parallelism modes offered, from the suffixes of the compatible strategies."""
    modes: set[str] = set()
    for name in effective_compatible_strategies(recipe):
        if name == "pd_cluster" or not isinstance(name, str):
            continue
        for mode, suffix in _POOL_MODE_SUFFIXES:
            if suffix.search(name):
                modes.add(mode)
                break
    ordered: list[str] = [m for m in ("tp", "tep", "dep") if m in modes] or ["tp"]
    restrict = get(recipe, "strategy_overrides", "pd_cluster", "pool_modes")
    if isinstance(restrict, list) and restrict:
        narrowed = [m for m in ordered if m in restrict]
        ordered = narrowed or ordered  # a restriction that leaves nothing is ignored
    return ordered


def _mode_allowed(mode: Any, variant_key: str, hw: Hardware) -> bool:
    allow = get(mode, "variants")
    if isinstance(allow, list) and allow and variant_key not in allow:
        return False
    gates = get(mode, "hardware")
    if isinstance(gates, dict):
        gen = hw.generation
        if truthy(gen) and gates.get(gen) == "unsupported":
            return False
        if truthy(hw.id) and gates.get(hw.id) == "unsupported":
            return False
    return True


def resolve_mode_key(
    feature: dict, feature_key: str, variant: dict, variant_key: str, hw: Hardware, selected: Any = None
) -> Any:
    """The active mode of a single-select feature: user pick > variant default_modes >
    feature default_mode > first mode allowed for this variant and hardware."""
    modes = feature.get("modes")
    if not truthy(modes) or not isinstance(modes, dict):
        return None
    allowed = [k for k, mode in modes.items() if _mode_allowed(mode, variant_key, hw)]
    if not allowed:
        return None
    for candidate in (selected, get(variant, "default_modes", feature_key), feature.get("default_mode")):
        if truthy(candidate) and candidate in allowed:
            return candidate
    return allowed[0]


# ---------------------------------------------------------------------------
# The selection being resolved.


@dataclass(frozen=True)
class Selection:
    """Everything resolveCommand reads, with the lookups it derives from them done once.

    Frozen: the derived values below are cached on first use (one resolution reads `variant`
    a dozen times), which is only sound because the inputs cannot change underneath them.
    """

    recipe: dict
    variant_key: str
    strategy_name: str | None  # None: a compat case without one resolves like the site's `undefined`
    hw: Hardware
    features: list[str]
    strategies: dict
    taxonomy: dict
    node_count: int = 1
    pd_nodes: Any = None
    advanced_args: list[Any] = field(default_factory=list)
    feature_modes: dict = field(default_factory=dict)

    @cached_once
    def variant(self) -> dict:
        variants = self.recipe.get("variants")
        return obj(first_truthy(get(variants, self.variant_key), get(variants, "default"), {}))

    @cached_once
    def strategy(self) -> dict:
        return obj(first_truthy(get(self.strategies, self.strategy_name), {}))

    @cached_once
    def deploy_type(self) -> Any:
        return first_truthy(self.strategy.get("deploy_type"), "single_node")

    @cached_once
    def is_pd(self) -> bool:
        return self.strategy.get("deploy_type") == "pd_cluster"

    @cached_once
    def strategy_override(self) -> Any:
        """recipe.strategy_overrides[<strategy>] (None when absent)."""
        return get(self.recipe, "strategy_overrides", self.strategy_name)

    @cached_once
    def model_id(self) -> Any:
        return first_truthy(self.variant.get("model_id"), get(self.recipe, "model", "model_id"), "unknown")

    @cached_once
    def total_gpus(self) -> Any:
        return self.hw.gpu_count * max(1, self.node_count)

    @cached_once
    def strategy_generation_block(self) -> Any:
        """generation_block of strategy_overrides.<s>.hardware_overrides (it replaces the two below)."""
        return generation_block(get(self.strategy_override, "hardware_overrides"), self.hw)

    @cached_once
    def recipe_generation_block(self) -> Any:
        return generation_block(self.recipe.get("hardware_overrides"), self.hw)

    @cached_once
    def variant_generation_block(self) -> Any:
        return generation_block(self.variant.get("hardware_overrides"), self.hw)

    @cached_once
    def enabled_features(self) -> tuple[ActiveFeature, ...]:
        """See active_features."""
        return tuple(_find_active_features(self))


def single_node_tp(sel: Selection) -> Any:
    """TP size for single-node layouts: variant `tp` > strategy_overrides.single_node_tp.tp >
    auto-fit (1 GPU if the weights fit on one, else the whole node). Non-TP strategies and
    TEP/DEP always use the whole node; declared sizes are capped at the node's GPU count."""
    gpu_count = sel.hw.gpu_count
    if sel.strategy_name != "single_node_tp":
        return gpu_count
    for raw in (sel.variant.get("tp"), get(sel.recipe, "strategy_overrides", sel.strategy_name, "tp")):
        declared = raw if is_number(raw) else hardware_keyed_value(raw, sel.hw)
        if is_number(declared) and declared > 0:
            return declared if sel.hw.is_cpu else min(declared, gpu_count)
    vram = sel.hw.profile.get("vram_gb")
    per_gpu = vram / gpu_count if truthy(vram) and truthy(gpu_count) and is_number(vram) else 0
    need = first_truthy(sel.variant.get("vram_minimum_gb"), 0)
    if not truthy(need) or not truthy(per_gpu) or per_gpu <= 0:
        return gpu_count
    return 1 if need <= per_gpu else gpu_count


# ---------------------------------------------------------------------------
# PD pool geometry.


def pd_role_request(sel: Selection, role: str) -> dict:
    """pd_nodes[role] as an object: a bare number means {nodes: n}."""
    raw = get(sel.pd_nodes, role) if isinstance(sel.pd_nodes, dict) else None
    if is_number(raw):
        return {"nodes": raw}
    return raw if isinstance(raw, dict) else {}


def pd_role_configs(sel: Selection, role: str) -> tuple[dict, dict]:
    """(recipe strategy_overrides.<s>.<role>, strategy YAML <role>) configs, `{}` when absent."""
    so_role = obj(first_truthy(get(sel.strategy_override, role), {}))
    return so_role, obj(first_truthy(sel.strategy.get(role), {}))


def pd_pool_nodes(sel: Selection, role: str) -> Any:
    """Nodes of a pool; without pd_nodes: 0 (half a node each) on one node, 1 on several."""
    nodes = pd_role_request(sel, role).get("nodes")
    return nodes if is_number(nodes) else (1 if sel.node_count > 1 else 0)


def pd_declared_parallelism(sel: Selection, role: str) -> Any:
    so_role, role_cfg = pd_role_configs(sel, role)
    request = pd_role_request(sel, role)
    return first_truthy(
        request.get("parallelism"), so_role.get("parallelism"), role_cfg.get("parallelism"), "tp"
    )


def pd_pool_gpus(sel: Selection, nodes: Any) -> Any:
    return js_floor_div(sel.hw.gpu_count, 2) if nodes == 0 else nodes * sel.hw.gpu_count


def _clamp_rank(rank: Any, nodes_in_pool: Any) -> Any:
    return max(0, min(nodes_in_pool - 1, coalesce(rank, 0)))


def pd_role_meta(sel: Selection, role: str) -> dict:
    """The per-pool numbers the API echoes next to each PD command.

    Note: this reads the declared parallelism *without* the pool_modes clamp that the args use,
    and `tp` falls back with `||` (so an explicit tp: 0 reads as 1).
    """
    so_role, role_cfg = pd_role_configs(sel, role)
    nodes = pd_pool_nodes(sel, role)
    parallelism = pd_declared_parallelism(sel, role)
    pool_gpus = pd_pool_gpus(sel, nodes)
    is_dep = parallelism == "dep"
    tp = first_truthy(so_role.get("tp"), role_cfg.get("tp"), 1) if is_dep else pool_gpus
    dp_local = max(1, js_floor_div(sel.hw.gpu_count, tp)) if is_dep else 0
    dp_size = max(1, nodes) * dp_local if is_dep else 1
    current = _clamp_rank(pd_role_request(sel, role).get("rank"), max(1, nodes))
    return {
        "nodes": nodes,
        "parallelism": parallelism,
        "tp": tp,
        "dpLocal": dp_local,
        "dpSize": dp_size,
        "poolGpus": pool_gpus,
        "currentNode": current,
        "startRank": current * dp_local,
    }


# ---------------------------------------------------------------------------
# Argument layers.


class Layer(NamedTuple):
    """One source of arguments, in merge order. `name` says where in the recipe it came from.

    (A NamedTuple rather than a frozen dataclass: a resolution builds a dozen, and a frozen
    dataclass's __init__ costs several times a tuple's.)"""

    name: str
    args: tuple[Any, ...]


def _layer(name: str, value: Any, where: str | None = None) -> list[Layer]:
    """A layer from `if (value) args.push(...value)`; nothing when the value is falsy."""
    if not truthy(value):
        return []
    return [Layer(name, tuple(spread(value, where or name)))]


def _node_role_rank(node_role: str | None, node_rank: int) -> int:
    return max(1, node_rank) if node_role == "worker" else 0


def _multi_dep_args(sel: Selection, node_role: str | None, rank: int) -> list[Any]:
    """Multi-node DEP: DP over every GPU of the cluster; workers offset their start rank.

    `--data-parallel-size-local` is always the node's GPU count, but the worker start rank uses
    the recipe's own `--data-parallel-size-local` (from the strategy override layers) if any.
    """
    so = sel.strategy_override
    gen_ho = sel.strategy_generation_block
    exact_ho = get(so, "hardware_overrides", sel.hw.id)
    declared = [
        *(get(so, "vllm_args") or []),
        *(get(so, "extra_args") or []),
        *(get(gen_ho, "extra_args") or []),
        *(get(exact_ho, "extra_args") or []),
    ]
    gpu_count = sel.hw.gpu_count
    dp_local = gpu_count
    if "--data-parallel-size-local" in declared:
        last = len(declared) - 1 - declared[::-1].index("--data-parallel-size-local")
        dp_local = js_number(declared[last + 1]) if last + 1 < len(declared) else math.nan
    args = [
        "--data-parallel-size",
        shell.js_str(sel.total_gpus),
        "--data-parallel-size-local",
        shell.js_str(gpu_count),
        "--data-parallel-address",
        "$HEAD_IP",
    ]
    if node_role == "worker":
        args += ["--data-parallel-start-rank", shell.js_str(rank * dp_local)]
    return args


def _multi_tp_pp_args(sel: Selection, rank: int) -> list[Any]:
    """TP inside each node, PP across nodes."""
    args = [
        "--tensor-parallel-size",
        shell.js_str(sel.hw.gpu_count),
        "--pipeline-parallel-size",
        shell.js_str(sel.node_count),
        "--nnodes",
        shell.js_str(sel.node_count),
        "--node-rank",
        shell.js_str(rank),
        "--master-addr",
        "$HEAD_IP",
    ]
    return args + (["--headless"] if rank > 0 else [])


def _multi_tp_dp_args(sel: Selection, node_role: str | None, rank: int) -> list[Any]:
    """TP inside each node, one DP replica per node."""
    args = [
        "--tensor-parallel-size",
        shell.js_str(sel.hw.gpu_count),
        "--data-parallel-size",
        shell.js_str(sel.node_count),
        "--data-parallel-size-local",
        "1",
        "--data-parallel-address",
        "$HEAD_IP",
    ]
    return args + (["--data-parallel-start-rank", shell.js_str(rank)] if node_role == "worker" else [])


def _multi_tp_args(sel: Selection, rank: int) -> list[Any]:
    """TP/TEP over every GPU of the cluster; followers run --headless."""
    args = [
        "--tensor-parallel-size",
        shell.js_str(sel.total_gpus),
        "--nnodes",
        shell.js_str(sel.node_count),
        "--node-rank",
        shell.js_str(rank),
        "--master-addr",
        "$HEAD_IP",
    ]
    return args + (["--headless"] if rank > 0 else [])


def _pd_dep_args(sel: Selection, role: str, nodes: Any) -> list[Any]:
    """A DEP pool: one `vllm serve` per node, each spawning dp_local ranks."""
    so_role, role_cfg = pd_role_configs(sel, role)
    nodes_in_pool = max(1, nodes)
    tp_explicit = coalesce(so_role.get("tp"), role_cfg.get("tp"))
    role_tp = coalesce(tp_explicit, 1)
    dp_local = max(1, js_floor_div(sel.hw.gpu_count, role_tp))
    node_idx = _clamp_rank(pd_role_request(sel, role).get("rank"), nodes_in_pool)
    upper = role.upper()
    args = ["--tensor-parallel-size", shell.js_str(role_tp)] if tp_explicit is not None else []
    args += [
        "--data-parallel-size",
        shell.js_str(nodes_in_pool * dp_local),
        "--data-parallel-size-local",
        shell.js_str(dp_local),
        "--data-parallel-start-rank",
        shell.js_str(node_idx * dp_local),
        "--data-parallel-address",
        f"${upper}_NODE_1",
        "--data-parallel-rpc-port",
        f"${upper}_DP_RPC_PORT",
    ]
    return args + (["--data-parallel-hybrid-lb"] if nodes_in_pool > 1 else []) + ["--enable-expert-parallel"]


def _pd_tp_args(sel: Selection, role: str, nodes: Any, parallelism: Any) -> list[Any]:
    """A TP/TEP pool: one engine across the pool's nodes; followers run --headless."""
    so_role, role_cfg = pd_role_configs(sel, role)
    flag = first_truthy(
        so_role.get("parallel_flag"),
        role_cfg.get("parallel_flag"),
        sel.strategy.get("parallel_flag"),
        "--tensor-parallel-size",
    )
    args = [flag, shell.js_str(max(1, pd_pool_gpus(sel, nodes)))]
    if parallelism == "tep":
        args.append("--enable-expert-parallel")
    if nodes > 1:
        node_idx = _clamp_rank(pd_role_request(sel, role).get("rank"), nodes)
        args += [
            "--nnodes",
            shell.js_str(nodes),
            "--node-rank",
            shell.js_str(node_idx),
            "--master-addr",
            f"${role.upper()}_NODE_1",
        ]
        args += ["--headless"] if node_idx > 0 else []
    return args


def _pd_args(sel: Selection, role: str) -> list[Any]:
    nodes = pd_pool_nodes(sel, role)
    parallelism = pd_declared_parallelism(sel, role)
    allowed = pd_pool_modes(sel.recipe)
    if parallelism not in allowed:
        parallelism = allowed[0]  # snap to the recipe's pool_modes restriction
    if parallelism == "dep":
        return _pd_dep_args(sel, role, nodes)
    return _pd_tp_args(sel, role, nodes, parallelism)


def parallelism_args(sel: Selection, role: str | None, node_role: str | None, node_rank: int) -> list[Any]:
    """The strategy's sizing flags (-tp/-dp/-pp, node rank, rendezvous address)."""
    strategy = sel.strategy
    parallel_flag = first_truthy(strategy.get("parallel_flag"), "--tensor-parallel-size")
    is_multi = strategy.get("deploy_type") == "multi_node" and sel.node_count > 1
    rank = _node_role_rank(node_role, node_rank)
    if is_multi and parallel_flag == "--data-parallel-size":
        return _multi_dep_args(sel, node_role, rank)
    if is_multi and strategy.get("parallelism") == "tp_pp":
        return _multi_tp_pp_args(sel, rank)
    if is_multi and strategy.get("parallelism") == "tp_dp":
        return _multi_tp_dp_args(sel, node_role, rank)
    if is_multi:
        return _multi_tp_args(sel, rank)
    if sel.is_pd:
        return _pd_args(sel, role) if role else []
    return [parallel_flag, shell.js_str(single_node_tp(sel))]


def _strategy_args_layers(sel: Selection, role: str | None) -> list[Layer]:
    """Step 3a: the strategy YAML's own args (per role under PD)."""
    if not sel.is_pd:
        return _layer("strategy.vllm_args", sel.strategy.get("vllm_args"))
    if role:
        return _layer(f"strategy.{role}.vllm_args", get(sel.strategy, role, "vllm_args"))
    return []


def _sizing_layers(sel: Selection, role: str | None, node_role: str | None, node_rank: int) -> list[Layer]:
    """Step 3b: the strategy's sizing flags, the only layer that differs between node ranks."""
    sizing = parallelism_args(sel, role, node_role, node_rank)
    return [Layer("strategy.parallelism", tuple(sizing))] if sizing else []


def _strategy_override_layers(sel: Selection, role: str | None) -> list[Layer]:
    """Step 4: recipe strategy_overrides.<s> (`extra_args` then `vllm_args`; per role under PD)."""
    so = sel.strategy_override
    if not truthy(so):
        return []
    base = f"strategy_overrides.{sel.strategy_name}" + (f".{role}" if role else "")
    block = get(so, role) if role else so
    return _layer(f"{base}.extra_args", get(block, "extra_args")) + _layer(
        f"{base}.vllm_args", get(block, "vllm_args")
    )


def _hardware_layers(sel: Selection, role: str | None) -> list[Layer]:
    """Step 5: hardware overrides.

    A strategy-level generation block (strategy_overrides.<s>.hardware_overrides.<gen|nvidia>)
    REPLACES the recipe-level and variant-level generation blocks; otherwise both apply, recipe
    first. Exact-GPU strategy (and PD role) blocks are then added on top.
    """
    so, hw = sel.strategy_override, sel.hw
    so_name = f"strategy_overrides.{sel.strategy_name}"
    strategy_gen = sel.strategy_generation_block
    if truthy(strategy_gen):
        layers = _generation_layer(f"{so_name}.", so, strategy_gen, hw)
    else:
        layers = _generation_layer("", sel.recipe, sel.recipe_generation_block, hw)
        variant_prefix = f"variants.{sel.variant_key}."
        layers += _generation_layer(variant_prefix, sel.variant, sel.variant_generation_block, hw)
    layers += _layer(
        f"{so_name}.hardware_overrides.{hw.id}.extra_args", get(so, "hardware_overrides", hw.id, "extra_args")
    )
    if role:
        layers += _layer(
            f"{so_name}.{role}.hardware_overrides.{hw.id}.extra_args",
            get(so, role, "hardware_overrides", hw.id, "extra_args"),
        )
    return layers


def _generation_layer(prefix: str, container: Any, block: Any, hw: Hardware) -> list[Layer]:
    """The extra_args of the generation block picked from container.hardware_overrides, named
    by the key it was picked by (worked out only when there is a layer to name)."""
    args = get(block, "extra_args")
    if not truthy(args):
        return []
    return _layer(f"{prefix}hardware_overrides.{_gen_key(container, hw)}.extra_args", args)


def _gen_key(container: Any, hw: Hardware) -> str:
    """Which key of a hardware_overrides map generation_block picked (for layer names)."""
    overrides = get(container, "hardware_overrides")
    return str(hw.generation) if truthy(get(overrides, hw.generation)) else "nvidia"


class ActiveFeature(NamedTuple):
    """An enabled feature as it applies to one selection."""

    name: str
    feature: dict
    mode: dict | None  # the active mode of a modal feature; None for plain features
    override: dict  # the hardware override block that REPLACES the defaults' args/env ({} if none)

    @property
    def block(self) -> dict:
        """Where the default `args`/`env` live: the active mode, else the feature itself."""
        return self.mode if self.mode is not None else self.feature


def active_features(sel: Selection) -> tuple[ActiveFeature, ...]:
    """Each enabled feature the recipe has and the strategy allows, in the order the caller
    listed them; a modal feature with no mode available on this variant/hardware contributes
    nothing and is skipped. (Computed once per selection: the args, the env and every node
    rank read the same list.)"""
    return sel.enabled_features


def _active_feature(name: str, feature: dict, mode: dict | None, hw: Hardware) -> ActiveFeature:
    block = mode if mode is not None else feature
    override = obj(hardware_keyed_value(block.get("hardware_overrides"), hw))
    return ActiveFeature(name, feature, mode, override)


def _find_active_features(sel: Selection) -> Iterable[ActiveFeature]:
    for name in sel.features or []:
        feature = get(sel.recipe, "features", name)
        if not truthy(feature) or not isinstance(feature, dict):
            continue
        if not is_feature_allowed_for_strategy(feature, sel.strategy_name):
            continue
        modes = feature.get("modes")
        if not (truthy(modes) and isinstance(modes, dict)):
            yield _active_feature(name, feature, None, sel.hw)
            continue
        selected = get(sel.feature_modes, name)
        key = resolve_mode_key(feature, name, sel.variant, sel.variant_key, sel.hw, selected)
        mode = modes.get(key) if truthy(key) else None
        if truthy(mode):
            yield _active_feature(name, feature, obj(mode), sel.hw)


def _feature_layers(sel: Selection) -> list[Layer]:
    """Step 7: enabled features, last so they win the dedupe."""
    layers: list[Layer] = []
    for active in active_features(sel):
        override_args = active.override.get("args")
        args = coalesce(override_args, active.block.get("args"))
        suffix = ".hardware_overrides" if override_args is not None else ""
        layers += _layer(f"features.{active.name}{suffix}", args, f"features.{active.name}.args")
    return layers


def _layers_before_sizing(sel: Selection, role: str | None) -> list[Layer]:
    """Steps 1-3a of build_layers."""
    variant_name = f"variants.{sel.variant_key}"
    layers = _layer("model.base_args", get(sel.recipe, "model", "base_args"))
    layers += _layer(f"{variant_name}.extra_args", sel.variant.get("extra_args"))
    layers += _layer(
        f"{variant_name}.hardware_overrides.{sel.hw.id}.extra_args",
        get(sel.variant, "hardware_overrides", sel.hw.id, "extra_args"),
    )
    return layers + _strategy_args_layers(sel, role)


def _layers_after_sizing(sel: Selection, role: str | None) -> list[Layer]:
    """Steps 4-7 of build_layers."""
    layers = _strategy_override_layers(sel, role)
    layers += _hardware_layers(sel, role)
    layers += _layer("advanced", sel.advanced_args)
    return layers + _feature_layers(sel)


def build_layers(
    sel: Selection, role: str | None = None, node_role: str | None = None, node_rank: int = 1
) -> list[Layer]:
    """The ordered argument layers of one `vllm serve` (a PD role, a multi-node rank, or the
    single command). Merge order, earliest first (later wins the dedupe):

    1. model.base_args
    2. variant extra_args, then the variant's exact-GPU hardware override
    3. strategy vllm_args + sizing flags (TP/DP/PP, node rank, rendezvous)
    4. recipe strategy_overrides.<strategy> (per role under PD)
    5. hardware overrides (strategy generation block REPLACES recipe+variant generation blocks;
       exact-GPU strategy/role blocks add on top)
    6. advanced args (user-picked)
    7. features, in the order given

    Only step 3's sizing flags depend on the node rank (see render_ranks). The steps are
    evaluated in merge order, so a malformed recipe fails with the same error as the reference.
    """
    before = _layers_before_sizing(sel, role)
    sizing = _sizing_layers(sel, role, node_role, node_rank)
    return before + sizing + _layers_after_sizing(sel, role)


def flatten(layers: list[Layer]) -> list[Any]:
    return [arg for layer in layers for arg in layer.args]


def explain_flags(
    sel: Selection, role: str | None = None, node_role: str | None = None, node_rank: int = 1
) -> list[tuple[Any, Any, str]]:
    """(flag, value or None, layer name) for every unit that survives the last-wins dedupe, in
    rendered order. Positionals appear as (token, None, layer). A lint can use this to say which
    layer set a flag, and (by comparing with `build_layers`) which layers were shadowed."""
    tokens: list[Any] = []
    origins: list[str] = []
    for layer in build_layers(sel, role, node_role, node_rank):
        kept = shell.drop_falsy(list(layer.args))
        tokens += kept
        origins += [layer.name] * len(kept)
    units, position = [], 0
    for unit in shell.split_units(tokens):
        units.append((unit, origins[position]))
        position += len(unit) - 1
    seen: set[Any] = set()
    survivors = []
    for unit, origin in reversed(units):
        if unit[0] == "flag" and unit[1] in seen:
            continue
        seen.add(unit[1]) if unit[0] == "flag" else None
        survivors.append((unit[1], unit[2] if len(unit) > 2 else None, origin))
    return survivors[::-1]


# ---------------------------------------------------------------------------
# Environment.


def _assign(env: dict, value: Any) -> None:
    """Object.assign(env, value) for mappings (anything else contributes nothing)."""
    if isinstance(value, dict):
        env.update(value)


def _pd_gpu_env(sel: Selection, role: str, env: dict) -> None:
    """Pin GPUs per PD role: whole nodes list every GPU; a co-located half-node split gives
    prefill the first half and decode the rest."""
    nodes = pd_pool_nodes(sel, role)
    gpu_count = sel.hw.gpu_count
    if nodes >= 1:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(_js_length(gpu_count)))
        if nodes >= 2:
            env["GLOO_SOCKET_IFNAME"] = "$IFACE_NAME"
            env["NCCL_SOCKET_IFNAME"] = "$IFACE_NAME"
        return
    half = js_floor_div(gpu_count, 2)
    if half > 0:
        if not isinstance(half, int):  # +Infinity: JS throws on Array.from({length: Infinity}) too
            raise ResolutionError(
                f"hardware_profiles.{sel.hw.id}.gpu_count is {gpu_count}, not a finite number"
            )
        ids = range(half) if role == "prefill" else range(half, half + _js_length(gpu_count - half))
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in ids)


def _js_length(value: Any) -> int:
    """Array.from({length: value}) length: floor of a finite non-negative number."""
    return int(value) if is_number(value) and math.isfinite(value) and value > 0 else 0


def _hardware_env(sel: Selection, role: str | None, env: dict) -> None:
    """Same precedence as the args: strategy generation block replaces recipe+variant ones."""
    so, hw = sel.strategy_override, sel.hw
    strategy_gen = sel.strategy_generation_block
    if truthy(strategy_gen):
        _assign(env, get(strategy_gen, "extra_env"))
    else:
        _assign(env, get(sel.recipe_generation_block, "extra_env"))
        _assign(env, get(sel.variant_generation_block, "extra_env"))
    _assign(env, get(so, "hardware_overrides", hw.id, "extra_env"))
    if role:
        _assign(env, get(so, role, "hardware_overrides", hw.id, "extra_env"))


def _feature_env(sel: Selection, env: dict) -> None:
    for active in active_features(sel):
        _assign(env, first_truthy(coalesce(active.override.get("env"), active.block.get("env")), {}))


def _pd_rank_rewrite(sel: Selection, role: str, env: dict) -> None:
    """DEP followers open their own NIXL side channel: point `$<ROLE>_NODE_1` values at their
    node. (Reads the declared parallelism, not the pool_modes-clamped one.)"""
    rank = first_truthy(pd_role_request(sel, role).get("rank"), 0)
    if not (is_number(rank) and rank > 0 and pd_declared_parallelism(sel, role) == "dep"):
        return
    old, new = f"${role.upper()}_NODE_1", f"${role.upper()}_NODE_{shell.js_str(rank + 1)}"
    for key, value in env.items():
        if value == old:
            env[key] = new


def build_env(sel: Selection, role: str | None = None) -> dict:
    """Environment of one command: base < variant < strategy < PD GPU pinning < strategy
    overrides < hardware overrides < features; then PD-only cleanups."""
    env: dict = {}
    _assign(env, get(sel.recipe, "model", "base_env"))
    _assign(env, sel.variant.get("extra_env"))
    _assign(env, get(sel.variant, "hardware_overrides", sel.hw.id, "extra_env"))
    if not sel.is_pd:
        _assign(env, sel.strategy.get("env"))
    elif role:
        _assign(env, get(sel.strategy, role, "env"))
    if sel.is_pd and role:
        _pd_gpu_env(sel, role, env)
    so = sel.strategy_override
    if truthy(so):
        _assign(env, get(so, "env"))
        _assign(env, get(so, role, "env") if role else get(so, "extra_env"))
    _hardware_env(sel, role, env)
    _feature_env(sel, env)
    if sel.is_pd and sel.hw.id not in NVL4_HW_IDS:
        for key in NVL4_ONLY_ENV_KEYS:  # NVL4 tray tuning is harmful elsewhere
            env.pop(key, None)
    if sel.is_pd and role:
        _pd_rank_rewrite(sel, role, env)
    return env


# ---------------------------------------------------------------------------
# Rendering one command.


class Rendered(NamedTuple):
    command: str
    argv: list[Any]


def render(
    sel: Selection, role: str | None = None, node_role: str | None = None, node_rank: int = 1
) -> Rendered:
    return _render_args(sel, flatten(build_layers(sel, role, node_role, node_rank)))


def _render_args(sel: Selection, args: list[Any]) -> Rendered:
    return Rendered(*shell.render_serve(sel.model_id, args))


def render_ranks(sel: Selection, ranks: list[int]) -> tuple[Rendered, list[Rendered]]:
    """(head, one Rendered per follower rank) of a multi-node selection.

    Same as render(sel, None, "head") and render(sel, None, "worker", rank) for each rank, but
    the rank-independent layers are built once and only the sizing flags are rebuilt per rank.
    """
    before = flatten(_layers_before_sizing(sel, None))
    head_sizing = flatten(_sizing_layers(sel, None, "head", 1))
    after = flatten(_layers_after_sizing(sel, None))
    head = _render_args(sel, before + head_sizing + after)
    workers = [
        _render_args(sel, before + flatten(_sizing_layers(sel, None, "worker", rank)) + after)
        for rank in ranks
    ]
    return head, workers


def follower_ranks(nodes: Any) -> list[int]:
    """Ranks 1..nodes-1: an n-node cluster gets n-1 distinct worker commands."""
    return list(range(1, max(0, (nodes or 1) - 1) + 1))


def _router_command(sel: Selection, p_meta: dict, d_meta: dict) -> str:
    """vllm-router for PD: one endpoint per node for DEP pools, the head only for TP pools."""
    policy = first_truthy(get(sel.strategy, "router", "policy"), "round_robin")

    def endpoints(meta: dict) -> int:
        return max(1, first_truthy(meta["nodes"], 1)) if meta["parallelism"] == "dep" else 1

    intra = coalesce(
        get(sel.strategy_override, "router", "intra_node_data_parallel_size"),
        max(first_truthy(p_meta["dpLocal"], 0), first_truthy(d_meta["dpLocal"], 0), 1),
    )
    lines = [f"vllm-router --policy {shell.js_str(policy)} \\", "    --vllm-pd-disaggregation \\"]
    prefill_count, decode_count = _js_length(endpoints(p_meta)), _js_length(endpoints(d_meta))
    lines += [f"    --prefill http://$PREFILL_NODE_{i + 1}:8001 \\" for i in range(prefill_count)]
    lines += [f"    --decode http://$DECODE_NODE_{i + 1}:8002 \\" for i in range(decode_count)]
    lines += [
        "    --host $ROUTER_HOST \\",
        "    --port $ROUTER_PORT \\",
        f"    --intra-node-data-parallel-size {shell.js_str(intra)}",
    ]
    return "\n".join(lines)


def _base_result(sel: Selection, env: dict, meta: shell.DockerMeta, deploy_type: Any) -> dict:
    return {
        "hardware": sel.hw.id,
        "strategy": sel.strategy_name,
        "variant": sel.variant_key,
        "node_count": sel.node_count,
        "deploy_type": deploy_type,
        "env": env,
        "docker_image": meta.image,
    }


def _pd_role_result(sel: Selection, role: str, role_meta: dict, meta: shell.DockerMeta) -> dict:
    rendered = render(sel, role)
    env = build_env(sel, role)
    out = {"command": rendered.command, "argv": rendered.argv, "env": env, **role_meta}
    return {**out, **shell.dockerize(rendered.command, rendered.argv, env, meta, PD_PORTS[role])}


def _pd_result(sel: Selection, meta: shell.DockerMeta) -> dict:
    p_meta, d_meta = pd_role_meta(sel, "prefill"), pd_role_meta(sel, "decode")
    router_config = first_truthy(sel.strategy.get("router"), {"policy": "round_robin"})
    prefill = _pd_role_result(sel, "prefill", p_meta, meta)
    decode = _pd_role_result(sel, "decode", d_meta, meta)
    return {
        **_base_result(sel, {}, meta, "pd_cluster"),
        "prefill": prefill,
        "decode": decode,
        "router": {"command": _router_command(sel, p_meta, d_meta), "install": "uv pip install vllm-router"},
        "router_config": router_config,
    }


def _multi_node_result(sel: Selection, meta: shell.DockerMeta) -> dict:
    """Head (rank 0) plus one distinct command per follower rank.

    The API also has singular worker_* keys equal to element 0 of the plural lists; the compat
    format omits them, and so do we.
    """
    head, workers = render_ranks(sel, follower_ranks(sel.node_count))
    env = build_env(sel)
    head_docker = shell.dockerize(head.command, head.argv, env, meta)
    worker_dockers = [shell.dockerize(w.command, w.argv, env, meta) for w in workers]
    return {
        **_base_result(sel, env, meta, "multi_node"),
        "head_command": head.command,
        "worker_commands": [w.command for w in workers],
        "head_argv": head.argv,
        "worker_argvs": [w.argv for w in workers],
        "head_docker_command": head_docker["docker_command"],
        "worker_docker_commands": [w["docker_command"] for w in worker_dockers],
        "head_docker_argv": head_docker["docker_argv"],
        "worker_docker_argvs": [w["docker_argv"] for w in worker_dockers],
    }


def _companions(sel: Selection) -> list[dict]:
    """Helper processes enabled features run beside `vllm serve` (single-node shape only)."""
    out = []
    for name in sel.features or []:
        feature = get(sel.recipe, "features", name)
        command = get(feature, "companion", "command")
        if not truthy(command) or not is_feature_allowed_for_strategy(feature, sel.strategy_name):
            continue
        companion = feature["companion"]
        out.append(
            {
                "feature": name,
                "label": first_truthy(companion.get("label"), name),
                "description": first_truthy(companion.get("description"), ""),
                "command": shell.js_str(command).rstrip(),
            }
        )
    return out


def _single_result(sel: Selection, meta: shell.DockerMeta) -> dict:
    deploy_type = sel.deploy_type
    if deploy_type == "multi_node":
        # A multi-node strategy at one node renders the single-node shape but is labelled
        # multi_node; the API then wraps the (missing) head command and crashes.
        raise ResolutionError("Cannot read properties of undefined (reading 'match')")
    rendered = render(sel)
    env = build_env(sel)
    companions = _companions(sel)
    result = {
        **_base_result(sel, env, meta, deploy_type),
        "command": rendered.command,
        "argv": rendered.argv,
        **shell.dockerize(rendered.command, rendered.argv, env, meta),
    }
    return {**result, "companions": companions} if companions else result


def resolve_selection(sel: Selection) -> dict:
    """The API result for a prepared Selection (see resolve_command)."""
    meta = shell.docker_meta(sel.recipe, sel.variant, sel.hw.profile, sel.hw.id)
    if sel.is_pd:
        return _pd_result(sel, meta)
    if sel.deploy_type == "multi_node" and sel.node_count > 1:
        return _multi_node_result(sel, meta)
    return _single_result(sel, meta)


def resolve_command(
    recipe: dict,
    variant: str,
    strategy: str | None,
    hardware: str,
    features: list[str],
    strategies: dict,
    taxonomy: dict,
    node_count: int = 1,
    pd_nodes: Any = None,
    advanced_args: list[Any] | None = None,
    feature_modes: dict | None = None,
) -> dict:
    """Resolve one selection to the reference's result dict, or raise ResolutionError.

    `recipe` must be in the loaded form (preprocess.preprocess_recipe). Unknown variants fall
    back to `default`, unknown strategies/hardware resolve as empty specs — as the site does.
    """
    sel = Selection(
        recipe=recipe,
        variant_key=variant,
        strategy_name=strategy,
        hw=hardware_for(taxonomy, hardware),
        features=list(features or []),
        strategies=strategies,
        taxonomy=taxonomy,
        node_count=node_count,
        pd_nodes=pd_nodes,
        advanced_args=list(advanced_args or []),
        feature_modes=dict(feature_modes or {}),
    )
    return resolve_selection(sel)


# ---------------------------------------------------------------------------
# vllm-omni recipes.


def omni_tasks(recipe: dict) -> list[dict]:
    """The recipe's omni tasks the site knows (built-in ids only), with their selector key."""
    declared = get(recipe, "omni", "tasks")
    out = []
    for task in declared if isinstance(declared, list) else []:
        task_id = task if isinstance(task, str) else get(task, "id")
        if not truthy(task_id) or task_id not in OMNI_TASK_IDS:
            continue
        spec = {} if isinstance(task, str) else obj(task)
        out.append({"id": task_id, "key": first_truthy(spec.get("key"), task_id), "spec": spec})
    return out


def _omni_task_for_hardware(recipe: dict, task: dict, hw_id: str | None) -> tuple[Any, list[Any]]:
    """(model id, extra args) of a task on one hardware: an exact-GPU task override may swap the
    checkpoint and appends its args (after a task-scoped profile's `--task-type <family>`)."""
    spec = task["spec"]
    model_id = spec.get("model_id")
    extra = list(spread(first_truthy(spec.get("extra_args"), []), "omni task extra_args"))
    if not truthy(hw_id):
        return model_id, extra
    profile = obj(first_truthy(get(recipe, "omni", "profiles", hw_id), {}))
    override = obj(first_truthy(get(spec, "hardware_overrides", hw_id), {}))
    if truthy(profile.get("task_scoped")) and truthy(spec.get("family")):
        extra += ["--task-type", spec["family"]]
    extra += spread(first_truthy(override.get("extra_args"), []), "omni task override extra_args")
    return first_truthy(override.get("model_id"), model_id), extra


def resolve_omni(recipe: dict, variant_key: str, task_key: str, hardware: str, taxonomy: dict) -> dict:
    """`vllm serve --omni` for one omni task on one hardware: {command, env, model_id}.

    Simpler than resolve_command: no strategy; the variant's own extra args/env apply only to
    non-default variants; `omni.port` and `--omni` go last so they win the dedupe.
    """
    tasks = {t["key"]: t for t in reversed(omni_tasks(recipe))}
    task = tasks.get(task_key)
    if task is None:
        raise ResolutionError(f"recipe has no omni task {task_key!r}")
    hw = hardware_for(taxonomy, hardware)
    task_model, task_args = _omni_task_for_hardware(recipe, task, hardware)
    variants = recipe.get("variants")
    variant = obj(first_truthy(get(variants, variant_key), get(variants, "default"), {}))
    model_id = first_truthy(task_model, variant.get("model_id"), get(recipe, "model", "model_id"), "unknown")
    return {
        "command": _omni_command(recipe, variant_key, variant, task_args, hw, model_id),
        "env": _omni_env(recipe, variant_key, variant, hw),
        "model_id": model_id,
    }


def _omni_env(recipe: dict, variant_key: str, variant: dict, hw: Hardware) -> dict:
    env: dict = {}
    _assign(env, get(recipe, "model", "base_env"))
    if variant_key != "default":
        _assign(env, variant.get("extra_env"))
    _assign(env, get(generation_block(recipe.get("hardware_overrides"), hw), "extra_env"))
    _assign(env, get(generation_block(variant.get("hardware_overrides"), hw), "extra_env"))
    if truthy(hw.id):
        _assign(env, get(variant, "hardware_overrides", hw.id, "extra_env"))
    return env


def _omni_command(
    recipe: dict, variant_key: str, variant: dict, task_args: list[Any], hw: Hardware, model_id: Any
) -> str:
    args: list[Any] = []
    variant_args = variant.get("extra_args") if variant_key != "default" else None
    for value, where in (
        (get(recipe, "model", "base_args"), "model.base_args"),
        (variant_args, "variant.extra_args"),
    ):
        args += spread(value, where) if truthy(value) else []
    args += task_args
    for block in (
        generation_block(recipe.get("hardware_overrides"), hw),
        generation_block(variant.get("hardware_overrides"), hw),
        get(variant, "hardware_overrides", hw.id) if truthy(hw.id) else None,
    ):
        value = get(block, "extra_args")
        args += spread(value, "hardware_overrides extra_args") if truthy(value) else []
    port = get(recipe, "omni", "port")
    if truthy(port):
        args += ["--port", shell.js_str(port)]
    args.append("--omni")
    binary = first_truthy(get(recipe, "omni", "serve_binary"), "vllm serve")
    return shell.format_command(model_id, args, shell.js_str(binary))


# ---------------------------------------------------------------------------
# Site defaults (what recipes.vllm.ai preselects), for person-facing commands.


def default_variant(recipe: dict) -> str | None:
    """`default` when the recipe has it (the builder's initial pick), else the first variant."""
    variants = obj(recipe.get("variants"))
    if "default" in variants:
        return "default"
    return next(iter(variants), None)


def _precision_constraint(variant: dict) -> Any:
    return first_truthy(variant.get("precision_hardware"), PRECISION_HARDWARE.get(variant.get("precision")))


def _matches_constraint(profile: dict, constraint: Any) -> bool:
    if not truthy(constraint):
        return True
    if truthy(constraint.get("brand")) and profile.get("brand") != constraint["brand"]:
        return False
    if truthy(constraint.get("generation")):
        gens = first_truthy(profile.get("generation"), profile.get("gpu_generation"))
        if constraint["generation"] not in (gens if isinstance(gens, list) else [gens]):
            return False
    return True


def _variant_allows_hw(variant: dict, hw_id: str) -> bool:
    supported = variant.get("supported_hardware")
    return not isinstance(supported, list) or not supported or hw_id in supported


def compatible_hardware(recipe: dict, variant: dict, taxonomy: dict) -> list[str]:
    """Hardware the site offers for a variant: precision-compatible, not opted out, allowed by
    the variant, and (for `restricted` profiles) declared under meta.hardware."""
    declared = obj(get(recipe, "meta", "hardware"))
    constraint = _precision_constraint(variant)
    return [
        hw_id
        for hw_id, profile in obj(taxonomy.get("hardware_profiles")).items()
        if _matches_constraint(obj(profile), constraint)
        and declared.get(hw_id) != "unsupported"
        and _variant_allows_hw(variant, hw_id)
        and (not obj(profile).get("restricted") or hw_id in declared)
    ]


def default_hardware(recipe: dict, variant_key: str, taxonomy: dict) -> str:
    """meta.default_hardware if usable; Blackwell-only precisions prefer b200 then gb200; else
    h200; else NVIDIA first, then AMD, then others, alphabetically."""
    variant = obj(get(recipe, "variants", variant_key))
    compatible = compatible_hardware(recipe, variant, taxonomy)
    authored = get(recipe, "meta", "default_hardware")
    if truthy(authored) and authored in compatible:
        return authored
    if get(_precision_constraint(variant), "generation") == "blackwell":
        for hw_id in ("b200", "gb200"):
            if hw_id in compatible:
                return hw_id
    if "h200" in compatible:
        return "h200"
    profiles = obj(taxonomy.get("hardware_profiles"))
    order = {"NVIDIA": 0, "AMD": 1}
    compatible.sort(key=lambda h: (order.get(get(profiles, h, "brand"), 9), h))
    return compatible[0] if compatible else "h200"


def fits_single_node(hw: Hardware, variant: dict) -> bool:
    vram = hw.profile.get("vram_gb")
    node_vram = vram if is_number(vram) else 0
    need = first_truthy(variant.get("vram_minimum_gb"), 0)
    return need <= 0 or node_vram <= 0 or need <= node_vram


def min_gpus_for_strategy(recipe: dict, key: str, gpu_id: str | None) -> Any:
    """strategy_min_gpus floor: a scalar for all, or per-strategy, with exact-GPU maps on top."""
    cfg = recipe.get("strategy_min_gpus")
    if cfg is None:
        return 0
    if is_number(cfg):
        return cfg

    def from_block(block: Any) -> Any:
        if block is None:
            return 0
        if is_number(block):
            return block
        return coalesce(get(block, key), get(block, f"multi_node_{key}"), get(block, f"single_node_{key}"), 0)

    return max(from_block(cfg), from_block(get(cfg, gpu_id)) if gpu_id else 0)


def nodes_for_strategy(recipe: dict, key: str, gpus_per_node: Any, gpu_id: str | None) -> int:
    need = min_gpus_for_strategy(recipe, key, gpu_id)
    return max(1, math.ceil(need / first_truthy(gpus_per_node, 8))) if truthy(need) else 1


def recommend_strategy(recipe: dict, node_count: int = 1) -> str:
    """The site's default strategy: the recipe's default_strategy (its multi-node sibling past
    one node), else TP, else the first compatible one."""
    compatible = effective_compatible_strategies(recipe)
    # A JS value like every recipe field (see get()): truthy() below is what rules out null.
    explicit: Any = recipe.get("default_strategy")
    if truthy(explicit) and explicit in compatible:
        if node_count > 1 and explicit.startswith("single_node_"):
            sibling = "multi_node_" + explicit[len("single_node_") :]
            if sibling in compatible:
                return sibling
        else:
            return explicit
    if node_count > 1:
        for name in ("multi_node_tp", "multi_node_dep", "multi_node_tep"):
            if name in compatible:
                return name
    if "single_node_tp" in compatible:
        return "single_node_tp"
    return compatible[0] if compatible else "single_node_tp"


def default_strategy(
    recipe: dict, variant_key: str, hw_id: str, strategies: dict, taxonomy: dict
) -> tuple[str, int]:
    """(strategy, node count) the site recommends for a variant on a hardware.

    Two nodes when the weights don't fit one node and a multi-node strategy is offered; a
    strategy the GPU opts out of (or can't reach its GPU floor on) is replaced by the first
    usable non-PD strategy; the node count grows to clear `strategy_min_gpus`.
    """
    hw = hardware_for(taxonomy, hw_id)
    variant = obj(get(recipe, "variants", variant_key))
    scalable = hw.profile.get("scalable") is not False
    usable = [
        s
        for s in effective_compatible_strategies(recipe)
        if _strategy_usable(recipe, s, hw, strategies, scalable)
    ]
    multi = scalable and any(str(s).startswith("multi_node_") for s in usable)
    base_nodes = 2 if not fits_single_node(hw, variant) and multi else 1
    chosen = recommend_strategy(recipe, base_nodes)
    if chosen not in usable:
        chosen = next((s for s in usable if s != "pd_cluster"), usable[0] if usable else chosen)
    floor = nodes_for_strategy(recipe, chosen, hw.profile.get("gpu_count"), hw_id)
    is_multi = get(strategies, chosen, "deploy_type") == "multi_node"
    return chosen, max(base_nodes, 2 if is_multi else 1, floor)


def _strategy_usable(recipe: dict, name: str, hw: Hardware, strategies: dict, scalable: bool) -> bool:
    if not is_strategy_supported_on_hardware(recipe, name, hw):
        return False
    deploy = get(strategies, name, "deploy_type")
    max_nodes = MAX_NODES if deploy in ("multi_node", "pd_cluster") else 1
    if max_nodes * first_truthy(hw.profile.get("gpu_count"), 8) < min_gpus_for_strategy(recipe, name, hw.id):
        return False
    return scalable or (not str(name).startswith("multi_node_") and name != "pd_cluster")


def default_features(recipe: dict, hw_id: str | None, variant_key: str | None = "default") -> list[str]:
    """Features the site turns on: all, minus opt_in_features and hardware_opt_in_features[hw],
    except those the variant forces on through `default_modes`.

    ``hw_id=None, variant_key=None`` asks it of the recipe as written, on no box: all minus
    opt_in_features. That is `ledger recipe lint`'s question (two conflicting features both on by
    default), since a lint warning is about the recipe file, not about one hardware or variant.
    """
    opt_in = set(recipe.get("opt_in_features") or [])
    opt_in |= set(get(recipe, "hardware_opt_in_features", hw_id) or [])
    forced = set(obj(get(recipe, "variants", variant_key, "default_modes")))
    return [f for f in obj(recipe.get("features")) if f in forced or f not in opt_in]


def default_pd_nodes(
    recipe: dict, variant_key: str, hw_id: str, strategies: dict, taxonomy: dict
) -> dict | str | None:
    """pd_nodes the site's API uses for pd_cluster: None (both pools co-located on one node, when
    the node holds the weights twice), {prefill, decode} whole nodes per pool (grown to each
    pool's GPU floor), or "skip" when a pool would need more than 4 nodes."""
    hw = hardware_for(taxonomy, hw_id)
    variant = obj(get(recipe, "variants", variant_key))
    need = first_truthy(variant.get("vram_minimum_gb"), 0)
    vram = hw.profile.get("vram_gb")
    node_vram = vram if is_number(vram) else 0
    count = hw.profile.get("gpu_count")
    gpu_count = count if is_number(count) else 0
    if gpu_count >= 2 and node_vram >= 2 * need:
        return None
    if node_vram <= 0 or need <= 0:
        return None
    per_role = math.ceil(need / node_vram)
    if per_role > 4:
        return "skip"

    def floored(role: str) -> int:
        mode = first_truthy(
            get(recipe, "strategy_overrides", "pd_cluster", role, "parallelism"),
            get(strategies, "pd_cluster", role, "parallelism"),
            "tp",
        )
        return max(per_role, nodes_for_strategy(recipe, mode, hw.profile.get("gpu_count"), hw_id))

    return {"prefill": floored("prefill"), "decode": floored("decode")}
