"""Measuring: launch an arm, run every sweep point through the instruments, tear down.

One launch per (arm, repeat), so each repeat includes the server's start-up variance; between
points the prefix cache is emptied (each engine its own way: ``RunningServer.reset_prefix_cache``), and the
server's counters are read before and after each point.
"""

from __future__ import annotations

import json
import os
import urllib.request
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from recipe_ledger import engines, instruments, metrics, paths, runs
from recipe_ledger.experiment.spec import Experiment, Instrument
from recipe_ledger.instruments import server_metrics
from recipe_ledger.instruments.base import Clients, InvalidPoint, MeasureContext, Measurement, PointRun
from recipe_ledger.launch.containers import DockerLauncher
from recipe_ledger.launch.failures import BootFailure
from recipe_ledger.launch.process import ProcessLauncher
from recipe_ledger.launch.server import RunningServer
from recipe_ledger.launch.spec import LaunchSpec, grantable_memlock
from recipe_ledger.pipeline.events import Events, PointMeasured, ignore
from recipe_ledger.pipeline.plan import ArmPlan, RunPlan, instrument_at
from recipe_ledger.pipeline.preflight import remember_flagset
from recipe_ledger.pipeline.steps import StepClock
from recipe_ledger.recipes.flags import LaunchCommand


@dataclass
class PointRecord:
    """The numbers of one (arm, repeat, point, instrument), as kept in measurements.jsonl."""

    arm: str
    repeat: int
    point: int
    instrument: str
    instrument_version: str
    seed: int
    metrics: dict[str, float]
    server: dict[str, float] = field(default_factory=dict)
    raw_file: str = ""
    raw_sha256: str = ""
    wall_s: float = 0.0
    facts: dict[str, str] = field(default_factory=dict)  # e.g. the hash of SGLang's server_info
    # Why this point holds no usable number: the engine rejected the launch value at boot, the cache
    # flattered it, the replay's own validity signals failed. Verdicts never read a refused point.
    refused: str = ""
    sample: int = 0  # which measurement of the point inside this launch (instrument.samples_per_launch)
    # A quality instrument's per-item outcomes (metric -> item id -> value): quality bars pair them.
    items: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_json(self) -> str:
        fields = asdict(self)
        for optional in ("facts", "refused", "sample", "items"):
            if not fields[optional]:
                del fields[optional]  # records without them read as they always have
        return json.dumps(fields, sort_keys=True)


def refusals(records: list[PointRecord], arms: tuple[str, ...], instrument: str, point: int) -> list[str]:
    """Why points of these arms at this point were refused (rejected at boot, flattered, invalid):
    what makes a speed bar or a quality bar not comparable there."""
    return [
        f"{r.arm} repeat {r.repeat}: {r.refused}"
        for r in records
        if r.refused and r.arm in arms and r.instrument == instrument and r.point == point
    ]


@dataclass(frozen=True)
class Launch:
    """One fresh launch of one arm, and what every step of measuring it needs: the plan, which
    arm and repeat, the run's folder and id, the repository, where progress and step times go."""

    plan: RunPlan
    arm: ArmPlan
    repeat: int
    run_dir: Path
    run_id: str
    repo: Path
    events: Events = ignore
    tag: str = ""  # prefixes its server log and raw files ("aa-": calibration, "rp-": reproduction)
    clock: StepClock = field(default_factory=StepClock)  # sums the wall time of each step

    @property
    def experiment(self) -> Experiment:
        return self.plan.experiment

    def at_point(self, point: int) -> Launch:
        """This launch as a launch-flag sweep makes it at ``point``: the arm with that point's flags."""
        return replace(self, arm=self.plan.point_arm(self.arm, point))


def launch_spec(launch: Launch, log_tag: str = "") -> LaunchSpec:
    server = launch.experiment.server
    arm = launch.arm
    engine = engines.get(arm.engine)
    return LaunchSpec(
        argv=arm.argv,
        env=arm.env,  # the process launcher adds the environment it runs in
        host=server.host,
        port=server.port,
        health_path=engine.health_path,
        health_timeout_s=server.health_timeout_s,
        log_path=paths.contained(
            launch.run_dir, f"server-{launch.tag}{log_tag}{arm.name}-r{launch.repeat}.log"
        ),
        run_id=launch.run_id,
        engine=engine,
        image=arm.image if server.launcher == "docker" else None,
        volumes=dict(server.volumes),
        gpus=server.gpus,
        gpu_vendor=launch.plan.box.gpu.vendor,
        ulimit_memlock=grantable_memlock(),
    )


def launcher_for(plan: RunPlan) -> DockerLauncher | ProcessLauncher:
    return DockerLauncher() if plan.experiment.server.launcher == "docker" else ProcessLauncher()


def client_env() -> dict[str, str]:
    """The bench client runs from the serving venv; it needs the CPU device hint and no hub."""
    return {
        **os.environ,
        "VLLM_TARGET_DEVICE": os.environ.get("VLLM_TARGET_DEVICE", "cpu"),
        "HF_HUB_OFFLINE": "1",
    }


def measure_point(launch: Launch, instrument: Instrument, ctx: MeasureContext) -> Measurement:
    """One point through one instrument, against the server of ``launch.arm.engine``: the kind's
    registered instrument measures it (``recipe_ledger.instruments``)."""
    plan = launch.plan
    run = PointRun(
        ctx=ctx,
        spec=instrument,
        engine=launch.arm.engine,
        clients=Clients(plan.engine_bin, plan.sglang_python, plan.aiperf_bin),
        client_env=client_env(),
        arm_env=launch.arm.env,
        repo=launch.repo,
    )
    return instruments.get(instrument.kind).measure(run)


def warm_up(base_url: str, model: str, requests: int) -> None:
    """A few short completions before measuring: a fresh server's first requests pay one-off
    start-up costs that belong to no sweep point (seen here: the first bench after boot ~20% slow)."""
    body = json.dumps({"model": model, "prompt": "warm up", "max_tokens": 8, "temperature": 0}).encode()
    for _ in range(requests):
        request = urllib.request.Request(
            f"{base_url}/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                response.read()
        except OSError:
            return  # not an OpenAI-style server (a study with its own probe): nothing to warm


def sweep(
    launch: Launch, server: RunningServer | None = None, points: list[int] | None = None
) -> list[PointRecord]:
    """Every point x instrument for one launch of one arm (``points``: default every point the arm
    is measured at), against ``server`` (None: a study, nothing to reach)."""
    experiment = launch.experiment
    records = []
    if server is not None and experiment.server.warmup_requests:
        with launch.clock.step("warm-up"):
            warm_up(server.base_url, launch.arm.served_model, experiment.server.warmup_requests)
    for point in experiment.arm_points(launch.arm.name) if points is None else points:
        for instrument in experiment.instruments:
            for sample in range(instrument.samples_per_launch):
                records.append(measure_one(launch, instrument, point, server, sample))
        launch.events(PointMeasured(launch.arm.name, launch.repeat, point))
    return records


def raw_dir(plan: RunPlan, instrument: Instrument, run_dir: Path) -> Path:
    """Where an instrument's raw files go: ``raw/``, or ``raw/<instrument>/`` when the experiment has
    several, whose files would otherwise share one name per point and overwrite each other."""
    if len(plan.experiment.instruments) > 1:
        return paths.contained(run_dir, runs.RAW, instrument.name)
    return paths.contained(run_dir, runs.RAW)


# A later sample of a point inside one launch draws another workload: the same prompts again would
# measure the engine's caches as well as the engine (the prefix cache is emptied, others may not be).
SAMPLE_SEED_STEP = 100_000


def measure_one(
    launch: Launch, instrument: Instrument, point: int, server: RunningServer | None, sample: int = 0
) -> PointRecord:
    """One point through one instrument, between two reads of the server's counters; a point the
    instrument or the counters say is not the intended workload comes back refused, with why.
    ``sample`` counts the measurements of this point inside this launch (its raw files say -s<N>)."""
    plan, arm, repeat, clock = launch.plan, launch.arm, launch.repeat, launch.clock
    instrument = instrument_at(instrument, point)  # {point} in its options, filled in
    base_url = server.base_url if server is not None else None
    if server is not None:
        with clock.step("cache reset"):
            # SGLang's flush raises when the cache will not empty (the point fails); vLLM's never does.
            server.reset_prefix_cache()
    with clock.step("counter scrapes"):
        before = server_metrics.scrape(base_url) if base_url else None
    sweep_flags = plan.experiment.launch_sweep
    ctx = MeasureContext(
        arm=f"{launch.tag}{arm.name}",
        point=point,
        repeat=repeat,
        seed=plan.seed(point, repeat) + SAMPLE_SEED_STEP * sample,
        out_dir=raw_dir(plan, instrument, launch.run_dir),
        base_url=base_url,
        model_name=arm.served_model,
        tokenizer=arm.model_dir,
        params=tuple(sorted(arm.params.items())),
        concurrency=sweep_flags.concurrency if sweep_flags else None,
        sample=sample,
        # The control's first launch at this point is every quality instrument's reference.
        reference=f"{launch.tag}control-p{point}-r1",
    )
    try:
        with clock.step("client"):
            m = measure_point(launch, instrument, ctx)
    except InvalidPoint as invalid:
        return PointRecord(
            arm.name,
            repeat,
            point,
            instrument.name,
            "",
            ctx.seed,
            {},
            refused=f"invalid: {invalid}",
            sample=sample,
        )
    with clock.step("counter scrapes"):
        after = server_metrics.scrape(base_url) if base_url else None
    engine = engines.get(arm.engine)
    server_side = server_metrics.point_metrics(before, after, base_url, engine)
    if server is not None:  # a served arm: its throughput per GPU it occupies
        m.metrics.update(metrics.per_gpu(m.metrics, engine.gpus_used(LaunchCommand.parse(arm.argv))))
    refused = instruments.get(instrument.kind).refusals(instrument.options, server_side)
    return PointRecord(
        arm.name,
        repeat,
        point,
        instrument.name,
        m.instrument_version,
        ctx.seed,
        m.metrics,
        server_side,
        str(m.raw_path.relative_to(launch.run_dir)),
        m.raw_sha256,
        round(m.wall_s, 3),
        dict(m.facts),
        refused or "",
        sample,
        {metric: dict(values) for metric, values in m.items.items()},
    )


def measure_launch(launch: Launch) -> list[PointRecord]:
    """One fresh launch of ``launch.arm``: boot, sweep, tear down (always, also on error and Ctrl-C).
    In a launch-flag sweep, one launch per point, each with that point's flags. ``launch.clock``
    sums the wall time of each step (boot, warm-up, client, ...) for the run's timings."""
    if not launch.experiment.server.needs_server:
        return sweep(launch)
    if launch.plan.launches_per_point():
        records: list[PointRecord] = []
        for point in launch.experiment.arm_points(launch.arm.name):
            records += _launch_at_point(launch, point)
        return records
    return _launch_and_sweep(launch)


def _launch_and_sweep(
    launch: Launch, points: list[int] | None = None, log_tag: str = ""
) -> list[PointRecord]:
    spec = launch_spec(launch, log_tag)
    with launch.clock.step("boot"):
        server = launcher_for(launch.plan).start(spec)
    with server:  # on an error or Ctrl-C its exit tears the server down
        remember_flagset(launch.arm)
        records = sweep(launch, server, points)
        with launch.clock.step("teardown"):
            server.stop()  # idempotent: the exit then has nothing left to stop
    return records


def _launch_at_point(launch: Launch, point: int) -> list[PointRecord]:
    """One point of a launch-flag sweep. A value the engine refuses at boot (004: k=4) is a point
    of the sweep too: recorded as rejected, with the engine's own words, and the sweep goes on."""
    try:
        return _launch_and_sweep(launch.at_point(point), [point], f"p{point}-")
    except BootFailure as failure:
        if failure.cause == "impostor":
            raise  # not the engine refusing this point's value: someone else's server on the port
        reason = f"rejected at boot: {failure.cause}: {engine_reason(failure.log_tail)}"
        launch.events(PointMeasured(launch.arm.name, launch.repeat, point))
        seed = launch.plan.seed(point, launch.repeat)
        return [
            PointRecord(launch.arm.name, launch.repeat, point, instrument.name, "", seed, {}, refused=reason)
            for instrument in launch.experiment.instruments
        ]


_REASON_MARKERS = ("Error:", "error:", "Error ", "must be", "not supported", "Exception:")
_NOISE = ("For further information", "Traceback", 'File "')


def engine_reason(log_tail: str) -> str:
    """The engine's own words for a refused boot: the last log line that names an error, with the
    lines that detail it (pydantic lists each refused field below its headline), at most 300 chars."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    for index in range(len(lines) - 1, -1, -1):
        if any(marker in lines[index] for marker in _REASON_MARKERS):
            detail = [line for line in lines[index + 1 : index + 7] if not line.startswith(_NOISE)]
            return " ".join([lines[index], *detail])[:300]
    return lines[-1][-300:] if lines else "the server exited before answering its health check"
