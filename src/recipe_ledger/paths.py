"""Names that become file names, and paths that must stay inside their folder.

Arm, experiment and run names come from specs and from other boxes' ledger entries; ``--root`` and
``--out`` come from the command line. Each becomes part of a path the tool writes, so each is
checked here, in one place:

- ``check_name(name, what)``: a name that can stand in one file name (no separator, not ``..``,
  at most ``MAX_NAME`` bytes). The spec schemas hold a stricter slug pattern; this holds whatever
  let a name through.
- ``contained(base, *parts)``: ``base / parts``, refused unless it resolves inside ``base`` (so a
  symlink inside ``base`` that points out is refused too). Every writer that builds a path from a
  name goes through it: the run folder (runs/<id>/server-<arm>-r1.log, raw/), tables/, site/.
- ``check_folder(path, what)``: a folder given on the command line (``--root``, ``--out``) that the
  tool can use: not a file, not a system folder (/proc, /sys, /dev), no name over the system's
  limit, no symlink loop. Each refusal is one line (InputError, exit 2), never an OSError traceback.
- ``no_links(project, *parts)``: the record (``ledger/``, ``runs/``: ``RECORD_FOLDERS``) is written
  only into real folders and files of the project. A chain file, ``runs/`` or a run folder that is
  a symlink (the record appended through it to wherever it points, outside the repository that is
  committed and verified) is refused when it is written; ``links_under`` lists every symlink in
  those folders for ``ledger verify``, which reports each as a problem.
"""

from __future__ import annotations

import os
from pathlib import Path

from recipe_ledger.errors import InputError

# The folders the record lives in: ledger.store's LEDGER_DIR and runs.RUNS_DIRNAME (a test ties
# them); no symlink is written through or accepted under them.
RECORD_FOLDERS = ("ledger", "runs")
LINK_HINT = "replace the link by the real folder or file (mv its target here), then run the command again"
MAX_NAME = 128  # a name becomes part of a longer file name; most file systems stop at 255 bytes
_NAME_MAX = 255  # one path component, in bytes (ext4, xfs, btrfs, apfs)
_PATH_MAX = 4096
_SYSTEM_FOLDERS = (Path("/proc"), Path("/sys"), Path("/dev"))
_NAME_HINT = "use letters, digits, '.', '_' and '-'"


def check_name(name: object, what: str, where: str | None = None) -> str:
    """``name`` when it can stand in one file name; an InputError naming ``what`` otherwise."""
    bad = (
        not isinstance(name, str)
        or not name.strip()
        or name in (".", "..")
        or any(c in name for c in "/\\\x00")
        or len(name.encode("utf-8", "replace")) > MAX_NAME
    )
    if bad:
        shown = repr(name) if not isinstance(name, str) or len(name) <= 60 else repr(name[:60] + "...")
        raise InputError(
            f"{what} {shown} cannot name a file (no '/', '\\', '..', at most {MAX_NAME} bytes)",
            where=where,
            hint=_NAME_HINT,
        )
    assert isinstance(name, str)  # `bad` refused every non-string above
    return name


def contained(base: Path, *parts: str) -> Path:
    """``base / parts...``, refused (InputError) unless it stays inside ``base``.

    Both sides are resolved, so ``..`` parts and symlinks that lead out are refused alike; an
    absolute part (which would replace ``base`` in a join) is refused before any join."""
    for part in parts:
        if not part or "\x00" in part or Path(part).is_absolute():
            raise InputError(f"{part!r} cannot name a file inside {base}", where=str(base), hint=_NAME_HINT)
    path = base.joinpath(*parts)
    try:
        inside = path.resolve().is_relative_to(base.resolve())
    except (OSError, RuntimeError) as error:  # a symlink loop, a name the system refuses
        raise InputError(f"cannot resolve {path} ({_reason(error)})", where=str(base)) from None
    if not inside:
        raise InputError(
            f"{'/'.join(parts)!r} would be written outside {base}", where=str(base), hint=_NAME_HINT
        )
    return path


def check_folder(path: Path, what: str) -> Path:
    """``path`` when it can be used as the folder ``what`` (``--root``, ``--out``); it need not exist."""
    text = str(path)
    if "\x00" in text:
        raise InputError(f"{what} holds a NUL character", where=repr(text))
    too_long = next((p for p in path.parts if len(os.fsencode(p)) > _NAME_MAX), None)
    if too_long is not None or len(os.fsencode(text)) > _PATH_MAX:
        shown = (too_long or text)[:40] + "..."
        raise InputError(
            f"{what} has a name longer than the system allows ({shown})",
            where=None,
            hint=f"at most {_NAME_MAX} bytes per folder name",
        )
    try:
        resolved = path.resolve(strict=False)
        is_file = resolved.exists() and not resolved.is_dir()
    except (OSError, RuntimeError) as error:  # RuntimeError: a symlink loop (before Python 3.13)
        raise InputError(f"{what} cannot be resolved ({_reason(error)})", where=text) from None
    if any(resolved == s or resolved.is_relative_to(s) for s in _SYSTEM_FOLDERS):
        raise InputError(f"{what} is a system folder ({resolved}), not a project folder", where=text)
    if is_file:
        raise InputError(f"{what} is a file, not a folder", where=text)
    return path


def no_links(project: Path, *parts: str, what: str = "the record") -> Path:
    """``project / parts...`` when no prefix of it below ``project`` is a symlink and it resolves
    inside ``project``; an InputError naming the link (and where it points) otherwise. Parts that
    do not exist yet are fine: they will be made as real folders and files."""
    current = project
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise InputError(
                f"{current} is a symlink (to {_target(current)}): {what} is written only into the "
                "project's own folders and files, never through a link",
                where=str(current),
                hint=LINK_HINT,
            )
    try:
        inside = current.resolve().is_relative_to(project.resolve())
    except (OSError, RuntimeError) as error:  # a loop above the project, a name the system refuses
        raise InputError(f"cannot resolve {current} ({_reason(error)})", where=str(current)) from None
    if not inside:
        raise InputError(
            f"{current} resolves outside the project {project}", where=str(current), hint=LINK_HINT
        )
    return current


def links_under(project: Path, folders: tuple[str, ...] = RECORD_FOLDERS) -> list[tuple[Path, str]]:
    """Every symlink in ``project``'s record folders (the folder itself included), never followed:
    (the link, where it points). Directory entries only (``scandir`` reads their type without a
    stat), so a large ``runs/`` costs one listing per folder."""
    found: list[tuple[Path, str]] = []
    for name in folders:
        top = project / name
        if top.is_symlink():
            found.append((top, _target(top)))
        elif top.is_dir():
            found += _links_in(top)
    return found


def _links_in(folder: Path) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    pending = [folder]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        found.append((Path(entry.path), _target(Path(entry.path))))
                    elif entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
        except OSError:
            continue  # a folder that cannot be listed holds no link this tool could have written through
    return sorted(found)


def _target(link: Path) -> str:
    try:
        return os.readlink(link)
    except OSError as error:
        return f"unreadable: {_reason(error)}"


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` whole: a reader (or a crash) sees the old file or the new one, never half.
    The temporary name carries the process id, so two writers never share one."""
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with temp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
