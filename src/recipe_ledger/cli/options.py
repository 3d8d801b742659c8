"""The options several commands share, each defined once, with the one function that resolves it.

- ``--root DIR``: the project root (holding ledger/, recipes/, runs/) on every command that takes it;
  default: the git top level of the current directory.
- ``--recipes DIR``: a recipes root (models/, taxonomy.yaml, strategies/, boxes/) for `recipe` and
  `fit`; default: the project's recipes/ folder.
- ``--writer NAME``: the ledger chain to append to; default: $RECIPE_LEDGER_WRITER or the host name.
- ``--json``: data for machines instead of a table for people.

Each resolver runs as the option's click callback, so a command receives a ``Path`` or a ``str``,
never ``None``. The core modules they call are imported inside the callbacks: building the command
line (``ledger --help``) must not import the ledger's pydantic models or GitPython.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click
from click.core import ParameterSource

from recipe_ledger.errors import InputError

F = TypeVar("F", bound=Callable)

_RECIPES_MARKERS = ("models", "overlay", "upstream")  # recipes.layers: a flat root, a lab's layers
_RAW_ROOT = "recipe_ledger.raw_root"  # ctx.meta key: --root as given, for the --recipes default


def project_root(root: Path | None) -> Path:
    """The project root: ``root`` as given (relative stays relative), else the git top level of the cwd.

    The top level is the nearest folder upwards holding ``.git`` (a folder, or the file a worktree
    or submodule has): what git finds, without importing GitPython (~40 ms) on every command. A given
    root is checked (paths.check_folder): a file, /proc/self, a name over the system's limit or a
    symlink loop is one line and exit 2, not an OSError traceback later."""
    if root is not None:
        from recipe_ledger.paths import check_folder

        return check_folder(root, "--root")
    cwd = Path.cwd()
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    raise InputError(
        "not inside a git working tree", where=str(cwd), hint="pass --root DIR, or run `git init`"
    )


class LazyChoice(click.Choice):
    """A ``click.Choice`` whose values come from "module:attribute", imported only when the option
    is given or its help is shown (the ledger's kinds live beside its pydantic models)."""

    def __init__(self, target: str) -> None:
        self.target = target
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        import importlib

        module, _, attribute = self.target.partition(":")
        return tuple(getattr(importlib.import_module(module), attribute))

    @choices.setter
    def choices(self, _value: object) -> None:  # click.Choice.__init__ assigns it
        pass


def under_root(root: Path, path: Path, what: str = "--out") -> Path:
    """An output folder (``--out``) taken relative to the project root (as dvc runs it), unless absolute;
    checked like --root (paths.check_folder)."""
    from recipe_ledger.paths import check_folder

    return check_folder(path if path.is_absolute() else root / path, what)


def recipes_root(recipes: Path | None, root: Path | None) -> Path:
    """The recipes root: ``recipes`` as given, else ``<root>/recipes``, else the project's recipes/.

    Without either option the project's recipes/ is found from the current directory upwards (the
    folder holding recipes/models/), which is the git top level's recipes/ in a checkout and still
    works in an unpacked copy without git.
    """
    from recipe_ledger.paths import check_folder

    if recipes is not None:
        return check_folder(recipes, "--recipes")
    if root is None:
        return default_recipes_root(Path.cwd())
    check_folder(root, "--root")
    if not (root / "recipes").is_dir() and (root / "taxonomy.yaml").is_file():
        # The old meaning of --root on recipe commands: say what changed rather than "no recipes root".
        raise InputError(
            "--root is the project root now, and this folder is a recipes root",
            where=str(root),
            hint=f"pass --recipes {root}",
        )
    return root / "recipes"


def default_recipes_root(start: Path) -> Path:
    """This project's recipes/ folder, found from ``start`` upwards (relative to ``start`` when
    below it: messages then name recipes/models/x.yaml:12, not an absolute path): one holding
    models/ (flat) or a lab's overlay/ or upstream/ (recipes.layers). Here rather than in the
    recipe catalog so that finding it imports no recipe models."""
    here = start.resolve()
    for folder in (here, *here.parents):
        if any((folder / "recipes" / part).is_dir() for part in _RECIPES_MARKERS):
            found = folder / "recipes"
            return found.relative_to(here) if found.is_relative_to(here) else found
    return here / "recipes"


def writer_name(writer: str | None) -> str:
    """The writer (chain) name: ``writer`` as given, else $RECIPE_LEDGER_WRITER or the host name."""
    if writer:
        return writer
    from recipe_ledger.ledger.store import default_writer

    return default_writer()


def _resolve_root(ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
    return value if ctx.resilient_parsing else project_root(value)


def _remember_root(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    ctx.meta[_RAW_ROOT] = value


def _resolve_recipes(ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
    return value if ctx.resilient_parsing else recipes_root(value, ctx.meta.get(_RAW_ROOT))


def _resolve_writer(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    return value if ctx.resilient_parsing else writer_name(value)


_ROOT_HELP = (
    "Project root holding ledger/ and recipes/ (default: the git top level of the current directory)."
)
# A folder that is checked by paths.check_folder (project_root, under_root), not by click: click's
# refusal of a file is a usage block, the check's is one line. Shown as DIRECTORY, as before.
FOLDER = click.Path(path_type=Path)
FOLDER.name = "directory"

root_option = click.option("--root", type=FOLDER, default=None, callback=_resolve_root, help=_ROOT_HELP)


def recipes_option(command: F) -> F:
    """``--recipes DIR``, and ``--root DIR`` (the project whose recipes/ is the default): one ``recipes``.

    The command receives the resolved recipes root as a Path. ``--root`` is eager so that it is
    read before ``--recipes`` wherever each stands on the line.
    """
    command = click.option(
        "--recipes",
        type=FOLDER,
        default=None,
        callback=_resolve_recipes,
        help="Recipes root (models/, taxonomy.yaml, strategies/, boxes/). Default: the project's recipes/.",
    )(command)
    return click.option(
        "--root",
        type=FOLDER,
        default=None,
        is_eager=True,
        expose_value=False,
        callback=_remember_root,
        help="Project root whose recipes/ to use (default: found from the current directory).",
    )(command)


writer_option = click.option(
    "--writer",
    default=None,
    callback=_resolve_writer,
    help="Chain to append to (default: $RECIPE_LEDGER_WRITER or the host name).",
)


def given_root() -> Path:
    """The project root of a command that takes ``recipes_option`` (its ``--root``, else found)."""
    return project_root(click.get_current_context().meta.get(_RAW_ROOT))


def recipes_given() -> bool:
    """Whether the running command got ``--recipes`` or ``--root`` (lint then ignores where its paths lie)."""
    ctx = click.get_current_context()
    return ctx.get_parameter_source("recipes") is not ParameterSource.DEFAULT or bool(ctx.meta.get(_RAW_ROOT))


def allow_dirty_option(what: str) -> Callable[[F], F]:
    """``--allow-dirty`` as the flag ``allow_dirty``; ``what`` is the verb ("Run", "Publish"...).

    The clean-tree rule is the same for every command that measures or publishes
    (pipeline.clean_tree): only the verb differs."""
    return click.option(
        "--allow-dirty",
        is_flag=True,
        help=f"{what} although the spec, recipes/, scripts/ or the tool differ from the commit "
        "(the entries record dirty: true, the files and the diff's hash).",
    )


def tracking_uri_option(help: str) -> Callable[[F], F]:
    """``--tracking-uri`` (env MLFLOW_TRACKING_URI), the MLflow store; ``help`` says what it is for."""
    return click.option("--tracking-uri", envvar="MLFLOW_TRACKING_URI", help=help)


def json_option(help: str) -> Callable[[F], F]:
    """``--json`` as the flag ``as_json``; ``help`` says the shape of what is printed."""
    return click.option("--json", "as_json", is_flag=True, help=help)
