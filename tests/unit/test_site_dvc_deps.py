"""dvc.yaml is honest: each stage lists, among its deps, every module of this package that its
command loads, so that `dvc status` reports the stage changed after a code change (the clone test in
tests/integration/test_dvc_repro.py checks DVC itself sees it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.projects import REPO

SRC = REPO / "src"
# Runs the stage's command in a fresh interpreter (the test process has imported everything) and
# prints the files of the recipe_ledger modules it loaded, relative to the repository.
PROBE = """
import json, sys
from pathlib import Path
from click.testing import CliRunner
from recipe_ledger.cli import main
root, args = Path(sys.argv[1]).resolve(), sys.argv[2:]
result = CliRunner().invoke(main, args)
assert result.exit_code == 0, result.output
files = {m.__file__ for n, m in list(sys.modules.items()) if n.startswith("recipe_ledger") and m.__file__}
print(json.dumps(sorted(str(Path(f).resolve().relative_to(root)) for f in files)))
"""


def _stage_deps(name: str) -> list[str]:
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    return [str(d) for d in stages[name]["deps"]]


def _loaded_modules(args: list[str], tmp_path: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-c", PROBE, str(REPO), *args, "--out", str(tmp_path / "out")]
    done = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _covered(path: str, deps: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in deps)


@pytest.mark.parametrize(
    ("stage", "args"),
    [
        ("tables", ["tables", "--root", str(REPO)]),
        ("site", ["site", "--root", str(REPO), "--no-progress"]),
    ],
)
def test_every_module_a_stage_loads_is_one_of_its_deps(stage: str, args: list[str], tmp_path: Path) -> None:
    deps = _stage_deps(stage)
    loaded = _loaded_modules(args, tmp_path)
    assert any(p.startswith("src/recipe_ledger/") for p in loaded), loaded
    missing = [p for p in loaded if not _covered(p, deps)]
    assert missing == [], f"dvc.yaml stage {stage!r} misses deps it reads: {missing}"


def test_every_dep_of_the_site_stage_exists() -> None:
    for stage in ("tables", "site"):
        for dep in _stage_deps(stage):
            assert (REPO / dep).exists(), f"dvc.yaml stage {stage!r} lists {dep}, which does not exist"
