"""What `ledger sync` asks of git, in one place (GitPython): commit the ledger folder, fetch, merge,
undo a merge, push. Never a force-push, never a hand-resolved conflict.

gitinfo.py answers questions about the working tree (provenance, history); this module is the one
that changes a repository and talks to its remotes. Every git failure comes out as a LedgerError
with one line: the first line git printed that says what went wrong.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from recipe_ledger.errors import InputError, StateError

if TYPE_CHECKING:  # annotations only: git is imported lazily, in open_checkout
    import git

LEDGER_DIR = "ledger"
_AUTHOR = ("recipe-ledger", "recipe-ledger@localhost")  # used only when the clone sets no user


@dataclass(frozen=True)
class PushOutcome:
    pushed: bool
    stale: bool = False  # the remote moved on since the fetch: fetch, merge and try again
    reason: str = ""  # why the remote refused, when it did and a retry will not help


class GitCheckout:
    """One clone and one of its remotes, on the branch checked out now."""

    def __init__(self, repo: git.Repo, remote: str):
        self.repo = repo
        self.remote_name = remote
        self.branch = _branch(repo)
        self.remote = _remote(repo, remote)

    @property
    def tracking_ref(self) -> str:
        return f"{self.remote_name}/{self.branch}"

    def head(self) -> str | None:
        try:
            return self.repo.head.commit.hexsha
        except ValueError:  # no commit yet
            return None

    def commit_ledger(self) -> bool:
        """Commit what changed under ``ledger/`` (and only there); False when nothing did."""
        import git

        try:
            self.repo.git.add("--all", "--", LEDGER_DIR)
            staged = self.repo.git.diff("--cached", "--name-only", "--", LEDGER_DIR).split()
            if not staged:
                return False
            message = f"ledger sync: new entries in {', '.join(Path(name).name for name in staged)}"
            # `commit -- ledger` leaves anything else the user staged out of this commit; the
            # clone's own hooks run (a pre-commit hook that refuses is the user's call).
            self.repo.git.commit("-q", "-m", message, "--", LEDGER_DIR, env=_identity(self.repo))
        except git.GitCommandError as error:
            raise StateError(
                f"cannot commit {LEDGER_DIR}/ ({_git_line(error)}); nothing was fetched or pushed",
                where=str(self.repo.working_tree_dir),
                hint=f"git status -- {LEDGER_DIR}; fix what git says, then ledger sync again",
            ) from None
        return True

    def fetch(self) -> str | None:
        """Fetch the branch from the remote; its commit there, or None when the remote lacks it."""
        import git

        try:
            self.repo.git.fetch("--quiet", self.remote_name, env={"GIT_TERMINAL_PROMPT": "0"})
        except git.GitCommandError as error:
            raise StateError(
                f"cannot fetch from {self.remote_name} ({_git_line(error)}); nothing was changed",
                where=self.remote.url,
                hint=f"check the network and `git remote -v`, then ledger sync {self.remote_name}",
            ) from None
        try:
            return self.repo.commit(self.tracking_ref).hexsha
        except (git.BadName, ValueError):
            return None

    def merge(self, commit: str) -> bool:
        """Merge ``commit`` into HEAD (fast-forward when possible); True when HEAD moved.

        A conflict is aborted at once and refused: per-writer chains never conflict, so one means
        two boxes wrote under one writer name, or someone edited a file on both sides.
        """
        import git

        before = self.head()
        if before is not None and self.repo.is_ancestor(self.repo.commit(commit), self.repo.commit(before)):
            return False
        try:
            self.repo.git.merge(
                "-q", "-m", f"ledger sync: merge {self.tracking_ref}", commit, env=_identity(self.repo)
            )
        except git.GitCommandError as error:
            conflicted = sorted(str(path) for path in self.repo.index.unmerged_blobs())
            if conflicted or (Path(self.repo.git_dir) / "MERGE_HEAD").exists():
                self.repo.git.merge("--abort")
                raise StateError(
                    f"merging {self.tracking_ref} conflicts in {', '.join(conflicted) or 'the tree'};"
                    " the merge was aborted and nothing was changed",
                    where=str(self.repo.working_tree_dir),
                    hint="a chain conflicts only when two boxes share a writer name: give each box its own"
                    " RECIPE_LEDGER_WRITER; for other files resolve with git and run ledger sync again",
                ) from None
            raise StateError(
                f"cannot merge {self.tracking_ref} ({_git_line(error)}); nothing was changed",
                where=str(self.repo.working_tree_dir),
                hint="git status; commit or stash local edits, then ledger sync again",
            ) from None
        return self.head() != before

    def undo_merge(self, to: str | None) -> None:
        """Put HEAD back where it was before a merge this sync made (kept local edits stay)."""
        if to is not None and self.head() != to:
            self.repo.git.reset("--merge", to)

    def push(self) -> PushOutcome:
        """Push HEAD to the branch on the remote, never forced."""
        import git

        try:
            with _quiet_gitpython():
                infos = self.remote.push(f"HEAD:refs/heads/{self.branch}", env={"GIT_TERMINAL_PROMPT": "0"})
        except git.GitCommandError as error:
            return PushOutcome(False, reason=_git_line(error))
        if not infos:
            return PushOutcome(False, reason="git push reported nothing")
        info = infos[0]
        if info.flags & info.REJECTED:  # non-fast-forward: someone pushed since our fetch
            return PushOutcome(False, stale=True)
        if info.flags & (info.REMOTE_REJECTED | info.REMOTE_FAILURE | info.ERROR):
            summary = info.summary.strip() or "the remote refused the push"
            # Another push held the ref's lock at that instant: as stale as a non-fast-forward.
            return PushOutcome(False, stale=any(text in summary for text in _LOCK_RACE), reason=summary)
        return PushOutcome(True)


_LOCK_RACE = ("failed to update ref", "cannot lock ref", "failed to lock")


@contextmanager
def _quiet_gitpython() -> Iterator[None]:
    """GitPython logs a rejected push's stderr itself; the one line sync raises says it instead."""
    logger = logging.getLogger("git.remote")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def open_checkout(root: Path, remote: str | None) -> GitCheckout:
    """The clone holding ``root`` and ``remote`` (default: the branch's upstream remote, else origin)."""
    try:
        import git
    except ImportError:
        raise StateError(
            "ledger sync needs git and GitPython", hint="pip install GitPython; apt-get install git"
        ) from None
    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise InputError("not inside a git working tree", where=str(root), hint="git clone URL") from None
    return GitCheckout(repo, remote or _default_remote(repo))


def _default_remote(repo: git.Repo) -> str:
    try:
        tracking = repo.active_branch.tracking_branch()
    except TypeError:  # detached HEAD: _branch says so
        tracking = None
    return tracking.remote_name if tracking is not None else "origin"


def _branch(repo: git.Repo) -> str:
    try:
        return repo.active_branch.name
    except TypeError:
        raise StateError(
            "HEAD is detached: ledger sync pushes a branch",
            where=str(repo.working_tree_dir),
            hint="git switch main",
        ) from None


def _remote(repo: git.Repo, name: str) -> git.Remote:
    if name not in [remote.name for remote in repo.remotes]:
        known = ", ".join(remote.name for remote in repo.remotes) or "none"
        raise InputError(
            f"no git remote named {name!r} (known: {known})",
            where=str(repo.working_tree_dir),
            hint=f"git remote add {name} URL, or ledger sync REMOTE",
        )
    return repo.remote(name)


def _identity(repo: git.Repo) -> dict[str, str]:
    """Author and committer for sync's own commits when the clone has no user configured."""
    reader = repo.config_reader()
    if reader.has_option("user", "name") and reader.has_option("user", "email"):
        return {}
    name, email = _AUTHOR
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def _git_line(error: git.GitCommandError) -> str:
    """The line of git's stderr that says what failed (``fatal:``/``error:`` first), else the last."""
    lines = [line.strip() for line in str(error.stderr or "").splitlines() if line.strip()]
    lines = [line.removeprefix("stderr: ").strip("'") for line in lines]
    for line in lines:
        if line.startswith(("fatal:", "error:", "remote:", "!")):
            return line
    return lines[-1] if lines else f"git exited with {error.status}"
