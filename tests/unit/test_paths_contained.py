"""Contained paths: names that become file names stay inside their folder, and odd --root/--out
values are one line with exit 2, never a traceback."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import InputError
from recipe_ledger.paths import check_folder, check_name, contained
from recipe_ledger.pipeline.measure import Launch, launch_spec
from recipe_ledger.pipeline.plan import ArmPlan

REPO = Path(__file__).resolve().parents[2]
ESCAPES = ["../../../../X", "../x", "/abs/X", "a/../../b", "..", "", "x\x00y"]


@pytest.mark.parametrize("part", ESCAPES)
def test_contained_refuses_a_part_that_leaves_its_folder(tmp_path, part):
    base = tmp_path / "runs" / "r1"
    base.mkdir(parents=True)
    with pytest.raises(InputError):
        contained(base, part)


def test_contained_accepts_a_nested_name_and_returns_the_joined_path(tmp_path):
    assert contained(tmp_path, "raw", "a-p1-r1.json") == tmp_path / "raw" / "a-p1-r1.json"


def test_contained_refuses_a_symlink_inside_that_points_out(tmp_path):
    base = tmp_path / "site"
    base.mkdir()
    (base / "escape").symlink_to(tmp_path)
    with pytest.raises(InputError, match="outside"):
        contained(base, "escape/index.html")


@pytest.mark.parametrize("name", ["../../../../X", "/abs", "a/b", "a\\b", "..", ".", " ", "x" * 300])
def test_check_name_refuses_what_cannot_be_one_file_name(name):
    with pytest.raises(InputError) as caught:
        check_name(name, "arm name")
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


def test_check_name_accepts_the_names_the_examples_use():
    for name in ("control", "aa-control", "off60", "fast.v2", "tp_4"):
        assert check_name(name, "arm name") == name


def test_the_run_folder_refuses_an_arm_name_on_its_own_without_the_plan_check(tmp_path):
    """The second line of defence: measure builds the log path through contained."""

    # A stand-in for the RunPlan fields launch_spec reads: the arm's name is the point here.
    class Server:
        host, port, health_timeout_s, launcher, volumes, gpus = "127.0.0.1", 1, 1, "process", {}, None

    class Experiment:
        server = Server()

    class Plan:
        experiment = Experiment()
        box = SimpleNamespace(gpu=SimpleNamespace(vendor="nvidia"))

    for name in ("../../../../X", "/abs/X"):
        arm = ArmPlan(name, ["true"], {}, "test", None, "-")
        with pytest.raises(InputError):
            launch_spec(Launch(Plan(), arm, 1, tmp_path / "runs" / "r1", "r1", tmp_path))  # type: ignore[arg-type]
    assert not (tmp_path / "X").exists() and not Path("/abs/X").exists()


def _experiment(root: Path, arm: str) -> Path:
    server = {"argv": [sys.executable, "-c", "pass"]}
    spec = {
        "name": "escape",
        "hypothesis": "arm names are file names",
        "box": "cpu-only",
        "engine": "none",
        "server": {"launcher": "process", "port": 18998},
        "control": server,
        "candidates": {arm: server},
        "instruments": [{"name": "probe", "kind": "command", "command": ["true"]}],
        "points": [1],
        "repeats": 2,
        "bars": [{"metric": "x", "point": 1, "direction": "higher", "min_effect": 0.05}],
    }
    path = root / "experiments" / "escape.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


@pytest.mark.parametrize("arm", ["../../../../X", "/abs"])
@pytest.mark.parametrize("command", ["run", "calibrate"])
def test_a_plan_with_an_escaping_arm_name_is_refused_with_exit_2_and_writes_nothing(tmp_path, arm, command):
    root = tmp_path / "project"
    (root / "recipes" / "boxes").mkdir(parents=True)
    (root / "recipes" / "boxes" / "cpu-only.yaml").write_bytes(
        (REPO / "recipes" / "boxes" / "cpu-only.yaml").read_bytes()
    )
    spec = _experiment(root, arm)
    before = sorted(p for p in tmp_path.rglob("*"))
    result = CliRunner().invoke(main, [command, "--plan", str(spec), "--root", str(root)])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert sorted(p for p in tmp_path.rglob("*")) == before


@pytest.fixture
def odd_folders(tmp_path) -> dict[str, str]:
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    (tmp_path / "a-file").write_text("not a folder")
    return {
        "/proc/self": "/proc/self",
        "300 characters": str(tmp_path / ("x" * 300)),
        "symlink loop": str(tmp_path / "loop-a"),
        "a file": str(tmp_path / "a-file"),
        "under /sys": "/sys/kernel",
    }


@pytest.mark.parametrize("kind", ["/proc/self", "300 characters", "symlink loop", "a file", "under /sys"])
@pytest.mark.parametrize(
    "args", [["log"], ["verify"], ["note", "hi"], ["tables"], ["site"]], ids=lambda a: a[0]
)
def test_a_bad_root_is_one_line_and_exit_2(odd_folders, kind, args, monkeypatch):
    monkeypatch.setenv("RECIPE_LEDGER_WRITER", "box-a")
    result = CliRunner().invoke(main, [*args, "--root", odd_folders[kind]])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--root" in lines[0], lines
    assert not isinstance(result.exception, OSError)


@pytest.mark.parametrize("kind", ["/proc/self", "300 characters", "symlink loop", "a file"])
@pytest.mark.parametrize("command", ["tables", "site"])
def test_a_bad_out_is_one_line_and_exit_2(tmp_path, odd_folders, kind, command):
    project = tmp_path / "project"
    project.mkdir()
    assert CliRunner().invoke(main, ["init", "--root", str(project)]).exit_code == 0
    result = CliRunner().invoke(main, [command, "--root", str(project), "--out", odd_folders[kind]])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--out" in lines[0], lines


@pytest.mark.parametrize("kind", ["/proc/self", "symlink loop", "a file"])
@pytest.mark.parametrize("option", ["--root", "--recipes"])
def test_a_bad_recipes_or_root_on_recipe_commands_is_one_line_and_exit_2(odd_folders, kind, option):
    result = CliRunner().invoke(main, ["recipe", "list", option, odd_folders[kind]])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and option in lines[0], lines


def test_check_folder_accepts_a_folder_that_does_not_exist_yet(tmp_path):
    assert check_folder(tmp_path / "new" / "site", "--out") == tmp_path / "new" / "site"
