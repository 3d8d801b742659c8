"""The record is written only into the project's own folders and files (issue 26, paths): a chain
file, ledger/, runs/ or a run folder that is a symlink is refused when it would be written, naming
the link, nothing reaches where it points, and `ledger verify` reports every such link and fails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger import paths, runs
from recipe_ledger.cli import main
from recipe_ledger.errors import InputError
from recipe_ledger.ledger import chain, verify
from recipe_ledger.ledger.store import LEDGER_DIR, Ledger


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    Ledger.init(root)
    return root


@pytest.fixture
def outside(tmp_path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def note(root: Path, text: str = "n") -> dict:
    return Ledger.open(root).append("note", {"schema_version": 1, "text": text}, writer="box-a", git=None)


def cli(root: Path, *args: str):
    return CliRunner().invoke(main, [*args, "--root", str(root)], env={"RECIPE_LEDGER_WRITER": "box-a"})


def test_the_record_folders_are_the_ledgers_and_the_runs():
    assert paths.RECORD_FOLDERS == (LEDGER_DIR, runs.RUNS_DIRNAME)


def test_a_chain_file_linked_outside_is_never_appended_through(project, outside):
    target = outside / "chain.jsonl"
    note(project)
    os.replace(project / "ledger" / "box-a.jsonl", target)
    before = target.read_bytes()
    (project / "ledger" / "box-a.jsonl").symlink_to(target)
    with pytest.raises(InputError) as raised:
        note(project, "through the link")
    assert raised.value.where == str(project / "ledger" / "box-a.jsonl")
    assert f"is a symlink (to {target})" in raised.value.message and raised.value.hint
    assert target.read_bytes() == before


def test_a_ledger_folder_linked_outside_is_refused_by_init_and_append(tmp_path, outside):
    root = tmp_path / "elsewhere"
    root.mkdir()
    (root / "ledger").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError, match=r"ledger is a symlink"):
        Ledger.init(root)
    assert list(outside.iterdir()) == []
    (outside / "format.json").write_bytes(b'{"format":"recipe-ledger","version":1}\n')
    with pytest.raises(InputError, match=r"ledger is a symlink"):
        note(root)
    assert sorted(p.name for p in outside.iterdir()) == ["format.json"]


def test_the_chain_writer_refuses_a_link_even_when_the_store_did_not_look(tmp_path, outside):
    link = tmp_path / "box.jsonl"
    link.symlink_to(outside / "target.jsonl")
    with pytest.raises(InputError, match="is a symlink"):
        chain.append_line(link, lambda head: b"{}\n")
    assert not (outside / "target.jsonl").exists()


def test_repair_does_not_write_through_a_linked_quarantine(project, outside):
    note(project)
    with (project / "ledger" / "box-a.jsonl").open("ab") as handle:
        handle.write(b'{"id":"12')
    (project / "ledger" / "quarantine").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError, match="quarantine is a symlink"):
        verify.repair(Ledger.open(project))
    assert list(outside.iterdir()) == []


def test_a_runs_folder_linked_outside_receives_no_run_folder(project, outside):
    (project / "runs").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError) as raised:
        runs.create(project / "runs", "exp-20260101T000000Z-abcd")
    assert raised.value.where == str(project / "runs") and "is a symlink" in raised.value.message
    assert list(outside.iterdir()) == []


def test_a_run_folder_or_its_raw_linked_outside_is_refused(project, outside):
    (project / "runs").mkdir()
    (project / "runs" / "r1").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError, match=r"runs/r1 is a symlink"):
        runs.create(project / "runs", "r1")
    with pytest.raises(InputError, match=r"runs/r1 is a symlink"):
        runs.run_dir(project, "r1")  # what `ledger run --resume r1` opens
    (project / "runs" / "r2").mkdir()
    (project / "runs" / "r2" / "raw").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError, match=r"r2/raw is a symlink"):
        runs.create(project / "runs", "r2")
    assert list(outside.iterdir()) == []
    assert runs.create(project / "runs", "r3") == project / "runs" / "r3"  # real folders are made


def test_verify_reports_every_link_in_the_record_and_fails(project, outside):
    note(project)
    assert cli(project, "verify").exit_code == 0
    (outside / "other.jsonl").write_bytes(b"")
    (project / "ledger" / "box-b.jsonl").symlink_to(outside / "other.jsonl")
    (project / "runs").mkdir()
    (project / "runs" / "r1").mkdir()
    (project / "runs" / "r1" / "server-control-r1.log").symlink_to(outside / "log")
    result = cli(project, "verify")
    assert result.exit_code == 1, result.output
    assert f"ledger/box-b.jsonl: a symlink (to {outside / 'other.jsonl'}) in the record" in result.output
    assert "runs/r1/server-control-r1.log: a symlink" in result.output


def test_verify_reports_a_linked_runs_folder_without_walking_into_it(project, outside):
    (outside / "deep").mkdir()
    (outside / "deep" / "x").symlink_to("/")
    (project / "runs").symlink_to(outside, target_is_directory=True)
    report = verify.verify(Ledger.open(project))
    assert [(f.path, f.line) for f in report.findings] == [("runs", None)]
