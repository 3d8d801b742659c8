"""The ledger against real git: provenance stamps, history checks, and merging two boxes' clones."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.ledger import actions, gitinfo
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import verify, verify_history


def _commit_all(repo: git.Repo, message: str) -> None:
    repo.git.add(A=True)
    repo.index.commit(message)


@pytest.fixture
def project(tmp_path) -> git.Repo:
    repo = git.Repo.init(tmp_path / "project", initial_branch="main")
    with repo.config_writer() as config:
        config.set_value("user", "name", "Test").set_value("user", "email", "test@example.com")
    root = Path(repo.working_tree_dir)
    (root / "scripts").mkdir()
    (root / "scripts" / "knee.sh").write_text("#!/bin/sh\necho sweep\n")
    (root / "README.md").write_text("project\n")
    Ledger.init(root)
    _commit_all(repo, "start")
    return repo


def _root(repo: git.Repo) -> Path:
    return Path(repo.working_tree_dir)


def test_entries_record_commit_dirtiness_and_script_blob_hashes(project):
    root = _root(project)
    ledger = Ledger.open(root)
    payload = {"subject": "lane", "metrics": {"tps": 85.0}, "scripts": ["scripts/knee.sh"]}
    clean = ledger.append("result", payload, writer="box-a")
    expected_blob = project.git.hash_object("scripts/knee.sh")
    assert clean["git"] == {
        "commit": project.head.commit.hexsha,
        "dirty": False,
        "scripts": {"scripts/knee.sh": expected_blob},
    }
    # the ledger's own new line does not count as dirt; an edited script does
    (root / "scripts" / "knee.sh").write_text("#!/bin/sh\necho changed\n")
    dirty = ledger.append("result", payload, writer="box-a")
    assert dirty["git"]["dirty"] is True
    assert (
        dirty["git"]["scripts"]["scripts/knee.sh"]
        == project.git.hash_object("scripts/knee.sh")
        != expected_blob
    )


def test_a_named_script_that_does_not_exist_is_refused(project):
    with pytest.raises(Exception, match="script named by the entry does not exist"):
        Ledger.open(_root(project)).append(
            "note", {"text": "x", "scripts": ["scripts/nope.sh"]}, writer="box-a"
        )


def test_cli_root_defaults_to_the_git_top_level(project, monkeypatch):
    sub = _root(project) / "scripts"
    monkeypatch.chdir(sub)
    result = CliRunner().invoke(main, ["note", "from a subfolder", "--writer", "box-a"])
    assert result.exit_code == 0, result.output
    assert (_root(project) / "ledger" / "box-a.jsonl").exists()


def _append_and_commit(repo, writer, texts):
    ledger = Ledger.open(_root(repo))
    for text in texts:
        actions.note(ledger, text, writer=writer)
    _commit_all(repo, f"{writer}: {len(texts)} entries")


def test_history_passes_when_commits_only_append(project):
    _append_and_commit(project, "box-a", ["one", "two"])
    _append_and_commit(project, "box-a", ["three"])
    assert verify_history(Ledger.open(_root(project))).findings == []
    result = CliRunner().invoke(main, ["verify", "--history", "--root", str(_root(project))])
    assert result.exit_code == 0 and "and its git history" in result.output


def test_history_fails_on_a_commit_that_changed_a_line_even_after_it_is_reverted(project):
    _append_and_commit(project, "box-a", ["one", "two", "three"])
    path = _root(project) / "ledger" / "box-a.jsonl"
    original = path.read_bytes()
    path.write_bytes(original.replace(b'"two"', b'"TWO"'))
    _commit_all(project, "edit a line")
    bad = project.head.commit.hexsha
    path.write_bytes(original)
    _commit_all(project, "put it back")
    findings = [str(f) for f in verify_history(Ledger.open(_root(project))).findings]
    assert verify(Ledger.open(_root(project))).ok  # the chain on disk is whole again...
    assert any(
        f.startswith(f"ledger/box-a.jsonl: commit {bad[:12]}") and "changed line 2" in f for f in findings
    )


def test_history_fails_on_removed_lines_and_files_and_on_the_working_tree(project):
    _append_and_commit(project, "box-a", ["one", "two"])
    _append_and_commit(project, "box-b", ["b"])
    path = _root(project) / "ledger" / "box-a.jsonl"
    path.write_bytes(path.read_bytes().split(b"\n", 1)[0] + b"\n")
    findings = [str(f) for f in verify_history(Ledger.open(_root(project))).findings]
    head = project.head.commit.hexsha[:12]
    assert findings == [f"ledger/box-a.jsonl: working tree (parent {head}) removed everything from line 2 on"]
    _commit_all(project, "drop the last line")
    (_root(project) / "ledger" / "box-b.jsonl").unlink()
    _commit_all(project, "drop a chain")
    findings = [str(f) for f in verify_history(Ledger.open(_root(project))).findings]
    assert any("box-a.jsonl: commit" in f and "removed everything from line 2 on" in f for f in findings)
    assert any("box-b.jsonl: commit" in f and "removed the file" in f for f in findings)
    result = CliRunner().invoke(main, ["verify", "--history", "--root", str(_root(project))])
    assert result.exit_code == 1 and "removed the file" in result.output


def test_two_clones_on_two_boxes_merge_without_conflicts_and_verify(project, tmp_path):
    _append_and_commit(project, "box-a", ["before the clones"])
    origin = git.Repo.clone_from(_root(project), tmp_path / "origin.git", bare=True)
    clones = {}
    for box in ("box-a", "box-b"):
        clone = git.Repo.clone_from(origin.working_dir, tmp_path / box)
        with clone.config_writer() as config:
            config.set_value("user", "name", box).set_value("user", "email", f"{box}@example.com")
        clones[box] = clone
    _append_and_commit(clones["box-a"], "box-a", ["a1", "a2"])
    _append_and_commit(clones["box-b"], "box-b", ["b1", "b2", "b3"])
    first_b = Ledger.open(_root(clones["box-b"])).entries()[-3]["id"]
    # box-b refers to its own entry and, as a listed maintainer, retracts box-a's from before the clones
    ledger_b = Ledger.open(_root(clones["box-b"]))
    (ledger_b.dir / "maintainers").write_text("box-b\n")
    actions.retract(
        ledger_b, ledger_b.entries()[0]["id"], reason="superseded by b1", evidence=[first_b], writer="box-b"
    )
    _commit_all(clones["box-b"], "box-b retracts")
    clones["box-a"].remotes.origin.push("main")
    clones["box-b"].remotes.origin.pull("main", no_rebase=True)  # a plain git merge
    merged = clones["box-b"]
    assert len(merged.head.commit.parents) == 2 and not merged.index.unmerged_blobs()
    ledger = Ledger.open(_root(merged))
    report = verify(ledger)
    assert report.ok and report.entries == 1 + 2 + 3 + 1 and report.chains == 2
    assert verify_history(ledger).findings == []
    merged.remotes.origin.push("main")
    clones["box-a"].remotes.origin.pull("main", no_rebase=True)  # fast-forward on the other box
    assert verify(Ledger.open(_root(clones["box-a"]))).ok
    assert (_root(clones["box-a"]) / "ledger" / "box-b.jsonl").read_bytes() == (
        _root(merged) / "ledger" / "box-b.jsonl"
    ).read_bytes()


def test_blob_hash_matches_git(tmp_path):
    data = b"\x00binary\nand text\n"
    (tmp_path / "f").write_bytes(data)
    out = subprocess.run(
        ["git", "hash-object", str(tmp_path / "f")], capture_output=True, text=True, check=True
    )
    assert gitinfo.blob_hash(data) == out.stdout.strip()


def test_history_on_a_shallow_clone_says_what_it_could_not_check_then_fetches_it(project, tmp_path):
    _append_and_commit(project, "box-a", ["a1"])
    _append_and_commit(project, "box-a", ["a2"])
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "--quiet", "--depth", "1", f"file://{_root(project)}", str(shallow)], check=True
    )
    history = verify_history(Ledger.open(shallow))
    assert history.findings == [] and "(shallow clone)" in history.unchecked
    result = CliRunner().invoke(main, ["verify", "--history", "--root", str(shallow)])
    assert result.exit_code == 3 and "could not check history before commit" in result.output
    assert "ledger verify --history --fetch" in result.output
    fetched = CliRunner().invoke(main, ["verify", "--history", "--fetch", "--root", str(shallow)])
    assert fetched.exit_code == 0, fetched.output
    assert "and its git history" in fetched.output
    assert verify_history(Ledger.open(shallow)).unchecked is None


def test_a_chain_cut_back_with_its_old_signed_head_passes_plain_verify_but_not_history(
    project, tmp_path, monkeypatch
):
    monkeypatch.setenv("RECIPE_LEDGER_KEY_DIR", str(tmp_path / "keys"))
    root = _root(project)
    _append_and_commit(project, "box-a", ["a1"])
    actions.key_init(Ledger.open(root), writer="box-a", adopt=True)
    _commit_all(project, "box-a signs")
    old = project.head.commit.hexsha
    _append_and_commit(project, "box-a", ["a2", "a3"])
    # the forger restores both files as they were: a consistent, validly signed, shorter chain
    project.git.checkout(old, "--", "ledger/box-a.jsonl", "ledger/heads/box-a.json")
    _commit_all(project, "quietly drop a2 and a3")
    assert verify(Ledger.open(root)).ok  # this box never verified it longer (seen heads: test_ledger_keys)
    findings = [str(f) for f in verify_history(Ledger.open(root)).findings]
    assert any("box-a.jsonl" in f and "removed everything from line 3 on" in f for f in findings)
    assert any("moved a signed head back from seq 3 to 1" in f for f in findings)
