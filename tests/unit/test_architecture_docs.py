"""The architecture page and the package maps cannot drift from the code.

- docs/architecture.md's layer list (between its ``layers`` markers) is the layers contract of
  pyproject.toml, rendered; a new layer or a moved package fails here until the page says it.
- Every module and subpackage of ``recipe_ledger`` is named in its package's ``__init__`` docstring
  (the package map), so a module added tomorrow must be placed on the map by whoever adds it.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "recipe_ledger"
ARCHITECTURE = REPO / "docs" / "architecture.md"
BEGIN, END = "<!-- layers:begin (tests/unit/test_architecture_docs.py) -->", "<!-- layers:end -->"


def contract_layers() -> list[list[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    short = [[name.strip().removeprefix("recipe_ledger.") for name in layer.split("|")] for layer in layers]
    return short


def rendered_layers() -> str:
    """The layer list as the page shows it: top (imports the most) to bottom (imports nothing)."""
    lines = [f"{n}. `{' | '.join(layer)}`" for n, layer in enumerate(contract_layers(), start=1)]
    return "\n".join(lines)


def test_the_architecture_page_shows_the_contracts_layers():
    text = ARCHITECTURE.read_text()
    assert BEGIN in text and END in text, f"docs/architecture.md lacks the markers {BEGIN} ... {END}"
    shown = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert shown == rendered_layers(), (
        "docs/architecture.md's layer list differs from pyproject.toml's layers contract; put this "
        f"between its markers:\n{rendered_layers()}"
    )


def _docstring(init: Path) -> str:
    return ast.get_docstring(ast.parse(init.read_text())) or ""


def _members(package: Path) -> list[str]:
    modules = [p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")]
    packages = [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(modules + packages)


def _packages() -> list[Path]:
    return sorted(init.parent for init in PACKAGE.rglob("__init__.py"))


def _registered_cli_modules() -> set[str]:
    """cli/ maps its command modules through COMMANDS ("module:attribute"), not its docstring."""
    from recipe_ledger.cli import COMMANDS

    return {str(target[0]).split(":")[0].rsplit(".", 1)[-1] for target in COMMANDS.values()}


def unmapped(package: Path) -> list[str]:
    doc = _docstring(package / "__init__.py")
    named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", doc))
    extra = _registered_cli_modules() if package.name == "cli" else set()
    return [m for m in _members(package) if m not in named and m not in extra]


@pytest.mark.parametrize("package", _packages(), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_every_module_is_on_its_packages_map(package):
    missing = unmapped(package)
    assert not missing, (
        f"{package.relative_to(REPO)}/__init__.py's docstring does not name {', '.join(missing)}: "
        "add a line for each to the package map (what it owns, in one line)"
    )


def test_the_payload_versions_row_names_every_kind_at_its_current_version():
    from recipe_ledger.ledger.kinds import KINDS
    from recipe_ledger.ledger.models import current_version

    (row,) = [
        line for line in ARCHITECTURE.read_text().splitlines() if line.startswith("| payloads, by `kind`")
    ]
    shown = {kind: int(version) for kind, version in re.findall(r"`(\w+)` (\d+)", row)}
    assert shown == {kind: current_version(kind) for kind in KINDS}
