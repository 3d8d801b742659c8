"""A script of the repository (scripts/, benchmarks/) loaded as a module by its path: they are
programs, not part of the package, and tests read their functions directly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_script(relative: str, name: str | None = None) -> ModuleType:
    """``relative`` (``scripts/x.py``) as the module ``name`` (default: the file's stem), registered
    in sys.modules while it loads: a dataclass looks its module up by name."""
    path = REPO / relative
    module_name = name or path.stem
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
