"""`dvc repro` on a fresh copy of the repository regenerates the committed tables and site byte
for byte, and refuses a ledger that does not verify. Real git, real DVC (the `publish` extra)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.resources import dvc_executable, require

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# What the stages read and write, plus DVC's own files: a fresh clone holds exactly these.
COPIED = [
    "dvc.yaml",
    "dvc.lock",
    ".dvcignore",
    ".dvc/config",
    ".dvc/.gitignore",
    "ledger",
    "recipes",
    "tables",
    "site",
    "evidence",
    "experiments",
    "src/recipe_ledger",
]


def _dvc() -> str:
    require("dvc")
    return str(dvc_executable())


def _run(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "DVC_NO_ANALYTICS": "1"}
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    dvc = _dvc()
    missing = [p for p in COPIED if not (REPO / p).exists()]
    if missing:
        pytest.fail(f"not in the repository: {missing} (run `dvc repro` and commit its outputs)")
    root = tmp_path / "clone"
    for rel in COPIED:
        source, target = REPO / rel, root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copyfile(source, target)
    _run(["git", "init", "-q", "-b", "main"], root)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A"], root)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "clone"], root)
    root.joinpath(".dvc-bin").write_text(dvc)
    return root


def test_dvc_repro_regenerates_tables_and_site_byte_for_byte(clone: Path) -> None:
    dvc = clone.joinpath(".dvc-bin").read_text()
    shutil.rmtree(clone / "tables")
    shutil.rmtree(clone / "site")
    out = _run([dvc, "repro", "--force"], clone)
    assert "Running stage 'tables'" in out.stdout and "Running stage 'site'" in out.stdout
    diff = _run(["git", "status", "--porcelain", "--untracked-files=all"], clone).stdout
    assert diff.strip() in ("", "?? .dvc-bin"), f"dvc repro changed committed files:\n{diff}"


def test_dvc_repro_refuses_a_ledger_that_does_not_verify(clone: Path) -> None:
    dvc = clone.joinpath(".dvc-bin").read_text()
    chain = min((clone / "ledger").glob("*.jsonl"))
    data = chain.read_bytes()
    index = data.index(b'"kind":"') + len(b'"kind":"')
    chain.write_bytes(data[:index] + data[index:].replace(b"e", b"E", 1))
    result = _run([dvc, "repro", "--force"], clone, check=False)
    assert result.returncode != 0
    assert "does not verify" in result.stdout + result.stderr
    assert _run(["git", "diff", "--stat", "--", "tables", "site"], clone).stdout == ""


def _status(dvc: str, clone: Path) -> str:
    return _run([dvc, "status"], clone).stdout


@pytest.mark.parametrize(
    ("changed", "stages"),
    [
        ("src/recipe_ledger/site/templates/base.html", {"site"}),
        ("src/recipe_ledger/recipes/resolve.py", {"site"}),
        ("src/recipe_ledger/ledger/views.py", {"site", "tables"}),  # both read the ledger package
        ("src/recipe_ledger/redact/rules.py", {"site", "tables"}),
    ],
)
def test_dvc_status_sees_a_change_to_the_code_a_stage_is_built_from(
    clone: Path, changed: str, stages: set[str]
) -> None:
    dvc = clone.joinpath(".dvc-bin").read_text()
    assert "Data and pipelines are up to date" in _status(dvc, clone), "the committed dvc.lock is stale"
    path = clone / changed
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    status = _status(dvc, clone)
    reported = {name for name in ("tables", "site") if f"{name}:" in status.splitlines()}
    assert reported == stages, status
