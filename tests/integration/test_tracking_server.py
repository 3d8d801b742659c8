"""`ledger mlflow sync` against the shared tracking stack: MLflow on PostgreSQL with S3 artifacts.

The stack is the one scripts/tracking-server/start.sh starts (.ci/run does, resource
"tracking-server"): PostgreSQL 15 on loopback, moto's S3 server, `mlflow server --serve-artifacts`.
Each test writes into its own experiment, so they share the server without seeing each other.
What several boxes do is played by several processes on this one.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from recipe_ledger.ledger.store import Ledger

from helpers.net import free_port
from helpers.pipeline import experiment_yaml, ledger, stand_in_repo, write_committed
from helpers.resources import require, tracking_server_settings

SECRET_KEY = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY-" + "7" * 8  # an S3 secret a box might have in its env
DB_PASSWORD = "pg-" + "s3cr3t" * 4


@pytest.fixture(autouse=True, scope="module")
def _stack() -> None:
    require("tracking-server")


@pytest.fixture()
def server() -> dict[str, str]:
    return tracking_server_settings()


@pytest.fixture()
def experiment() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(autouse=True)
def _no_ambient_tracking_uri(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def mlflow_client(uri: str):
    import mlflow

    return mlflow.MlflowClient(uri)


def entry_runs(uri: str, experiment: str) -> list:
    client = mlflow_client(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    return client.search_runs(
        [found.experiment_id], filter_string="tags.`ledger.role` = 'entry'", max_results=5000
    )


def sync_cmd(root: Path, uri: str, experiment: str) -> list[str]:
    return [sys.executable, "-m", "recipe_ledger.cli", "mlflow", "sync", "--root", str(root)] + [
        "--tracking-uri",
        uri,
        "--experiment",
        experiment,
    ]


def sync(root: Path, uri: str, experiment: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        sync_cmd(root, uri, experiment),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, **(env or {})},
    )


def small_ledger(root: Path, count: int) -> list[str]:
    """``count`` result and failure entries over two writers' chains (no run folders: quick to index)."""
    root.mkdir(parents=True, exist_ok=True)
    store = Ledger.init(root)
    ids = []
    for n in range(count):
        writer = ("box-a", "box-b")[n % 2]
        if n % 5 == 4:
            payload = {"subject": f"lane-{n}", "cause_class": "oom", "cause": "out of memory"}
            ids.append(store.append("failure", payload, writer=writer, git=None)["id"])
        else:
            payload = {"subject": f"lane-{n}", "metrics": {"output_tps_total": 100.0 + n}}
            ids.append(store.append("result", payload, writer=writer, git=None)["id"])
    return ids


def ledger_digest(root: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted((root / "ledger").glob("*")))).hexdigest()


def assert_each_entry_once(uri: str, experiment: str, ids: list[str]) -> None:
    runs = entry_runs(uri, experiment)
    per_entry = Counter(run.data.tags["ledger.entry_id"] for run in runs)
    assert per_entry == Counter(ids), (
        f"duplicates or losses: {per_entry - Counter(ids)} / {Counter(ids) - per_entry}"
    )
    assert all(run.info.status in ("FINISHED", "FAILED") for run in runs)


# ------------------------------------------------------------------------------ PostgreSQL and S3


def test_a_sync_fills_postgresql_and_s3_and_a_second_changes_nothing(tmp_path, server, experiment):
    repo = stand_in_repo(tmp_path)
    write_committed(repo, "experiments/x.yaml", experiment_yaml(free_port(), []))
    ledger(repo, "run", "experiments/x.yaml", "--no-mlflow")
    uri = server["MLFLOW_TRACKING_URI"]
    # A box's own secrets in its environment reach nothing the sync writes or prints.
    secrets_env = {"AWS_SECRET_ACCESS_KEY": SECRET_KEY, "DATABASE_URL": f"postgresql://u:{DB_PASSWORD}@db/x"}
    first = sync(repo, uri, experiment, env=secrets_env)
    assert first.returncode == 0 and first.stdout.startswith("2 created"), first.stdout + first.stderr
    assert f"{uri}/#/experiments/" in first.stdout and "workflowType=machine_learning" in first.stdout

    runs = entry_runs(uri, experiment)
    result = next(r for r in runs if r.data.tags["ledger.kind"] == "result")
    # The rows are in PostgreSQL (the server's backend store), the files in the S3 bucket.
    import boto3
    import psycopg

    with psycopg.connect(server["TRACKING_PG_URI"]) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM runs JOIN experiments USING (experiment_id)"
            " WHERE experiments.name = %s AND runs.lifecycle_stage = 'active'",
            (experiment,),
        ).fetchone()
    # parents, the result's measurement children (arms x repeats x points) and its summaries (one per arm
    # at the bar's point: tracking.compare), the calibration's children
    assert count == len(runs) + 2 * 2 * 2 + 2 + 2 * 2
    s3 = boto3.client(  # the admin's view of the bucket (moto takes any keys; start.sh's default)
        "s3",
        endpoint_url=server["TRACKING_S3_ENDPOINT"],
        region_name="us-east-1",
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
    )
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=server["TRACKING_S3_BUCKET"])["Contents"]]
    assert any(result.info.run_id in k and k.endswith("measurements.jsonl") for k in keys)

    second = sync(repo, uri, experiment)
    assert second.stdout.startswith("0 created, 0 updated, 2 unchanged"), second.stdout + second.stderr
    written = [
        first.stdout,
        first.stderr,
        *(str(r.data) for r in mlflow_client(uri).search_runs([result.info.experiment_id], max_results=1000)),
    ]
    written += [p.read_text() for p in (repo / "ledger").glob("*.jsonl")]
    assert not [text for text in written if SECRET_KEY in text or DB_PASSWORD in text]


# ------------------------------------------------------------------------------ several boxes at once


def test_four_syncs_at_once_index_each_entry_exactly_once(tmp_path, server, experiment):
    ids = small_ledger(tmp_path / "repo", 40)
    uri = server["MLFLOW_TRACKING_URI"]
    procs = [
        subprocess.Popen(
            sync_cmd(tmp_path / "repo", uri, experiment),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outputs
    assert_each_entry_once(uri, experiment, ids)
    assert sync(tmp_path / "repo", uri, experiment).stdout.startswith("0 created, 0 updated, 40 unchanged")


def test_an_interrupted_sync_resumes_where_it_stopped(tmp_path, server, experiment):
    ids = small_ledger(tmp_path / "repo", 60)
    uri = server["MLFLOW_TRACKING_URI"]
    proc = subprocess.Popen(
        sync_cmd(tmp_path / "repo", uri, experiment), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 300
    while len(entry_runs(uri, experiment)) < 5 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)  # no clean-up: what a power cut or an OOM kill leaves
    proc.wait()
    resumed = sync(tmp_path / "repo", uri, experiment)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_each_entry_once(uri, experiment, ids)


# ------------------------------------------------------------------------------ what goes wrong


class FailingProxy(http.server.ThreadingHTTPServer):
    """Forwards to the tracking server; from the ``fail_after``-th run creation on, answers 500."""

    def __init__(self, upstream: str, fail_after: int):
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream, self.fail_after, self.creations = upstream, fail_after, 0

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    server: FailingProxy

    def log_message(self, *_args) -> None:
        pass

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
        if self.path.endswith("/runs/create"):
            self.server.creations += 1
            if self.server.creations > self.server.fail_after:
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"error_code": "INTERNAL_ERROR", "message": "database unavailable"}')
                return
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type",)}
        request = urllib.request.Request(
            self.server.upstream + self.path, data=body, method=self.command, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, payload, kind = response.status, response.read(), response.headers.get("Content-Type")
        except urllib.error.HTTPError as error:
            status, payload, kind = error.code, error.read(), error.headers.get("Content-Type")
        self.send_response(status)
        self.send_header("Content-Type", kind or "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward


@pytest.fixture()
def failing_proxy(server) -> Iterator[FailingProxy]:
    proxy = FailingProxy(server["MLFLOW_TRACKING_URI"], fail_after=5)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    yield proxy
    proxy.shutdown()
    proxy.server_close()


def test_a_server_failing_mid_sync_gets_one_line_and_the_next_sync_completes(
    tmp_path, server, experiment, failing_proxy
):
    ids = small_ledger(tmp_path / "repo", 12)
    before = ledger_digest(tmp_path / "repo")
    failed = sync(tmp_path / "repo", failing_proxy.uri, experiment)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert (
        "failed mid-sync" in failed.stderr
        and "5 created" in failed.stderr
        and "Traceback" not in failed.stderr
    )
    assert len(failed.stderr.strip().splitlines()) == 1
    assert ledger_digest(tmp_path / "repo") == before
    done = sync(tmp_path / "repo", server["MLFLOW_TRACKING_URI"], experiment)
    assert done.returncode == 0 and done.stdout.startswith("7 created, 0 updated, 5 unchanged"), (
        done.stdout + done.stderr
    )
    assert_each_entry_once(server["MLFLOW_TRACKING_URI"], experiment, ids)


def test_a_server_that_is_down_or_not_mlflow_leaves_the_ledger_untouched_and_says_what_to_run(
    tmp_path, server, experiment
):
    small_ledger(tmp_path / "repo", 3)
    before = ledger_digest(tmp_path / "repo")
    down = sync(tmp_path / "repo", f"http://127.0.0.1:{free_port()}", experiment)
    assert down.returncode == 3 and "does not answer" in down.stderr and "ledger mlflow sync" in down.stderr
    not_mlflow = sync(tmp_path / "repo", server["TRACKING_S3_ENDPOINT"], experiment)  # the S3 API, say
    assert not_mlflow.returncode == 3 and "not as an MLflow tracking server" in not_mlflow.stderr
    wrong = sync(tmp_path / "repo", "mlflow.lab:5000", experiment)
    assert wrong.returncode == 2 and "is not a tracking URI" in wrong.stderr
    for result in (down, not_mlflow, wrong):
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert ledger_digest(tmp_path / "repo") == before


def test_wrong_s3_credentials_on_the_server_are_one_line_about_its_artifact_store(
    tmp_path, server, experiment
):
    """A server whose S3 keys the store refuses (moto with authentication on, keys it never issued)."""
    s3_port, mlflow_port = free_port(), free_port()
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}  # moto checks every request's keys
    started = [
        subprocess.Popen(
            [str(bin_dir / "moto_server"), "-H", "127.0.0.1", "-p", str(s3_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    ]
    server_env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "AKIANOTISSUED0000000",
        "AWS_SECRET_ACCESS_KEY": "not-a-key-the-store-knows",
        "MLFLOW_S3_ENDPOINT_URL": f"http://127.0.0.1:{s3_port}",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    argv = [str(bin_dir / "mlflow"), "server", "--backend-store-uri", f"sqlite:///{tmp_path / 'm.db'}"]
    argv += ["--artifacts-destination", "s3://bucket/artifacts", "--serve-artifacts"]
    argv += ["--host", "127.0.0.1", "--port", str(mlflow_port), "--workers", "1"]
    with open(tmp_path / "mlflow.log", "w") as log:
        started.append(
            subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=server_env, start_new_session=True
            )
        )
    try:
        uri = f"http://127.0.0.1:{mlflow_port}"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(uri + "/health", timeout=2).close()
                break
            except OSError:
                time.sleep(0.5)
        repo = tmp_path / "repo"
        small_ledger(repo, 5)  # its failure entry has a file to upload (failure.txt)
        before = ledger_digest(repo)
        result = sync(repo, uri, experiment)
        assert result.returncode == 3, result.stdout + result.stderr
        assert "could not store the run's files in its artifact store" in result.stderr, result.stderr
        assert "AWS_ACCESS_KEY_ID" in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert "not-a-key-the-store-knows" not in result.stderr and ledger_digest(repo) == before
    finally:
        for process in started:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
