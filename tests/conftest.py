from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
COMPAT = SHARED / "compat"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def compat_dir() -> Path:
    if not (COMPAT / "vllm-recipes").is_dir():
        pytest.skip("../shared/compat is not beside this checkout")
    return COMPAT
