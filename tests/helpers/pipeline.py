"""The stand-in pipeline of ``ledger run``: a fake server (fake_server.py) and a probe script.

The probe reports a throughput that depends on the arm, so the verdict is known in advance; the
run and MLflow tests drive the real CLI in a subprocess against a temporary git repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import FAKE_SERVER

REPO = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""\
    import json, os, signal, sys, urllib.request
    arm, point, repeat, base_url = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    assert urllib.request.urlopen(base_url + "/health").status == 200
    if os.environ.get("PROBE_INTERRUPT") and arm == "fast":
        os.kill(int(os.environ["PROBE_INTERRUPT"]), signal.SIGINT)
    speed = {"control": 100.0, "aa-control": 100.0, "fast": 130.0, "same": 100.2}[arm]
    jitter = 1 + 0.002 * ((repeat * 7 + point) % 3 - 1)   # repeats within 0.4%: a tight instrument
    print(json.dumps({"output_tps_total": speed * point * jitter}))
    """)


def experiment_yaml(port: int, candidate_flags: list[str], name: str = "fast") -> str:
    server = [sys.executable, str(FAKE_SERVER), "--prefix-cache"]
    return json.dumps(
        {
            "name": "wiring",
            "hypothesis": "the fast arm is faster",
            "box": "cpu-only",
            "engine": "none",
            "server": {"launcher": "process", "port": port, "health_timeout_s": 30},
            "control": {"argv": server},
            "candidates": {name: {"argv": server + candidate_flags}},
            "instruments": [
                {
                    "name": "probe",
                    "kind": "command",
                    "command": [
                        sys.executable,
                        "scripts/probe.py",
                        "{arm}",
                        "{point}",
                        "{repeat}",
                        "{base_url}",
                    ],
                }
            ],
            "points": [1, 4],
            "repeats": 2,
            "bars": [{"metric": "output_tps_total", "point": 4, "direction": "higher", "min_effect": 0.05}],
            "calibration": {"repeats": 2},
        }
    )


def stand_in_repo(tmp_path: Path) -> Path:
    """A git repository with a ledger, the cpu-only box and the probe script, under ``tmp_path``."""
    root = tmp_path / "repo"
    (root / "recipes" / "boxes").mkdir(parents=True)
    (root / "recipes" / "models").mkdir()
    shutil.copy(REPO / "recipes" / "boxes" / "cpu-only.yaml", root / "recipes" / "boxes")
    (root / "scripts").mkdir()
    (root / "scripts" / "probe.py").write_text(PROBE)
    (root / "experiments").mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    commit(root, "init")
    ledger(root, "init")
    return root


def commit(root: Path, message: str = "what the run measures") -> None:
    """Commit everything: `ledger run` refuses a tree whose experiment or scripts differ from HEAD."""
    git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True)


def write_committed(root: Path, path: str, text: str) -> None:
    (root / path).write_text(text)
    commit(root)


def ledger(
    root: Path, *args: str, env: dict | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", *args, "--root", str(root)]
        if args[0] in ("init", "verify")
        else [sys.executable, "-m", "recipe_ledger.cli", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def entries(root: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "recipe_ledger.cli", "log", "--json", "--root", str(root)],
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]
