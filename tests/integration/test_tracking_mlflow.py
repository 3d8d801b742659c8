"""`ledger mlflow sync` against real MLflow stores: a local SQLite file and a tracking server over HTTP.

The stand-in pipeline (tests/helpers/pipeline.py: a fake server, a probe script) produces a real
ledger and run folder; these tests index them and read back what MLflow holds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.net import free_port
from helpers.pipeline import entries, experiment_yaml, ledger, stand_in_repo, write_committed
from helpers.resources import require

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
SERVER_START_S = 90


@pytest.fixture(autouse=True, scope="module")
def _mlflow_installed() -> None:
    require("mlflow")


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """The pipeline's own: a git repository with a ledger, the cpu-only box and a probe script."""
    return stand_in_repo(tmp_path)


@pytest.fixture(autouse=True)
def _no_ambient_tracking_uri(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the subprocesses must use what the test says


def client(uri: str):
    import mlflow  # after require("mlflow"): the module is importable only with the tracking extra

    return mlflow.MlflowClient(uri)


def local_uri(root: Path) -> str:
    return f"sqlite:///{root / 'mlflow.db'}"


def run_experiment(root: Path, *flags: str) -> None:
    write_committed(root, "experiments/x.yaml", experiment_yaml(free_port(), list(flags)))
    ledger(root, "run", "experiments/x.yaml", "--no-mlflow", check=not flags)


def sync(root: Path, *args: str) -> str:
    return ledger(root, "mlflow", "sync", "--root", str(root), *args).stdout


def parent_runs(uri: str, kind: str | None = None) -> list:
    store = client(uri)
    experiment = store.get_experiment_by_name("recipe-ledger")
    where = "tags.`ledger.role` = 'entry'" + (f" and tags.`ledger.kind` = '{kind}'" if kind else "")
    return store.search_runs([experiment.experiment_id], filter_string=where)


def children(uri: str, run_id: str) -> list:
    store = client(uri)
    experiment_id = store.get_run(run_id).info.experiment_id
    return store.search_runs([experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'")


def _compare_runs(link: str) -> str:
    """The run ids of MLflow's compare-runs link (``#/compare-runs?runs=[...]&...``), as JSON."""
    query = urllib.parse.urlsplit(link.split("#", 1)[1]).query
    return urllib.parse.parse_qs(query)["runs"][0]


def assert_result_run(uri: str, result_entry: dict) -> str:
    (run,) = parent_runs(uri, "result")
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    record = result_entry["payload"]["experiment"]
    assert run.info.run_name == record["run_id"] and run.info.status == "FINISHED"
    assert tags["ledger.entry_id"] == result_entry["id"] and tags["ledger.status"] == "active"
    assert (
        tags["verdict.fast.output_tps_total.c4"] == "win"
        and tags["git.commit"] == result_entry["git"]["commit"]
    )
    assert params["arm.control.fingerprint"] == record["arms"]["control"]["fingerprint"]
    assert params["instrument.probe.version"].startswith("command:")
    assert params["experiment.spec_sha256"] == record["spec_sha256"]
    # The bars by position: the same six columns whatever the experiment (docs/mlflow.md).
    assert tags["bar1.verdict"] == "win" and tags["bar1"].startswith("fast vs control: output_tps_total")
    assert 25 < metrics["bar1.effect_pct"] < 35  # a signed percentage
    assert metrics["bar1.ci_low_pct"] <= metrics["bar1.effect_pct"] <= metrics["bar1.ci_high_pct"]
    assert "bar1.effect_pct=%" in tags["ledger.units"]
    assert not any(name.startswith(("control.", "fast.")) for name in metrics)  # medians: on the summaries
    kids = children(uri, run.info.run_id)
    summaries = [k for k in kids if k.data.tags.get("ledger.role") == "summary"]
    medians = result_entry["payload"]["metrics"]
    assert {(k.data.params["arm"], k.data.params["point"]) for k in summaries} == {
        ("control", "4"),
        ("fast", "4"),
    }
    for summary in summaries:
        arm = summary.data.params["arm"]
        assert summary.data.metrics["output_tps_total"] == medians[f"{arm}.c4.output_tps_total"]
    assert sorted(summary.info.run_id for summary in summaries) == sorted(
        json.loads(_compare_runs(tags["ledger.compare"]))
    )
    kids = [k for k in kids if k.data.tags.get("ledger.role") == "measurement"]
    assert len(kids) == 2 * 2 * 2  # arms x repeats x points
    assert {(k.data.params["arm"], k.data.params["repeat"], k.data.params["point"]) for k in kids} == {
        (arm, str(r), str(p)) for arm in ("control", "fast") for r in (1, 2) for p in (1, 4)
    }
    assert all("output_tps_total" in k.data.metrics and k.info.status == "FINISHED" for k in kids)
    assert all("output_tps_total=tok/s" in k.data.tags["ledger.units"] for k in kids)
    assert not any(name.startswith(("control.", "fast.")) for k in kids for name in k.data.metrics)
    files = {a.path for a in client(uri).list_artifacts(run.info.run_id)}
    assert {"plan.json", "measurements.jsonl", "summary.json", "server-control-r1.log", "raw"} <= files
    return run.info.run_id


# ------------------------------------------------------------------------------ a local SQLite store


def test_sync_indexes_a_run_once_and_mirrors_a_retraction(repo):
    run_experiment(repo)
    uri = local_uri(repo)
    first = sync(repo)
    assert first.startswith("2 created, 0 updated, 0 unchanged"), first
    _calibration_entry, result_entry = entries(repo)
    run_id = assert_result_run(uri, result_entry)
    (calibration_run,) = parent_runs(uri, "calibration")
    assert len(children(uri, calibration_run.info.run_id)) == 2 * 2  # the A/A launches x points
    assert (repo / "mlartifacts" / "recipe-ledger").is_dir()  # beside mlflow.db, not ./mlruns

    again = sync(repo)
    assert again.startswith("0 created, 0 updated, 2 unchanged"), again
    assert len(parent_runs(uri)) == 2 and len(children(uri, run_id)) == 8 + 2  # measurements, summaries

    ledger(repo, "retract", result_entry["id"][:12], "--reason", "the probe was miscalibrated")
    after = sync(repo)
    assert after.startswith("0 created, 1 updated, 1 unchanged"), after
    run = client(uri).get_run(run_id)
    assert run.data.tags["ledger.status"] == "retracted"
    assert run.info.status == "KILLED" and run.info.run_name.startswith("[retracted] ")
    assert {k.info.status for k in children(uri, run_id)} == {"KILLED"}
    assert "the probe was miscalibrated" in run.data.tags["ledger.status_note"]
    assert {k.data.tags["ledger.status"] for k in children(uri, run_id)} == {"retracted"}
    assert len(parent_runs(uri)) == 2


def two_instrument_yaml(port: int) -> str:
    """The stand-in experiment measured by two instruments, a bar on each: two calibrations, the
    result's ``experiment.calibration`` naming only the first, the other one a ref."""
    spec = json.loads(experiment_yaml(port, []))
    probe = spec["instruments"][0]
    spec["instruments"] = [probe, {**probe, "name": "probe-b"}]
    spec["bars"] = [{**spec["bars"][0], "instrument": name} for name in ("probe", "probe-b")]
    return json.dumps(spec)


def test_a_result_links_both_calibrations_and_a_later_note_tags_its_run(repo):
    write_committed(repo, "experiments/x.yaml", two_instrument_yaml(free_port()))
    ledger(repo, "run", "experiments/x.yaml", "--no-mlflow")
    calibrations = [e for e in entries(repo) if e["kind"] == "calibration"]
    (result_entry,) = [e for e in entries(repo) if e["kind"] == "result"]
    assert len(calibrations) == 2, calibrations
    assert sync(repo).startswith("3 created, 0 updated, 0 unchanged")
    uri = local_uri(repo)
    (run,) = parent_runs(uri, "result")
    tags = run.data.tags
    by_instrument = {c["payload"]["instrument"]: c["id"][:12] for c in calibrations}
    assert set(tags["ledger.calibrations"].split(", ")) == set(by_instrument.values())
    for instrument, short in by_instrument.items():
        assert tags[f"calibration.{instrument}.output_tps_total"].startswith(f"{short}: c1 cv ")
        bar = f"verdict.fast.{instrument}/output_tps_total.c4.calibration"
        assert tags[bar].startswith(f"{short} (cv ") and tags[bar].endswith("%)")
    for calibration_run in parent_runs(uri, "calibration"):
        assert calibration_run.data.tags["ledger.used_by"] == result_entry["id"][:12]

    note = ledger(
        repo, "note", "Correction: the probe counted the warm-up", "--ref", result_entry["id"][:12]
    ).stdout.strip()
    after = sync(repo)
    assert after.startswith("0 created, 1 updated, 2 unchanged"), after
    tags = client(uri).get_run(run.info.run_id).data.tags
    assert tags["ledger.notes"] == note[:12]
    assert tags[f"ledger.note.{note[:12]}"] == "Correction: the probe counted the warm-up"
    assert "Correction: the probe counted the warm-up" in tags["mlflow.note.content"]
    assert tags["ledger.status"] == "active" and set(tags["ledger.calibrations"].split(", ")) == set(
        by_instrument.values()
    )
    assert sync(repo).startswith("0 created, 0 updated, 3 unchanged")


def test_ledger_run_indexes_at_once_and_a_failure_gets_its_cause(repo):
    write_committed(repo, "experiments/x.yaml", experiment_yaml(free_port(), []))
    out = ledger(repo, "run", "experiments/x.yaml").stdout
    assert "indexed in MLflow: 2 created" in out, out
    # The candidate never boots: a failure entry (after a fresh A/A calibration: the port, part of
    # the control's argv, is new, so the first calibration does not match).
    run_experiment(repo, "--oom-after", "0")
    assert sync(repo).startswith("2 created, 0 updated, 2 unchanged")
    (failure,) = parent_runs(local_uri(repo), "failure")
    assert failure.data.tags["ledger.cause_class"] == "oom" and failure.info.status == "FAILED"
    experiment = client(local_uri(repo)).get_experiment_by_name("recipe-ledger")
    assert "params.`arm`" in experiment.tags["mlflow.sharedViewState.ledger"]
    text = client(local_uri(repo)).download_artifacts(failure.info.run_id, "failure.txt", str(repo / "dl"))
    assert "out of memory" in Path(text).read_text().lower()


def test_an_exported_store_is_served_from_its_folder(repo, tmp_path, mlflow_server):
    run_experiment(repo)
    sync(repo)
    dest = tmp_path / "export"
    out = ledger(repo, "mlflow", "export", str(dest), "--root", str(repo)).stdout
    assert "exported" in out and (dest / "mlflow.db").is_file()
    uri = mlflow_server(dest, f"sqlite:///{dest / 'mlflow.db'}")
    (run,) = parent_runs(uri, "result")
    paths = [f["path"] for f in list_artifacts_over_http(uri, run.info.run_id)]
    assert "measurements.jsonl" in paths  # served by the server from the copied mlartifacts/


def list_artifacts_over_http(uri: str, run_id: str) -> list[dict]:
    """What the UI's artifact browser asks for (the server resolves the run's artifact location)."""

    with urllib.request.urlopen(
        f"{uri}/ajax-api/2.0/mlflow/artifacts/list?run_id={run_id}", timeout=30
    ) as response:
        return json.load(response).get("files", [])


# ------------------------------------------------------------------------------ a tracking server


@pytest.fixture()
def mlflow_server(tmp_path) -> Iterator:
    """Start `mlflow server` (one worker, a free port) in a folder; stopped after the test."""
    started: list[subprocess.Popen] = []

    def start(cwd: Path, backend_uri: str, *extra: str) -> str:
        port = free_port()
        argv = [
            str(Path(sys.executable).parent / "mlflow"),
            "server",
            "--backend-store-uri",
            backend_uri,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            *extra,
        ]
        with open(tmp_path / f"mlflow-server-{port}.log", "w") as log:  # the child keeps its own handle
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
            )
        started.append(process)
        uri = f"http://127.0.0.1:{port}"
        wait_for_health(uri, process, tmp_path / f"mlflow-server-{port}.log")
        return uri

    yield start
    for process in started:
        stop(process)


def wait_for_health(uri: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"mlflow server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    pytest.fail(f"mlflow server did not answer /health within {SERVER_START_S}s:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    """The server's own process group (it was started in a new session): the CLI and its uvicorn worker."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_sync_over_http_to_a_tracking_server_with_proxied_artifacts(repo, tmp_path, mlflow_server):
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    # As a shared server runs for several boxes: artifacts uploaded through the server, not to a path.
    uri = mlflow_server(
        server_dir,
        f"sqlite:///{server_dir / 'mlflow.db'}",
        "--artifacts-destination",
        str(server_dir / "artifacts"),
    )
    run_experiment(repo)
    out = sync(repo, "--tracking-uri", uri)
    assert out.startswith("2 created"), out
    assert_result_run(uri, entries(repo)[-1])
    assert (server_dir / "artifacts").is_dir()  # the files went through the server
    assert sync(repo, "--tracking-uri", uri).startswith("0 created, 0 updated, 2 unchanged")
    assert not (repo / "mlflow.db").exists()  # nothing written to the local default


def test_a_server_that_does_not_answer_fails_fast_and_says_the_ledger_is_safe(repo):
    result = ledger(
        repo,
        "mlflow",
        "sync",
        "--root",
        str(repo),
        "--tracking-uri",
        f"http://127.0.0.1:{free_port()}",
        check=False,
    )
    assert result.returncode == 3, result.stdout + result.stderr
    # "does not answer" is the reachability check's refusal, made before MLflow's client is used:
    # failing fast is that path being taken, not a timing (MLflow's own retries take minutes).
    assert "does not answer" in result.stderr and "nothing was lost" in result.stderr
