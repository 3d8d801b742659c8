"""A stand-in run's ledger entry is the same before and after a refactor (issue 23's check).

Three small experiments (engine none, vllm and sglang, each a raw command that boots the stand-in
server of helpers/fake_server.py, measured by the arm-dependent probe) run through the real CLI. Their
result entries, with what legitimately differs between two runs masked (ids, times, the free port, temp
paths, hashes of files that hold those, host facts), must equal tests/golden/standin-entries.json,
written by the code before the engines and instruments became registries. Regenerate only for a change
that means to alter entries:
    RECIPE_LEDGER_WRITE_GOLDEN=1 pytest tests/integration/test_standin_entry_golden.py
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import FAKE_SERVER
from helpers.net import free_port
from helpers.pipeline import entries, experiment_yaml, ledger, stand_in_repo, write_committed

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "standin-entries.json"

# Keys whose values change from run to run by design (identity, time, machine, content hashes of
# files holding times or ports); their presence is still compared, not their value.
_VOLATILE_KEYS = {
    "id",
    "prev",
    "ts",
    "git",
    "host",
    "run_id",
    "wall_s",
    "sha256",
    "raw_sha256",
    "artifacts",
    "started",
    "finished",
    "duration_s",
    "fingerprint",
    "plan_sha256",
    "spec_sha256",
    "commit",
    "signature",
    "writer",
    "python",
    "hostname",
    "blob",
    "blobs",
    "scripts",
}


def _mask(value: Any, port: int, root: str) -> Any:
    if isinstance(value, dict):
        return {k: ("<volatile>" if k in _VOLATILE_KEYS else _mask(v, port, root)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, port, root) for v in value]
    if isinstance(value, str):
        text = (
            value.replace(root, "<root>")
            .replace(sys.executable, "<python>")
            .replace(str(FAKE_SERVER), "<fake>")
        )
        text = re.sub(rf"\b{port}\b", "<port>", text)
        text = re.sub(r"\b[0-9a-f]{12,64}\b", "<hash>", text)  # ids and hashes inside refs and text
        text = re.sub(r"\d{8}T\d{6}Z?|\d{4}-\d{2}-\d{2}T[\d:.]+Z?", "<time>", text)
        return re.sub(r"<time>-[0-9a-z]+", "<time>-<n>", text)  # a run id's stamp and its random suffix
    return value


def _experiment(port: int, engine: str) -> str:
    spec = json.loads(experiment_yaml(port, ["--delay", "0"]))
    spec["name"] = f"golden-{engine}"
    spec["engine"] = engine
    if engine == "sglang":
        for arm in [spec["control"], *spec["candidates"].values()]:
            arm["argv"] = [*arm["argv"], "--engine", "sglang"]
    return json.dumps(spec)


def _run_entries(tmp_path: Path, engine: str) -> list[dict[str, Any]]:
    root = stand_in_repo(tmp_path / engine)
    port = free_port()
    write_committed(root, "experiments/x.yaml", _experiment(port, engine))
    ledger(root, "run", "experiments/x.yaml", env={"RECIPE_LEDGER_WRITER": "golden-box"})
    found = [e for e in entries(root) if e.get("kind") in ("result", "calibration", "failure")]
    return _mask(found, port, str(root))


def test_a_stand_in_runs_entries_are_unchanged(tmp_path):
    got = {engine: _run_entries(tmp_path, engine) for engine in ("none", "vllm", "sglang")}
    if os.environ.get("RECIPE_LEDGER_WRITE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    expected = json.loads(GOLDEN.read_text())
    for engine in got:
        # As indented JSON, so a failure shows the lines that changed, not two truncated dicts.
        assert _lines(got[engine]) == _lines(expected[engine]), f"engine {engine}: the entries changed"


def _lines(found: list[dict[str, Any]]) -> list[str]:
    return json.dumps(found, indent=1, sort_keys=True).splitlines()
