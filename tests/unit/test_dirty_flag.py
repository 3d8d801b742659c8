"""An entry written from a dirty tree is flagged wherever it is shown (CLI, site, MLflow tags)."""

from __future__ import annotations

from recipe_ledger.ledger.views import dirty_flag
from recipe_ledger.tracking.entries import common_tags

CLEAN = {"commit": "a" * 40, "dirty": False}
LEGACY = {"commit": "b" * 40, "dirty": True}
ALLOWED = {
    "commit": "c" * 40,
    "dirty": True,
    "diff_sha256": "sha256:" + "d" * 64,
    "dirty_files": ["scripts/x.py"],
}


def _entry(git: dict) -> dict:
    return {
        "id": "e" * 64,
        "seq": 3,
        "kind": "result",
        "ts": "2026-12-01T00:00:00+00:00",
        "writer": "w",
        "git": git,
        "payload": {"subject": "s", "text": "t"},
    }


def test_a_clean_entry_carries_no_flag():
    assert dirty_flag(_entry(CLEAN)) is None
    assert dirty_flag({"kind": "note", "payload": {}}) is None


def test_an_allowed_dirty_run_is_flagged_with_its_files_and_diff_hash():
    flag = dirty_flag(_entry(ALLOWED))
    assert (
        flag is not None and "1 file(s)" in flag and "sha256:" + "d" * 64 in flag and "cccccccccccc" in flag
    )


def test_an_entry_from_before_the_clean_tree_rule_says_its_diff_was_not_recorded():
    flag = dirty_flag(_entry(LEGACY))
    assert flag is not None and "diff not recorded" in flag


def test_mlflow_tags_carry_the_diff_hash_of_an_allowed_dirty_run():
    assert common_tags(_entry(ALLOWED))["git.diff_sha256"] == "sha256:" + "d" * 64
    assert common_tags(_entry(ALLOWED))["git.dirty"] == "true"
    assert "git.diff_sha256" not in common_tags(_entry(LEGACY))
