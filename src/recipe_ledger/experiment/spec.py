"""The experiment spec (``experiments/*.yaml``): strict, versioned, with a JSON Schema.

An experiment names a box, a control arm and one or more candidate arms, the instruments that
measure them, the points of the sweep (concurrency levels), how many times each arm is launched
(repeats, interleaved ABBA, a fresh launch each time) and the bars that decide the verdict.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from recipe_ledger import engines as engine_registry
from recipe_ledger import instruments as instrument_registry
from recipe_ledger import quality, sequential
from recipe_ledger.experiment import entry_size, pointwise
from recipe_ledger.instruments import template
from recipe_ledger.spec.bounds import (
    MAX_ARMS,
    MAX_ITEMS,
    MAX_POINTS,
    MAX_REPEATS,
    MAX_SEED,
    MAX_TIMEOUT_S,
    ArgList,
    EnvMap,
    LongText,
    PathText,
    Point,
    ShortText,
    Slug,
)
from recipe_ledger.spec.registered import RegisteredName
from recipe_ledger.spec.validate import validate_doc
from recipe_ledger.spec.versioned import check_doc
from recipe_ledger.spec.yamlfile import load_yaml
from recipe_ledger.verdict import DEFAULT_CALIBRATION_REPEATS, DEFAULT_REPEATS

EXPERIMENT_SCHEMA_VERSION = 1
MAX_SAMPLES_PER_LAUNCH = 20


# Engine names are checked against ``recipe_ledger.engines`` when a spec is validated, so a plugin's
# engine is as good as a built-in; an arm may not name a stand-in ("none"), the experiment may.
Engine = Annotated[str, RegisteredName(functools.partial(engine_registry.names, stand_ins=False))]
AnyEngine = Annotated[str, RegisteredName(engine_registry.names)]
CONTROL_ARM = "control"  # what every bar compares a candidate with (the file's `control:`)
ENGINE_DESCRIPTION = "The serving engine of this arm; default: the experiment's engine."
OVERRIDES_DESCRIPTION = "Flags and environment changed on top of the arm's command."
ARM_POINTS_DESCRIPTION = (
    "The sweep points this arm is measured at (some of the experiment's points); default: all of "
    "them. A bar compares a candidate with the control at the points both are measured at."
)


def _arm_points_field() -> Any:
    # One field, one description, on every arm kind (InferenceX sweeps each config over its own range).
    return Field(default=None, min_length=1, max_length=MAX_POINTS, description=ARM_POINTS_DESCRIPTION)


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Overrides(_Closed):
    """Changes on top of an arm's resolved command: extra flags (last wins) and environment."""

    args: ArgList = Field(
        default_factory=list,
        description='Flags appended to the arm\'s command, e.g. [--cpu-offload-gb, "70"]; a flag '
        "the command already has is replaced (last wins).",
    )
    env: EnvMap = Field(
        default_factory=dict, description="Environment variables set on top of the arm's own."
    )
    remove_args: ArgList = Field(default_factory=list, description="Flags to drop, with their values.")


class RecipeArm(_Closed):
    """An arm served by a recipe's resolved launch command (``ledger recipe command``), on the box's
    hardware unless another is named."""

    kind: Literal["recipe"] = Field(
        default="recipe", description="'recipe'; implied when the arm has a recipe: key."
    )
    recipe: PathText = Field(description="Recipe name, org/name or path under the recipes root.")
    hardware: ShortText | None = Field(default=None, description="Taxonomy id; default: the box's.")
    strategy: ShortText | None = Field(
        default=None, description="Strategy id (recipes/strategies/); default: the recipe's default."
    )
    variant: ShortText | None = Field(default=None, description="Recipe variant; default: 'default'.")
    features: list[ShortText] | None = Field(
        default=None, max_length=MAX_ITEMS, description="Default: the recipe's default features."
    )
    model_path: PathText | None = Field(
        default=None, description="Serve this local directory instead of the recipe's model id."
    )
    image: ShortText | None = Field(
        default=None,
        description="The docker image of this arm (a docker launcher); default: server.image.",
    )
    engine: Engine | None = Field(default=None, description=ENGINE_DESCRIPTION)
    overrides: Overrides = Field(default_factory=Overrides, description=OVERRIDES_DESCRIPTION)
    points: list[Point] | None = _arm_points_field()


class CommandArm(_Closed):
    """An arm served by a command written out in full (no recipe behind it)."""

    kind: Literal["command"] = Field(
        default="command", description="'command'; implied when the arm has an argv: key."
    )
    argv: ArgList = Field(min_length=1, description="The server command, e.g. [vllm, serve, DIR, ...].")
    env: EnvMap = Field(default_factory=dict, description="Environment of the server process.")
    image: ShortText | None = Field(
        default=None,
        description="The docker image of this arm (a docker launcher); default: server.image.",
    )
    engine: Engine | None = Field(default=None, description=ENGINE_DESCRIPTION)
    overrides: Overrides = Field(default_factory=Overrides, description=OVERRIDES_DESCRIPTION)
    points: list[Point] | None = _arm_points_field()


class ReleaseArm(_Closed):
    """An arm served exactly as a published release pinned it (image, argv, env)."""

    kind: Literal["release"] = Field(
        default="release", description="'release'; implied when the arm has a release: key."
    )
    release: ShortText = Field(description="LANE@VERSION of a published release.")
    engine: Engine | None = Field(default=None, description=ENGINE_DESCRIPTION)
    overrides: Overrides = Field(default_factory=Overrides, description=OVERRIDES_DESCRIPTION)
    points: list[Point] | None = _arm_points_field()


class StudyArm(_Closed):
    """An arm of a study with no server (a GPU microbenchmark): only a name and parameters, which
    the command instrument's template receives as {arm} and {<param>}."""

    kind: Literal["study"] = Field(
        default="study", description="'study'; implied when the arm has a params: key."
    )
    params: EnvMap = Field(
        default_factory=dict, description="Values the command instrument's template receives as {<param>}."
    )
    points: list[Point] | None = _arm_points_field()


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


def _describe_kinds() -> str:
    """The ``kind`` field's description, from what each registered kind says of itself."""
    said = [f"{kind} ({instrument_registry.get(kind).summary})" for kind in instrument_registry.kinds()]
    listed = said[0] if len(said) == 1 else f"{', '.join(said[:-1])} or {said[-1]}"
    return f"{listed}; a plugin adds its own (docs/instruments.md)."


# An instrument kind the registry knows (recipe_ledger.instruments): a built-in or a plugin's.
InstrumentKindName = Annotated[str, RegisteredName(instrument_registry.kinds, _describe_kinds)]


class Instrument(_Closed):
    """A benchmark client: the tight default is ``vllm bench serve``; ``command`` runs a script
    that prints JSON metrics (for studies with no server)."""

    name: Slug = Field(description="The instrument's name; bars and metrics refer to it.")
    kind: InstrumentKindName  # described by the registry: see _describe_kinds
    options: dict[ShortText, Any] = Field(
        default_factory=dict,
        max_length=MAX_ITEMS,
        description="Options of the benchmark client, as its flags without dashes (dataset_name, "
        "random_input_len, num_prompts, tokenizer...); the point sets the concurrency.",
    )
    command: ArgList | None = Field(
        default=None,
        description="For kind=command: argv template; {arm}, {point}, {repeat}, {seed}, {out} are filled in.",
    )
    samples_per_launch: int = Field(
        default=1,
        ge=1,
        le=MAX_SAMPLES_PER_LAUNCH,
        description="Times each point is measured inside one launch (the seeds ran each point twice). "
        "The verdict counts a launch once, by the mean of its samples' logarithms, and reports their "
        "spread apart: repeats inside one launch never pass for launch-to-launch evidence.",
    )

    @model_validator(mode="after")
    def _command_needs_argv(self) -> Instrument:
        if instrument_registry.get(self.kind).needs_command and not self.command:
            raise ValueError(f"an instrument of kind {self.kind!r} needs a 'command' argv template")
        return self

    @model_validator(mode="after")
    def _template_fields_are_plain(self) -> Instrument:
        # Refused here, when the file loads: str.format would obey {arm:>1500000000} mid-run.
        if instrument_registry.get(self.kind).needs_command:
            for number, part in enumerate(self.command or []):
                try:
                    template.fields(part)
                except template.TemplateError as error:
                    raise ValueError(f"instrument {self.name!r} command[{number}] {error}") from None
        return self

    def template_fields(self) -> list[tuple[int, str]]:
        """(argv index, field name) of every field this instrument's command template fills."""
        if not instrument_registry.get(self.kind).needs_command:
            return []
        argv = enumerate(self.command or [])
        return [(number, name) for number, part in argv for name in template.fields(part)]


class LaunchSweep(_Closed):
    """Points that are values of a launch setting, not concurrency levels: each point relaunches
    every arm with ``args`` appended (``{point}`` replaced by the point's value), and the client
    runs at one fixed ``concurrency``. A value the engine refuses at boot becomes a rejected point
    with the engine's reason; the sweep goes on."""

    args: ArgList = Field(
        min_length=1,
        description="Flags appended per point, e.g. [--max-num-seqs, '{point}'] or "
        '[--speculative-config, \'{"method": "ngram", "num_speculative_tokens": {point}}\'].',
    )
    concurrency: int = Field(
        default=1, ge=1, le=100_000, description="The client's concurrency at every point."
    )
    arms: list[Slug] | None = Field(
        default=None,
        max_length=MAX_ITEMS,
        description="The arms the flags apply to (default: every arm). The others launch as they "
        "are at every point: 004's k sweep measures each k against a control without speculation.",
    )

    def applies_to(self, arm: str) -> bool:
        return self.arms is None or arm in self.arms

    @model_validator(mode="after")
    def _names_the_point(self) -> LaunchSweep:
        if not any("{point}" in arg for arg in self.args):
            raise ValueError("launch_sweep.args must contain {point} where the point's value goes")
        return self

    def args_for(self, point: int) -> list[str]:
        return [arg.replace("{point}", str(point)) for arg in self.args]


class Bar(_Closed):
    """A bar the candidate must clear against the control on one metric: the verdict's rule."""

    kind: Literal["speed"] = Field(
        default="speed", description="'speed' (a ratio against the control); implied without margin:."
    )
    metric: ShortText = Field(
        min_length=1, description="Normalized metric name, e.g. output_tps_total, ttft_ms_p50."
    )
    point: Point | Literal["all"] = Field(description="The sweep point the bar applies to, or 'all'.")
    direction: Literal["higher", "lower"] = Field(description="Which way is better for this metric.")
    min_effect: float = Field(gt=0, lt=1, description="Smallest relative effect that matters (0.03 = 3%).")
    instrument: Slug | None = Field(default=None, description="Default: the first instrument.")
    agreement_threshold: float = Field(
        default=0.02,
        gt=0,
        lt=1,
        description="Largest relative spread of one arm's repeats that still counts as agreeing "
        "(the replicate gate). 2% suits a GPU sweep; a shared CPU box needs more, and says so.",
    )


class QualityBar(_Closed):
    """A quality bar: the candidate keeps the model's answers. Non-inferiority on one item metric of
    a quality instrument (answer agreement, task accuracy, probes): the candidate's share of items
    kept is not below the control's by more than ``margin``, shown at the design's error rate
    (``rl-quality/1``, docs/verdicts.md). A speed win whose quality bar is not shown is published as
    "faster, quality not shown" or "faster, worse answers", never as a win."""

    kind: Literal["quality"] = Field(
        default="quality", description="'quality'; implied when the bar has a margin: key."
    )
    metric: ShortText = Field(
        min_length=1,
        description="An item metric of the bar's instrument: answer_match_rate, top1_agreement "
        "(agreement), eval_accuracy (lm_eval), probes_passed_rate (probes).",
    )
    point: Point | Literal["all"] = Field(description="The sweep point the bar applies to, or 'all'.")
    instrument: Slug | None = Field(
        default=None, description="The quality instrument; default: the first instrument."
    )
    margin: float = Field(
        default=quality.DEFAULT_MARGIN,
        gt=0,
        lt=1,
        description="How much worse the candidate may be, as a share of items (0.05: five answers in "
        "a hundred). Fewer items than quality.items_to_show can never show it.",
    )


def _bar_kind(value: Any) -> str:
    """A bar's kind, written or implied: a margin makes it a quality bar."""
    if isinstance(value, (Bar, QualityBar)):
        return value.kind
    if isinstance(value, dict):
        if "kind" in value:
            return str(value["kind"])
        if "margin" in value:
            return "quality"
    return "speed"


AnyBar = Annotated[
    Annotated[Bar, Tag("speed")] | Annotated[QualityBar, Tag("quality")], Discriminator(_bar_kind)
]


class Server(_Closed):
    """How every server arm is launched and reached: one fresh server per launch."""

    launcher: Literal["process", "docker"] = Field(
        default="process", description="process (a child process here) or docker (a container)."
    )
    image: ShortText | None = Field(
        default=None, description="Docker image (by digest, ideally) for launcher=docker."
    )
    host: ShortText = Field(
        default="127.0.0.1", description="Address the server listens on and is measured at."
    )
    port: int = Field(default=8000, ge=1, le=65535, description="Port the server listens on.")
    health_timeout_s: float = Field(
        default=600,
        gt=0,
        le=MAX_TIMEOUT_S,
        description="Seconds a launch may take to answer /health before it counts as failed.",
    )
    needs_server: bool = Field(
        default=True, description="false for studies: no server, only command instruments."
    )
    warmup_requests: int = Field(
        default=4,
        ge=0,
        le=10_000,
        description="Requests sent after boot and before measuring: the first requests "
        "of a fresh server are slow (lazy initialisation), and that belongs to no sweep point.",
    )
    volumes: dict[PathText, PathText] = Field(
        default_factory=dict, max_length=MAX_ITEMS, description="host path -> container path"
    )
    gpus: Literal["all", "none"] | Annotated[int, Field(ge=0, le=1024)] = Field(
        default="none", description="GPUs given to the container: all, none or a count (launcher=docker)."
    )


class Calibration(_Closed):
    """A/A launches of the control (``ledger calibrate``): the instrument's noise, hence the MDE."""

    repeats: int = Field(
        default=DEFAULT_CALIBRATION_REPEATS,
        ge=2,
        le=MAX_REPEATS,
        description="A/A launches of the control: the fixed design's inline calibration, and "
        "`ledger calibrate`.",
    )
    max_age_days: float = Field(
        default=14, gt=0, le=3650, description="Older calibrations no longer count: calibrate again."
    )


class Design(_Closed):
    """How launches are spent: the sequential design (the default) looks after every launch pair and
    stops once every bar is decided; the fixed design launches ``repeats`` per arm, then decides."""

    kind: Literal["sequential", "fixed"] = Field(
        default="sequential",
        description="sequential (rl-sequential/1, a look after every launch pair) or fixed "
        "(rl-verdict/2 after `repeats` launches per arm). docs/verdicts.md.",
    )
    cap: int | None = Field(
        default=None,
        ge=sequential.MIN_PAIRS,
        le=sequential.MAX_CAP,
        description="Sequential: launches per arm at most. Default: what budget_box_hours buys at "
        f"this box's recorded launch time, else {sequential.DEFAULT_CAP}.",
    )
    budget_box_hours: float | None = Field(
        default=None,
        gt=0,
        le=100_000,
        description="Sequential: box-hours the experiment may spend; sets the cap from the box's "
        "recorded launch time when no cap is given.",
    )
    pairs_per_look: int = Field(
        default=1,
        ge=1,
        le=sequential.MAX_CAP,
        description="Sequential: a look after every block of this many launch pairs.",
    )
    alpha: float = Field(
        default=sequential.DEFAULT_ALPHA,
        gt=0,
        le=0.2,
        description="Sequential: false calls (win or regression at no true effect) over the whole "
        "sequence, both sides together.",
    )

    @model_validator(mode="after")
    def _sequential_fields_need_the_sequential_design(self) -> Design:
        if self.kind == "fixed":
            set_here = sorted(self.model_fields_set & {"cap", "budget_box_hours", "pairs_per_look", "alpha"})
            if set_here:
                raise ValueError(
                    f"{', '.join(set_here)} belong to the sequential design; the fixed design "
                    "launches `repeats` per arm: remove them or set kind: sequential"
                )
        return self


class Experiment(_Closed):
    """An experiment file (experiments/*.yaml): a control, candidates, instruments, points and bars."""

    schema_version: int = Field(
        default=EXPERIMENT_SCHEMA_VERSION, description="The file format's version; a newer one is refused."
    )
    name: Slug = Field(
        description="The experiment's id in the ledger: lowercase letters, digits, '.', '_', '-'.",
    )
    hypothesis: LongText = Field(
        description="What the candidates should do better, and why: recorded with the result."
    )
    box: Slug = Field(
        description="Box profile id (recipes/boxes/), e.g. dgx-station-gb300; `ledger fit --list-boxes`."
    )
    engine: AnyEngine = Field(
        default="vllm",
        description="The engine of every server arm that names none itself; 'none' for studies "
        "and stand-in servers.",
    )
    server: Server = Field(default_factory=Server, description="How servers are launched and reached.")
    control: Arm = Field(description="The arm every candidate is compared with (named 'control').")
    candidates: dict[Slug, Arm] = Field(
        min_length=1,
        max_length=MAX_ARMS,
        description="The arms under test, by name (any name but 'control').",
    )
    instruments: list[Instrument] = Field(
        min_length=1, max_length=MAX_ARMS, description="The benchmark clients that measure every arm."
    )
    points: list[Point] = Field(
        min_length=1, max_length=MAX_POINTS, description="Sweep points, e.g. concurrency 1, 2, 4, 8, 16."
    )
    repeats: int = Field(
        default=DEFAULT_REPEATS,
        ge=1,
        le=MAX_REPEATS,
        description="The fixed design: launches per arm, interleaved ABBA. Setting it without a "
        "`design` keeps the fixed design (files written before the sequential default mean what they said).",
    )
    design: Design | None = Field(
        default=None,
        description="How launches are spent; default: sequential, or fixed when `repeats` is set.",
    )
    bars: list[AnyBar] = Field(
        min_length=1,
        max_length=MAX_ITEMS,
        description="The bars that decide the verdict: speed bars (min_effect) and quality bars (margin).",
    )
    calibration: Calibration = Field(
        default_factory=Calibration, description="How the control's noise is measured."
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=MAX_SEED,
        description="Seed of the instruments' workloads; {seed} in command templates.",
    )
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
        swept = set(self.launch_sweep.arms or ()) if self.launch_sweep else set()
        if swept - set(self.arm_names):
            raise ValueError(
                f"launch_sweep.arms names {sorted(swept - set(self.arm_names))}, not arms of this "
                f"experiment ({self.arm_names})"
            )
        return self

    @model_validator(mode="after")
    def _arm_points_are_compared(self) -> Experiment:
        # An arm's own points are some of the sweep's, and every bar must find the control and each
        # candidate at a point it decides: found at load, not as "no measurement" after the launches.
        for name in self.arm_names:
            own = self.arm(name).points or []
            outside = sorted(set(own) - set(self.points))
            if outside:
                raise ValueError(
                    f"{_where(name)}.points {outside} are not among the experiment's points "
                    f"{self.points}: add them there (the sweep is every point any arm is measured at)"
                )
        for bar in self.bars:
            for candidate in self.candidates:
                if bar.point != "all":
                    missing = [a for a in ("control", candidate) if bar.point not in self.arm_points(a)]
                    if missing:
                        raise ValueError(
                            f"bar {bar.metric}@{bar.point}: arm {missing[0]!r} is not measured at point "
                            f"{bar.point} (its points {self.arm_points(missing[0])})"
                        )
                elif not self.compared_points(bar, candidate):
                    raise ValueError(
                        f"bar {bar.metric} on all points: candidate {candidate!r} "
                        f"{self.arm_points(candidate)} and the control {self.arm_points('control')} "
                        "share no point to compare at"
                    )
        return self

    @model_validator(mode="after")
    def _template_fields_are_known(self) -> Experiment:
        # A field no arm fills would fail as a KeyError in the middle of the run: refuse it now.
        for instrument in self.instruments:
            for number, name in instrument.template_fields():
                if name in template.BUILT_IN_FIELDS:
                    continue
                missing = [arm for arm in self.arm_names if name not in _params_of(self.arm(arm))]
                if missing:
                    raise ValueError(
                        f"instrument {instrument.name!r} command[{number}] names {{{name}}}, which arm "
                        f"{missing[0]!r} does not set in its params (the fields every arm has: "
                        f"{', '.join(template.BUILT_IN_FIELDS)})"
                    )
        return self

    @model_validator(mode="after")
    def _pointwise_values_fill(self) -> Experiment:
        # {point} in server arguments and instrument options (experiment.pointwise): an unknown
        # placeholder or an expression that does not evaluate fails now, naming field and point.
        try:
            pointwise.check(self.pointwise_fields(), self.points)
        except pointwise.PointwiseError as error:
            raise ValueError(str(error)) from None
        return self

    def pointwise_fields(self) -> dict[str, object]:
        """Every value that names a placeholder, by where it is written: arms' argv, env and
        overrides, instruments' options (not a command template's own fields, nor launch_sweep)."""
        fields: dict[str, object] = {}
        for name in self.arm_names:
            fields |= _arm_fields(name, self.arm(name))
        for instrument in self.instruments:
            fields |= {
                f"instruments[{instrument.name}].options.{k}": v for k, v in instrument.options.items()
            }
        return {where: value for where, value in fields.items() if pointwise.names_in(value)}

    def arm_depends_on_point(self, name: str) -> bool:
        """Whether the arm's server command or environment names ``{point}`` (relaunched per point)."""
        return pointwise.depends_on_point(list(_arm_fields(name, self.arm(name)).values()))

    @model_validator(mode="after")
    def _bars_fit_their_instruments(self) -> Experiment:
        for bar in self.bars:
            instrument = self.instrument_of(bar)
            kind = instrument_registry.get(instrument.kind)
            if isinstance(bar, QualityBar) and bar.metric not in kind.item_metrics:
                known = ", ".join(kind.item_metrics) or "none: it measures speed"
                raise ValueError(
                    f"quality bar on {bar.metric!r}: instrument {instrument.name!r} ({instrument.kind}) "
                    f"scores no such items (its item metrics: {known}); name a quality instrument"
                )
            if isinstance(bar, Bar) and kind.measures_quality:
                raise ValueError(
                    f"bar on {bar.metric!r}: instrument {instrument.name!r} ({instrument.kind}) measures "
                    "answers, not speed: make it a quality bar (margin: instead of min_effect, direction)"
                )
        return self

    @model_validator(mode="after")
    def _studies_have_no_server(self) -> Experiment:
        kinds = {arm.kind for arm in (self.control, *self.candidates.values())}
        if "study" in kinds and self.server.needs_server:
            raise ValueError("study arms run no server: set server.needs_server to false")
        if not self.server.needs_server and any(_needs_server(i.kind) for i in self.instruments):
            serverless = [repr(kind) for kind in instrument_registry.kinds() if not _needs_server(kind)]
            raise ValueError(f"with no server only {' or '.join(serverless)} instruments can measure")
        return self

    @model_validator(mode="after")
    def _repeats_belong_to_the_fixed_design(self) -> Experiment:
        if (
            self.design is not None
            and self.design.kind == "sequential"
            and "repeats" in self.model_fields_set
        ):
            raise ValueError(
                "repeats is the fixed design's launches per arm; the sequential design stops on its "
                "own (design.cap bounds it): remove repeats or set design.kind: fixed"
            )
        return self

    @model_validator(mode="after")
    def _sequential_design_stops_on_speed_bars(self) -> Experiment:
        if self.design is not None and self.design.kind == "sequential" and not self.speed_bars:
            raise ValueError(
                "the sequential design stops when its speed bars are decided and this experiment has "
                "none: quality bars alone run the fixed design (design.kind: fixed, repeats)"
            )
        return self

    @property
    def chosen_design(self) -> Design:
        """The design this experiment runs: the one it names; else fixed when it sets ``repeats``
        (as every file did before the sequential default), else sequential."""
        if self.design is not None:
            return self.design
        # With no speed bar the sequential design has nothing to stop on: quality bars alone run the
        # fixed design's repeats (their items, not more launches, decide them).
        fixed = "repeats" in self.model_fields_set or not self.speed_bars
        return Design(kind="fixed" if fixed else "sequential")

    @property
    def sequential(self) -> bool:
        return self.chosen_design.kind == "sequential"

    @property
    def default_instrument(self) -> Instrument:
        """The instrument of every bar that names none: the first one listed."""
        return self.instruments[0]

    @property
    def speed_bars(self) -> list[Bar]:
        """The bars decided as ratios against the control (every bar of a file written before
        quality bars)."""
        return [bar for bar in self.bars if isinstance(bar, Bar)]

    @property
    def quality_bars(self) -> list[QualityBar]:
        return [bar for bar in self.bars if isinstance(bar, QualityBar)]

    def instrument_of(self, bar: Bar | QualityBar) -> Instrument:
        """The instrument whose numbers ``bar`` decides on: the one it names, else the default."""
        name = bar.instrument or self.default_instrument.name
        return next(i for i in self.instruments if i.name == name)

    @property
    def arm_names(self) -> list[str]:
        return ["control", *self.candidates]

    def arm(self, name: str) -> RecipeArm | CommandArm | ReleaseArm | StudyArm:
        return self.control if name == "control" else self.candidates[name]

    def arm_points(self, name: str) -> list[int]:
        """The sweep points arm ``name`` is measured at: its own ``points``, else the experiment's."""
        own = self.arm(name).points
        return [p for p in self.points if p in own] if own else list(self.points)

    @property
    def arms_have_own_points(self) -> bool:
        return any(self.arm(name).points for name in self.arm_names)

    def compared_points(self, bar: Bar | QualityBar, candidate: str | None = None) -> list[int]:
        """The points ``bar`` decides for ``candidate``: its own point, or for ``point: all`` every
        point where both the control and the candidate are measured; with no candidate named, the
        points it decides for any of them (what the plan prices), in the sweep's order."""
        if bar.point != "all":
            return [bar.point]
        shared = set(self.arm_points("control"))
        chosen = [candidate] if candidate is not None else list(self.candidates)
        wanted = {p for name in chosen for p in self.arm_points(name)} & shared
        return [p for p in self.points if p in wanted]

    def uncompared_points(self, name: str) -> list[int]:
        """The points arm ``name`` is measured at that no bar compares (the other side is not there)."""
        pairs = [name] if name != "control" else list(self.candidates)
        compared = {p for bar in self.bars for c in pairs for p in self.compared_points(bar, c)}
        return [p for p in self.arm_points(name) if p not in compared]

    def engine_of(self, arm_name: str) -> str:
        """The name of the engine that serves ``arm_name``: its own ``engine:``, else the
        experiment's (a study arm runs no server: "none")."""
        arm = self.arm(arm_name)
        if isinstance(arm, StudyArm):
            return "none"
        return arm.engine or self.engine

    @property
    def engines(self) -> set[str]:
        """The engines of the server arms; more than one makes a cross-engine experiment."""
        named = {self.engine_of(name) for name in self.arm_names}
        return {name for name in named if not engine_registry.get(name).stand_in}


def _where(name: str) -> str:
    """Where the file writes arm ``name``."""
    return "control" if name == "control" else f"candidates.{name}"


def _arm_fields(name: str, arm: RecipeArm | CommandArm | ReleaseArm | StudyArm) -> dict[str, str]:
    """An arm's server arguments and environment, by where the file writes them."""
    where = _where(name)
    fields: dict[str, str] = {}
    if isinstance(arm, CommandArm):
        fields |= {f"{where}.argv[{i}]": a for i, a in enumerate(arm.argv)}
        fields |= {f"{where}.env.{k}": v for k, v in arm.env.items()}
    if not isinstance(arm, StudyArm):
        fields |= {f"{where}.overrides.args[{i}]": a for i, a in enumerate(arm.overrides.args)}
        fields |= {f"{where}.overrides.env.{k}": v for k, v in arm.overrides.env.items()}
    return fields


def _params_of(arm: RecipeArm | CommandArm | ReleaseArm | StudyArm) -> dict[str, str]:
    return arm.params if isinstance(arm, StudyArm) else {}


def _needs_server(kind: str) -> bool:
    return instrument_registry.get(kind).needs_server


def load_experiment(path: Path | str) -> Experiment:
    """Load and validate an experiment file; errors name the file, the line and the field. An
    experiment whose result entry could not be recorded (its text over the entry's size limit) is
    refused here, at the field to shorten, not after the run."""
    doc = load_yaml(Path(path))
    check_doc(doc, EXPERIMENT_SCHEMA_VERSION)
    experiment = validate_doc(doc, Experiment, what="experiment")
    entry_size.refuse_oversized(experiment, doc.where)
    return experiment


def experiment_json_schema() -> dict:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **Experiment.model_json_schema()}
