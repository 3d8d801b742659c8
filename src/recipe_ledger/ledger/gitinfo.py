"""Everything the ledger asks of git, in one place (GitPython).

- where the project's top level is (the default ``--root``);
- the provenance stamped on every entry: the commit, whether the tree was dirty, and the git blob
  hash of each script an entry names;
- which files that feed a measurement (the experiment, recipes, scripts, the tool) differ from the
  commit, and a hash of that difference (``feeding_changes``), so a run can refuse a dirty tree;
- the ledger folder as it stood in every commit, for ``ledger verify --history``.

The ledger folder itself is left out of the dirty check: appending an entry must not make the next
entry claim a dirty tree.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recipe_ledger.errors import InputError, StateError

if TYPE_CHECKING:  # annotations only: at run time git is imported lazily, in _repo
    import git

LEDGER_DIR = "ledger"


def _repo(path: Path) -> git.Repo | None:
    try:
        import git  # imported lazily: reading and verifying a ledger does not need it
    except ImportError:  # GitPython absent, or no git executable (a bare GPU box)
        return None
    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def is_work_tree(path: Path) -> bool:
    """Whether ``path`` is inside a git working tree (with git and GitPython at hand)."""
    repo = _repo(path)
    return repo is not None and repo.working_tree_dir is not None


def top_level(start: Path) -> Path:
    """The git top level of ``start`` (the default root of every ledger command)."""
    repo = _repo(start)
    if repo is None or repo.working_tree_dir is None:
        raise InputError(
            "not inside a git working tree", where=str(start), hint="pass --root DIR, or run `git init`"
        )
    return Path(repo.working_tree_dir)


def blob_hash(data: bytes) -> str:
    """The id git gives a file with this content (``git hash-object``), without running git."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def script_blobs(root: Path, scripts: Sequence[str]) -> dict[str, str]:
    """``{path: blob hash}`` of the working-tree files an entry names, as they are right now.

    Hashing the file on disk (not HEAD's copy) pins what actually ran, dirty or not.
    """
    blobs = {}
    for name in sorted(set(scripts)):
        path = root / name
        if not path.is_file():
            raise InputError("script named by the entry does not exist", where=name, hint="ls scripts/")
        blobs[name] = blob_hash(path.read_bytes())
    return blobs


SNAPSHOT_ENV = "RECIPE_LEDGER_GIT_STATE"  # "<commit>" or "<commit>+dirty"


def snapshot(root: Path) -> dict[str, Any] | None:
    """``{"commit": sha or None, "dirty": bool}`` of the repository at ``root``; None outside git.

    A copy of the tree shipped to a box without its .git (a lent GPU machine) cannot see its own
    commit; whoever shipped it states it in $RECIPE_LEDGER_GIT_STATE, and that is what is recorded.
    """
    stated = os.environ.get(SNAPSHOT_ENV)
    repo = _repo(root)
    if repo is None:
        if stated:
            commit, _, flag = stated.partition("+")
            return {"commit": commit or None, "dirty": flag == "dirty"}
        return None
    status = repo.git.status("--porcelain", "--untracked-files=no", "--", ".", f":(exclude){LEDGER_DIR}")
    return {"commit": _head(repo), "dirty": bool(status.strip())}


# What a measurement depends on besides the spec it names: resolution, instruments, the tool itself.
FEEDING_PATHS = ("recipes", "scripts", "src/recipe_ledger", "evals")  # evals: the lm_eval tasks


@dataclass(frozen=True)
class TreeChanges:
    """Files under the paths that feed a measurement which differ from the commit."""

    commit: str | None
    files: tuple[str, ...]  # repository-relative, POSIX, sorted; modified, staged or untracked
    diff_sha256: str | None  # None when nothing differs

    @property
    def dirty(self) -> bool:
        return bool(self.files)


def feeding_changes(root: Path, extra: Sequence[Path] = ()) -> TreeChanges | None:
    """Modified, staged and untracked-but-not-ignored files under ``FEEDING_PATHS`` of ``root`` and
    under ``extra`` (an experiment or release spec); None outside a git working tree.

    The hash covers ``git diff HEAD --binary`` of those paths plus each untracked file's name and
    bytes: the same edits give the same hash, so an allowed dirty run can be matched to its diff.
    ``ledger/`` and ``runs/`` are never among the paths: appending an entry is what a run does.
    """
    repo = _repo(root)
    if repo is None or repo.working_tree_dir is None:
        return None
    top = Path(repo.working_tree_dir).resolve()
    specs = _pathspecs(top, [root / p for p in FEEDING_PATHS] + [Path(p) for p in extra])
    if not specs:
        return TreeChanges(_head(repo), (), None)
    out = repo.git.status("--porcelain", "-z", "--untracked-files=all", "--no-renames", "--", *specs)
    entries = [item for item in out.split("\0") if item]
    files = tuple(sorted({item[3:] for item in entries}))
    if not files:
        return TreeChanges(_head(repo), (), None)
    untracked = sorted(item[3:] for item in entries if item.startswith("??"))
    return TreeChanges(_head(repo), files, _diff_hash(repo, top, specs, untracked))


def _pathspecs(top: Path, paths: Sequence[Path]) -> list[str]:
    """``paths`` relative to the working tree, those outside it left out (git would refuse them)."""
    specs = []
    for path in paths:
        try:
            specs.append(path.resolve().relative_to(top).as_posix() or ".")
        except ValueError:
            continue
    return sorted(set(specs))


def _head(repo: git.Repo) -> str | None:
    try:
        return repo.head.commit.hexsha
    except ValueError:  # a repository without any commit yet
        return None


def _diff_hash(repo: git.Repo, top: Path, specs: list[str], untracked: list[str]) -> str:
    digest = hashlib.sha256()
    if _head(repo) is not None:
        diff = repo.git.diff("HEAD", "--binary", "--no-renames", "--", *specs, stdout_as_string=False)
        digest.update(diff)
    else:  # nothing to diff against: what is staged is the whole change
        digest.update(repo.git.diff("--cached", "--binary", "--", *specs, stdout_as_string=False))
    for name in untracked:
        digest.update(b"\0untracked\0" + name.encode() + b"\0" + (top / name).read_bytes())
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True)
class LedgerChange:
    """One ledger file that differs between a commit and one of its parents."""

    commit: str
    parent: str
    path: str
    old: bytes
    new: bytes | None  # None: the commit removed the file


def ledger_changes(root: Path) -> Iterator[LedgerChange]:
    """Every change to a file under ``ledger/`` between any reachable commit and each parent."""
    repo = _repo(root)
    if repo is None:
        raise InputError("not inside a git working tree", where=str(root), hint="git init")
    try:
        commits = list(repo.iter_commits("HEAD"))
    except ValueError:
        return  # no commits yet: no history to check
    # A shallow clone's boundary commits name parents it does not hold: there is nothing to compare
    # them with (verify_history says so through shallow_boundary), so they are not read.
    cut = _shallow_commits(repo)
    for commit in commits:
        if commit.hexsha in cut:
            continue
        new = _ledger_tree(commit.tree)
        for parent in commit.parents:
            old = _ledger_tree(parent.tree)
            if old is None or (new is not None and old.hexsha == new.hexsha):
                continue  # the ledger folder is identical (or absent before): nothing to compare
            yield from _changes(repo, commit.hexsha, parent.hexsha, _blobs(old), _blobs(new))


def _shallow_commits(repo: git.Repo) -> set[str]:
    """The commits at a shallow clone's boundary (their parents are not here); empty when whole."""
    shallow = Path(repo.common_dir) / "shallow"
    if not shallow.is_file():
        return set()
    return {line.strip() for line in shallow.read_text().splitlines() if line.strip()}


def shallow_boundary(root: Path) -> str | None:
    """What a shallow clone cannot show (``"history before commit abc123def456"``), or None."""
    repo = _repo(root)
    cut = sorted(_shallow_commits(repo)) if repo is not None else []
    return f"history before commit {', '.join(c[:12] for c in cut)} (shallow clone)" if cut else None


def unshallow(root: Path) -> None:
    """Fetch the history a shallow clone lacks (``git fetch --unshallow``); no-op when whole."""
    repo = _repo(root)
    if repo is None or shallow_boundary(root) is None:
        return
    from git import GitCommandError

    try:
        repo.git.fetch("--unshallow", "--quiet")
    except GitCommandError as error:
        message = (error.stderr or str(error)).strip().splitlines()
        raise StateError(
            f"could not fetch the full history: {message[-1] if message else error}",
            where=str(root),
            hint="git fetch --unshallow (from a box that reaches the remote), then ledger verify --history",
        ) from None


def working_tree_changes(root: Path) -> Iterator[LedgerChange]:
    """Ledger files on disk compared with HEAD's copies (what the next commit would record)."""
    repo = _repo(root)
    if repo is None:
        return
    try:
        head = repo.head.commit
    except ValueError:
        return
    top = Path(repo.working_tree_dir or root)
    for path, sha in _blobs(_ledger_tree(head.tree)).items():
        disk = top / path
        data = disk.read_bytes() if disk.is_file() else None
        if data is None or blob_hash(data) != sha:
            yield LedgerChange("working tree", head.hexsha, path, _read_blob(repo, sha), data)


def staged_changes(root: Path) -> Iterator[LedgerChange]:
    """Ledger files in the index compared with HEAD's copies: what is staged for the next commit,
    even when the working tree was put back afterwards."""
    repo = _repo(root)
    if repo is None:
        return
    try:
        head = repo.head.commit
    except ValueError:
        return
    staged = {
        os.fspath(path): entry.hexsha
        for (path, _stage), entry in repo.index.entries.items()
        if os.fspath(path).startswith(LEDGER_DIR + "/")
    }
    for path, sha in _blobs(_ledger_tree(head.tree)).items():
        if staged.get(path) != sha:
            new = _read_blob(repo, staged[path]) if path in staged else None
            yield LedgerChange("index", head.hexsha, path, _read_blob(repo, sha), new)


def _changes(
    repo: git.Repo, commit: str, parent: str, old: dict[str, str], new: dict[str, str]
) -> Iterator[LedgerChange]:
    for path, sha in old.items():
        if new.get(path) == sha:
            continue
        data = _read_blob(repo, new[path]) if path in new else None
        yield LedgerChange(commit, parent, path, _read_blob(repo, sha), data)


def _ledger_tree(tree: git.Tree) -> git.Tree | None:
    """The ledger folder of a commit's tree; None when the commit has none (or a file by that name)."""
    from git import Tree  # importable here: ``tree`` came out of a repository _repo opened

    try:
        found = tree / LEDGER_DIR
    except KeyError:
        return None
    return found if isinstance(found, Tree) else None


def _blobs(sub: git.Tree | None) -> dict[str, str]:
    if sub is None:
        return {}
    from git import Blob  # importable here: ``sub`` came out of a repository _repo opened

    return {os.fspath(item.path): item.hexsha for item in sub.traverse() if isinstance(item, Blob)}


def _read_blob(repo: git.Repo, sha: str) -> bytes:
    return repo.odb.stream(bytes.fromhex(sha)).read()


def head_blob(root: Path, path: str) -> str | None:
    """The blob hash of ``path`` in HEAD, or None (not tracked, no commit yet, or no git at all).

    ``path`` is relative to the repository's top level, as in ``git rev-parse HEAD:path``. A
    release compares it with the file on disk: a script no commit holds cannot be fetched by others.
    """
    repo = _repo(root)
    if repo is None:
        return None
    try:
        item = repo.head.commit.tree / path
    except (ValueError, KeyError):  # ValueError: no commit yet; KeyError: not in HEAD's tree
        return None
    return item.hexsha if item.type == "blob" else None
