"""The ``Engine`` base class: what the tool knows about one serving engine, in one place.

Every place that once asked ``engine == "sglang"`` asks the arm's engine object instead: how its
command names the model and the address, which program serves it from the project's venv, when it
is ready, how its prefix cache is emptied, which of its counters mean what, which log lines say it
ran out of memory, which compile caches a first boot fills, and which other clients can talk to it.
A default here means "this engine has no such thing": a new engine overrides what it has.

Engines never import ``recipes`` (it sits above them): a launch command reaches them as any object
with ``LaunchCommand``'s few reading and editing methods (``ServerCommand``), so
``recipes.flags.LaunchCommand`` stays the one argv reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Protocol, Self, TypeVar

from recipe_ledger.errors import InputError

Samples = dict[str, float]  # a /metrics scrape: each metric's total over its labels
# The file in an engine's kernel or compile cache that lists the flag sets it has booted with.
SEEN_FILE = ".recipe-ledger-flagsets.json"


class ServerCommand(Protocol):
    """What an engine reads and edits of a launch command (``recipes.flags.LaunchCommand``)."""

    @property
    def program(self) -> tuple[str, ...]: ...

    def render(self) -> list[str]: ...

    def word(self, position: int) -> str | None: ...

    def first_value(self, name: str) -> str | None: ...

    def has(self, name: str) -> bool: ...

    def with_word(self, position: int, word: str) -> Self: ...

    def with_value(self, name: str, value: str) -> Self: ...

    def extended(self, tokens: list[str] | tuple[str, ...]) -> Self: ...


Command = TypeVar("Command", bound=ServerCommand)


@dataclass(frozen=True)
class ForeignClient:
    """A benchmark client written for another engine, as far as this engine is concerned: the
    backend it uses when the instrument names none, and the backends that speak this engine's API."""

    default_backend: str
    backends: frozenset[str]


class Engine:
    """One serving engine. Built-ins are ``engines.vllm``, ``engines.sglang`` and ``engines.none``;
    a plugin subclasses this and is found through the ``recipe_ledger.engines`` entry points."""

    name: str = ""  # what an experiment's ``engine:`` says; the registry's key
    # Not a serving engine of its own (studies, stand-in servers): arms may not name it, and the
    # ledger records no engine for its arms, as before engines were an axis.
    stand_in: bool = False
    # The ``--engine`` recipes render this engine's command for (``recipes.command``); None: this
    # engine has no recipe commands, only command and release arms.
    recipe_engine: str | None = None
    shown_in_source: bool = True  # an arm's source says " · engine: NAME"
    health_path: str = "/health"
    program_label: str = "the serving engine"  # how preflight names a server program that is missing
    setup_hint: str | None = None  # the command that installs it
    # Log lines that mean out of memory in this engine's words, beyond CUDA's and the kernel's own.
    oom_patterns: tuple[str, ...] = ()
    memory_hint: str = "lower the engine's memory settings or the context length"
    # Instrument kind -> how that client reaches this engine; a kind absent here measures it as is
    # (its own client, or one that speaks to any server, such as a command).
    foreign_clients: Mapping[str, ForeignClient] = MappingProxyType({})
    # The request option through which its OpenAI /v1/completions returns per-token
    # log-probabilities (the answer-agreement instrument needs them); None: it cannot, and an
    # instrument that needs them is refused before any launch, naming this engine.
    logprobs_option: str | None = None
    # Its OpenAI endpoints answer 422 to any request field outside OpenAI's schema (vLLM and SGLang
    # ignore the ones they do not know): a client that adds its own engine's fields to every request
    # (vLLM's ``repetition_penalty``, ``ignore_eos``) measures nothing there, and its kind's
    # ``check_arm`` refuses such an arm before any launch.
    openai_schema_only: bool = False
    # The server-counter metrics (``metrics.SERVER_COUNTER_METRICS``) this engine's /metrics can
    # give. The plan names the ones it cannot, and refuses a bar on one of them, before any launch.
    counter_metric_names: frozenset[str] = frozenset()
    # Only when the server happens to expose them (a generic OpenAI server): the plan says "if".
    counters_optional: bool = False

    # --- the launch command ---------------------------------------------------------------------
    def model_of(self, command: ServerCommand) -> str | None:
        """The model a written-out command serves (a local directory when it is one), if it says."""
        return None

    def served_model(self, command: ServerCommand) -> str:
        """The name clients send in requests."""
        return command.first_value("--served-model-name") or "model"

    def with_model(self, command: Command, model_dir: str) -> Command:
        """``command`` serving the local ``model_dir`` (an experiment's ``model_path``)."""
        raise InputError(
            f"engine {self.name!r} does not say how its command names a local model directory",
            hint="write the arm as a command (argv:) with the model in it",
        )

    def with_metrics(self, command: Command) -> Command:
        """``command`` with whatever switch makes the server expose the /metrics the instruments read."""
        return command

    def with_local_program(self, command: Command, repo: Path) -> Command:
        """``command`` as a local process runs it: the engine's program from the project's venv."""
        return command

    def gpus_used(self, command: ServerCommand) -> int:
        """How many GPUs a launch of ``command`` occupies: the product of its parallel sizes
        (``parallel_flags``: tensor x data x pipeline), 1 when it names none. Expert parallelism runs
        on those same GPUs in vLLM and SGLang, so it adds none. What per-GPU throughput divides by."""
        gpus = 1
        for names in self.parallel_flags(command):
            value = next((v for v in map(command.first_value, names) if v is not None), None)
            if value is not None and value.isdigit() and int(value) > 0:
                gpus *= int(value)
        return gpus

    def parallel_flags(self, command: ServerCommand) -> tuple[tuple[str, ...], ...]:
        """The flags (with their aliases) whose values multiply into ``gpus_used``: vLLM's names."""
        return (
            ("--tensor-parallel-size", "-tp"),
            ("--data-parallel-size", "-dp"),
            ("--pipeline-parallel-size", "-pp"),
        )

    def max_logprobs(self, command: ServerCommand) -> int | None:
        """The most top log-probabilities per token a server launched by ``command`` returns
        (vLLM's --max-logprobs), or None when the engine sets no cap."""
        return None

    # --- a running server -----------------------------------------------------------------------
    def readiness_problem(self, base_url: str, timeout_s: float) -> str | None:
        """After /health answered 200: None when the server is ready, else what failed, in one line
        naming the request ("POST URL failed: ...")."""
        return None

    def reset_prefix_cache(self, base_url: str, timeout_s: float) -> bool:
        """Empty the prefix cache before a point: True when the server said it did."""
        return False

    def counter_metrics(self, before: Samples, after: Samples) -> dict[str, float]:
        """Normalized metrics (``prefix_cache_hit_rate``, ``spec_accept_len``...) from the
        difference between two /metrics scrapes around a point."""
        return {}

    def reported_metrics(self, base_url: str, derived: Mapping[str, float]) -> dict[str, float]:
        """What the server reports elsewhere for metrics its counters left out of ``derived``."""
        return {}

    # --- preflight ------------------------------------------------------------------------------
    def boot_cache_notice(
        self, arm: str, env: Mapping[str, str], flagset: str, container_volumes: Mapping[str, str] | None
    ) -> str | None:
        """A notice that the first boot of ``arm`` will be slow (a cold kernel or compile cache),
        or None. ``flagset`` keys the cache (preflight hashes the flags that change kernels);
        ``container_volumes`` is None for a local process, else the container's mounts."""
        return None

    def flagset_seen_file(self, env: Mapping[str, str]) -> Path | None:
        """Where a successful boot records its flag set as seen by the cache, or None."""
        return None

    # --- identity: one object per name, also across copies and pickles --------------------------
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (_registered, (self.name,))

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Self:
        return self

    def __repr__(self) -> str:
        return f"<engine {self.name}>"


def _registered(name: str) -> Engine:
    from recipe_ledger import engines  # at unpickling time: the package is loaded by then

    return engines.get(name)


def counter_delta(before: Samples, after: Samples, name: str) -> float | None:
    """How much counter ``name`` grew between two scrapes (None when the server has no such counter)."""
    if name not in after:
        return None
    return after[name] - before.get(name, 0.0)
