"""Adding an engine and an instrument is one file each plus its registration (issue 23).

A third party's package, made here in a temporary folder: ``echo_engine.py`` (an ``Engine``
subclass) and ``echo_instrument.py`` (an ``InstrumentKind``), registered through the two
entry-point groups in a ``dist-info`` folder on PYTHONPATH. Nothing in the project is edited. The
real CLI then plans (``ledger run --plan``) and runs a stand-in experiment that names both, against
the stand-in server, and records a result whose arms carry the plugin's engine and whose bar was
measured by the plugin's instrument.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import FAKE_SERVER
from helpers.net import free_port
from helpers.pipeline import entries, ledger, stand_in_repo, write_committed
from helpers.plugins import write_distribution

pytestmark = pytest.mark.integration

ENGINE_FILE = textwrap.dedent('''\
    """A serving engine the tool has never heard of: /health readiness, vLLM's cache reset."""
    from recipe_ledger.engines.base import Engine
    from recipe_ledger.launch.health import request_status


    class EchoEngine(Engine):
        name = "echo"
        program_label = "the echo server"

        def reset_prefix_cache(self, base_url, timeout_s):
            return request_status(base_url + "/reset_prefix_cache", method="POST", timeout_s=timeout_s) == 200


    ENGINE = EchoEngine()
    ''')

INSTRUMENT_FILE = textwrap.dedent('''\
    """A client the tool has never heard of: asks the server's /health, reports an arm's speed."""
    import json
    import urllib.request

    from recipe_ledger.instruments.base import InstrumentKind, Measurement, sha256_file

    SPEED = {"control": 100.0, "aa-control": 100.0, "fast": 130.0}


    class EchoProbe(InstrumentKind):
        kind = "echo_probe"
        client = "echo-probe"
        summary = "the echo server's own probe"

        def measure(self, run):
            ctx = run.ctx
            assert urllib.request.urlopen(ctx.base_url + "/health").status == 200
            jitter = 1 + 0.002 * ((ctx.repeat * 7 + ctx.point) % 3 - 1)
            metrics = {"output_tps_total": SPEED[ctx.arm] * ctx.point * jitter}
            ctx.out_dir.mkdir(parents=True, exist_ok=True)
            raw = ctx.out_dir / f"{ctx.stem}.echo.json"
            raw.write_text(json.dumps(metrics))
            return Measurement(self.kind, "echo-probe 1", ctx, metrics, raw, sha256_file(raw), 0.01)


    INSTRUMENT = EchoProbe()
    ''')


def install_plugin_package(folder: Path) -> str:
    """The two files and their registration; returns the PYTHONPATH that makes them importable."""
    write_distribution(
        folder,
        {"echo_engine": ENGINE_FILE, "echo_instrument": INSTRUMENT_FILE},
        {
            "recipe_ledger.engines": "echo = echo_engine:ENGINE",
            "recipe_ledger.instruments": "echo_probe = echo_instrument:INSTRUMENT",
        },
    )
    return os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)


def experiment(port: int) -> str:
    server = [sys.executable, str(FAKE_SERVER), "--prefix-cache"]
    return json.dumps(
        {
            "name": "plugin-run",
            "hypothesis": "the fast arm is faster on a plugin engine, by a plugin instrument",
            "box": "cpu-only",
            "engine": "echo",
            "server": {"launcher": "process", "port": port, "health_timeout_s": 30},
            "control": {"argv": server},
            "candidates": {"fast": {"argv": [*server, "--delay", "0"]}},
            "instruments": [{"name": "probe", "kind": "echo_probe"}],
            "points": [1, 4],
            "repeats": 2,
            "bars": [{"metric": "output_tps_total", "point": 4, "direction": "higher", "min_effect": 0.05}],
            "calibration": {"repeats": 2},
        }
    )


def test_a_plugin_engine_and_instrument_plan_run_and_record(tmp_path):
    root = stand_in_repo(tmp_path)
    env = {"PYTHONPATH": install_plugin_package(tmp_path / "plugins"), "RECIPE_LEDGER_WRITER": "plugin-box"}
    write_committed(root, "experiments/x.yaml", experiment(free_port()))

    planned = ledger(root, "run", "experiments/x.yaml", "--plan", env=env)
    # The plan names neither engine nor kind; that it planned at all is the point (without the
    # registration the same file is refused, below), and it lists the plugin's instrument.
    assert "instruments ['probe']" in planned.stdout

    ledger(root, "run", "experiments/x.yaml", "--no-mlflow", env=env)
    result = [e for e in entries(root) if e["kind"] == "result"][-1]["payload"]
    assert {arm["engine"] for arm in result["experiment"]["arms"].values()} == {"echo"}
    assert result["experiment"]["instruments"] == {"probe": "echo-probe 1"}
    assert result["verdict"] == "win" and result["experiment"]["bars"][0]["effect"] > 0.25


def test_without_the_registration_the_same_experiment_is_refused_naming_the_engine(tmp_path):
    root = stand_in_repo(tmp_path)
    write_committed(root, "experiments/x.yaml", experiment(free_port()))
    refused = ledger(root, "run", "experiments/x.yaml", "--plan", check=False)
    assert refused.returncode == 2
    assert "echo" in refused.stdout + refused.stderr and "Traceback" not in refused.stderr
