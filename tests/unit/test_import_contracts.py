"""The import contracts in pyproject.toml bite: a probe import in a copy of the package breaks
exactly the contract that forbids it, and the unmodified copy keeps them all.

Each case copies ``src/recipe_ledger`` and pyproject.toml to a temporary folder, appends one import
to one module (or adds a new module), and runs lint-imports on the copy in a child process, so
that the graph is built from the copy and not from the package this test imports. lint-imports
builds the graph of this package in well under a second, so every probe runs on its own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "recipe_ledger"
LINT_IMPORTS = "from importlinter.cli import lint_imports_command; lint_imports_command()"
# lint-imports prints "<contract name> KEPT|BROKEN (n ignored imports)" on one line when wide enough.
VERDICT_LINE = re.compile(r"^(?P<name>.+?) (?P<state>KEPT|BROKEN)(?: \(\d+ ignored imports?\))?$")


def contracts() -> list[dict]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return config["tool"]["importlinter"]["contracts"]


def contract_forbidding(library: str, module: str) -> str:
    """The name of the one forbidden contract that covers ``module`` and forbids ``library``."""
    names = [
        contract["name"]
        for contract in contracts()
        if contract["type"] == "forbidden"
        and library in contract["forbidden_modules"]
        and any(_covers(source, module) for source in contract["source_modules"])
    ]
    assert len(names) == 1, f"expected one contract forbidding {library} in {module}, found {names}"
    return names[0]


def _covers(source: str, module: str) -> bool:
    return module == source or module.startswith(source + ".")


def copy_of_the_package(tmp_path: Path) -> Path:
    shutil.copytree(
        REPO / "src" / PACKAGE,
        tmp_path / "src" / PACKAGE,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def add_import(copy: Path, module: str, statement: str) -> None:
    """Append ``statement`` to ``module`` in the copy (a package: to its ``__init__.py``), creating
    the module if it is new."""
    folder = copy / "src" / Path(*module.split("."))
    path = folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")
    text = path.read_text() if path.exists() else '"""A module added after the contracts were written."""\n'
    path.write_text(text + f"\n{statement}\n")


def lint_imports(copy: Path) -> tuple[int, dict[str, str], str]:
    """(exit code, {contract name: KEPT|BROKEN}, full output) of lint-imports run on the copy."""
    env = {**os.environ, "PYTHONPATH": str(copy / "src"), "COLUMNS": "400", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--config", "pyproject.toml", "--no-cache"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    states = {}
    for line in output.splitlines():
        match = VERDICT_LINE.match(line.strip())
        if match:
            states[match["name"]] = match["state"]
    return done.returncode, states, output


def test_the_unmodified_copy_keeps_every_contract(tmp_path):
    code, states, output = lint_imports(copy_of_the_package(tmp_path))

    assert code == 0, output
    assert set(states) == {contract["name"] for contract in contracts()}, output
    assert set(states.values()) == {"KEPT"}, output


PROBES = [
    # (module that gains the import, the import, the library its contract forbids)
    ("recipe_ledger.cli.output", "import docker", "docker"),  # the probe
    ("recipe_ledger.launch.server", "import docker", "docker"),  # launch, but not its docker owner
    ("recipe_ledger.tracking", "import click", "click"),  # the other probe (the package's __init__)
    ("recipe_ledger.tracking.sync", "import mlflow", "mlflow"),  # tracking, but not mlflow's owner
    ("recipe_ledger.tracking.export", "import sqlite3", "sqlite3"),  # export goes through localstore
    ("recipe_ledger.tracking.localstore", "import mlflow", "mlflow"),  # sqlite3's owner is not mlflow's
    ("recipe_ledger.recipes.catalog", "import yaml", "yaml"),
    ("recipe_ledger.experiment.spec", "from ruamel.yaml import YAML", "ruamel"),  # the other YAML library
    ("recipe_ledger.releases.pins", "from git import Repo", "git"),
    ("recipe_ledger.ledger.store", "from rich.console import Console", "rich"),
    ("recipe_ledger.brand_new", "import mlflow", "mlflow"),  # a module nobody listed anywhere
    ("recipe_ledger.verdict", "import subprocess", "subprocess"),
    ("recipe_ledger.stats", "import time", "time"),  # the verdict's distributions are pure too
    ("recipe_ledger.sequential", "import time", "time"),  # the sequential verdict has no clock
    ("recipe_ledger.scaleout.sweep", "import ray", "ray"),  # the sweep driver, beside ray's owner
    ("recipe_ledger.redact.rules", "import detect_secrets", "detect_secrets"),  # redact, not its owner
]


@pytest.mark.parametrize(("module", "statement", "library"), PROBES, ids=[p[0] + ":" + p[2] for p in PROBES])
def test_a_forbidden_import_breaks_its_contract_and_only_it(tmp_path, module, statement, library):
    copy = copy_of_the_package(tmp_path)
    add_import(copy, module, statement)

    code, states, output = lint_imports(copy)

    expected = contract_forbidding(library, module)
    assert code != 0, output
    assert {name for name, state in states.items() if state == "BROKEN"} == {expected}, output
    assert f"{module} -> {library}" in output, output  # the report names the offending import


def test_an_impure_module_reached_from_the_resolver_breaks_purity(tmp_path):
    """Purity counts indirect imports: resolve may not reach I/O through another of our modules."""
    copy = copy_of_the_package(tmp_path)
    add_import(copy, "recipe_ledger.recipes.resolve", "from recipe_ledger import provenance")

    code, states, output = lint_imports(copy)

    assert code != 0, output
    assert states[contract_forbidding("subprocess", "recipe_ledger.recipes.resolve")] == "BROKEN", output
    assert "recipe_ledger.provenance -> subprocess" in output, output


def test_every_package_is_under_the_acyclic_contract():
    """A package added tomorrow is kept free of cycles only when the contract names it."""
    (acyclic,) = [c for c in contracts() if c["type"] == "acyclic_siblings"]
    src = REPO / "src"
    packages = sorted(
        ".".join(init.parent.relative_to(src).parts) for init in (src / PACKAGE).rglob("__init__.py")
    )
    assert sorted(acyclic["ancestors"]) == [p for p in packages if p != PACKAGE]


def test_an_import_cycle_inside_the_ledger_breaks_its_acyclic_contract(tmp_path):
    """semantics importing verify again (verify imports semantics) is the cycle the contract forbids,
    even as a TYPE_CHECKING import."""
    (acyclic,) = [c for c in contracts() if c["type"] == "acyclic_siblings"]
    assert "recipe_ledger.ledger" in acyclic["ancestors"]
    copy = copy_of_the_package(tmp_path)
    add_import(
        copy,
        "recipe_ledger.ledger.semantics",
        "if TYPE_CHECKING:\n    from recipe_ledger.ledger import verify",
    )

    code, states, output = lint_imports(copy)

    assert code != 0, output
    assert {name for name, state in states.items() if state == "BROKEN"} == {acyclic["name"]}, output
    # It names one import that would break the cycle, whichever of the two it nominates.
    assert ".verify -> .semantics" in output or ".semantics -> .verify" in output, output


def top_level_modules() -> set[str]:
    root = REPO / "src" / PACKAGE
    names = {path.stem for path in root.glob("*.py") if path.stem != "__init__"}
    names |= {path.parent.name for path in root.glob("*/__init__.py")}
    return {f"{PACKAGE}.{name}" for name in names}


def test_every_top_level_module_sits_in_a_layer():
    """The layers contract says nothing about a module it does not name: a new one must be placed."""
    (layers,) = [contract for contract in contracts() if contract["type"] == "layers"]
    placed = {name.strip(" ()") for layer in layers["layers"] for name in re.split(r"[|:]", layer)}

    missing = sorted(top_level_modules() - placed)

    assert not missing, (
        f"{missing} sit in no layer of {layers['name']!r}: add each to its layer in pyproject.toml "
        "[tool.importlinter], then run lint-imports"
    )
