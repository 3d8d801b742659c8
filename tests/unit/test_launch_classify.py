"""Boot-failure classification on real-looking server logs, and LaunchSpec validation (no processes)."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
from pathlib import Path

import pytest

from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.errors import InputError, LedgerError
from recipe_ledger.launch import BOOT_CAUSES, BootFailure, LaunchSpec, classify_boot_failure
from recipe_ledger.launch.failures import read_log, redacted_tail

from helpers.resources import require

VLLM_CUDA_OOM = """\
INFO 11-29 02:14:07 [gpu_model_runner.py:2301] Loading model from scratch...
ERROR 11-29 02:15:41 [core.py:708] EngineCore failed to start.
ERROR 11-29 02:15:41 [core.py:708] Traceback (most recent call last):
ERROR 11-29 02:15:41 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/\
vllm/v1/engine/core.py", line 699
ERROR 11-29 02:15:41 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. \
GPU 0 has a total capacity of 139.81 GiB of which 2.11 GiB is free.
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""

VLLM_NO_CACHE_BLOCKS = """\
INFO 11-29 02:20:13 [gpu_worker.py:276] Available KV cache memory: -4.21 GiB
ERROR 11-29 02:20:13 [core.py:708] ValueError: No available memory for the cache blocks. Try increasing \
`gpu_memory_utilization` when initializing the engine.
"""

VLLM_NEGATIVE_KV_ONLY = "INFO 11-29 02:20:13 [gpu_worker.py:276] Available KV cache memory: -0.37 GiB\n"

VLLM_MAX_LEN_TOO_BIG = """\
ValueError: To serve at least one request with the models's max seq len (1048576), (5.50 GiB KV cache is \
needed, which is larger than the available KV cache memory (3.12 GiB). Based on the available memory, the \
estimated maximum model length is 612000. Try increasing `gpu_memory_utilization` or decreasing \
`max_model_len`
"""

ARGPARSE_UNRECOGNIZED = """\
usage: vllm serve [model_tag] [options]
vllm serve: error: unrecognized arguments: --offload-backend uva
"""

ARGPARSE_INVALID_CHOICE = """\
usage: vllm serve [model_tag] [options]
vllm serve: error: argument --dtype: invalid choice: 'bf16' (choose from 'auto', 'bfloat16', 'float16')
"""

ARGPARSE_BAD_VALUE = "vllm serve: error: argument --max-model-len: invalid int value: '1M'\n"

UVICORN_PORT_TAKEN = """\
INFO:     Started server process [4242]
INFO:     Waiting for application startup.
ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 8123): address already in use
"""

PLAIN_CRASH = """\
Traceback (most recent call last):
  File "/opt/venv/bin/vllm", line 8, in <module>
ImportError: libcudart.so.12: cannot open shared object file: No such file or directory
"""

STILL_LOADING = "INFO 11-29 02:14:07 [gpu_model_runner.py:2301] Loading model weights took 41.2 GiB\n"


@pytest.mark.parametrize(
    ("log_text", "exit_code", "timed_out", "expected"),
    [
        (VLLM_CUDA_OOM, 1, False, "out_of_memory"),
        (VLLM_NO_CACHE_BLOCKS, 1, False, "out_of_memory"),
        (VLLM_NEGATIVE_KV_ONLY, None, True, "out_of_memory"),
        (VLLM_MAX_LEN_TOO_BIG, 1, False, "out_of_memory"),
        ("", 137, False, "out_of_memory"),  # docker: the kernel's OOM killer
        (STILL_LOADING, -9, False, "out_of_memory"),  # process launcher: killed by SIGKILL
        (ARGPARSE_UNRECOGNIZED, 2, False, "rejected_flag"),
        (ARGPARSE_INVALID_CHOICE, 2, False, "rejected_flag"),
        (ARGPARSE_BAD_VALUE, 2, False, "rejected_flag"),
        (UVICORN_PORT_TAKEN, 1, False, "port_in_use"),
        (
            "Error starting userland proxy: listen tcp4 0.0.0.0:8123: bind: address already in use",
            None,
            False,
            "port_in_use",
        ),
        (STILL_LOADING, None, True, "timeout"),
        ("", None, True, "timeout"),
        (PLAIN_CRASH, 1, False, "crash"),
        ("", 0, False, "crash"),  # exited cleanly before ever being healthy is still a crash
    ],
)
def test_classify_boot_failure(log_text: str, exit_code: int | None, timed_out: bool, expected: str) -> None:
    assert classify_boot_failure(log_text, exit_code, timed_out, VLLM) == expected


def test_an_oom_logged_before_a_hang_is_reported_as_oom_not_timeout() -> None:
    assert classify_boot_failure(VLLM_CUDA_OOM + STILL_LOADING, None, True, VLLM) == "out_of_memory"


def test_every_classifier_answer_is_a_known_cause() -> None:
    logs = [VLLM_CUDA_OOM, ARGPARSE_UNRECOGNIZED, UVICORN_PORT_TAKEN, PLAIN_CRASH, ""]
    answers = {
        classify_boot_failure(text, code, late, VLLM)
        for text in logs
        for code in (None, 1)
        for late in (True, False)
    }
    assert answers <= BOOT_CAUSES


def test_boot_failure_carries_cause_tail_and_next_command() -> None:
    failure = BootFailure("timeout", "no 200", log_tail="last line", where="/runs/x.log", hint="tail -n 80 x")
    assert isinstance(failure, LedgerError)
    assert failure.cause == "timeout" and failure.log_tail == "last line"
    assert str(failure) == "/runs/x.log: timeout: no 200 (next: tail -n 80 x)"


def test_boot_failure_refuses_an_unknown_cause() -> None:
    with pytest.raises(ValueError, match="unknown boot failure cause"):
        BootFailure("gremlins", "?")  # type: ignore[arg-type]


def test_log_tail_is_redacted_including_the_launch_env_secrets() -> None:
    text = "\n".join(f"line {i}" for i in range(200)) + "\nusing token hf_abcdefghijklmnopqrstuvwxyz123\n"
    text += "auth with s3cr3t-value-from-env\n"
    tail = redacted_tail(text, 80, extra_env={"MY_SERVICE_PASSWORD": "s3cr3t-value-from-env"})
    assert len(tail.splitlines()) == 80
    assert "hf_abcdef" not in tail and "s3cr3t-value-from-env" not in tail
    assert "[REDACTED]" in tail and "line 199" in tail and "line 119" not in tail


def test_read_log_starts_at_this_launchs_offset(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("earlier attempt: CUDA out of memory\n")
    offset = log.stat().st_size
    with open(log, "a") as handle:
        handle.write("this attempt: fine\n")
    assert read_log(log, offset) == "this attempt: fine\n"
    assert read_log(tmp_path / "missing.log") == ""


# --- LaunchSpec ---------------------------------------------------------------------------------


def make_spec(**changes: object) -> LaunchSpec:
    fields: dict[str, object] = {
        "argv": ["vllm", "serve", "/model", "--port", "8123"],
        "env": {"VLLM_TARGET_DEVICE": "cpu"},
        "host": "127.0.0.1",
        "port": 8123,
        "health_path": "/health",
        "health_timeout_s": 240,
        "log_path": "/tmp/runs/server-control-r1.log",
        "run_id": "exp1-control-r1",
        "engine": VLLM,
    }
    fields.update(changes)
    return LaunchSpec(**fields)  # type: ignore[arg-type]


def test_spec_is_frozen_all_the_way_down() -> None:
    argv = ["vllm", "serve"]
    env = {"A": "1"}
    spec = make_spec(argv=argv, env=env)
    argv.append("--later")
    env["B"] = "2"
    assert spec.argv == ("vllm", "serve") and dict(spec.env) == {"A": "1"}
    assert isinstance(spec.log_path, Path)
    with pytest.raises(AttributeError):
        spec.port = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.env["C"] = "3"  # type: ignore[index]
    with pytest.raises(TypeError):
        spec.volumes.update({"/a": "/b"})  # type: ignore[attr-defined]


def test_spec_can_be_recorded_copied_and_hashed() -> None:
    spec = make_spec(image="img", volumes={"/models/x": "/model:ro"})
    record = dataclasses.asdict(spec)
    assert record["env"] == {"VLLM_TARGET_DEVICE": "cpu"} and record["argv"][0] == "vllm"
    assert hash(spec) == hash(make_spec(image="img", volumes={"/models/x": "/model:ro"}))
    assert copy.deepcopy(spec) == spec and pickle.loads(pickle.dumps(spec)) == spec
    assert dataclasses.replace(spec, port=9000).port == 9000


def test_spec_accepts_a_real_environment() -> None:
    # The runner may pass os.environ whole; exported bash functions have names like these.
    spec = make_spec(env={**os.environ, "BASH_FUNC_module%%": "() {  eval x\n}", "a.b": "1"})
    assert spec.env["a.b"] == "1"


def test_docker_spec_defaults() -> None:
    spec = make_spec(
        image="vllm/vllm-openai@sha256:" + "a" * 64, gpus="all", volumes={"/models/x": "/model:ro"}
    )
    assert spec.is_docker and spec.network == "host" and spec.published_port == 8123
    assert not make_spec().is_docker


@pytest.mark.parametrize(
    ("changes", "field_name"),
    [
        ({"argv": []}, "argv"),
        ({"argv": "vllm serve /model"}, "argv"),
        ({"argv": ["vllm", 8123]}, "argv"),
        ({"env": {"BAD=NAME": "1"}}, "env"),
        ({"env": {"": "1"}}, "env"),
        ({"env": {"N": 1}}, "env"),
        ({"port": 0}, "port"),
        ({"port": 70000}, "port"),
        ({"port": True}, "port"),
        ({"health_path": "health"}, "health_path"),
        ({"health_timeout_s": 0}, "health_timeout_s"),
        ({"run_id": "has space"}, "run_id"),
        ({"run_id": ""}, "run_id"),
        ({"gpus": 0}, "gpus"),
        ({"gpus": "some"}, "gpus"),
        ({"image": "  "}, "image"),
        ({"volumes": {"relative": "/model"}}, "volumes"),
        ({"volumes": {"/models": "/model:rx"}}, "volumes"),
        ({"container_port": 8000}, "container_port"),  # host network publishes nothing
        ({"network": "bridge", "container_port": 0}, "container_port"),
        ({"ulimit_memlock": -2}, "ulimit_memlock"),
        ({"engine": "vllm"}, "engine"),  # a name is not an engine: recipe_ledger.engines.get(name) is
    ],
)
def test_spec_rejects_bad_fields_naming_the_field(changes: dict[str, object], field_name: str) -> None:
    with pytest.raises(InputError) as caught:
        make_spec(**changes)
    assert caught.value.where == f"LaunchSpec.{field_name}"


def test_spec_accepts_gpu_counts_and_published_ports() -> None:
    spec = make_spec(image="img", gpus=2, network="bridge", container_port=8000)
    assert spec.gpus == 2 and spec.published_port == 8000


# --- the docker run shape (pure: builds keyword arguments, starts nothing) ------------------------


def test_container_options_follow_the_seed_docker_run_shape() -> None:
    require("docker-sdk")
    from recipe_ledger.launch.containers import container_options

    spec = make_spec(
        image="vllm/vllm-openai@sha256:" + "b" * 64,
        gpus="all",
        shm_size="16g",
        volumes={"/models/dsv41": "/model:ro", "/cache/vllm": "/root/.cache/vllm"},
    )
    options = container_options(spec, launch_id="abc123")
    assert options["command"] == list(spec.argv) and options["environment"] == {"VLLM_TARGET_DEVICE": "cpu"}
    assert options["network_mode"] == "host" and "ports" not in options
    assert options["ipc_mode"] == "host" and options["cap_add"] == ["IPC_LOCK"]
    assert [dict(u) for u in options["ulimits"]] == [{"Name": "memlock", "Soft": -1, "Hard": -1}]
    assert options["volumes"] == ["/models/dsv41:/model:ro", "/cache/vllm:/root/.cache/vllm"]
    owner = options["labels"].pop("recipe-ledger.owner")  # this process: host, pid, start identity
    assert owner.split()[1] == str(os.getpid())
    assert options["labels"] == {
        "recipe-ledger.managed": "1",
        "recipe-ledger.run": spec.run_id,
        "recipe-ledger.launch": "abc123",
    }
    assert [dict(r) for r in options["device_requests"]] == [
        {"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}
    ]
    assert options["shm_size"] == "16g" and options["detach"] is True


def test_container_options_for_a_gpu_count_and_a_bridge_network() -> None:
    require("docker-sdk")
    from recipe_ledger.launch.containers import container_options

    two_gpus = container_options(make_spec(image="img", gpus=2, network="bridge", container_port=8000), "x")
    assert two_gpus["device_requests"][0]["Count"] == 2
    assert two_gpus["network"] == "bridge" and two_gpus["ports"] == {"8000/tcp": ("127.0.0.1", 8123)}
    assert "device_requests" not in container_options(make_spec(image="img"), "x")


def test_container_options_give_an_amd_box_its_rocm_devices() -> None:
    # ROCm's containers: /dev/kfd, /dev/dri, the video group (ROCm's docker documentation).
    require("docker-sdk")
    from recipe_ledger.launch.containers import container_options

    every = container_options(make_spec(image="rocm/vllm", gpus="all", gpu_vendor="amd"), "x")
    assert every["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
    assert every["group_add"] == ["video"] and every["security_opt"] == ["seccomp=unconfined"]
    assert "device_requests" not in every and "ROCR_VISIBLE_DEVICES" not in every["environment"]
    two = container_options(make_spec(image="rocm/vllm", gpus=2, gpu_vendor="amd"), "x")
    assert two["environment"]["ROCR_VISIBLE_DEVICES"] == "0,1" and "device_requests" not in two
    assert "devices" not in container_options(make_spec(image="img", gpu_vendor="amd"), "x")  # gpus: none
    with pytest.raises(InputError, match="gpu_vendor"):
        make_spec(image="img", gpu_vendor="intel")


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("vllm/vllm-openai:deepseekv41-flash-0909", "vllm/vllm-openai"),
        ("vllm/vllm-openai@sha256:" + "c" * 64, "vllm/vllm-openai"),
        ("localhost:5000/vllm/vllm-openai:v1@sha256:" + "c" * 64, "localhost:5000/vllm/vllm-openai"),
        ("localhost:5000/vllm", "localhost:5000/vllm"),
    ],
)
def test_missing_image_hint_names_the_repository(image: str, repository: str) -> None:
    from recipe_ledger.launch.containers import repository_of

    assert repository_of(image) == repository


def test_cleanup_selects_one_run_or_everything_the_tool_manages() -> None:
    from recipe_ledger.launch.containers import cleanup_label

    assert cleanup_label("exp1-control-r1") == "recipe-ledger.run=exp1-control-r1"
    assert cleanup_label(None) == "recipe-ledger.managed=1"


def test_an_unreachable_daemon_is_docker_unavailable_with_the_next_command(monkeypatch) -> None:
    require("docker-sdk")
    from recipe_ledger.launch.containers import connect

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(BootFailure) as caught:
        connect()
    assert caught.value.cause == "docker_unavailable"
    assert "dockerd" in str(caught.value) and "docker info" in str(caught.value)


# transformers serve 5.17 (typer over click 8.2+), printed by `transformers serve /x --no-such-flag`
# and `transformers serve /x --port notanumber` in .venv-tserve.
CLICK_NO_SUCH_OPTION = """\
Usage: transformers serve [OPTIONS] [FORCE_MODEL]
Try 'transformers serve --help' for help.

Error: No such option '--no-such-flag'.
"""
CLICK_BAD_VALUE = "Error: Invalid value for '--port': 'notanumber' is not a valid integer.\n"


@pytest.mark.parametrize("log", [CLICK_NO_SUCH_OPTION, CLICK_BAD_VALUE, "Error: No such option: --x\n"])
def test_clicks_rejected_flags_are_rejected_flags(log: str) -> None:
    assert classify_boot_failure(log, 2, False, VLLM) == "rejected_flag"
