"""The lock of a run under way (runs/<id>/lock.json) and how an abandoned run is found and recorded once."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from recipe_ledger import runs
from recipe_ledger.errors import StateError
from recipe_ledger.launch import procs
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.pipeline import abandoned

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")

SRC = Path(__file__).resolve().parents[2] / "src"


def make_run(root: Path, run_id: str = "wiring-20250101T000000Z-abcd") -> Path:
    folder = runs.create(runs.runs_dir(root), run_id)
    runs.write_json(
        folder / runs.PLAN,
        {"experiment": {"name": "wiring"}, "box": {"id": "cpu-only"}, "arms": {"control": {}, "fast": {}}},
    )
    runs.write_records(
        folder / runs.MEASUREMENTS,
        [
            {"arm": "control", "repeat": 1, "point": 1},
            {"arm": "control", "repeat": 1, "point": 4},
            {"arm": "fast", "repeat": 1, "point": 1},
        ],
    )
    return folder


def lock_in_a_process_that_dies(folder: Path) -> int:
    """Take the run's lock in a child, then kill -9 it: the lock stays, naming a pid that is gone."""
    code = (
        "import sys, time; from pathlib import Path; from recipe_ledger import runs\n"
        "runs.take_lock(Path(sys.argv[1]), 'box', None); print('locked', flush=True); time.sleep(600)"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "locked"
    child.send_signal(signal.SIGKILL)
    child.wait()
    return child.pid


@pytest.fixture
def root(tmp_path: Path) -> Path:
    Ledger.init(tmp_path)
    return tmp_path


def test_a_lock_names_its_process_and_a_live_run_is_never_claimed(root: Path) -> None:
    folder = make_run(root)
    lock = runs.take_lock(folder, "box", {"commit": "abc", "dirty": False})
    document = json.loads((folder / runs.LOCK).read_text())
    assert document["pid"] == os.getpid() and document["identity"] == procs.identity(os.getpid())
    assert document["writer"] == "box" and document["git"] == {"commit": "abc", "dirty": False}
    assert runs.claim_abandoned(folder) is None  # its owner (this process) lives and holds it
    assert abandoned.record_abandoned(root) == []
    with pytest.raises(StateError, match="locked by another run"):
        runs.take_lock(folder, "box", None)
    lock.release()
    assert not (folder / runs.LOCK).exists()


def test_a_run_whose_process_died_is_recorded_once_with_what_it_measured(root: Path) -> None:
    folder = make_run(root)
    pid = lock_in_a_process_that_dies(folder)
    (entry,) = abandoned.record_abandoned(root)
    payload = entry["payload"]
    assert entry["kind"] == "failure" and entry["writer"] == "box"
    assert payload["subject"] == "wiring"
    assert f"abandoned: the ledger process {pid} died" in payload["cause"]
    assert "arms control, fast" in payload["cause"]
    assert "measured so far: control#1 p1 p4; fast#1 p1" in payload["cause"]
    assert payload["conditions"]["run_id"] == folder.name and payload["conditions"]["launches_measured"] == 2
    assert payload["origin"]["source"] == folder.name
    assert runs.MEASUREMENTS in payload["artifacts"]
    assert not (folder / runs.LOCK).exists()
    assert abandoned.record_abandoned(root) == []  # a second command appends nothing
    assert [e["kind"] for e in Ledger.open(root).entries()] == ["failure"]


def test_a_reused_pid_does_not_keep_an_abandoned_run_alive(root: Path) -> None:
    folder = make_run(root)
    lock_in_a_process_that_dies(folder)
    document = json.loads((folder / runs.LOCK).read_text())
    # The pid now names a live process (this one), started at another time than the lock's owner.
    document["pid"] = os.getpid()
    (folder / runs.LOCK).write_text(json.dumps(document))
    assert len(abandoned.record_abandoned(root)) == 1


def test_a_lock_of_another_host_or_one_nobody_can_read_is_left_alone(root: Path) -> None:
    folder = make_run(root)
    lock_in_a_process_that_dies(folder)
    document = json.loads((folder / runs.LOCK).read_text())
    (folder / runs.LOCK).write_text(json.dumps({**document, "host": socket.gethostname() + "-other"}))
    assert abandoned.record_abandoned(root) == []
    (folder / runs.LOCK).write_text("{torn")
    assert abandoned.record_abandoned(root) == []
    assert (folder / runs.LOCK).exists()


def test_two_commands_racing_for_one_abandoned_run_record_it_once(root: Path) -> None:
    folder = make_run(root)
    lock_in_a_process_that_dies(folder)
    first = runs.claim_abandoned(folder)
    assert first is not None
    assert runs.claim_abandoned(folder) is None  # held by the first claimant
    assert abandoned.record_abandoned(root) == []
    first.release()
    assert runs.claim_abandoned(folder) is None  # released = recorded: the lock is gone


def test_a_run_already_recorded_before_it_died_gets_no_second_entry(root: Path) -> None:
    folder = make_run(root)
    lock_in_a_process_that_dies(folder)
    ledger = Ledger.open(root)
    ledger.append(
        "failure",
        {
            "schema_version": 1,
            "subject": "wiring",
            "cause_class": "other",
            "cause": "measurement: interrupted (Ctrl-C)",
            "conditions": {"run_id": folder.name},
            "origin": {"how": "measured", "source": folder.name},
        },
        writer="box",
        git=None,
    )
    assert abandoned.record_abandoned(root) == []
    assert not (folder / runs.LOCK).exists()  # recorded: the stale lock is dropped
