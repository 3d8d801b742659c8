"""`ledger sync` against a bare git remote in a temp folder: real git, real clones, real pushes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from recipe_ledger.errors import StateError
from recipe_ledger.ledger import actions, gitremote
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.sync import sync

from helpers.sweep_project import git, ledger_lines

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture
def remote(tmp_path) -> Path:
    seed = tmp_path / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
    Ledger.init(seed)
    (seed / "README.md").write_text("project\n")
    git(seed, "add", "-A")
    git(seed, "-c", "user.name=s", "-c", "user.email=s@s", "commit", "-q", "-m", "start")
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(bare)], check=True)
    return bare


def clone(remote: Path, name: str) -> Path:
    path = remote.parent / name
    subprocess.run(["git", "clone", "-q", str(remote), str(path)], check=True)
    git(path, "config", "user.name", name)
    git(path, "config", "user.email", f"{name}@example.com")
    return path


def note(root: Path, writer: str, *texts: str) -> None:
    ledger = Ledger.open(root)
    for text in texts:
        actions.note(ledger, text, writer=writer)


def cli_sync(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", "sync", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": SRC},
    )


def test_two_boxes_sync_both_ways_and_the_merged_ledger_verifies(remote):
    a, b = clone(remote, "a"), clone(remote, "b")
    note(a, "box-a", "a1", "a2")
    note(b, "box-b", "b1")
    first = sync(a)
    assert first.committed and not first.merged and first.entries_after == 2
    second = cli_sync(b)
    assert second.returncode == 0, second.stderr
    assert "3 entries in 2 chain(s), 2 new from other boxes" in second.stdout
    again = sync(a)  # box-a takes box-b's chain; nothing of its own to commit
    assert not again.committed and again.merged and again.entries_after == 3
    assert (a / "ledger" / "box-b.jsonl").read_bytes() == (b / "ledger" / "box-b.jsonl").read_bytes()
    assert git(remote, "rev-parse", "main") == git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD")
    history = subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", "verify", "--history", "--root", str(a)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        check=False,
    )
    assert history.returncode == 0, history.stdout


def test_only_the_ledger_folder_is_committed(remote):
    a = clone(remote, "a")
    note(a, "box-a", "a1")
    (a / "README.md").write_text("edited, not the ledger's business\n")
    sync(a)
    assert git(a, "status", "--porcelain") == "M README.md"
    assert git(a, "show", "--name-only", "--format=", "HEAD") == "ledger/box-a.jsonl"


class RacingCheckout(gitremote.GitCheckout):
    """A real checkout whose first push finds that another box pushed just after our fetch."""

    def __init__(self, repo, remote_name: str, rival: Path):
        super().__init__(repo, remote_name)
        self.rival = rival
        self.pushes = 0

    def push(self) -> gitremote.PushOutcome:
        self.pushes += 1
        if self.pushes == 1:
            note(self.rival, "box-r", "pushed between our fetch and our push")
            sync(self.rival)
        return super().push()


def test_a_push_rejected_because_the_remote_moved_on_is_retried_after_a_new_fetch(remote):
    a, rival = clone(remote, "a"), clone(remote, "rival")
    note(a, "box-a", "a1")
    checkout = RacingCheckout(gitremote.open_checkout(a, None).repo, "origin", rival)
    result = sync(a, checkout=checkout, pause=lambda s: None)
    assert result.rounds == 2 and checkout.pushes == 2
    assert {e["writer"] for e in ledger_lines(a)} == {"box-a", "box-r"}
    assert git(remote, "rev-parse", "main") == git(a, "rev-parse", "HEAD")


def test_a_remote_that_refuses_the_push_is_one_line_and_nothing_is_forced(remote):
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'read-only mirror' >&2\nexit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    before = git(remote, "rev-parse", "main")
    a = clone(remote, "a")
    note(a, "box-a", "a1")
    result = cli_sync(a)
    assert result.returncode == 3
    assert "origin refused the push" in result.stderr and "hook declined" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert git(remote, "rev-parse", "main") == before
    assert len(ledger_lines(a)) == 1  # the entry stays, committed locally, for the next sync


def test_an_unknown_remote_and_an_unreachable_one(remote):
    a = clone(remote, "a")
    unknown = cli_sync(a, "upstream")
    assert unknown.returncode == 2 and "no git remote named 'upstream' (known: origin)" in unknown.stderr
    git(a, "remote", "add", "far", "http://127.0.0.1:9/nothing.git")
    note(a, "box-a", "a1")
    far = cli_sync(a, "far")
    assert far.returncode == 3 and "cannot fetch from far" in far.stderr
    assert len(far.stderr.strip().splitlines()) == 1
    assert git(remote, "rev-parse", "main") == git(a, "rev-parse", "origin/main")


def test_two_boxes_writing_one_chain_conflict_and_the_merge_is_aborted(remote):
    a, b = clone(remote, "a"), clone(remote, "b")
    note(a, "vm", "from box a")
    note(b, "vm", "from box b, under the same writer name")
    sync(a)
    head = git(b, "rev-parse", "HEAD")
    with pytest.raises(StateError, match="conflicts in ledger/vm.jsonl.*RECIPE_LEDGER_WRITER"):
        sync(b)
    assert not (b / ".git" / "MERGE_HEAD").exists() and git(b, "status", "--porcelain") == ""
    assert git(b, "rev-parse", "HEAD") != head  # its own entry was committed, not merged
    assert "from box b" in (b / "ledger" / "vm.jsonl").read_text()


def test_a_merge_that_does_not_verify_is_undone_and_nothing_is_pushed(remote):
    a, b = clone(remote, "a"), clone(remote, "b")
    note(a, "box-a", "a1", "a2")
    path = a / "ledger" / "box-a.jsonl"
    path.write_text(path.read_text().replace('"a2"', '"A2"'))  # an edited line travels to b
    git(a, "add", "-A")
    git(a, "commit", "-q", "-m", "tampered")
    git(a, "push", "-q", "origin", "main")
    note(b, "box-b", "b1")
    with pytest.raises(StateError, match="not whole after merging origin/main.*undone"):
        sync(b)
    assert not (b / "ledger" / "box-a.jsonl").exists()
    assert git(remote, "rev-parse", "main") == git(a, "rev-parse", "HEAD")


def test_a_pre_commit_hook_that_refuses_stops_the_sync_before_any_fetch(remote):
    a = clone(remote, "a")
    hook = a / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'no commits on this box' >&2\nexit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    note(a, "box-a", "a1")
    result = cli_sync(a)
    assert result.returncode == 3 and "cannot commit ledger/" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert git(a, "status", "--porcelain", "--", "ledger") == "A  ledger/box-a.jsonl"  # staged, kept
