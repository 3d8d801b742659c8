"""Pydantic models of the vLLM recipes schema (recipes.vllm.ai), plus this project's additions.

The recipes schema belongs to another project and grows: every field seen in the 173 recipes of
the reference snapshot is typed here, and fields we do not know yet are kept as they are
(``extra="allow"``) so that a newer recipe still loads and renders. Known fields are strict: a
string where a number belongs is an error, never a silent coercion.

Our additions (the "superset"), all optional so that upstream recipes stay valid:
- ``features.<name>.conflicts_with``: features that must not be enabled together with this one;
- ``memory``: the checkpoint's components for ``ledger fit``;
- ``sglang``: SGLang's own launch args, env, port and image (``model``, ``variants.<v>``,
  ``hardware_overrides.<hw>``, ``variants.<v>.hardware_overrides.<hw>``, ``strategy_overrides.<s>``,
  ``strategy_overrides.<s>.hardware_overrides.<hw>``; see ``recipes/sglang.py``);
- ``hardware_notes`` is upstream; ``box`` profiles live in ``recipes/boxes/`` (see ``boxes.py``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from recipe_ledger.spec.versioned import version_problem

Args = list[str]
Env = dict[str, str]


class _Open(BaseModel):
    """Strict for known fields, tolerant of fields added upstream after our snapshot."""

    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)


class _Closed(BaseModel):
    """Strict and closed: our own additions, where an unknown field is a typo."""

    model_config = ConfigDict(extra="forbid", strict=True)


# ---------------------------------------------------------------- taxonomy and strategies


class HardwareProfile(_Open):
    brand: str
    generation: str
    display_name: str
    description: str = ""
    gpu_count: int
    vram_gb: float
    multi_node: bool = False
    restricted: bool = False
    scalable: bool = True


class Taxonomy(_Open):
    hardware_profiles: dict[str, HardwareProfile]
    tasks: list[dict[str, Any]] = Field(default_factory=list)
    strategies: list[str] = Field(default_factory=list)
    kv_offload_groups: dict[str, dict[str, Any]] = Field(default_factory=dict)
    kv_offload: dict[str, dict[str, Any]] = Field(default_factory=dict)


class HardwareMatch(_Open):
    min_gpus: int | None = None
    max_gpus: int | None = None
    multi_node: bool | None = None


class StrategyRole(_Open):
    vllm_args: Args = Field(default_factory=list)
    env: Env = Field(default_factory=dict)


class Strategy(_Open):
    name: str
    deploy_type: str
    display_name: str
    orientation: str = ""
    description: str = ""
    hardware_match: HardwareMatch = Field(default_factory=HardwareMatch)
    parallel_flag: str | None = None
    vllm_args: Args = Field(default_factory=list)
    env: Env = Field(default_factory=dict)
    parallelism: Any = None
    prefill: StrategyRole | None = None
    decode: StrategyRole | None = None
    router: dict[str, Any] | None = None


# ---------------------------------------------------------------- our SGLang superset


SGLANG_DEFAULT_PORT = 30000  # sglang.launch_server's own default (recipes.sglang keeps it in step)


class SglangBlock(_Closed):
    """How SGLang serves this recipe: its own flags, never vLLM's (``ledger recipe lint`` checks).

    Blocks are merged model -> variant -> hardware -> variant x hardware -> strategy -> strategy x
    hardware, the later winning per flag, like vLLM's layers. A selection with any block takes its
    args from the blocks alone, on top of the strategy's parallel layout (translated); without one,
    the resolved vLLM flags are translated where SGLang has a clear equivalent."""

    args: Args = Field(default_factory=list, description="sglang.launch_server flags, e.g. --tp-size 8.")
    env: Env = Field(default_factory=dict, description="Environment of the server process.")
    port: int | None = Field(
        default=None, ge=1, le=65535, description=f"The server's port (default {SGLANG_DEFAULT_PORT})."
    )
    docker_image: str | None = Field(
        default=None, description="The image for --docker (default: lmsysorg/sglang at our version)."
    )


# ---------------------------------------------------------------- recipe blocks


class Meta(_Open):
    title: str
    slug: str
    provider: str
    description: str
    date_added: dt.date | str | None = None
    date_updated: dt.date | str | None = None
    difficulty: str | None = None
    tasks: list[str] = Field(default_factory=list)
    related_recipes: list[str] = Field(default_factory=list)
    hardware: dict[str, str] = Field(default_factory=dict)
    performance_headline: str | None = None
    default_hardware: str | None = None
    platforms: list[dict[str, Any]] = Field(default_factory=list)


class ModelBlock(_Open):
    model_id: str
    min_vllm_version: str | None = None
    architecture: str | None = None
    parameter_count: str | None = None
    active_parameters: str | None = None
    context_length: int | None = None
    base_args: Args = Field(default_factory=list)
    base_env: Env = Field(default_factory=dict)
    docker_image: str | dict[str, str | dict[str, str]] | None = None
    install: dict[str, Any] | None = None
    supports_dcp: bool | None = None
    nightly_required: bool | None = None
    sglang: SglangBlock | None = None  # ours: the base SGLang block of every variant and hardware


class ArgsOverride(_Open):
    args: Args = Field(default_factory=list)


class FeatureMode(_Open):
    label: str | None = None
    description: str | None = None
    args: Args = Field(default_factory=list)
    variants: list[str] | None = None
    hardware: list[str] | dict[str, Any] | None = None
    hardware_overrides: dict[str, ArgsOverride] = Field(default_factory=dict)


class Feature(_Open):
    description: str = ""
    label: str | None = None
    args: Args = Field(default_factory=list)
    default_mode: str | None = None
    modes: dict[str, FeatureMode] = Field(default_factory=dict)
    hardware_overrides: dict[str, ArgsOverride] = Field(default_factory=dict)
    strategies: list[str] | None = None
    hardware: list[str] | dict[str, Any] | None = None
    # Ours: features that must not be enabled together with this one (lint checks it).
    conflicts_with: list[str] = Field(default_factory=list)


class HardwareOverride(_Open):
    extra_args: Args = Field(default_factory=list)
    extra_env: Env = Field(default_factory=dict)
    docker_image: str | None = None
    install_note: str | None = None


class SglangHardwareOverride(HardwareOverride):
    """A hardware override of the recipe or of a variant: the places an ``sglang`` block is read."""

    sglang: SglangBlock | None = None


class Variant(_Open):
    precision: str | None = None
    vram_minimum_gb: float | None = None
    description: str | None = None
    label: str | None = None
    model_id: str | None = None
    extra_args: Args = Field(default_factory=list)
    extra_env: Env = Field(default_factory=dict)
    hardware_overrides: dict[str, SglangHardwareOverride] = Field(default_factory=dict)
    tp: int | dict[str, int] | None = None
    supported_hardware: list[str] | None = None
    min_vllm_version: str | None = None
    precision_hardware: dict[str, Any] | None = None
    default_modes: dict[str, str] | None = None
    docker_image: str | dict[str, str] | None = None
    sglang: SglangBlock | None = None  # ours


class PdRole(_Open):
    nodes: int | dict[str, int] | None = None
    parallelism: str | None = None
    tp: int | dict[str, int] | None = None
    vllm_args: Args = Field(default_factory=list)
    env: Env = Field(default_factory=dict)
    hardware_overrides: dict[str, HardwareOverride] = Field(default_factory=dict)


class StrategyOverride(_Open):
    tp: int | dict[str, int] | None = None
    extra_args: Args = Field(default_factory=list)
    extra_env: Env = Field(default_factory=dict)
    env: Env = Field(default_factory=dict)
    vllm_args: Args = Field(default_factory=list)
    hardware_overrides: dict[str, SglangHardwareOverride] = Field(default_factory=dict)
    prefill: PdRole | None = None
    decode: PdRole | None = None
    router: dict[str, Any] | None = None
    pool_modes: Any = None
    sglang: SglangBlock | None = None  # ours: SGLang's flags for this strategy's layout


class Dependency(_Open):
    note: str | None = None
    command: str | None = None
    optional: bool | None = None
    brand: str | list[str] | None = None
    install_modes: list[str] | None = None


class HardwareNote(_Open):
    title: str
    body: str
    link: dict[str, str] | None = None


# ---------------------------------------------------------------- our memory superset


ComponentKind = Literal["experts", "engram", "dense", "embedding", "scales", "drafter", "vision", "other"]


class MemoryComponent(_Closed):
    """One part of the checkpoint, as a model card's memory table lists it."""

    name: str
    kind: ComponentKind
    params_b: float | None = Field(default=None, description="Entries (parameters), in billions.")
    stored_gib: float = Field(description="Bytes on disk, in GiB.")
    offload: str | None = Field(
        default=None,
        description="How it can leave the GPU: 'uva' (rows read over the host link), "
        "'host_table' (an n-gram table kept in host RAM), or null (must be GPU-resident).",
    )
    param_names: list[str] = Field(
        default_factory=list,
        description="Parameter names of this component ({i} for a layer index), to check "
        "--cpu-offload-params patterns against.",
    )


class RoutingBlock(_Closed):
    """How a MoE layer routes: what ``ledger fit --predict`` needs to count the expert bytes a
    decode step reads."""

    experts_per_layer: int = Field(gt=0, le=65536, description="Routed experts in each MoE layer.")
    experts_per_token: int = Field(
        gt=0, le=1024, description="Routed experts each token selects (top-k), shared experts excluded."
    )


class ShapeBlock(_Closed):
    """The transformer's shape where it sets what a decode step sends between GPUs: what
    ``ledger fit --predict`` needs for the TP all-reduces and EP all-to-alls (recipes.parallel_cost)."""

    layers: int = Field(gt=0, le=4096, description="Transformer layers (each ends two TP all-reduces).")
    hidden_size: int = Field(gt=0, le=1_048_576, description="The residual stream's width (hidden_size).")
    moe_layers: int = Field(
        default=0, ge=0, le=4096, description="Layers whose MLP is routed (MoE); 0 for a dense model."
    )

    @model_validator(mode="after")
    def _moe_within_layers(self) -> ShapeBlock:
        if self.moe_layers > self.layers:
            raise ValueError(f"moe_layers ({self.moe_layers}) exceeds layers ({self.layers})")
        return self


MEMORY_SCHEMA_VERSION = 1  # the version of our superset block; upstream recipe fields are not ours


class MemoryBlock(_Closed):
    """Checkpoint components and KV cost: the input of ``ledger fit``."""

    # exclude: read, never written back (the site's recipe JSON shows the recipe, not our bookkeeping).
    schema_version: int = Field(
        default=MEMORY_SCHEMA_VERSION,
        exclude=True,
        description="Version of this block (the superset), not of the recipe.",
    )

    @field_validator("schema_version", mode="before")
    @classmethod
    def _readable_version(cls, value: object) -> object:
        # The same rule as every spec file (spec.versioned), reported at memory.schema_version.
        problem = version_problem(value, MEMORY_SCHEMA_VERSION)
        if problem:
            message, hint = problem
            text = message + (f" (next: {hint})" if hint else "")
            raise PydanticCustomError("schema_version", "{text}", {"text": text})
        return value

    source: str | None = Field(
        default=None, description="Where the table comes from (a guide section, a report)."
    )
    disk_gb: float | None = Field(
        default=None, description="The checkpoint's size as the guide states it, GB."
    )
    headroom_factor: float = Field(default=1.2, description="The schema's vram_minimum_gb = total x this.")
    components: list[MemoryComponent]
    kv_bytes_per_token: float | None = Field(
        default=None, description="Global KV bytes per token of context (all layers, one sequence)."
    )
    kv_fixed_gib: float = Field(default=0.0, description="KV that does not grow with context (windows).")
    activation_reserve_gib: float = Field(
        default=0.0, description="Runtime buffers outside weights and KV (activations, graphs, indexer)."
    )
    routing: RoutingBlock | None = Field(
        default=None, description="MoE routing (experts per layer, top-k), for the throughput ceiling."
    )
    shape: ShapeBlock | None = Field(
        default=None,
        description="Layers, hidden size and MoE layers, for what TP and EP cost between GPUs per step.",
    )


# ---------------------------------------------------------------- the recipe


class Recipe(_Open):
    meta: Meta
    model: ModelBlock
    features: dict[str, Feature] = Field(default_factory=dict)
    opt_in_features: list[str] = Field(default_factory=list)
    variants: dict[str, Variant]
    compatible_strategies: list[str] = Field(default_factory=list)
    default_strategy: str | dict[str, str] | None = None
    strategy_overrides: dict[str, StrategyOverride] = Field(default_factory=dict)
    strategy_hardware: dict[str, dict[str, str]] = Field(default_factory=dict)
    strategy_min_gpus: dict[str, int | dict[str, int]] = Field(default_factory=dict)
    hardware_overrides: dict[str, SglangHardwareOverride] = Field(default_factory=dict)
    hardware_opt_in_features: dict[str, list[str]] = Field(default_factory=dict)
    hardware_notes: dict[str, HardwareNote] = Field(default_factory=dict)
    kv_offload_support: dict[str, str] = Field(default_factory=dict)
    dependencies: list[Dependency] = Field(default_factory=list)
    omni: dict[str, Any] | None = None
    guide: str = ""
    memory: MemoryBlock | None = None
