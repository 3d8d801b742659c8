"""`dvc repro` on a fresh copy of the repository regenerates the committed tables and site byte
for byte, and refuses a ledger that does not verify; `dvc metrics` and `dvc plots` read what
dvc.yaml declares. Real git, real DVC (the `publish` extra)."""

from __future__ import annotations

import csv
import json
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


def test_dvc_metrics_and_plots_show_the_declared_series(clone: Path) -> None:
    dvc = clone.joinpath(".dvc-bin").read_text()
    shown = json.loads(_run([dvc, "metrics", "show", "--json"], clone).stdout)
    metrics = shown[""]["data"]["tables/metrics.json"]["data"]
    assert metrics == json.loads((clone / "tables" / "metrics.json").read_text())
    with open(clone / "tables" / "verdicts.csv", newline="") as handle:
        verdicts = list(csv.DictReader(handle))
    assert metrics["published"]["verdicts"] == len(verdicts) == sum(metrics["outcomes"].values())
    assert {row["run_id"] for row in verdicts if row["effect"]} == set(metrics["results"])

    plots = json.loads(_run([dvc, "plots", "show", "--json"], clone).stdout)
    assert not plots.get("errors"), plots["errors"]
    for path, x, y in (("tables/effects.csv", "effect", "bar"), ("tables/noise.csv", "cv", "calibration")):
        (plot,) = plots["data"][path]
        encoding = plot["content"]["encoding"]
        assert (encoding["x"]["field"], encoding["y"]["field"]) == (x, y), encoding
        with open(clone / path, newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert rows, path
        values = plot["content"]["data"]["values"]
        assert [(v[y], v[x]) for v in values] == [(r[y], r[x]) for r in rows]
    assert not (clone / "dvc_plots").exists()  # --json renders nothing into the repository


def test_dvc_metrics_diff_shows_a_retracted_result_leaving_the_headline(clone: Path) -> None:
    dvc = clone.joinpath(".dvc-bin").read_text()
    assert json.loads(_run([dvc, "metrics", "diff", "--json"], clone).stdout) == {}
    (clone / "ledger" / "maintainers").write_text("box-t\n")
    ledger = [str(BIN / "ledger"), "retract", "bd60452cc40c", "--reason", "a test", "--writer", "box-t"]
    _run([*ledger, "--root", "."], clone)
    _run([dvc, "repro"], clone)
    diff = json.loads(_run([dvc, "metrics", "diff", "--json"], clone).stdout)["tables/metrics.json"]
    assert diff["published.results"]["diff"] == -1
    gone = [name for name, change in diff.items() if name.startswith("results.h200-expert-placement-")]
    assert gone and all(diff[name]["new"] is None for name in gone)
