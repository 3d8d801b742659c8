"""`ledger recipe command recipe-ledger/tiny-qwen2 -H cpu_x86 --engine sglang` boots as printed.

The printed command names the model by its id, as a person would run it on a box whose Hugging Face
cache holds the model (the recipe's env sets HF_HUB_OFFLINE=1, so nothing is downloaded). The test
lays the tiny model out as that cache entry, puts the SGLang venv's `python` first on PATH, and runs
the printed argv and env unchanged, port included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from recipe_ledger.engines.sglang import ENGINE as SGLANG
from recipe_ledger.engines.sglang_api import generate_problem
from recipe_ledger.launch import LaunchSpec, ProcessLauncher, port_is_free

from helpers.resources import REPO, SGLANG_PYTHON, TINY_MODEL, require

BOOT_TIMEOUT_S = 300


def printed_command() -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", "recipe", "command", "recipe-ledger/tiny-qwen2"]
        + ["-H", "cpu_x86", "--engine", "sglang", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def hub_cache_holding_the_tiny_model(home: Path, model_id: str) -> Path:
    """HF_HOME with ``model_id`` in its hub cache, as a download would have left it."""
    entry = home / "hub" / f"models--{model_id.replace('/', '--')}"
    snapshot = entry / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text("0" * 40)
    for file in TINY_MODEL.iterdir():
        (snapshot / file.name).symlink_to(file)
    return home


def test_the_printed_sglang_command_boots_the_tiny_model(tmp_path):
    require("sglang")
    printed = printed_command()
    argv, env, port = printed["argv"], printed["env"], int(printed["port"])
    assert argv[:3] == ["python", "-m", "sglang.launch_server"] and port == 30000
    assert port_is_free("127.0.0.1", port), "port 30000 is taken: the printed command cannot boot here"
    model_id = argv[argv.index("--model-path") + 1]
    home = hub_cache_holding_the_tiny_model(tmp_path / "hf", model_id)
    path = f"{SGLANG_PYTHON.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    spec = LaunchSpec(
        argv=argv,  # exactly as printed: `python` is the SGLang venv's through PATH
        env={**env, "HF_HOME": str(home), "PATH": path},
        host="127.0.0.1",
        port=port,
        health_path="/health",
        health_timeout_s=BOOT_TIMEOUT_S,
        log_path=tmp_path / "server.log",
        run_id="printed-sglang",
        engine=SGLANG,  # ready = /health and one real generation
    )
    with ProcessLauncher().start(spec) as server:
        server.wait_until_ready()
        assert generate_problem(server.base_url, 60) is None
    assert port_is_free("127.0.0.1", port)
