"""`ledger sweep` on a real local Ray cluster: three labelled nodes on this machine, each with its
own clone of a bare git remote, running study experiments (plain-command instrument, no server)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers.ray_nodes import local_cluster
from helpers.resources import require
from helpers.sweep_project import git, ledger_lines, study_spec, sweep_project

SRC = str(Path(__file__).resolve().parents[2] / "src")
BOXES = ["box-a", "box-b", "box-c"]


def _node_env(project, box: str) -> dict[str, str]:
    return {
        "RECIPE_LEDGER_WRITER": f"{box}-chain",
        "RECIPE_LEDGER_CHECKOUT": str(project.clones[box]),
        "PYTHONPATH": SRC,
    }


def _sweep(project, address: str, *specs: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "recipe_ledger.cli",
            "sweep",
            *specs,
            "--cluster",
            address,
            "--writer",
            "driver",
        ],
        cwd=project.driver,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=300,
    )


@pytest.fixture(scope="module")
def cluster_and_project(tmp_path_factory):
    require("ray", "the sweep runs experiments on a local Ray cluster")
    tmp = tmp_path_factory.mktemp("sweep")
    specs = {f"study-{box}-{n}": study_spec(f"study-{box}-{n}", box) for box in BOXES for n in (1, 2)}
    specs["crashes-on-box-b"] = study_spec("crashes-on-box-b", "box-b", candidate="crash")
    specs["slow-on-box-c"] = study_spec("slow-on-box-c", "box-c")
    specs["nobody-box"] = study_spec("nobody-box", "box-z")
    project = sweep_project(tmp, BOXES, specs)
    with local_cluster({box: _node_env(project, box) for box in BOXES}) as cluster:
        yield cluster, project


def test_each_experiment_runs_on_its_box_and_every_chain_reaches_the_remote(cluster_and_project):
    cluster, project = cluster_and_project
    specs = [f"experiments/study-{box}-{n}.yaml" for box in BOXES for n in (1, 2)]
    result = _sweep(project, cluster.address, *specs)
    assert result.returncode == 0, result.stdout + result.stderr
    for box in BOXES:
        assert f"[{box} 2/2]" in result.stdout
    # Each box wrote its own chain, in its own clone, for its own experiments only.
    for box in BOXES:
        own = [e for e in ledger_lines(project.clones[box]) if e["writer"] == f"{box}-chain"]
        assert {e["payload"]["subject"] for e in own if e["kind"] == "result"} == {
            f"study-{box}-1",
            f"study-{box}-2",
        }
    # The driver synced last: all three chains are in its clone and verify.
    driver = ledger_lines(project.driver)
    assert {e["writer"] for e in driver} >= {f"{box}-chain" for box in BOXES}
    assert sum(e["kind"] == "result" for e in driver) == 6
    verified = subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", "verify", "--history", "--root", str(project.driver)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert git(project.remote, "rev-parse", "main") == git(project.driver, "rev-parse", "HEAD")


def test_a_box_the_cluster_lacks_is_refused_in_one_line_before_anything_runs(cluster_and_project):
    cluster, project = cluster_and_project
    before = git(project.remote, "rev-parse", "main")
    result = _sweep(project, cluster.address, "experiments/study-box-a-1.yaml", "experiments/nobody-box.yaml")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "box=box-z" in result.stderr and "ray start --address" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert git(project.remote, "rev-parse", "main") == before  # nothing ran, nothing was pushed


def test_no_cluster_at_the_address_is_one_line(cluster_and_project, tmp_path):
    _, project = cluster_and_project
    result = _sweep(project, "127.0.0.1:9", "experiments/study-box-a-1.yaml")
    assert result.returncode == 3 and "no Ray cluster answers at 127.0.0.1:9" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_failing_run_is_recorded_by_its_box(cluster_and_project):
    cluster, project = cluster_and_project
    result = _sweep(project, cluster.address, "experiments/crashes-on-box-b.yaml")
    assert result.returncode == 1, result.stdout + result.stderr
    failures = [e for e in ledger_lines(project.driver) if e["kind"] == "failure"]
    assert [(e["writer"], e["payload"]["subject"]) for e in failures] == [("box-b-chain", "crashes-on-box-b")]


def test_a_box_that_dies_mid_run_leaves_a_failure_entry_by_the_driver(cluster_and_project):
    cluster, project = cluster_and_project
    # The study on box-c says it started, then hangs until its node is killed under it.
    started = project.clones["box-c"].parent / "box-c-study-started"
    gate = project.clones["box-c"] / "scripts" / "study.py"
    gate.write_text(
        f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\nwhile True: time.sleep(1)\n"
    )
    git(project.clones["box-c"], "update-index", "--assume-unchanged", "scripts/study.py")

    def kill_once_started() -> None:
        for _ in range(600):
            if started.exists():
                break
            time.sleep(0.2)
        cluster.kill("box-c")

    killer = threading.Thread(target=kill_once_started)
    killer.start()
    try:
        result = _sweep(project, cluster.address, "experiments/slow-on-box-c.yaml")
    finally:
        killer.join()
    assert started.exists()
    assert result.returncode == 1, result.stdout + result.stderr
    lost = [e for e in ledger_lines(project.driver) if e["payload"].get("subject") == "slow-on-box-c"]
    assert [(e["writer"], e["kind"]) for e in lost] == [("driver", "failure")]
    assert "box box-c came back without a report" in lost[0]["payload"]["cause"]
    assert git(project.remote, "rev-parse", "main") == git(project.driver, "rev-parse", "HEAD")


def test_an_uncommitted_experiment_is_refused_before_the_cluster_is_asked(cluster_and_project):
    _, project = cluster_and_project
    spec = project.driver / "experiments" / "study-box-a-1.yaml"
    original = spec.read_text()
    spec.write_text(original.replace('"repeats": 2', '"repeats": 3'))
    try:
        result = _sweep(project, "127.0.0.1:9", "experiments/study-box-a-1.yaml")
    finally:
        spec.write_text(original)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "experiments/study-box-a-1.yaml: experiment differs from the last commit" in result.stderr
    assert "git commit experiments/study-box-a-1.yaml" in result.stderr
