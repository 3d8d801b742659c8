"""The local SQLite store: the only module that imports ``sqlite3``.

Where the default store lives (``<repo>/mlflow.db``, artifacts in ``mlartifacts/`` beside it), how
its commits are made cheap (WAL), and the two operations ``ledger mlflow export`` needs from SQLite
itself: a consistent copy while a sync writes, and artifact locations made relative to the copy.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DB_FILE = "mlflow.db"
ARTIFACTS_DIR = "mlartifacts"


def default_tracking_uri(repo: Path) -> str:
    """The local default store: ``<repo>/mlflow.db`` (git-ignored), an SQLite file."""
    return "sqlite:///" + str(Path(repo).resolve() / DB_FILE)


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (relative paths are relative to the current directory)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    return Path(tracking_uri.removeprefix("sqlite:///")).resolve()


def artifact_root(tracking_uri: str) -> Path | None:
    """Where a local store keeps artifacts: ``mlartifacts/`` beside the database file.

    MLflow's own default for an SQLite store is ``./mlruns`` relative to wherever the process
    happens to run; beside the database is where ``ledger mlflow export`` finds them again. For a
    tracking server the server decides (its ``--default-artifact-root`` / artifact proxy).
    """
    db = sqlite_path(tracking_uri)
    return db.parent / ARTIFACTS_DIR if db else None


def lighten_sqlite_commits() -> None:
    """SQLite stores commit in write-ahead-log mode without an fsync per commit.

    MLflow commits several times per run (params, metrics and tags each in their own session), and
    in SQLite's default mode every commit waits for the disk: most of a sync's time on a busy box.
    The store is an index the ledger rebuilds (``ledger mlflow sync``), so a power cut losing its
    last commits costs nothing; WAL with synchronous=NORMAL never corrupts it. Idempotent."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "connect", _sqlite_pragmas):
        event.listen(Engine, "connect", _sqlite_pragmas)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


def backup_sqlite(source: Path, target: Path) -> None:
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def relocate_artifacts(db: Path, root: Path) -> tuple[int, int]:
    """Point experiments and runs under ``root`` at ``mlartifacts/...`` (relative: the folder moves)."""
    prefixes = (f"file://{root}", str(root))
    with sqlite3.connect(db) as conn:
        for table, column, id_column in (
            ("experiments", "artifact_location", "experiment_id"),
            ("runs", "artifact_uri", "run_uuid"),
        ):
            for row_id, location in conn.execute(f"SELECT {id_column}, {column} FROM {table}").fetchall():
                relocated = _relative_location(location, prefixes)
                if relocated is not None:
                    conn.execute(
                        f"UPDATE {table} SET {column} = ? WHERE {id_column} = ?", (relocated, row_id)
                    )
        runs = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        outside = conn.execute(
            "SELECT COUNT(*) FROM runs WHERE artifact_uri NOT LIKE ?", (ARTIFACTS_DIR + "/%",)
        ).fetchone()[0]
    conn.close()
    return runs, outside


def _relative_location(location: str | None, prefixes: Sequence[str]) -> str | None:
    for prefix in prefixes:
        if location and (location == prefix or location.startswith(prefix + "/")):
            return ARTIFACTS_DIR + location[len(prefix) :]
    return None
