"""Planning a run: every arm resolved to the exact server command, the ABBA schedule, the seeds.

Planning is pure (apart from reading recipes), so ``ledger run --plan`` can show exactly what will
be launched before any machine time is spent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from recipe_ledger import engines, instruments, paths
from recipe_ledger.engines.base import Engine
from recipe_ledger.engines.sglang import find_sglang_python
from recipe_ledger.engines.vllm import find_vllm_bin
from recipe_ledger.errors import InputError
from recipe_ledger.experiment import entry_size, pointwise
from recipe_ledger.experiment.engines import check_bars_have_counters, check_one_client_per_bar, counter_notes
from recipe_ledger.experiment.spec import (
    CommandArm,
    Experiment,
    Instrument,
    Overrides,
    RecipeArm,
    ReleaseArm,
    StudyArm,
)
from recipe_ledger.instruments import aiperf_replay
from recipe_ledger.recipes.boxes import Box, load_box
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.command import CommandRequest, resolve_for_people
from recipe_ledger.recipes.flags import LaunchCommand
from recipe_ledger.redact import redact_env


@dataclass(frozen=True)
class ArmPlan:
    name: str
    argv: list[str]
    env: dict[str, str]
    source: str  # what it was resolved from, for people
    model_dir: str | None  # a local model directory (also the bench client's tokenizer)
    served_model: str  # the name clients send in requests
    image: str | None = None
    params: dict[str, str] = field(default_factory=dict)  # a study arm's template parameters
    engine: str = "vllm"  # a registered engine's name (recipe_ledger.engines): "none" for studies, stand-ins

    @property
    def fingerprint(self) -> str:
        """What makes two launches the same configuration: argv, env (secrets redacted), image.
        Not the engine: the argv already names it, and leaving it out keeps every fingerprint (and
        so every calibration key) of the runs recorded before engines became an axis."""
        blob = json.dumps(
            {"argv": self.argv, "env": redact_env(self.env), "image": self.image, "params": self.params},
            sort_keys=True,
        )
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class RunPlan:
    experiment: Experiment
    box: Box
    arms: dict[str, ArmPlan]
    schedule: list[tuple[str, int]]  # (arm, repeat), ABBA
    spec_path: str
    engine_bin: str  # vLLM's CLI: the vllm bench serve client, and vLLM arms' server
    notes: list[str] = field(default_factory=list)
    sglang_python: str = ""  # the SGLang venv's python: SGLang arms' server, the sglang.bench_serving client
    aiperf_bin: str = ""  # AIPerf's CLI: the aiperf_replay client (scripts/setup_aiperf_venv.sh)

    def point_arm(self, arm: ArmPlan, point: int) -> ArmPlan:
        """``arm`` as launched at ``point``: ``{point}`` in its argv and environment filled in
        (experiment.pointwise), and in a launch-flag sweep its argv with the sweep's flags for that
        value (replacing an earlier occurrence: last wins, as the engine reads it); an arm that
        depends on neither launches as it is."""
        if self.experiment.arm_depends_on_point(arm.name):
            arm = replace(arm, argv=pointwise.args_at(arm.argv, point), env=pointwise.env_at(arm.env, point))
        sweep = self.experiment.launch_sweep
        if sweep is None or not sweep.applies_to(arm.name):
            return arm
        argv = LaunchCommand.parse(arm.argv).replacing(sweep.args_for(point)).render()
        return replace(arm, argv=argv)

    def launches_per_point(self) -> bool:
        """One launch per point: a launch-flag sweep, or an arm whose command names ``{point}``."""
        experiment = self.experiment
        return experiment.launch_sweep is not None or any(
            experiment.arm_depends_on_point(name) for name in experiment.arm_names
        )

    def seed(self, point: int, repeat: int) -> int:
        """Differs per repeat (no prefix-cache flattery across repeats), equal across arms at the
        same repeat and point (paired comparisons)."""
        return self.experiment.seed + 1000 * repeat + point


def abba_schedule(arms: list[str], repeats: int) -> list[tuple[str, int]]:
    """A B B A A B ...: each arm's launches are spread evenly over the run, so a slow drift of
    the machine (thermal, a neighbour's load) lands on every arm alike."""
    order: list[tuple[str, int]] = []
    for repeat in range(1, repeats + 1):
        names = arms if repeat % 2 == 1 else list(reversed(arms))
        order += [(name, repeat) for name in names]
    return order


@dataclass(frozen=True)
class _ArmDraft:
    """An arm while planning: its command still in parsed form (rendered once, in ``plan_run``)."""

    command: LaunchCommand
    env: dict[str, str]
    source: str
    model_dir: str | None
    image: str | None = None


def apply_overrides(
    command: LaunchCommand, env: dict[str, str], overrides: Overrides
) -> tuple[LaunchCommand, dict[str, str]]:
    """Drop ``remove_args`` flags (with their values), then append ``args`` replacing any earlier
    occurrence of the same flag: the last value is the one vLLM would use anyway, and a
    single occurrence keeps the command readable."""
    return command.replacing(overrides.args, set(overrides.remove_args)), {**env, **overrides.env}


def with_server_address(command: LaunchCommand, host: str, port: int) -> LaunchCommand:
    return command.replacing(["--host", host, "--port", str(port)])


def check_vendor(arm: str, hardware: str | None, root: RecipeRoot, box: Box) -> None:
    """Refuse (InputError) an arm resolved for one vendor's GPUs on a box of the other's: its image
    and flags are built for that vendor (ROCm or CUDA), and the container would not see the GPUs."""
    profile = root.taxonomy.hardware_profiles.get(hardware or "")
    if profile is None or box.gpu.count == 0:
        return
    vendor = profile.brand.lower()
    if vendor in ("nvidia", "amd") and vendor != box.gpu.vendor:
        raise InputError(
            f"arm {arm!r} resolves for {hardware} ({profile.brand} GPUs), but box {box.id!r} has "
            f"{box.gpu.vendor.upper() if box.gpu.vendor == 'amd' else 'NVIDIA'} GPUs ({box.gpu.name})",
            where=f"arm {arm!r}",
            hint=f"run it on a {profile.brand} box profile (recipes/boxes/), or set the arm's hardware: "
            f"to one of the box's",
        )


def _recipe_arm(
    root: RecipeRoot, box: Box, name: str, arm: RecipeArm, repo: Path, engine: Engine
) -> _ArmDraft:
    if engine.recipe_engine is None:
        raise InputError(
            f"arm {name!r}: engine {engine.name!r} has no recipe commands",
            hint="write the arm as a command (argv:) or a release",
        )
    # The command the recipe renders for the arm's engine (the stand-ins take vLLM's).
    request = CommandRequest(
        arm.recipe,
        arm.hardware or box.hardware,
        arm.strategy,
        arm.variant,
        arm.features,
        engine=engine.recipe_engine,
    )
    resolved = resolve_for_people(root, request)
    check_vendor(name, request.hardware, root, box)  # after resolving: a missing recipe says so first
    if "argv" not in resolved.result:
        raise InputError(
            f"arm {name!r}: {resolved.strategy} is a multi-node or PD strategy; "
            "ledger run launches single-node servers",
            hint="set strategy: single_node_tp",
        )
    command = LaunchCommand.parse(resolved.result["argv"])
    model_dir = str((repo / arm.model_path).resolve()) if arm.model_path else None
    if model_dir:
        command = engine.with_model(command, model_dir)
    command, env = apply_overrides(command, resolved.env, arm.overrides)
    source = (
        f"{resolved.loaded.ref} · {resolved.hardware} · {resolved.strategy} · {resolved.variant} · "
        f"features: {', '.join(resolved.features) or 'none'}"
        + (f" · engine: {engine.name}" if engine.shown_in_source else "")
    )
    return _ArmDraft(command, env, source, model_dir)


def _command_arm(name: str, arm: CommandArm, engine: Engine) -> _ArmDraft:
    command, env = apply_overrides(LaunchCommand.parse(arm.argv), dict(arm.env), arm.overrides)
    model = engine.model_of(command)
    model_dir = model if model and Path(model).is_dir() else None
    return _ArmDraft(command, env, "raw command", model_dir)


@dataclass(frozen=True)
class ReleaseLaunch:
    """What a published release pins for launching it again (see recipe_ledger.releases)."""

    argv: list[str]
    env: dict[str, str]
    image: str | None  # a digest reference when the release is served from an image
    model_dir: str | None  # the local model directory (the bench client's tokenizer)


ReleaseLookup = Callable[[str], ReleaseLaunch]  # "LANE@VERSION" -> its pins; raises when unknown


def _release_arm(
    name: str, arm: ReleaseArm, lookup: ReleaseLookup | None, experiment: Experiment, repo: Path
) -> _ArmDraft:
    if lookup is None:
        raise InputError(
            f"arm {name!r} names release {arm.release!r}, but no ledger was given to look it up",
            hint="ledger run reads releases from the ledger",
        )
    pinned = lookup(arm.release)
    if not pinned.argv:
        raise InputError(
            f"release {arm.release} records no launch argv (imported or unpinned): it cannot be "
            "launched as it was published",
            hint=f"ledger release show {arm.release}",
        )
    if pinned.image and experiment.server.launcher != "docker":
        raise InputError(
            f"release {arm.release} is served from image {pinned.image}",
            hint="set server.launcher: docker in the experiment",
        )
    command, env = apply_overrides(LaunchCommand.parse(pinned.argv), dict(pinned.env), arm.overrides)
    model_dir = str((repo / pinned.model_dir).resolve()) if pinned.model_dir else None
    return _ArmDraft(command, env, f"release {arm.release}", model_dir, pinned.image)


def _arm_draft(
    root: RecipeRoot,
    box: Box,
    name: str,
    arm: RecipeArm | CommandArm | ReleaseArm,
    repo: Path,
    release_lookup: ReleaseLookup | None,
    experiment: Experiment,
    engine: Engine,
) -> _ArmDraft:
    if isinstance(arm, RecipeArm):
        return _recipe_arm(root, box, name, arm, repo, engine)
    if isinstance(arm, CommandArm):
        return _command_arm(name, arm, engine)
    if isinstance(arm, ReleaseArm):
        return _release_arm(name, arm, release_lookup, experiment, repo)
    raise InputError(f"arm {name!r}: unknown kind")  # pragma: no cover - the spec admits no other kind


def plan_run(
    spec_path: Path,
    experiment: Experiment,
    root: RecipeRoot,
    repo: Path,
    release_lookup: ReleaseLookup | None = None,
) -> RunPlan:
    check_one_client_per_bar(experiment)  # before anything else: a refusal costs no machine time
    check_bars_have_counters(experiment)
    # Names become file names (runs/<experiment>-<stamp>/server-<arm>-r1.log): refused here, before
    # any launch, and again by paths.contained wherever a file is made.
    paths.check_name(experiment.name, "experiment name", str(spec_path))
    for name in experiment.arm_names:
        paths.check_name(name, "arm name", str(spec_path))
    box = load_box(root.boxes_dirs, experiment.box)
    arms: dict[str, ArmPlan] = {}
    engine_bin = find_vllm_bin(repo)  # the vllm bench serve client's too
    sglang_python = find_sglang_python(repo)  # the sglang.bench_serving client's too
    for name in experiment.arm_names:
        arm = experiment.arm(name)
        if isinstance(arm, StudyArm):
            arms[name] = ArmPlan(
                name, [], {}, f"study arm {name}", None, "-", params=dict(arm.params), engine="none"
            )
            continue
        engine = engines.get(experiment.engine_of(name))
        draft = _arm_draft(root, box, name, arm, repo, release_lookup, experiment, engine)
        command = _server_command(draft.command, engine, experiment, repo)
        arms[name] = ArmPlan(
            name,
            command.render(),
            draft.env,
            draft.source,
            draft.model_dir,
            engine.served_model(draft.command),  # --served-model-name, else the model as the engine names it
            draft.image or getattr(arm, "image", None) or experiment.server.image,
            engine=engine.name,
        )
    check_workload_instruments(experiment, arms, repo)
    # Again with the resolved commands (a recipe's argv is known only now): the result entry must
    # fit in the ledger, or the run would be lost at record time.
    entry_size.refuse_oversized(experiment, lambda _: str(spec_path), arms)
    return RunPlan(
        experiment,
        box,
        arms,
        abba_schedule(experiment.arm_names, experiment.repeats),
        str(spec_path),
        engine_bin,
        notes=counter_notes(experiment) + instrument_notes(experiment, repo),
        sglang_python=sglang_python,
        aiperf_bin=aiperf_replay.find_aiperf(repo),
    )


def max_model_len(argv: list[str]) -> int | None:
    """The context an arm's command sets (vLLM's --max-model-len, SGLang's --context-length)."""
    command = LaunchCommand.parse(argv)
    for flag in ("--max-model-len", "--context-length"):
        value = command.first_value(flag)
        if value and value.isdigit():
            return int(value)
    return None


def check_workload_instruments(experiment: Experiment, arms: dict[str, ArmPlan], repo: Path) -> None:
    """Refuse before any launch what each instrument can know now (its kind's check_before_launch):
    options, a user trace's lines, a trace longer than the smallest context an arm sets, a client
    not installed; an arm it cannot measure (its kind's check_arm)."""
    contexts = [n for n in (max_model_len(a.argv) for a in arms.values()) if n is not None]
    smallest = min(contexts) if contexts else None
    for instrument in experiment.instruments:
        kind = instruments.get(instrument.kind)
        for at_point in instruments_at_points(instrument, experiment.points):
            kind.check_before_launch(at_point, repo, smallest)
        for arm in arms.values():
            kind.check_arm(instrument, arm.name, arm.engine, LaunchCommand.parse(arm.argv))


def instrument_notes(experiment: Experiment, repo: Path) -> list[str]:
    """What each instrument says about its workload before any launch (a replay's trace)."""
    return [note for i in experiment.instruments for note in instruments.get(i.kind).plan_notes(i, repo)]


def instrument_at(instrument: Instrument, point: int) -> Instrument:
    """The instrument as it measures ``point``: ``{point}`` in its options filled in and evaluated
    (experiment.pointwise); the same object when nothing in them depends on the point."""
    if not pointwise.depends_on_point(instrument.options):
        return instrument
    return instrument.model_copy(update={"options": pointwise.options_at(instrument.options, point)})


def instruments_at_points(instrument: Instrument, points: list[int]) -> list[Instrument]:
    """The instrument at each point, each distinct set of options once (a check reads a trace)."""
    seen: dict[str, Instrument] = {}
    for point in points:
        at_point = instrument_at(instrument, point)
        seen.setdefault(json.dumps(at_point.options, sort_keys=True, default=str), at_point)
    return list(seen.values())


def _server_command(
    command: LaunchCommand, engine: Engine, experiment: Experiment, repo: Path
) -> LaunchCommand:
    """The address every engine takes (--host/--port, SGLang too), the engine's metrics switch, and
    the project's venv for the engine's program when it runs as a local process (an image has its own)."""
    command = with_server_address(command, experiment.server.host, experiment.server.port)
    command = engine.with_metrics(command)
    if experiment.server.launcher != "process":
        return command
    return engine.with_local_program(command, repo)
