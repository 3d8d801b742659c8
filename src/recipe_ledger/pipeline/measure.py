"""Measuring: launch an arm, run every sweep point through the instruments, tear down.

One launch per (arm, repeat), so each repeat includes the server's start-up variance; between
points the prefix cache is emptied (each engine its own way: ``RunningServer.reset_prefix_cache``), and the
server's counters are read before and after each point.
"""

from __future__ import annotations

import json
import os
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from recipe_ledger import paths, runs
from recipe_ledger.experiment.spec import Instrument
from recipe_ledger.instruments import command as command_instrument
from recipe_ledger.instruments import server_metrics, sglang_bench, vllm_bench
from recipe_ledger.instruments.base import MeasureContext, Measurement
from recipe_ledger.launch.containers import DockerLauncher
from recipe_ledger.launch.process import ProcessLauncher
from recipe_ledger.launch.server import RunningServer
from recipe_ledger.launch.spec import LaunchSpec, grantable_memlock
from recipe_ledger.pipeline.events import Events, PointMeasured, ignore
from recipe_ledger.pipeline.plan import ArmPlan, RunPlan
from recipe_ledger.pipeline.preflight import remember_flagset


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

    def to_json(self) -> str:
        fields = asdict(self)
        if not fields["facts"]:
            del fields["facts"]  # records without facts (every vLLM one) read as they always have
        return json.dumps(fields, sort_keys=True)


def launch_spec(
    plan: RunPlan, arm: ArmPlan, repeat: int, run_dir: Path, run_id: str, tag: str = ""
) -> LaunchSpec:
    server = plan.experiment.server
    return LaunchSpec(
        argv=arm.argv,
        env=arm.env,  # the process launcher adds the environment it runs in
        host=server.host,
        port=server.port,
        health_path="/health",
        health_timeout_s=server.health_timeout_s,
        log_path=paths.contained(run_dir, f"server-{tag}{arm.name}-r{repeat}.log"),
        run_id=run_id,
        engine=arm.engine,
        image=arm.image if server.launcher == "docker" else None,
        volumes=dict(server.volumes),
        gpus=server.gpus,
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


def measure_point(
    plan: RunPlan,
    arm: ArmPlan,
    instrument: Instrument,
    ctx: MeasureContext,
    repo: Path,
) -> Measurement:
    """One point through one instrument, against the server of ``arm.engine``."""
    if instrument.kind == "vllm_bench_serve":
        # The OpenAI completions client measures an SGLang server as it is: no option changes.
        return vllm_bench.measure(plan.engine_bin, instrument.options, ctx, env=client_env())
    if instrument.kind == "sglang_bench_serving":
        # The client runs from SGLang's venv, the one its servers run from (plan.find_sglang_python).
        return sglang_bench.measure(
            plan.sglang_python, instrument.options, ctx, env=client_env(), engine=arm.engine
        )
    if instrument.kind == "command":
        return command_instrument.measure(list(instrument.command or []), ctx, env=arm.env, root=repo)
    raise NotImplementedError(f"instrument kind {instrument.kind}")


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
    plan: RunPlan,
    arm: ArmPlan,
    repeat: int,
    base_url: str | None,
    run_dir: Path,
    repo: Path,
    server: RunningServer | None = None,
    events: Events = ignore,
    tag: str = "",
) -> list[PointRecord]:
    """Every point x instrument for one launch of one arm."""
    records = []
    if base_url and plan.experiment.server.warmup_requests:
        warm_up(base_url, arm.served_model, plan.experiment.server.warmup_requests)
    for point in plan.experiment.points:
        for instrument in plan.experiment.instruments:
            if server is not None:
                # SGLang's flush raises when the cache will not empty (the point fails); vLLM's never does.
                server.reset_prefix_cache()
            before = server_metrics.scrape(base_url) if base_url else None
            ctx = MeasureContext(
                arm=f"{tag}{arm.name}",
                point=point,
                repeat=repeat,
                seed=plan.seed(point, repeat),
                out_dir=paths.contained(run_dir, runs.RAW),
                base_url=base_url,
                model_name=arm.served_model,
                tokenizer=arm.model_dir,
                params=tuple(sorted(arm.params.items())),
            )
            m = measure_point(plan, arm, instrument, ctx, repo)
            after = server_metrics.scrape(base_url) if base_url else None
            records.append(
                PointRecord(
                    arm.name,
                    repeat,
                    point,
                    instrument.name,
                    m.instrument_version,
                    ctx.seed,
                    m.metrics,
                    server_metrics.point_metrics(before, after, base_url, arm.engine),
                    str(m.raw_path.relative_to(run_dir)),
                    m.raw_sha256,
                    round(m.wall_s, 3),
                    dict(m.facts),
                )
            )
        events(PointMeasured(arm.name, repeat, point))
    return records


def measure_launch(
    plan: RunPlan,
    arm: ArmPlan,
    repeat: int,
    run_dir: Path,
    run_id: str,
    repo: Path,
    events: Events = ignore,
    tag: str = "",
) -> list[PointRecord]:
    """One fresh launch of ``arm``: boot, sweep, tear down (always, also on error and Ctrl-C)."""
    if not plan.experiment.server.needs_server:
        return sweep(plan, arm, repeat, None, run_dir, repo, events=events, tag=tag)
    spec = launch_spec(plan, arm, repeat, run_dir, run_id, tag)
    with launcher_for(plan).start(spec) as server:
        remember_flagset(arm)
        return sweep(
            plan,
            arm,
            repeat,
            server.base_url,
            run_dir,
            repo,
            server=server,
            events=events,
            tag=tag,
        )
