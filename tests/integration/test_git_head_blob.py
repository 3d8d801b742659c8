"""gitinfo.head_blob against git itself: the blob id ``git rev-parse HEAD:path`` prints, or None.

Release pins used to shell out to that command; the GitPython version must answer the same for a
committed file, a modified one (HEAD's blob, not the disk's), an untracked one, a repository
without commits and a folder outside git.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from recipe_ledger.ledger import gitinfo


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "gen.py").write_text("print('model')\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "scripts")
    git(tmp_path, "commit", "-q", "-m", "init")
    return tmp_path


def test_a_committed_file_has_the_blob_git_names(repo):
    blob = gitinfo.head_blob(repo, "scripts/gen.py")

    assert blob == git(repo, "rev-parse", "HEAD:scripts/gen.py")
    assert blob == gitinfo.blob_hash((repo / "scripts" / "gen.py").read_bytes())


def test_a_modified_file_answers_heads_copy_not_the_disk(repo):
    committed = git(repo, "rev-parse", "HEAD:scripts/gen.py")
    (repo / "scripts" / "gen.py").write_text("print('changed')\n")

    assert gitinfo.head_blob(repo, "scripts/gen.py") == committed


def test_paths_are_relative_to_the_top_level_even_from_a_subfolder(repo):
    assert gitinfo.head_blob(repo / "scripts", "scripts/gen.py") == git(
        repo / "scripts", "rev-parse", "HEAD:scripts/gen.py"
    )


def test_an_untracked_file_has_no_head_blob(repo):
    (repo / "scripts" / "new.py").write_text("print('new')\n")

    assert gitinfo.head_blob(repo, "scripts/new.py") is None


def test_no_commit_and_no_repository_give_none(tmp_path):
    outside = tmp_path / "plain"
    outside.mkdir()
    (outside / "a.py").write_text("x = 1\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    (empty / "a.py").write_text("x = 1\n")

    assert gitinfo.head_blob(outside, "a.py") is None
    assert gitinfo.head_blob(empty, "a.py") is None
