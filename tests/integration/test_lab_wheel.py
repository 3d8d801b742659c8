"""The tool as a package (issue 29): built as a wheel, installed in a fresh venv, run in an empty git
repository far from this checkout. `ledger init` makes a lab there, `ledger recipe list` lists its
recipe and the lab's first experiment (a study with no server) plans on the detected box; nothing
is read from this repository at run time.

The fresh venv gets the wheel only (``--no-deps --no-index``); its dependencies come from the venv
running the tests through a ``.pth`` line, so the test downloads nothing but what pip's build
isolation needs to build the wheel (setuptools, as any ``pip wheel .`` does)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _source_copy(into: Path) -> Path:
    """The files git would commit (tracked and new, not ignored), links kept as links."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source, target = REPO / name, into / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_file():
            shutil.copyfile(source, target)
    return into


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv holding the wheel built from this tree; its bin/ folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = _source_copy(tmp / "source")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(source), "-w", str(tmp / "dist")],
        tmp,
        env,
    )
    wheel = next((tmp / "dist").glob("recipe_ledger-*.whl"))
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp, env)
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp, env)
    deps = sysconfig.get_paths()["purelib"]  # this venv's: pydantic, click, rich, GitPython...
    (Path(purelib.stdout.strip()) / "recipe-ledger-deps.pth").write_text(deps + "\n")
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], tmp, env)
    return venv / "bin"


def test_a_lab_made_by_the_installed_wheel_lists_its_recipe_and_plans_its_example(installed, tmp_path):
    lab = tmp_path / "lab"
    lab.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "RECIPE_LEDGER_SIGNING": "off"}
    _run(["git", "init", "-q"], lab, env)
    where = _run(
        [str(installed / "python"), "-c", "import recipe_ledger; print(recipe_ledger.__file__)"], lab, env
    )
    assert Path(where.stdout.strip()).is_relative_to(installed.parent)  # the wheel, not this checkout

    made = _run([str(installed / "ledger"), "init"], lab, env).stdout
    for path in (
        "recipes/overlay/models/recipe-ledger/tiny-qwen2.yaml",
        "experiments/example-sort.yaml",
        "dvc.yaml",
    ):
        assert f"created {path}" in made and (lab / path).is_file()
    box = next((lab / "boxes").glob("*.yaml")).stem

    listed = _run([str(installed / "ledger"), "recipe", "list"], lab, env).stdout
    assert "recipe-ledger/tiny-qwen2" in listed

    planned = _run(
        [str(installed / "ledger"), "run", "--plan", "experiments/example-sort.yaml"], lab, env
    ).stdout
    assert f"experiment example-sort on {box}" in planned and "study arm builtin" in planned
    assert list((lab / "ledger").glob("*.jsonl")) == []  # signing off: no key entry; a plan records nothing


def test_a_lab_runs_its_example_to_a_verdict_builds_its_site_and_verifies(installed, tmp_path):
    """Issue 29's check, end to end with the wheel alone: init, commit, run the example to a verdict,
    `dvc repro` (the lab's own dvc.yaml, its `ledger` the wheel's), `ledger verify`."""
    lab = tmp_path / "lab"
    lab.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        # the writer signs from its first entry (as a new box does), its key outside the lab
        "RECIPE_LEDGER_SIGNING": "on",
        "RECIPE_LEDGER_KEY_DIR": str(tmp_path / "keys"),
        "RECIPE_LEDGER_WRITER": "lab-box",
        # the lab's dvc.yaml calls `ledger` by name: the wheel's, ahead of any other
        "PATH": f"{installed}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    ledger = str(installed / "ledger")
    _run(["git", "init", "-q"], lab, env)
    made = _run([ledger, "init", "--name", "lab-one"], lab, env).stdout
    assert "lab-box signs its chain" in made, made
    _run(["git", "add", "-A"], lab, env)
    _run(
        ["git", "-c", "user.name=lab", "-c", "user.email=lab@example.invalid", "commit", "-qm", "lab"],
        lab,
        env,
    )
    ran = _run([ledger, "run", "experiments/example-sort.yaml", "--no-mlflow"], lab, env).stdout
    # the comparisons (a count, not a time) decide on any machine, however busy; the time may not
    assert "builtin compares_per_item@1: win" in ran, ran
    _run([sys.executable, "-m", "dvc", "repro"], lab, env)
    assert (lab / "site" / "index.html").is_file() and "lab-one" in (lab / "site" / "index.html").read_text()
    assert any((lab / "tables").iterdir())
    verified = _run([ledger, "verify"], lab, env)
    assert verified.stdout.startswith("ok") and "signed" in verified.stdout, verified.stdout
    assert "warning" not in verified.stdout + verified.stderr
