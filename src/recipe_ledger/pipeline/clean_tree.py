"""A number belongs to a commit: refuse to measure or publish from a tree that differs from it.

27 of the first 31 entries were written from a dirty tree, the H200 result among them, so their
commit does not say what ran. ``require_clean_tree`` refuses when a file that feeds the
measurement (the spec, recipes, scripts, the tool) differs from HEAD, naming the files; with
``allow_dirty`` it lets the run go and returns a git stamp that says so: ``dirty: true``, the
files, and the hash of their diff, which every entry of the run then carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recipe_ledger.errors import StateError
from recipe_ledger.ledger import gitinfo

_SHOWN = 8  # files named in the refusal before "and N more"


def require_clean_tree(repo: Path, feeds: Sequence[Path], *, allow_dirty: bool) -> dict[str, Any] | None:
    """The git stamp for this operation's entries, after refusing a dirty tree unless allowed.

    Outside a git working tree (a copy shipped to a lent box, $RECIPE_LEDGER_GIT_STATE) nothing can
    be compared: the stated snapshot is returned as before, never refused.
    """
    changes = gitinfo.feeding_changes(repo, feeds)
    stamp = gitinfo.snapshot(repo)
    if changes is None or not changes.dirty:
        return stamp
    if not allow_dirty:
        raise StateError(refusal(changes), hint="commit them, or rerun with --allow-dirty")
    return {
        **(stamp or {"commit": changes.commit}),
        "dirty": True,
        "diff_sha256": changes.diff_sha256,
        "dirty_files": list(changes.files),
    }


def refusal(changes: gitinfo.TreeChanges) -> str:
    count = len(changes.files)
    shown = ", ".join(changes.files[:_SHOWN]) + (f" and {count - _SHOWN} more" if count > _SHOWN else "")
    commit = f"commit {changes.commit[:12]}" if changes.commit else "the repository (no commit yet)"
    noun = "file that feeds" if count == 1 else "files that feed"
    verb = "differs" if count == 1 else "differ"
    return f"{count} {noun} this measurement {verb} from {commit}: {shown}"
