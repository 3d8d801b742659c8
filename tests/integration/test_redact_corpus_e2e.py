"""The planted-secret corpus end to end: a real `ledger run` (fake server, probe script), a boot
failure, the tables and a real MLflow SQLite store; every file written and everything printed is
searched for the needles. The unit twin (every ledger kind, the site) is
tests/unit/test_redact_corpus.py.

The server is a hostile wrapper around the fake server: it prints its argv, its environment and the
raw value of a secret with no recognisable shape, as real servers do at start-up.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

from helpers import FAKE_SERVER
from helpers.net import free_port
from helpers.pipeline import ledger, stand_in_repo, write_committed
from helpers.resources import require

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

NO_SHAPE = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYnoShape"  # an AWS secret access key: only its name says so
ARGV_SECRETS = [
    "--model",
    "https://alice:ArgvUrlPass9@hub.example.com/org/model",
    "--password",
    "ArgvPass4321",
    "--api-key=sk-" + "k" * 32,
    "--hf-token",
    "hf_" + "Hf0" * 8,
]
ENV = {
    "MY_PASS": "ArmEnvPass1",
    "AWS_SECRET_ACCESS_KEY": NO_SHAPE,
    "LAB_DSN": "postgres-dsn-value",  # secret only because $RECIPE_LEDGER_REDACT_NAMES lists it
    "SGLANG_DSV4_ADAPTIVE_PREFILL_TOKEN_PRODUCT": "738197504",
}
NEEDLES = [
    "ArgvUrlPass9",
    "ArgvPass4321",
    "k" * 32,
    "Hf0Hf0Hf0",
    "ArmEnvPass1",
    "noShape",
    "postgres-dsn-value",
]
NEEDLES += ["dXNlcjpTM2NyM3Q", "HeaderBearer123456", "LogPassword77"]
USER_NAMES = {"RECIPE_LEDGER_REDACT_NAMES": "LAB_DSN"}

HOSTILE_SERVER = textwrap.dedent(f"""\
    import os, sys
    args = sys.argv[1:]
    print("hostile: argv", " ".join(args), flush=True)
    print("hostile: env", " ".join(f"{{k}}={{os.environ.get(k, '')}}" for k in {sorted(ENV)!r}), flush=True)
    print("hostile: the aws key is", os.environ.get("AWS_SECRET_ACCESS_KEY"), flush=True)
    print("hostile: Authorization: Basic dXNlcjpTM2NyM3Q=", flush=True)
    print("hostile: authorization: Bearer HeaderBearer123456", flush=True)
    print("hostile: db password: LogPassword77", flush=True)
    keep, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--model", "--password", "--hf-token"):
            skip = True
        elif not arg.startswith("--api-key="):
            keep.append(arg)
    if "--die" in keep:
        print("hostile: dying with password=LogPassword77", flush=True)
        sys.exit(1)
    os.execv(sys.executable, [sys.executable, {str(FAKE_SERVER)!r}, *keep])
    """)


@pytest.fixture(scope="module", autouse=True)
def _mlflow_installed() -> None:
    require("mlflow")


def experiment(port: int, *extra: str) -> str:
    server = [sys.executable, "scripts/hostile_server.py", *ARGV_SECRETS, "--prefix-cache", *extra]
    return json.dumps(
        {
            "name": "corpus",
            "hypothesis": "the fast arm is faster; creds at https://alice:ArgvUrlPass9@hub.example.com",
            "box": "cpu-only",
            "engine": "none",
            "server": {"launcher": "process", "port": port, "health_timeout_s": 30},
            "control": {"argv": server, "env": ENV},
            "candidates": {"fast": {"argv": server, "env": ENV}},
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
            "points": [1],
            "repeats": 2,
            "bars": [{"metric": "output_tps_total", "point": 1, "direction": "higher", "min_effect": 0.05}],
            "calibration": {"repeats": 2},
        }
    )


def _found(text: str) -> list[str]:
    return [needle for needle in NEEDLES if needle in text]


def test_no_needle_in_any_output_of_a_run_a_failure_the_tables_and_mlflow(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    root = stand_in_repo(tmp_path)
    (root / "scripts" / "hostile_server.py").write_text(HOSTILE_SERVER)
    write_committed(root, "experiments/ok.yaml", experiment(free_port()))
    write_committed(root, "experiments/dies.yaml", experiment(free_port(), "--die"))
    uri = f"sqlite:///{root / 'mlflow.db'}"
    printed = [
        ledger(root, "run", "--plan", "experiments/ok.yaml", env=USER_NAMES),
        ledger(root, "calibrate", "--plan", "experiments/ok.yaml", env=USER_NAMES),
        ledger(root, "run", "experiments/ok.yaml", "--tracking-uri", uri, env=USER_NAMES),
        ledger(root, "run", "experiments/dies.yaml", "--no-mlflow", env=USER_NAMES, check=False),
        ledger(root, "mlflow", "sync", "--root", str(root), "--tracking-uri", uri, env=USER_NAMES),
        ledger(root, "tables", "--root", str(root), env=USER_NAMES),
        ledger(root, "log", "--root", str(root), env=USER_NAMES),
    ]
    assert printed[3].returncode == 5, printed[3].stdout + printed[3].stderr
    kinds = [json.loads(line)["kind"] for line in (root / "ledger").glob("*.jsonl").__next__().open()]
    assert "result" in kinds and "failure" in kinds

    leaks = {f"output of call {i}": _found(p.stdout + p.stderr) for i, p in enumerate(printed)}
    for folder in ("ledger", "runs", "tables", "mlartifacts"):
        files = [p for p in (root / folder).rglob("*") if p.is_file()]
        assert files, folder
        for path in files:
            leaks[str(path.relative_to(root))] = _found(path.read_text(encoding="utf-8", errors="replace"))
    leaks["mlflow.db"] = _found((root / "mlflow.db").read_bytes().decode("utf-8", errors="replace"))
    assert {where: found for where, found in leaks.items() if found} == {}

    # Redacted, not dropped: the count stays, the logs say where a secret was.
    plan = next((root / "runs").glob("corpus-*/plan.json")).read_text()
    assert "738197504" in plan and "[REDACTED]" in plan
    logs = "".join(p.read_text() for p in (root / "runs").glob("corpus-*/server-*.log"))
    assert "hostile: the aws key is [REDACTED]" in logs
