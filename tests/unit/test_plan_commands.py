"""`ledger run --plan` prints each arm's launch as a line a shell takes as it is: every word quoted,
a docker arm's full `docker run` (rendered from the settings the docker launcher creates the
container with), secret values never printed, and a candidate's changes from the control named."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.launch.containers import container_settings, docker_run_argv
from recipe_ledger.launch.spec import LaunchSpec

from helpers.projects import scratch_recipes_root

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-value-for-the-plan-test"
JSON_FLAG = '{"cudagraph_capture_sizes":[1,2,4]}'
IMAGE = "registry.example/org/server@sha256:" + "c" * 64


def _project(tmp_path: Path, launcher: str) -> Path:
    root = tmp_path / "project"
    (root / "recipes").mkdir(parents=True)
    scratch_recipes_root(root / "recipes")
    (root / "recipes" / "boxes").mkdir()
    (root / "recipes" / "boxes" / "cpu-only.yaml").write_bytes(
        (REPO / "recipes" / "boxes" / "cpu-only.yaml").read_bytes()
    )
    control = {
        "argv": ["serve-it", "/model", "--compilation-config", JSON_FLAG, "--max-num-seqs", "1", "--eager"],
        "env": {"HF_TOKEN": SECRET, "MODE": "two words"},
    }
    candidate = {
        **control,
        "argv": ["serve-it", "/model", "--compilation-config", JSON_FLAG, "--max-num-seqs", "8"],
    }
    server: dict[str, object] = {"launcher": launcher, "port": 18997}
    if launcher == "docker":
        server["image"] = IMAGE
        server["volumes"] = {"/models/x y": "/model:ro"}
    spec = {
        "schema_version": 1,
        "name": "quoted",
        "hypothesis": "the plan pastes",
        "box": "cpu-only",
        "engine": "none",
        "server": server,
        "control": control,
        "candidates": {"wide": candidate},
        "instruments": [{"name": "probe", "kind": "command", "command": ["true"]}],
        "points": [1],
        "repeats": 2,
        "bars": [{"metric": "x", "point": 1, "direction": "higher", "min_effect": 0.05}],
    }
    path = root / "experiments" / "quoted.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def _plan(tmp_path: Path, launcher: str) -> list[str]:
    spec = _project(tmp_path, launcher)
    result = CliRunner().invoke(main, ["run", "--plan", str(spec), "--root", str(spec.parents[1])])
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output
    return result.output.splitlines()


def _command_after(lines: list[str], arm: str) -> list[str]:
    """The words of the command line printed under ``arm``'s heading, as a shell reads them."""
    index = next(i for i, line in enumerate(lines) if line.startswith(f"  {arm}: "))
    return shlex.split(lines[index + 1])


def test_a_process_arm_pastes_as_its_variables_and_its_argv_with_json_kept_one_word(tmp_path):
    lines = _plan(tmp_path, "process")
    words = _command_after(lines, "control")
    assert words[0] == "MODE=two words"
    assert words[1:4] == ["serve-it", "/model", "--compilation-config"] and words[4] == JSON_FLAG
    assert not any("HF_TOKEN" in word for word in words)  # named on its own line, never its value
    assert any("export HF_TOKEN in your shell" in line for line in lines)


def test_a_docker_arm_pastes_as_the_docker_run_the_launcher_would_make(tmp_path):
    words = _command_after(_plan(tmp_path, "docker"), "control")
    assert words[:2] == ["docker", "run"]
    image_at = words.index(IMAGE)
    flags, argv = words[:image_at], words[image_at + 1 :]
    assert argv[:4] == ["serve-it", "/model", "--compilation-config", JSON_FLAG]
    assert ["-v", "/models/x y:/model:ro"] == flags[flags.index("-v") : flags.index("-v") + 2]
    assert "HF_TOKEN" in flags and "MODE=two words" in flags  # -e NAME: docker reads the caller's value
    assert flags[flags.index("HF_TOKEN") - 1] == "-e"
    assert ["--network", "host"] == flags[flags.index("--network") : flags.index("--network") + 2]


@pytest.mark.parametrize("launcher", ["process", "docker"])
def test_a_candidate_names_each_flag_it_changes_from_the_control(tmp_path, launcher):
    lines = _plan(tmp_path, launcher)
    (changed,) = [line.strip() for line in lines if line.strip().startswith("changed from control:")]
    assert "--max-num-seqs 8 (control: 1)" in changed and "--eager removed (control: (set))" in changed
    assert "--compilation-config" not in changed  # the same in both arms: not a change
    control_at = next(i for i, line in enumerate(lines) if line.startswith("  control: "))
    assert not lines[control_at + 2].strip().startswith("changed from control")


def _spec(**changes: object) -> LaunchSpec:
    fields: dict[str, object] = {
        "argv": ["vllm", "serve", "/model"],
        "env": {"A": "1", "API_TOKEN": SECRET},
        "host": "127.0.0.1",
        "port": 8123,
        "health_path": "/health",
        "health_timeout_s": 240,
        "log_path": "/tmp/runs/server-control-r1.log",
        "run_id": "exp1",
        "engine": VLLM,
        "image": "img:1",
    }
    fields.update(changes)
    return LaunchSpec(**fields)  # type: ignore[arg-type]


def test_docker_run_argv_renders_every_setting_of_the_container():
    spec = _spec(gpus=2, network="bridge", container_port=8000, shm_size="16g", init=True, ulimit_memlock=-1)
    argv = docker_run_argv(spec, lambda name, _: "TOKEN" in name)
    text = shlex.join(argv)
    for expected in (
        "--gpus 2",
        "-p 127.0.0.1:8123:8000/tcp",
        "--network bridge",
        "--shm-size 16g",
        "--init",
        "--detach",
        "--ipc host",
        "--ulimit memlock=-1:-1",
        "--cap-add IPC_LOCK",
        "-e A=1",
        "-e API_TOKEN ",
    ):
        assert expected in text
    assert SECRET not in text and argv[-4:] == ["img:1", "vllm", "serve", "/model"]
    amd = shlex.join(docker_run_argv(_spec(gpus="all", gpu_vendor="amd"), lambda *_: False))
    assert "--device /dev/kfd:/dev/kfd:rwm" in amd and "--group-add video" in amd
    assert "--security-opt seccomp=unconfined" in amd


def test_docker_run_argv_leaves_out_only_the_launch_bookkeeping():
    # Labels and the name mark a launch of this tool (a later ledger removes it as an orphan).
    settings = container_settings(_spec(), "x")
    assert {"labels", "name"} <= set(settings)
    text = shlex.join(docker_run_argv(_spec(), lambda *_: False))
    assert "recipe-ledger." not in text and "--name" not in text


def test_calibrate_plan_prints_the_control_as_the_same_docker_run(tmp_path):
    spec = _project(tmp_path, "docker")
    root = str(spec.parents[1])
    calibrate = CliRunner().invoke(main, ["calibrate", "--plan", str(spec), "--root", root])
    assert calibrate.exit_code == 0, calibrate.output
    run = CliRunner().invoke(main, ["run", "--plan", str(spec), "--root", root])
    assert _command_after(calibrate.output.splitlines(), "control") == _command_after(
        run.output.splitlines(), "control"
    )
    assert SECRET not in calibrate.output
