"""``ledger mlflow export``: a local store copied into a self-contained folder (needs no MLflow)."""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.tracking.localstore import (
    ARTIFACTS_DIR,
    DB_FILE,
    artifact_root,
    backup_sqlite,
    default_tracking_uri,
    relocate_artifacts,
    sqlite_path,
)
from recipe_ledger.tracking.uri import safe_uri


@dataclass
class ExportReport:
    dest: Path
    runs: int
    artifact_files: int
    outside: int  # runs whose artifacts live outside this store's mlartifacts/ (left as they are)

    def __str__(self) -> str:
        outside = f"; {self.outside} runs keep artifacts stored elsewhere" if self.outside else ""
        return (
            f"exported {self.runs} runs and {self.artifact_files} artifact files to {self.dest}{outside}. "
            f"Browse: cd {shlex.quote(str(self.dest))} && mlflow ui --backend-store-uri sqlite:///{DB_FILE}"
        )


def export_local_store(repo: Path, dest: Path, tracking_uri: str | None = None) -> ExportReport:
    """Copy a local SQLite store and its artifacts into ``dest``, as a self-contained folder.

    The database is copied with SQLite's backup API (a consistent snapshot even while a sync
    writes) and its artifact locations are rewritten to ``mlartifacts/...`` relative paths, so the
    folder can be moved, archived, or served on another machine from inside it. Needs no MLflow.
    """
    uri = tracking_uri or default_tracking_uri(repo)
    db = sqlite_path(uri)
    if db is None:
        raise InputError(
            f"export copies a local SQLite store; {safe_uri(uri)} is not one",
            where="--tracking-uri",
            hint="a tracking server keeps its own backups; `ledger mlflow sync --tracking-uri URI` fills one",
        )
    if not db.is_file():
        raise StateError("no MLflow store here yet", where=str(db), hint="ledger mlflow sync")
    dest = Path(dest).resolve()
    if dest.exists() and any(dest.iterdir()):
        raise InputError("the export folder is not empty", where=str(dest), hint="give a new folder")
    dest.mkdir(parents=True, exist_ok=True)
    backup_sqlite(db, dest / DB_FILE)
    root = artifact_root(uri)
    assert root is not None
    files = _copy_artifacts(root, dest / ARTIFACTS_DIR)
    runs, outside = relocate_artifacts(dest / DB_FILE, root)
    (dest / "README.txt").write_text(_export_readme())
    return ExportReport(dest, runs, files, outside)


def _copy_artifacts(root: Path, target: Path) -> int:
    if not root.is_dir():
        target.mkdir()
        return 0
    shutil.copytree(root, target)
    return sum(1 for p in target.rglob("*") if p.is_file())


def _export_readme() -> str:
    return (
        "An MLflow index of a Recipe Ledger, exported by `ledger mlflow export`.\n"
        "The ledger (ledger/*.jsonl in the project's git repository) is the record; this is its index.\n\n"
        "Artifact paths are relative to this folder: start MLflow from inside it.\n\n"
        f"  cd {'<this folder>'}\n"
        f"  mlflow ui --backend-store-uri sqlite:///{DB_FILE} --port 5000\n"
        "  # or: mlflow server --backend-store-uri sqlite:///mlflow.db"
        " --host 127.0.0.1 --port 5000 --workers 1\n\n"
        "To fill a shared tracking server instead,"
        " run `ledger mlflow sync --tracking-uri URI` in the project.\n"
    )
