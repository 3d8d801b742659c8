"""A failure entry is read on other hosts for ever: the paths in it are relative to the project,
and a path elsewhere on this host is a placeholder (`<outside project>/NAME`), never /work/alice/..."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from recipe_ledger.errors import InputError
from recipe_ledger.launch.failures import BootFailure
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.pipeline.failures import (
    OUTSIDE_PROJECT,
    project_paths,
    record_failure,
    record_setup_failure,
)

ROOT = Path("/work/someone/project")


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("see /work/someone/project/runs/r1/server-control-r1.log", "see runs/r1/server-control-r1.log"),
        ("--tokenizer=/work/someone/project/.cache/tiny-model", "--tokenizer=.cache/tiny-model"),
        ("in '/work/someone/project'", "in '.'"),
        ("a sibling /work/someone/other/runs/x/a.log", f"a sibling {OUTSIDE_PROJECT}/a.log"),
        ("a scratch /tmp/pytest-7/out.json", f"a scratch {OUTSIDE_PROJECT}/out.json"),
    ],
)
def test_paths_of_this_host_are_made_portable(given, shown):
    assert project_paths(given, ROOT) == shown


@pytest.mark.parametrize(
    "kept",
    [
        "vllm serve /model -v /models/x:/root/.cache/vllm",  # container paths, the same everywhere
        "POST /v1/completions HTTP/1.1 from http://127.0.0.1:8000/health",  # a URL's path
        'File "/usr/lib/python3.11/json/decoder.py", line 355',  # the system's, not a person's
    ],
)
def test_paths_that_name_no_host_are_kept(kept):
    assert project_paths(kept, ROOT) == kept


def test_home_paths_are_placeholders():
    assert project_paths(f"{Path.home()}/.cache/x/wheel.whl", ROOT) == f"{OUTSIDE_PROJECT}/wheel.whl"


def test_a_setup_failure_entry_holds_no_absolute_path_of_the_project(tmp_path):
    ledger = Ledger.init(tmp_path)
    error = InputError(
        "no such recipe", where=str(tmp_path / "experiments" / "x.yaml") + ":3", hint=f"ls {tmp_path}/recipes"
    )
    entry = record_setup_failure(ledger, "w", "x", error, "planning")
    assert str(tmp_path) not in entry["payload"]["cause"]
    assert "experiments/x.yaml:3" in entry["payload"]["cause"] and "ls recipes" in entry["payload"]["cause"]


def test_a_run_failure_entry_makes_its_cause_and_log_tail_portable(tmp_path):
    log = tmp_path / "runs" / "r1" / "server-control-r1.log"
    log.parent.mkdir(parents=True)
    failure = BootFailure(
        "crash",
        "the server exited",
        log_tail=f"loading {tmp_path}/.cache/tiny-model\nTraceback: {Path.home()}/src/x.py",
        where=str(log),
        hint=f"tail -n 200 {log}",
    )
    plan = SimpleNamespace(experiment=SimpleNamespace(name="x"), box=SimpleNamespace(id="cpu-only"))
    ctx = SimpleNamespace(
        plan=plan,
        ledger=Ledger.init(tmp_path),
        writer="w",
        repo=tmp_path,
        run_id="r1",
        run_dir=log.parent,
        git=None,
        started=time.monotonic(),
        progress=lambda: {"resume": f"ledger run --resume {log.parent}"},
    )
    payload = record_failure(ctx, failure, "boot")["payload"]  # type: ignore[arg-type]
    assert str(tmp_path) not in str(payload) and str(Path.home()) + "/" not in str(payload)
    assert "tail -n 200 runs/r1/server-control-r1.log" in payload["cause"]
    assert (
        "loading .cache/tiny-model" in payload["log_tail"]
        and f"{OUTSIDE_PROJECT}/x.py" in payload["log_tail"]
    )
    assert payload["conditions"]["resume"] == "ledger run --resume runs/r1"
