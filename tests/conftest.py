from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import resources
from helpers.resources import require

pytest_plugins = ["pytester"]  # tests/unit/test_resources.py runs these hooks on a scratch suite

REPO_ROOT = Path(__file__).resolve().parents[1]
INTEGRATION = REPO_ROOT / "tests" / "integration"


def pytest_configure(config: pytest.Config) -> None:
    # A new writer makes a signing key and starts its chain with a key entry (docs/ledger.md); the
    # suite's many scratch ledgers would fill the user's key folder and shift every seq, so it is
    # off here: the tests of signing turn it on with a key folder of their own. The heads each
    # verify has seen are kept in a folder of this session, never the user's.
    os.environ.setdefault("RECIPE_LEDGER_SIGNING", "off")
    os.environ.setdefault("RECIPE_LEDGER_STATE_DIR", tempfile.mkdtemp(prefix="recipe-ledger-state-"))
    # A misspelt name would make CI skip what it means to require: refuse it before collecting.
    try:
        resources.required_resources()
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: `-m "not integration"` sees the marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration is an integration test, whatever its module says."""
    for item in items:
        if item.path.is_relative_to(INTEGRATION):
            item.add_marker(pytest.mark.integration)


_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under RECIPE_LEDGER_REQUIRE=all (CI) a skipped test is a failure: nothing skips silently."""
    if _skipped and resources.requires_everything() and exitstatus == pytest.ExitCode.OK:
        reporter: Any = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"{resources.ENV_VAR}=all but {len(_skipped)} test(s) skipped: {', '.join(_skipped[:5])}",
                red=True,
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def compat_dir() -> Path:
    require("compat")
    return resources.COMPAT


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker SDK client of a daemon that answers (``require("docker")``), closed at the end."""
    require("docker")
    import docker

    client = docker.from_env()
    yield client
    client.close()
