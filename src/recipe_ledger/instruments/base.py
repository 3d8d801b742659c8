"""What every instrument shares: the kind it registers, the context of one measurement, its result.

An instrument module defines one ``InstrumentKind`` (its kind, client, options, checks before
launch, ``measure(run)`` and refusals) and the registry (``recipe_ledger.instruments``) finds it
by kind. ``measure`` has one signature for every kind: a ``PointRun`` carries what any of them
needs (the point, the instrument as the experiment wrote it, the client programs, environments
and the repository).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from recipe_ledger import engines
from recipe_ledger.engines.base import ServerCommand
from recipe_ledger.errors import InputError, LedgerError
from recipe_ledger.launch.guard import Guard, new_tag
from recipe_ledger.launch.procs import LAUNCH_TAG
from recipe_ledger.redact import LogPipe


class InstrumentError(LedgerError):
    """A measurement that could not be taken or read (the client failed, its output is unusable)."""

    def __init__(
        self, message: str, *, where: str | None = None, hint: str | None = None, output_tail: str = ""
    ):
        super().__init__(message, where=where, hint=hint)
        self.output_tail = output_tail


class InvalidPoint(InstrumentError):
    """The client ran to the end, and its own signals say the point was not the intended workload
    (requests failed, the context overflowed, the cache did not share as the trace says). The runner
    records the point as refused, with this message, and goes on: a failed point, not a number."""


# Normalized metric names, their units and directions live in recipe_ledger.metrics (the metric
# table): every instrument maps its tool's output into those names.


@dataclass(frozen=True)
class MeasureContext:
    """One measurement: which arm, sweep point and repeat; where the server is; where raw goes."""

    arm: str
    point: int
    repeat: int
    seed: int
    out_dir: Path
    base_url: str | None = None
    model_name: str | None = None
    tokenizer: str | None = None
    params: tuple[tuple[str, str], ...] = ()  # a study arm's parameters, for command templates
    # The client's concurrency when the point is not one (a launch-flag sweep's points are flag values).
    concurrency: int | None = None
    sample: int = 0  # which measurement of this point inside this launch (instrument.samples_per_launch)
    # The stem of the measurement a quality instrument compares this one with: the control's first
    # launch at this point, in this run (with its tag). When ``stem == reference`` this is that one.
    reference: str = ""

    @property
    def client_concurrency(self) -> int:
        return self.concurrency if self.concurrency is not None else self.point

    @property
    def stem(self) -> str:
        # The first sample keeps the name every run had before samples_per_launch existed.
        suffix = f"-s{self.sample}" if self.sample else ""
        return f"{self.arm}-p{self.point}-r{self.repeat}{suffix}"


@dataclass
class Measurement:
    instrument: str
    instrument_version: str
    context: MeasureContext
    metrics: dict[str, float]
    raw_path: Path
    raw_sha256: str
    wall_s: float
    argv: list[str] = field(default_factory=list)
    # What the record keeps besides the numbers: strings a client reports about the server it
    # measured (SGLang's embedded server_info: its hash, version, model path, tp size).
    facts: dict[str, str] = field(default_factory=dict)
    # A quality instrument's per-item outcomes, metric -> item id -> value in [0, 1] (1: the answer
    # was kept, correct, the probe passed): what a quality bar pairs across arms by item. Empty for
    # an agreement reference (it is what the others are compared with, not evidence); a probe's or
    # an accuracy's reference measurement keeps its items (each is evidence on its own).
    items: dict[str, dict[str, float]] = field(default_factory=dict)


class InstrumentSpec(Protocol):
    """An instrument as the experiment file writes it (``experiment.spec.Instrument``, which sits
    above this package): its name, kind, the client's options and a command template."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def options(self) -> dict[str, Any]: ...

    @property
    def command(self) -> Sequence[str] | None: ...


@dataclass(frozen=True)
class Clients:
    """The client programs the plan found for this run (``pipeline.plan``). A plugin's client is
    none of these: it finds its own program (from ``PointRun.repo``, the environment, PATH)."""

    vllm_bin: str = ""  # vLLM's CLI: ``vllm bench serve`` (vllm_bench_serve, tail)
    sglang_python: str = ""  # the SGLang venv's python: ``-m sglang.bench_serving``
    aiperf_bin: str = ""  # AIPerf's CLI (aiperf_replay)


@dataclass(frozen=True)
class PointRun:
    """Everything one instrument needs to measure one point: the one argument of every ``measure``."""

    ctx: MeasureContext  # which arm, point and repeat; the server's address; where raw files go
    spec: InstrumentSpec
    engine: str  # the name of the engine serving the measured arm ("none": a stand-in or a study)
    clients: Clients
    client_env: dict[str, str]  # the environment a benchmark client runs in
    arm_env: dict[str, str]  # the arm's own environment (a command instrument's script gets it)
    repo: Path  # the repository: scripts, traces and venvs are found under it


class InstrumentKind:
    """One kind of instrument, as the registry knows it. A built-in module defines one instance
    (``INSTRUMENT``); a plugin defines one in its own file and names it in an entry point of the
    group ``recipe_ledger.instruments``. A default here means "this kind has no such thing"."""

    kind: str = ""  # what an experiment's instrument ``kind:`` says; the registry's key
    client: str = ""  # the program it runs, as a cross-engine bar names it ("vllm bench serve")
    summary: str = ""  # a few words for the experiment schema's description of ``kind``
    needs_server: bool = True  # False: it can measure a study (no server)
    needs_command: bool = False  # True: the instrument must carry a ``command`` argv template
    options_model: type[BaseModel] | None = None  # a strict model of its options; None: the client's flags
    options_hint: str = "docs/instruments.md lists each instrument's options"
    # Its own numbers a result's medians keep beyond metrics.SUMMARY_METRICS (the tail test's tail).
    extra_summary_metrics: tuple[str, ...] = ()
    # A quality instrument: the metrics whose per-item outcomes (``Measurement.items``) a quality
    # bar may decide on (non-inferiority, docs/verdicts.md). Empty: a speed instrument.
    item_metrics: tuple[str, ...] = ()

    @property
    def measures_quality(self) -> bool:
        return bool(self.item_metrics)

    def parse_options(self, options: Mapping[str, Any], instrument: str) -> Any:
        """The options as this kind reads them (its model), or an InputError naming the field."""
        if self.options_model is None:
            return options
        return parse_options(self.options_model, options, instrument, self.options_hint)

    def check_before_launch(self, spec: InstrumentSpec, repo: Path, max_model_len: int | None) -> None:
        """Refuse (InputError) before any launch what can be known now: by default, its options.
        ``max_model_len`` is the smallest context an arm's command sets, when any sets one."""
        self.parse_options(spec.options, spec.name)

    def check_arm(self, spec: InstrumentSpec, arm: str, engine: str, command: ServerCommand) -> None:
        """Refuse (InputError) before any launch an arm this instrument cannot measure: an engine
        that cannot return what it needs (log-probabilities), a cap the arm's command sets below it.
        ``command`` is the arm's launch command as the planner parsed it (``recipes.flags``, a layer
        above this one): ask the engine what it means (``engines.get(engine).max_logprobs(command)``)."""

    def plan_notes(self, spec: InstrumentSpec, repo: Path) -> list[str]:
        """Lines ``--plan`` prints about this instrument's workload (a trace's size, reuse, length)."""
        return []

    def measure(self, run: PointRun) -> Measurement:
        """One point: run the client, keep its raw output under ``run.ctx.out_dir``, hashed."""
        raise NotImplementedError(f"instrument kind {self.kind!r} does not measure")

    def refusals(self, options: Mapping[str, Any], server_side: Mapping[str, float]) -> str | None:
        """Why a measured point is not the intended workload, read from the server's own counters
        over the point (``server_side``), or None: a refused point is recorded, never decided on."""
        return None


def refuse_schema_only_engine(
    spec: InstrumentSpec, arm: str, engine_name: str, client: str, fields: Sequence[str]
) -> None:
    """Refuse (InputError) an arm whose server answers 422 to request fields outside OpenAI's
    schema (``Engine.openai_schema_only``) when this client adds ``fields`` to every request: each
    request would fail, after the other arms' launches were spent."""
    if engines.get(engine_name).openai_schema_only:
        raise InputError(
            f"instrument {spec.name!r} ({client}) cannot measure arm {arm!r}: engine {engine_name!r} "
            f"refuses request fields outside OpenAI's schema (422), and {client} sends "
            f"{' and '.join(fields)} with every request",
            where=f"arm {arm!r}",
            hint="measure every arm with a client that sends only the schema's fields (kind openai_bench)",
        )


OptionsT = TypeVar("OptionsT", bound=BaseModel)


def parse_options(model: type[OptionsT], options: Mapping[str, Any], instrument: str, hint: str) -> OptionsT:
    """An instrument's options read through its model; the first problem as one InputError line."""
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        # A rule over the whole model (no field in its location) is about the options themselves.
        field_name = f"options.{where}" if where else "options"
        raise InputError(f"instrument {instrument!r}: {field_name}: {first['msg']}", hint=hint) from None


def option_flags(options: dict[str, object]) -> list[str]:
    """A client's options as --flags: ``key_name: value`` -> ``--key-name value``, True a bare switch,
    False and None left out. A zero is a value (``temperature: 0`` is greedy): ``0 in (False, None)``
    is true in Python, which once dropped it and left the server's default sampling in place."""
    argv: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not False and value is not None:
            argv += [flag, str(value)]
    return argv


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def sha256_json(value: object) -> str:
    """The hash of a JSON value in canonical form (sorted keys), so that key order never matters."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def venv_distribution_version(client: Path, distribution: str) -> str | None:
    """The version of ``distribution`` installed in the virtual environment ``client`` belongs to
    (``<venv>/bin/<client>``), read from its metadata: no import of the package, no process."""
    venv = client.parent.parent
    if not (venv / "pyvenv.cfg").is_file():
        return None
    site_dirs = [str(d) for d in sorted(venv.glob("lib/python3*/site-packages"))]
    found = [d.version for d in importlib.metadata.distributions(name=distribution, path=site_dirs)]
    return found[0] if found else None


_CLIENT_GRACE_S = 5.0  # a client killed by its watchdog has no server left to be polite to


def run_client(
    argv: list[str], *, env: dict[str, str] | None, log_path: Path, timeout_s: float, cwd: Path | None = None
) -> float:
    """Run a benchmark client to completion, its output to ``log_path``; return the wall time.

    A non-zero exit is an InstrumentError carrying the tail of the output. The client runs in
    its own session so that Ctrl-C in the terminal reaches the runner first, which then stops it;
    a watchdog (``launch.guard``) stops it if the runner dies without doing so (``kill -9``).
    ``cwd``: where it runs (lm-eval resolves a task's relative data files against it).
    """
    start = time.monotonic()
    guard = Guard.start(new_tag(), grace_s=_CLIENT_GRACE_S)
    tagged = {**(os.environ if env is None else env), LAUNCH_TAG: guard.tag or ""}
    try:
        # The client writes into a pipe whose reader redacts each line before it reaches the file
        # (redact.stream), against the client's own environment: a killed run leaves nothing raw.
        log_path.write_bytes(b"")
        log = LogPipe(log_path, env)
        try:
            proc = subprocess.Popen(
                argv,
                env=tagged,
                cwd=cwd,
                stdout=log.child_fd,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.started()
        try:
            code = proc.wait(timeout=timeout_s)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            log.close()
    finally:
        guard.release()
    if code != 0:
        tail = log_path.read_text(errors="replace")[-2000:]
        raise InstrumentError(
            f"{Path(argv[0]).name} exited with {code}",
            where=str(log_path),
            hint=f"read {log_path}",
            output_tail=tail,
        )
    return time.monotonic() - start


def last_json_object(text: str) -> dict:
    """The last line of ``text`` that parses as a JSON object (scripts may print logs first)."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    raise InstrumentError("no JSON object on the output's last lines")


def numeric_only(values: dict) -> dict[str, float]:
    return {k: float(v) for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
