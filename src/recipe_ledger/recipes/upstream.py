"""A lab's upstream snapshot: take in a new one, say what changed, replace the old one.

``ledger recipe update --from PATH`` reads a recipes checkout or an archive of one (``.tar.gz``,
``.tgz``, ``.tar``, ``.zip``; the folder holding ``models/`` may sit one level down, as in a
repository archive), compares it with ``recipes/upstream/`` (recipes added and removed, and for each
recipe both hold the resolved command on each hardware of the lab's boxes), lints it, and swaps it
in: the new tree is copied beside the old one and renamed into place, so a failure leaves the old
snapshot whole. ``recipes/overlay/`` is never read for the comparison nor written.
``recipes/UPSTREAM.yaml`` records the source, its commit (when the caller knows it) and a content
hash of the snapshot's files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from recipe_ledger.errors import InputError, LedgerError
from recipe_ledger.paths import write_text_atomic
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.command import CommandRequest, resolve_for_people
from recipe_ledger.recipes.layers import UPSTREAM, UPSTREAM_RECORD, layers_of
from recipe_ledger.recipes.lint import LintWarning, lint_items

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
SNAPSHOT_PARTS = ("models", "strategies", "taxonomy.yaml")  # what a snapshot keeps of a checkout


@dataclass(frozen=True)
class CommandChange:
    recipe: str  # models/org/name.yaml
    hardware: str
    before: str  # the argv joined, or "(does not resolve: ...)"
    after: str


@dataclass
class UpdateReport:
    source: str
    commit: str | None
    content_sha256: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[CommandChange] = field(default_factory=list)
    warnings: list[LintWarning] = field(default_factory=list)
    applied: bool = False


def content_hash(root: Path) -> str:
    """sha256 over every snapshot file's path and bytes, in path order: equal trees, equal hash."""
    digest = hashlib.sha256()
    for path in sorted(_snapshot_files(root), key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return "sha256:" + digest.hexdigest()


def model_refs(root: Path) -> set[str]:
    """The recipes of a snapshot, as the recipe engine lists them (recipes.layers)."""
    layers = layers_of(root)
    return set(layers.model_files()) if layers is not None else set()


def command_changes(
    old: RecipeRoot, new: RecipeRoot, refs: Iterable[str], hardware: Iterable[str]
) -> list[CommandChange]:
    """For each recipe and hardware id, the resolved command before and after, where they differ."""
    changes = []
    for ref in sorted(refs):
        for hw in sorted(set(hardware)):
            before, after = _command_text(old, ref, hw), _command_text(new, ref, hw)
            if before != after:
                changes.append(CommandChange(ref, hw, before, after))
    return changes


def compare(
    old_dir: Path | None, new_dir: Path, hardware: Iterable[str]
) -> tuple[list[str], list[str], list[CommandChange]]:
    """(added, removed, changed commands) from the old snapshot to the new one."""
    new_refs = model_refs(new_dir)
    if old_dir is None or not (old_dir / "models").is_dir():
        return sorted(new_refs), [], []
    old_refs = model_refs(old_dir)
    both = old_refs & new_refs
    # Fresh corpora (not the per-path cache): upstream/ changes under the same path.
    fresh = [RecipeRoot(d, layers_of(d)) for d in (old_dir, new_dir)]
    changed = command_changes(fresh[0], fresh[1], both, hardware)
    return sorted(new_refs - old_refs), sorted(old_refs - new_refs), changed


def update(
    recipes: Path, source: Path, commit: str | None, hardware: Iterable[str], *, dry_run: bool
) -> UpdateReport:
    """Compare, lint and (unless ``dry_run``) swap the new snapshot in for ``recipes/upstream``."""
    with opened_snapshot(source) as new_dir:
        upstream = recipes / UPSTREAM
        added, removed, changed = compare(upstream if upstream.is_dir() else None, new_dir, hardware)
        report = UpdateReport(str(source), commit, content_hash(new_dir), added, removed, changed)
        root = RecipeRoot(new_dir)
        report.warnings = [_as_taken_in(w, new_dir) for w in lint_items(root, root.load_all())]
        if not dry_run:
            replace_upstream(recipes, new_dir, report)
            report.applied = True
    return report


def _as_taken_in(warning: LintWarning, new_dir: Path) -> LintWarning:
    """The warning at the path its file will have in the lab (recipes/upstream/...): the snapshot's
    temporary folder (an archive's extraction) is gone once the command returns."""
    prefix = f"{new_dir}/"
    if not warning.where.startswith(prefix):
        return warning
    return dataclasses.replace(warning, where=f"recipes/{UPSTREAM}/{warning.where[len(prefix) :]}")


def replace_upstream(recipes: Path, new_dir: Path, report: UpdateReport) -> None:
    """Copy the snapshot beside upstream/, then rename it into place; the old one goes last."""
    recipes.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".upstream-new-", dir=recipes))
    try:
        for part in SNAPSHOT_PARTS:
            _copy(new_dir / part, staging / part)
        upstream, retired = recipes / UPSTREAM, recipes / f".{UPSTREAM}-old"
        shutil.rmtree(retired, ignore_errors=True)
        if upstream.exists():
            upstream.rename(retired)
        staging.rename(upstream)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(retired, ignore_errors=True)
    _write_record(recipes / UPSTREAM_RECORD, report)


@contextmanager
def opened_snapshot(source: Path) -> Iterator[Path]:
    """The folder holding ``models/`` in a checkout or an unpacked archive."""
    if source.is_dir():
        yield _snapshot_root(source, source)
        return
    if not source.is_file() or not source.name.endswith(ARCHIVE_SUFFIXES):
        raise InputError(
            "not a recipes checkout nor an archive (.tar.gz, .tgz, .tar, .zip)",
            where=str(source),
            hint="ledger recipe update --from PATH-TO-A-RECIPES-CHECKOUT",
        )
    with tempfile.TemporaryDirectory(prefix="recipe-ledger-upstream-") as scratch:
        _unpack(source, Path(scratch))
        yield _snapshot_root(Path(scratch), source)


def _snapshot_root(top: Path, shown: Path) -> Path:
    for folder in (top, *sorted(p for p in top.iterdir() if p.is_dir())):
        if (folder / "models").is_dir():
            return folder
    raise InputError(
        "no models/ folder in this snapshot (nor one level down)",
        where=str(shown),
        hint="pass a checkout of a recipes repository (models/, strategies/, taxonomy.yaml)",
    )


def _unpack(archive: Path, into: Path) -> None:
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zipped:
                for name in zipped.namelist():
                    if not (into / name).resolve().is_relative_to(into.resolve()):
                        raise InputError(f"archive member {name!r} leads outside", where=str(archive))
                zipped.extractall(into)
        else:
            with tarfile.open(archive) as tarred:
                tarred.extractall(into, filter="data")  # refuses links out, absolute names, devices
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as error:
        raise InputError(f"cannot unpack the archive ({error})", where=str(archive)) from None


def _snapshot_files(root: Path) -> Iterator[Path]:
    for part in SNAPSHOT_PARTS:
        path = root / part
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (p for p in path.rglob("*") if p.is_file())


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, symlinks=False)
    elif source.is_file():
        shutil.copyfile(source, target)


def _command_text(root: RecipeRoot, ref: str, hardware: str) -> str:
    try:
        return " ".join(resolve_for_people(root, CommandRequest(ref, hardware=hardware)).argv)
    except LedgerError as error:
        return f"(does not resolve: {error.message})"


def _write_record(path: Path, report: UpdateReport) -> None:
    # JSON strings are YAML scalars: the record is written without a YAML library (spec.yamlfile owns it).
    lines = [
        "# The upstream snapshot in recipes/upstream/: written by `ledger recipe update`, not by hand.",
        f"source: {json.dumps(report.source)}",
        f"commit: {json.dumps(report.commit) if report.commit else 'null'}",
        f"content_sha256: {json.dumps(report.content_sha256)}",
    ]
    write_text_atomic(path, "\n".join(lines) + "\n")
