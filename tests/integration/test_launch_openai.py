"""The process launcher against an OpenAI-compatible stand-in (tests/helpers/fake_server.py --engine
openai) served as engine ``openai``: readiness is ``GET /v1/models`` then one real chat completion;
a server that never lists models did not boot, one that lists but completes nothing is up and wrong,
and every failure leaves nothing running."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from recipe_ledger import engines
from recipe_ledger.engines import openai_api
from recipe_ledger.launch import BootFailure, LaunchSpec, ProcessLauncher, live_servers
from recipe_ledger.launch.ports import port_is_free
from recipe_ledger.pipeline.failures import cause_class_of

from helpers import FAKE_SERVER
from helpers.launching import no_server_left_behind  # noqa: F401  (autouse)
from helpers.net import free_port
from helpers.waiting import wait_for

HOST = "127.0.0.1"


@pytest.fixture
def make_spec(tmp_path: Path) -> Callable[..., LaunchSpec]:
    def build(*server_flags: str, timeout_s: float = 20.0, engine: str = "openai") -> LaunchSpec:
        port = free_port()
        argv = [sys.executable, str(FAKE_SERVER), "--port", str(port), "--engine", "openai", *server_flags]
        chosen = engines.get(engine)
        log = tmp_path / "runs" / "server-own-r1.log"
        return LaunchSpec(
            argv, {}, HOST, port, chosen.health_path, timeout_s, log, "test-openai-r1", engine=chosen
        )

    return build


def test_a_server_is_ready_after_models_and_one_real_completion(make_spec) -> None:
    spec = make_spec("--delay", "0.5", "--model", "my-model")
    assert spec.health_path == "/v1/models"
    with ProcessLauncher().start(spec) as server:
        # The log pump holds a last line until the next one or a quiet moment: wait for it.
        assert wait_for(lambda: "POST /v1/chat/completions" in server.log_text())
        assert "GET /v1/models" in server.log_text()
        assert openai_api.served_model_ids(server.base_url, 5) == (["my-model"], None)
    assert port_is_free(HOST, spec.port) and not live_servers()


def test_transformers_serve_is_ready_after_health_and_one_completion_without_models(make_spec) -> None:
    # Its /v1/models lists the hub cache (a 500 offline): readiness never asks it.
    spec = make_spec("--delay", "0.5", "--no-models", engine="transformers")
    assert spec.health_path == "/health"
    with ProcessLauncher().start(spec) as server:
        assert wait_for(lambda: "POST /v1/chat/completions" in server.log_text())
        assert "GET /v1/models" not in server.log_text()
    assert port_is_free(HOST, spec.port) and not live_servers()


def test_a_server_that_never_lists_models_did_not_boot(make_spec) -> None:
    spec = make_spec("--no-models", timeout_s=1.5)
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(spec)
    failure = caught.value
    assert failure.cause == "no_answer" and cause_class_of(failure) == "no-boot"
    assert "no 200 from" in str(failure) and "/v1/models" in str(failure)
    assert "Application startup complete" in failure.log_tail  # the last log lines travel with it
    assert port_is_free(HOST, spec.port) and not live_servers()


def test_a_server_that_answers_but_completes_nothing_is_bad_output(make_spec) -> None:
    spec = make_spec("--no-choices")
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(spec)
    failure = caught.value
    assert failure.cause == "generate_failed" and cause_class_of(failure) == "bad-output"
    assert "no completion in it (no choices)" in str(failure)
    assert port_is_free(HOST, spec.port) and not live_servers()


def test_a_loading_server_that_never_gets_ready_is_a_hang_not_a_no_boot(make_spec) -> None:
    # /v1/models answers 503 all along: the server is up and never ready.
    with pytest.raises(BootFailure) as caught:
        ProcessLauncher().start(make_spec("--never-healthy", timeout_s=1.5))
    assert caught.value.cause == "timeout" and cause_class_of(caught.value) == "hang"
