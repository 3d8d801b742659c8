"""Exit codes as documented (cli/__init__.py, docs/cli.md): the machine not being ready is 3, in one
line, wherever it is found; never a traceback with exit 1."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import StateError
from recipe_ledger.launch.failures import BOOT_CAUSES, NOT_READY_CAUSES, BootFailure
from recipe_ledger.ledger.store import Ledger

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("cause", sorted(BOOT_CAUSES))
def test_a_boot_failure_that_says_the_machine_is_not_ready_exits_3(cause):
    failure = BootFailure(cause, "x")
    assert failure.exit_code == (StateError.exit_code if cause in NOT_READY_CAUSES else 1)


def test_release_publish_with_the_docker_daemon_down_is_one_line_and_exit_3(tmp_path, monkeypatch):
    root = tmp_path / "project"
    shutil.copytree(REPO / "recipes", root / "recipes")
    shutil.copytree(REPO / "scripts", root / "scripts")
    shutil.copytree(REPO / "ledger", root / "ledger")  # the results the release's numbers come from
    spec = root / "corpus-v9.yaml"
    spec.write_text(
        (REPO / "recipes" / "releases" / "tiny-cpu" / "v2.yaml")
        .read_text()
        .replace("version: v2", "version: v9")
    )
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-daemon.sock'}")
    result = CliRunner().invoke(
        main,
        ["release", "publish", "tiny-cpu", "v9", "--from", str(spec), "--dry-run", "--allow-dirty"]
        + ["--root", str(root), "--writer", "box-a"],
    )
    assert result.exit_code == 3, result.output
    assert len(result.output.strip().splitlines()) == 1 and "docker_unavailable" in result.output


def test_an_os_error_the_core_did_not_expect_is_one_line_and_exit_3(tmp_path, monkeypatch):
    Ledger.init(tmp_path)

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device", str(tmp_path / "ledger" / "box-a.jsonl"))

    monkeypatch.setattr(Ledger, "append", disk_full)
    result = CliRunner().invoke(main, ["note", "hello", "--root", str(tmp_path), "--writer", "box-a"])
    assert result.exit_code == 3, result.output
    assert result.output.strip().splitlines() == [
        f"error: {tmp_path / 'ledger' / 'box-a.jsonl'}: No space left on device"
    ]
