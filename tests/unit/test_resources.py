"""The test suite's own switch: require(resource) skips, or fails when RECIPE_LEDGER_REQUIRE names it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from helpers import resources
from helpers.resources import ENV_VAR, PROBES, require, required_resources, requires_everything

TESTS = Path(__file__).resolve().parents[1]
CONFTEST, HELPERS_PARENT = TESTS / "conftest.py", TESTS
GONE = "the thing is not installed (apt-get install thing)"


@pytest.fixture
def fake_resources(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two stand-in resources: one present, one missing; the real probes are not called."""
    monkeypatch.setitem(PROBES, "present", lambda: None)
    monkeypatch.setitem(PROBES, "absent", lambda: GONE)
    monkeypatch.delenv(ENV_VAR, raising=False)


def test_a_present_resource_lets_the_test_run(fake_resources, monkeypatch) -> None:
    monkeypatch.setenv(ENV_VAR, "all")
    assert require("present") is None


def test_a_missing_resource_skips_with_the_probe_reason_and_the_caller_reason(fake_resources) -> None:
    with pytest.raises(pytest.skip.Exception, match="the browser tests: the thing is not installed"):
        require("absent", "the browser tests")
    with pytest.raises(pytest.skip.Exception, match=r"^the thing is not installed"):
        require("absent")


@pytest.mark.parametrize("setting", ["absent", "present, absent", "all"])
def test_a_missing_required_resource_fails_the_test(fake_resources, monkeypatch, setting: str) -> None:
    monkeypatch.setenv(ENV_VAR, setting)
    with pytest.raises(pytest.fail.Exception, match=re.escape(f"{ENV_VAR} requires absent, but {GONE}")):
        require("absent")


def test_requiring_another_resource_still_skips_this_one(fake_resources, monkeypatch) -> None:
    monkeypatch.setenv(ENV_VAR, "present")
    with pytest.raises(pytest.skip.Exception):
        require("absent")


def test_all_names_every_probe_and_only_all_requires_everything() -> None:
    assert required_resources({ENV_VAR: "all"}) == set(PROBES)
    assert requires_everything({ENV_VAR: "all"})
    assert not requires_everything({ENV_VAR: "docker,vllm"})
    assert required_resources({}) == set()
    assert required_resources({ENV_VAR: " docker , vllm ,"}) == {"docker", "vllm"}


def test_an_unknown_name_is_refused_rather_than_silently_not_required() -> None:
    with pytest.raises(ValueError, match=r"unknown resources \['dokcer'\]"):
        required_resources({ENV_VAR: "docker,dokcer"})
    with pytest.raises(ValueError, match="unknown resource 'dokcer'"):
        require("dokcer")


def test_every_resource_ci_installs_has_a_probe() -> None:
    assert {"docker", "registry", "vllm", "sglang", "cpu-lane", "browser", "compat", "mlflow", "dvc"} <= set(
        PROBES
    )


def test_a_probe_reports_the_command_that_provides_what_is_missing(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(resources, "SERVE_VLLM", tmp_path / "no-venv" / "bin" / "vllm")
    resources.vllm.cache_clear()
    try:
        assert "./dev serve-setup" in (resources.vllm() or "")
    finally:
        resources.vllm.cache_clear()


@pytest.fixture
def sglang_python(monkeypatch, tmp_path):
    """Point the sglang probe at a stand-in venv python (a script) the test writes; no cached answer."""
    python = tmp_path / "venv" / "bin" / "python"
    monkeypatch.setattr(resources, "SGLANG_PYTHON", python)
    resources.sglang.cache_clear()
    yield python
    resources.sglang.cache_clear()


def write_script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_the_sglang_probe_names_the_setup_command_when_the_venv_is_missing(sglang_python) -> None:
    assert "./dev serve-setup" in (resources.sglang() or "")


def test_the_sglang_probe_reports_why_sglang_does_not_import(sglang_python) -> None:
    write_script(sglang_python, "echo \"ModuleNotFoundError: No module named 'sgl_kernel'\" >&2; exit 1")
    missing = resources.sglang() or ""
    assert "No module named 'sgl_kernel'" in missing and "scripts/setup_sglang_venv.sh" in missing


def test_the_sglang_probe_passes_when_sglang_imports_and_the_model_is_there(
    sglang_python, monkeypatch, tmp_path
) -> None:
    write_script(sglang_python, "exit 0")
    model = tmp_path / "model"
    monkeypatch.setattr(resources, "TINY_MODEL", model)
    assert "tiny model" in (resources.sglang() or "")
    resources.sglang.cache_clear()
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"")
    assert resources.sglang() is None


# --- the session rules of tests/conftest.py, run on a throwaway test file ------------------------


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A scratch test folder with this suite's conftest; its pytest runs in a subprocess."""
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makepyfile(
        test_scratch="import pytest\n\ndef test_runs():\n    pass\n\n"
        "def test_skips():\n    pytest.skip('nothing to test against')\n"
    )
    paths = [str(HELPERS_PARENT), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    return pytester


def test_a_skip_fails_the_session_when_everything_is_required(suite, monkeypatch) -> None:
    monkeypatch.setenv(ENV_VAR, "all")
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*{ENV_VAR}=all but 1 test(s) skipped: *test_skips*"])


def test_a_skip_is_only_reported_when_not_everything_is_required(suite, monkeypatch) -> None:
    monkeypatch.setenv(ENV_VAR, "docker")
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=1)


def test_a_misspelt_requirement_stops_pytest_before_collecting(suite, monkeypatch) -> None:
    monkeypatch.setenv(ENV_VAR, "dokcer")
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown resources*dokcer*"])
