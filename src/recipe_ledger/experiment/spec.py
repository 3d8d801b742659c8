"""The experiment spec (``experiments/*.yaml``): strict, versioned, with a JSON Schema.

An experiment names a box, a control arm and one or more candidate arms, the instruments that
measure them, the points of the sweep (concurrency levels), how many times each arm is launched
(repeats, interleaved ABBA, a fresh launch each time) and the bars that decide the verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from recipe_ledger.spec.versioned import load_versioned

EXPERIMENT_SCHEMA_VERSION = 1

Engine = Literal["vllm", "sglang"]
ENGINE_DESCRIPTION = "The serving engine of this arm; default: the experiment's engine."


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Overrides(_Closed):
    """Changes on top of an arm's resolved command: extra flags (last wins) and environment."""

    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    remove_args: list[str] = Field(default_factory=list, description="Flags to drop, with their values.")


class RecipeArm(_Closed):
    kind: Literal["recipe"] = "recipe"
    recipe: str = Field(description="Recipe name, org/name or path under the recipes root.")
    hardware: str | None = Field(default=None, description="Taxonomy id; default: the box's.")
    strategy: str | None = None
    variant: str | None = None
    features: list[str] | None = Field(default=None, description="Default: the recipe's default features.")
    model_path: str | None = Field(
        default=None, description="Serve this local directory instead of the recipe's model id."
    )
    engine: Engine | None = Field(default=None, description=ENGINE_DESCRIPTION)
    overrides: Overrides = Field(default_factory=Overrides)


class CommandArm(_Closed):
    kind: Literal["command"] = "command"
    argv: list[str] = Field(min_length=1, description="The server command, e.g. [vllm, serve, DIR, ...].")
    env: dict[str, str] = Field(default_factory=dict)
    engine: Engine | None = Field(default=None, description=ENGINE_DESCRIPTION)
    overrides: Overrides = Field(default_factory=Overrides)


class ReleaseArm(_Closed):
    kind: Literal["release"] = "release"
    release: str = Field(description="LANE@VERSION of a published release.")
    engine: Engine | None = Field(default=None, description=ENGINE_DESCRIPTION)
    overrides: Overrides = Field(default_factory=Overrides)


class StudyArm(_Closed):
    """An arm of a study with no server (a GPU microbenchmark): only a name and parameters, which
    the command instrument's template receives as {arm} and {<param>}."""

    kind: Literal["study"] = "study"
    params: dict[str, str] = Field(default_factory=dict)


def _arm_kind(value: Any) -> str:
    """An arm's kind, written or implied by its main key (recipe:, argv:, release:)."""
    if isinstance(value, (RecipeArm, CommandArm, ReleaseArm, StudyArm)):
        return value.kind
    if isinstance(value, dict):
        if "kind" in value:
            return str(value["kind"])
        for key, kind in (
            ("recipe", "recipe"),
            ("argv", "command"),
            ("release", "release"),
            ("params", "study"),
        ):
            if key in value:
                return kind
    return "recipe"


Arm = Annotated[
    Annotated[RecipeArm, Tag("recipe")]
    | Annotated[CommandArm, Tag("command")]
    | Annotated[ReleaseArm, Tag("release")]
    | Annotated[StudyArm, Tag("study")],
    Discriminator(_arm_kind),
]


class Instrument(_Closed):
    """A benchmark client: the tight default is ``vllm bench serve``; ``command`` runs a script
    that prints JSON metrics (for studies with no server)."""

    name: str
    kind: Literal["vllm_bench_serve", "sglang_bench_serving", "command", "aiperf_replay", "tail"]
    options: dict[str, Any] = Field(default_factory=dict)
    command: list[str] | None = Field(
        default=None,
        description="For kind=command: argv template; {arm}, {point}, {repeat}, {seed}, {out} are filled in.",
    )

    @model_validator(mode="after")
    def _command_needs_argv(self) -> Instrument:
        if self.kind == "command" and not self.command:
            raise ValueError("an instrument of kind 'command' needs a 'command' argv template")
        return self


class LaunchSweep(_Closed):
    """Points that are values of a launch setting, not concurrency levels: each point relaunches
    every arm with ``args`` appended (``{point}`` replaced by the point's value), and the client
    runs at one fixed ``concurrency``. A value the engine refuses at boot becomes a rejected point
    with the engine's reason; the sweep goes on."""

    args: list[str] = Field(
        min_length=1,
        description="Flags appended per point, e.g. [--max-num-seqs, '{point}'] or "
        '[--speculative-config, \'{"method": "ngram", "num_speculative_tokens": {point}}\'].',
    )
    concurrency: int = Field(default=1, ge=1, description="The client's concurrency at every point.")

    @model_validator(mode="after")
    def _names_the_point(self) -> LaunchSweep:
        if not any("{point}" in arg for arg in self.args):
            raise ValueError("launch_sweep.args must contain {point} where the point's value goes")
        return self

    def args_for(self, point: int) -> list[str]:
        return [arg.replace("{point}", str(point)) for arg in self.args]


class Bar(_Closed):
    metric: str = Field(description="Normalized metric name, e.g. output_tps_total, ttft_ms_p50.")
    point: int | Literal["all"] = Field(description="The sweep point the bar applies to, or 'all'.")
    direction: Literal["higher", "lower"]
    min_effect: float = Field(gt=0, lt=10, description="Smallest relative effect that matters (0.03 = 3%).")
    instrument: str | None = Field(default=None, description="Default: the first instrument.")
    agreement_threshold: float = Field(
        default=0.02,
        gt=0,
        lt=1,
        description="Largest relative spread of one arm's repeats that still counts as agreeing "
        "(the replicate gate). 2% suits a GPU sweep; a shared CPU box needs more, and says so.",
    )


class Server(_Closed):
    launcher: Literal["process", "docker"] = "process"
    image: str | None = Field(
        default=None, description="Docker image (by digest, ideally) for launcher=docker."
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    health_timeout_s: float = Field(default=600, gt=0)
    needs_server: bool = True
    warmup_requests: int = Field(
        default=4,
        ge=0,
        description="Requests sent after boot and before measuring: the first requests "
        "of a fresh server are slow (lazy initialisation), and that belongs to no sweep point.",
    )
    volumes: dict[str, str] = Field(default_factory=dict, description="host path -> container path")
    gpus: Literal["all", "none"] | int = "none"


class Calibration(_Closed):
    repeats: int = Field(default=3, ge=2, description="A/A launches of the control.")
    max_age_days: float = Field(default=14, gt=0)


class Experiment(_Closed):
    schema_version: int = Field(default=EXPERIMENT_SCHEMA_VERSION)
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    hypothesis: str
    box: str
    engine: Literal["vllm", "sglang", "none"] = Field(
        default="vllm",
        description="The engine of every server arm that names none itself; 'none' for studies "
        "and stand-in servers.",
    )
    server: Server = Field(default_factory=Server)
    control: Arm
    candidates: dict[str, Arm] = Field(min_length=1)
    instruments: list[Instrument] = Field(min_length=1)
    points: list[int] = Field(min_length=1, description="Sweep points, e.g. concurrency 1, 2, 4, 8, 16.")
    repeats: int = Field(default=2, ge=1, description="Launches per arm, interleaved ABBA.")
    bars: list[Bar] = Field(min_length=1)
    calibration: Calibration = Field(default_factory=Calibration)
    seed: int = 0
    launch_sweep: LaunchSweep | None = Field(
        default=None, description="Make the points values of a launch flag (each point relaunches)."
    )

    @model_validator(mode="after")
    def _names_are_consistent(self) -> Experiment:
        if "control" in self.candidates:
            raise ValueError("'control' is the control arm's name; give the candidate another name")
        instruments = {i.name for i in self.instruments}
        for bar in self.bars:
            if bar.instrument and bar.instrument not in instruments:
                raise ValueError(f"bar names instrument {bar.instrument!r}, not one of {sorted(instruments)}")
            if bar.point != "all" and bar.point not in self.points:
                raise ValueError(f"bar point {bar.point} is not one of the points {self.points}")
        return self

    @model_validator(mode="after")
    def _studies_have_no_server(self) -> Experiment:
        kinds = {arm.kind for arm in (self.control, *self.candidates.values())}
        if "study" in kinds and self.server.needs_server:
            raise ValueError("study arms run no server: set server.needs_server to false")
        if not self.server.needs_server and any(i.kind != "command" for i in self.instruments):
            raise ValueError("with no server only 'command' instruments can measure")
        return self

    @property
    def arm_names(self) -> list[str]:
        return ["control", *self.candidates]

    def arm(self, name: str) -> RecipeArm | CommandArm | ReleaseArm | StudyArm:
        return self.control if name == "control" else self.candidates[name]

    def engine_of(self, arm_name: str) -> Literal["vllm", "sglang", "none"]:
        """The engine that serves ``arm_name``: its own ``engine:``, else the experiment's (a study
        arm runs no server: "none")."""
        arm = self.arm(arm_name)
        if isinstance(arm, StudyArm):
            return "none"
        return arm.engine or self.engine

    @property
    def engines(self) -> set[str]:
        """The engines of the server arms; more than one makes a cross-engine experiment."""
        return {str(self.engine_of(name)) for name in self.arm_names} - {"none"}


def load_experiment(path: Path | str) -> Experiment:
    """Load and validate an experiment file; errors name the file, the line and the field."""
    return load_versioned(path, Experiment, EXPERIMENT_SCHEMA_VERSION, what="experiment")


def experiment_json_schema() -> dict:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **Experiment.model_json_schema()}
