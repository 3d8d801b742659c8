"""A real ``transformers serve`` on this CPU, started by the process launcher as engine ``transformers``,
serving the tiny model.

Needs transformers serve's venv and the tiny model (scripts/setup_tserve_venv.sh,
scripts/make_tiny_model.py; `./dev serve-setup` makes both): ``require("tserve")``, and
``require("vllm")`` for the test that runs vLLM's bench client. Skipped without them unless
required (CI). Three boots in all (one is ~10-15 s here): one module-scoped server answers the
readiness, endpoint and client checks; two more launches check teardown on Ctrl-C inside the
``with`` block and a flag typer rejects.

The command is built as the planner builds a command arm's (``pipeline.plan``): the arm's argv, the
address every engine takes (``with_server_address``), the program from the project's venv
(``Engine.with_local_program``); requests name the model as ``Engine.served_model`` says.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from recipe_ledger import engines, instruments
from recipe_ledger.errors import InputError
from recipe_ledger.instruments import openai_bench, vllm_bench
from recipe_ledger.instruments.base import InstrumentError, MeasureContext
from recipe_ledger.launch import (
    BootFailure,
    LaunchSpec,
    ProcessLauncher,
    ProcessServer,
    live_servers,
    port_is_free,
)
from recipe_ledger.launch.process import group_is_gone
from recipe_ledger.pipeline.measure import client_env
from recipe_ledger.pipeline.plan import with_server_address
from recipe_ledger.recipes.flags import LaunchCommand

from helpers.launching import group_members
from helpers.net import free_port, http
from helpers.resources import REPO, SERVE_VLLM, TINY_MODEL, TSERVE, require
from helpers.waiting import wait_for

pytestmark = pytest.mark.slow

HOST = "127.0.0.1"
ENGINE = engines.get("transformers")
BOOT_TIMEOUT_S = 300.0  # ~10-15 s on this 2-core box; the margin is for a loaded CI run
CPU_ENV = {"HF_HUB_OFFLINE": "1"}
# The arm as an experiment writes it (experiments/examples/tiny-tserve.yaml, with the model's full path).
ARM_ARGV = ("transformers", "serve", str(TINY_MODEL), "--device", "cpu")


@pytest.fixture(scope="module", autouse=True)
def serving_environment() -> None:
    require("tserve")


def served_model() -> str:
    """The name every request sends, as the planner records it for the arm."""
    return ENGINE.served_model(LaunchCommand.parse(list(ARM_ARGV)))


def tserve_spec(log_dir: Path, *extra_flags: str, run_id: str = "transformers-r1") -> LaunchSpec:
    port = free_port()
    command = LaunchCommand.parse([*ARM_ARGV, *extra_flags])
    command = ENGINE.with_local_program(with_server_address(command, HOST, port), REPO)
    argv = command.render()
    assert argv[0] == str(TSERVE), argv  # the venv's program, never one found on PATH
    return LaunchSpec(
        argv=argv,
        env=CPU_ENV,
        host=HOST,
        port=port,
        health_path=ENGINE.health_path,
        health_timeout_s=BOOT_TIMEOUT_S,
        log_path=log_dir / f"server-{run_id}.log",
        run_id=run_id,
        engine=ENGINE,
    )


def processes_with(*words: str) -> set[int]:
    """Live processes whose command line holds every one of ``words`` as an argument."""
    found = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # it exited while we looked
        if all(word.encode() in args for word in words):
            found.add(int(cmdline.parent.name))
    return found


def assert_nothing_left(pgid: int, port: int) -> None:
    assert group_is_gone(pgid), f"process group {pgid} still has live members: {group_members(pgid)}"
    assert port_is_free(HOST, port), f"something still listens on {port}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessServer]:
    spec = tserve_spec(tmp_path_factory.mktemp("tserve"))
    started = time.monotonic()
    with ProcessLauncher().start(spec) as running:
        print(
            f"\ntransformers serve ready (/health, then one completion) in {time.monotonic() - started:.1f} s"
        )
        yield running
    assert_nothing_left(running.pgid, spec.port)


def test_it_is_ready_after_health_and_one_real_completion_never_asking_models(server) -> None:
    assert server.is_alive() and server.spec.health_path == "/health"
    # The log pump holds a last line until the next one or a quiet moment: wait for it.
    assert wait_for(lambda: '"POST /v1/chat/completions HTTP/1.1" 200' in server.log_text(), timeout_s=30)
    log = server.log_text()
    assert '"GET /health HTTP/1.1" 200' in log
    assert "GET /v1/models" not in log  # it lists the hub cache, and answers 500 offline
    assert f"Loading {TINY_MODEL}" in log


def test_completions_and_chat_answer_with_a_choice_for_the_model_the_plan_names(server) -> None:
    model = served_model()
    assert model == str(TINY_MODEL)  # the positional word, as written
    status, body = http(
        "POST",
        server.base_url + "/v1/completions",
        {"model": model, "prompt": "hello", "max_tokens": 3, "temperature": 0},
    )
    assert status == 200, body[:500]
    answer = json.loads(body)
    assert isinstance(answer["choices"][0]["text"], str) and answer["usage"]["completion_tokens"] == 3
    chat = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    status, body = http("POST", server.base_url + "/v1/chat/completions", chat)
    assert status == 200, body[:500]
    assert isinstance(json.loads(body)["choices"][0]["message"]["content"], str)
    # Pinned to that word: a request naming anything else is refused.
    status, body = http("POST", server.base_url + "/v1/completions", {"model": "tiny", "prompt": "hello"})
    assert status == 400 and b"pinned" in body, body[:500]


def test_it_has_no_metrics_and_the_engine_claims_no_counters(server) -> None:
    status, _ = http("GET", server.base_url + "/metrics")
    assert status == 404
    assert ENGINE.counter_metric_names == frozenset() and not ENGINE.counters_optional


def test_it_refuses_every_request_of_vllm_bench_serve_so_the_plan_refuses_that_client(
    server, tmp_path
) -> None:
    require("vllm", "vLLM's bench client")
    options = {
        "backend": "openai",
        "endpoint": "/v1/completions",
        "dataset_name": "random",
        "random_input_len": 16,
        "random_output_len": 4,
        "num_prompts": 2,
    }
    ctx = MeasureContext(
        "transformers", 2, 1, 1, tmp_path, base_url=server.base_url, model_name=served_model(),
        tokenizer=str(TINY_MODEL),
    )  # fmt: skip
    with pytest.raises(InstrumentError, match=r"no request completed at concurrency 2 \(2 failed\)"):
        vllm_bench.measure(str(SERVE_VLLM), options, ctx, env=client_env())
    # Why: the fields vLLM's client adds to OpenAI's schema.
    assert wait_for(lambda: server.log_text().count('"POST /v1/completions HTTP/1.1" 422') >= 2)
    client_log = (tmp_path / f"{ctx.stem}.client.log").read_text()
    assert "Unprocessable Entity" in client_log
    # So the planner refuses the instrument on this engine's arm before any launch.
    with pytest.raises(InputError, match="refuses request fields outside OpenAI's schema"):
        instruments.get(vllm_bench.NAME).check_arm(
            Instrument("bench", vllm_bench.NAME, options), "transformers", ENGINE.name,
            LaunchCommand.parse(list(ARM_ARGV)),
        )  # fmt: skip


def test_the_schema_only_client_gets_an_answer_to_every_prompt(server, tmp_path) -> None:
    # openai_bench: the one client of experiments/examples/tiny-tserve.yaml, for both arms.
    options = openai_bench.parse_options(
        {"endpoint": "/v1/completions", "num_prompts": 4, "input_len": 16, "output_len": 8}
    )
    ctx = MeasureContext(
        "transformers", 2, 1, 1, tmp_path, base_url=server.base_url, model_name=served_model()
    )
    measurement = openai_bench.measure(options, ctx, env=client_env())
    raw = json.loads(measurement.raw_path.read_text())
    records = raw["requests"]
    assert len(records) == 4 and not [r["error"] for r in records if "error" in r]
    assert all(r["usage"]["completion_tokens"] >= 1 for r in records)  # every request generated
    metrics = measurement.metrics
    assert metrics["completed"] + metrics["failed"] == 4 and metrics["output_tps_total"] > 0
    print(f"\nopenai_bench at concurrency 2: { {k: round(v, 2) for k, v in sorted(metrics.items())} }")


def test_ctrl_c_inside_the_block_leaves_no_process_of_the_group_and_a_free_port(tmp_path) -> None:
    # KeyboardInterrupt is what Ctrl-C raises; it is not an Exception, the harder case for __exit__.
    spec = tserve_spec(tmp_path, run_id="transformers-interrupted-r1")
    with pytest.raises(KeyboardInterrupt), ProcessLauncher().start(spec) as running:
        assert running.is_alive()
        raise KeyboardInterrupt
    assert_nothing_left(running.pgid, spec.port)
    assert wait_for(lambda: not group_members(running.pgid), timeout_s=30)


def test_a_flag_typer_rejects_fails_the_boot_as_rejected_flag_and_leaves_nothing(tmp_path) -> None:
    spec = tserve_spec(tmp_path, "--no-such-flag-here", run_id="transformers-rejected-r1")
    registered = live_servers()  # the module's server, when it is up
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(spec)
    failure = caught.value
    assert failure.cause == "rejected_flag", failure.log_tail
    assert "server exited with status" in str(failure)  # the exit was noticed, not the timeout
    assert "--no-such-flag-here" in failure.log_tail
    assert port_is_free(HOST, spec.port) and live_servers() == registered
    assert not processes_with(f"{spec.port}", "--no-such-flag-here")  # the server, and only it, is gone


@dataclass(frozen=True)
class Instrument:
    """An instrument as an experiment writes it (``instruments.base.InstrumentSpec``)."""

    name: str
    kind: str
    options: dict[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] | None = None
