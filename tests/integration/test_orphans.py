"""Nothing orphaned, no impostor measured: `ledger run` killed with SIGKILL, and a port taken over
while the server still loads, against real processes (the stand-in server of tests/helpers/, a
real docker daemon, and a real vLLM where its serving venv is installed).

Every wait polls a condition with a deadline; nothing sleeps on luck.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from recipe_ledger import runs
from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.launch import BootFailure, LaunchSpec, ProcessLauncher, port_is_free, procs

from helpers import FAKE_SERVER
from helpers.net import free_port, nothing_listens_on
from helpers.pipeline import entries, experiment_yaml, ledger, stand_in_repo, write_committed
from helpers.resources import require
from helpers.waiting import wait_for

HOST = "127.0.0.1"
SRC = Path(__file__).resolve().parents[2] / "src"


def pid_is_gone(pid: int) -> bool:
    stat = procs.stat_of(pid)
    return stat is None or stat.state == "Z"


def processes_naming(text: str) -> list[int]:
    """Live processes whose command line holds ``text`` (this test's own port or marker)."""
    return [s.pid for s in procs.all_stats() if text in procs.command_line(s.pid) and s.pid != os.getpid()]


@contextlib.contextmanager
def impostor_on(port: int) -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in impostor: a plain HTTP server answering /health 200 on ``port``, started by the test."""
    process = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: not nothing_listens_on(port), timeout_s=30), "the impostor did not bind"
        yield process
    finally:
        process.kill()
        process.wait()


def log_says(path: Path, words: str) -> bool:
    return path.is_file() and words in path.read_text(errors="replace")


# ------------------------------------------------------------------------- kill -9 of `ledger run`

# The probe holds the candidate's first launch in the middle of a point until the test kills the
# runner: by then the calibration and the control's first launch are on disk.
HOLDING_PROBE = textwrap.dedent("""\
    import json, os, sys, time
    arm, point, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if arm == os.environ.get("PROBE_HOLD_ARM", "fast") and repeat == 1:
        open(os.environ["PROBE_HOLDING"], "w").close()
        time.sleep(600)
    print(json.dumps({"output_tps_total": {"fast": 130.0}.get(arm, 100.0) * point}))
    """)


def test_kill_9_of_ledger_run_stops_its_server_and_the_next_command_records_the_run(tmp_path) -> None:
    repo = stand_in_repo(tmp_path)
    port, pid_file, holding = free_port(), tmp_path / "pids", tmp_path / "holding"
    (repo / "scripts" / "probe.py").write_text(HOLDING_PROBE)
    write_committed(
        repo, "experiments/x.yaml", experiment_yaml(port, ["--spawn-child", "--pid-file", str(pid_file)])
    )
    note_id = ledger(repo, "note", "before the run").stdout.split()[-1][:12]
    runner = subprocess.Popen(
        [sys.executable, "-m", "recipe_ledger.cli", "run", "experiments/x.yaml", "--no-mlflow"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PROBE_HOLDING": str(holding)},
    )
    try:
        assert wait_for(holding.exists, timeout_s=240), "the run never reached the candidate's launch"
        leader, child = (int(p) for p in pid_file.read_text().split())
        assert not pid_is_gone(leader) and not port_is_free(HOST, port)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    finally:
        if runner.poll() is None:
            runner.kill()
    # The watchdog stops the server, its worker and the probe; then it is gone itself.
    assert wait_for(lambda: pid_is_gone(leader) and pid_is_gone(child), timeout_s=60), "server left running"
    assert wait_for(lambda: port_is_free(HOST, port), timeout_s=30)
    assert wait_for(lambda: not processes_naming(str(holding)), timeout_s=30), "the probe was left running"
    assert wait_for(lambda: not processes_naming(f"--parent {runner.pid}"), timeout_s=30), (
        "a watchdog lingers"
    )
    (folder,) = runs.locked_runs(repo / "runs")  # half-written and still locked by the dead runner
    # Its A/A calibration was recorded before it died; the run itself has no entry yet.
    assert [e["kind"] for e in entries(repo)] == ["note", "calibration"]

    # The next command that touches runs/ records the abandoned run, once.
    shown = ledger(repo, "show", note_id)
    assert "recorded failure entry" in shown.stderr
    ledger(repo, "show", note_id)
    failures = [e for e in entries(repo) if e["kind"] == "failure"]
    assert len(failures) == 1, failures
    payload = failures[0]["payload"]
    assert f"the ledger process {runner.pid} died" in payload["cause"]
    assert "experiment wiring, arms control, fast" in payload["cause"]
    assert "A/A control#1 p1 p4; A/A control#2 p1 p4; control#1 p1 p4" in payload["cause"]
    assert payload["conditions"]["run_id"] == folder.name and payload["conditions"]["stage"] == "abandoned"
    assert not (folder / runs.LOCK).exists()
    ledger(repo, "verify")


# ------------------------------------------------------------------------- an impostor during boot


def late_binding_spec(tmp_path: Path, port: int) -> LaunchSpec:
    """A stand-in that binds its port only once a file that never appears exists: a server loading."""
    return LaunchSpec(
        argv=[sys.executable, str(FAKE_SERVER), "--port", str(port), "--bind-when", str(tmp_path / "never")],
        env={},
        host=HOST,
        port=port,
        health_path="/health",
        health_timeout_s=60,
        log_path=tmp_path / "server-control-r1.log",
        run_id="impostor-test",
        engine=VLLM,
    )


def test_an_impostor_bound_while_the_server_loads_is_refused_and_ours_is_stopped(tmp_path) -> None:
    port = free_port()
    spec = late_binding_spec(tmp_path, port)
    outcome: dict[str, BaseException] = {}

    def launch() -> None:
        try:
            ProcessLauncher().start(spec).stop()
        except BaseException as error:  # noqa: BLE001 - the thread hands it to the test
            outcome["error"] = error

    thread = threading.Thread(target=launch)
    thread.start()
    try:
        assert wait_for(lambda: log_says(spec.log_path, "loading the model"), timeout_s=30)
        with impostor_on(port) as impostor:
            thread.join(120)
            assert not thread.is_alive()
            failure = outcome.get("error")
            assert isinstance(failure, BootFailure), failure
            assert failure.cause == "impostor"
            assert f"pid {impostor.pid}" in str(failure) and "nothing was measured" in str(failure)
            assert impostor.poll() is None, "someone else's process is refused, never killed"
    finally:
        thread.join(120)
    assert not processes_naming(str(tmp_path / "never")), "our loading server must be stopped"


def test_ledger_run_records_an_impostor_as_a_failure_and_measures_nothing(tmp_path) -> None:
    repo = stand_in_repo(tmp_path)
    port = free_port()
    spec = json.loads(experiment_yaml(port, []))
    spec["control"]["argv"] += ["--bind-when", str(tmp_path / "never")]
    write_committed(repo, "experiments/x.yaml", json.dumps(spec))
    runner = subprocess.Popen(
        [sys.executable, "-m", "recipe_ledger.cli", "run", "experiments/x.yaml", "--no-mlflow"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_for(
            lambda: any(log_says(p, "loading the model") for p in (repo / "runs").glob("*/server-*.log")),
            timeout_s=120,
        )
        with impostor_on(port):
            out, err = runner.communicate(timeout=240)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 5, out + err
    assert "impostor" in err
    kinds = [e["kind"] for e in entries(repo)]
    assert kinds == ["failure"], kinds
    failure = entries(repo)[-1]["payload"]
    assert failure["cause_class"] == "config" and "impostor" in failure["cause"]
    (folder,) = (repo / "runs").iterdir()
    assert not (folder / runs.MEASUREMENTS).exists() and not (folder / runs.CALIBRATION).exists()
    assert not list((folder / runs.RAW).iterdir()), "the probe must never have run"
    assert not (folder / runs.LOCK).exists()


# ------------------------------------------------------------------------------------- docker

DOCKER_IMAGE_TAG = "recipe-ledger-test/busybox-httpd:1"


@pytest.fixture
def busybox_image(docker_client):  # type: ignore[no-untyped-def]
    from helpers.images import build_busybox_image

    return build_busybox_image(docker_client, DOCKER_IMAGE_TAG, {"www/health": b"ok\n"})


def docker_spec(
    tmp_path: Path, image_id: str, port: int, run_id: str, boot: str, **more: object
) -> LaunchSpec:
    from recipe_ledger.launch.spec import grantable_memlock

    return LaunchSpec(
        argv=["/bin/busybox", "sh", "-c", boot],
        env={},
        host=HOST,
        port=port,
        health_path="/health",
        health_timeout_s=60,
        log_path=tmp_path / "server-control-r1.log",
        run_id=run_id,
        engine=VLLM,
        image=image_id,
        init=True,
        ulimit_memlock=grantable_memlock(),
        **more,  # type: ignore[arg-type]
    )


def containers_of(client, run_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    from recipe_ledger.launch.containers import LABEL_RUN

    return [c["Id"] for c in client.api.containers(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})]


def test_kill_9_of_the_launching_process_removes_its_container(
    docker_client, busybox_image, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    port, run_id = free_port(), f"orphan-{os.urandom(6).hex()}"
    spec = docker_spec(
        tmp_path, busybox_image.id, port, run_id, f"exec /bin/busybox httpd -f -p {HOST}:{port} -h /www"
    )
    code = textwrap.dedent(f"""\
        import pickle, time
        from recipe_ledger.launch import DockerLauncher
        server = DockerLauncher().start(pickle.loads(bytes.fromhex("{pickle.dumps(spec).hex()}")))
        print("ready", server.container_id, flush=True)
        time.sleep(600)
        """)
    launcher = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    try:
        assert launcher.stdout is not None
        assert launcher.stdout.readline().startswith("ready"), "the container did not become healthy"
        from recipe_ledger.launch.containers import LABEL_OWNER

        (container_id,) = containers_of(docker_client, run_id)
        labels = docker_client.api.inspect_container(container_id)["Config"]["Labels"]
        assert labels[LABEL_OWNER].split()[1] == str(launcher.pid)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert wait_for(lambda: not containers_of(docker_client, run_id), timeout_s=60), "container left behind"
    assert wait_for(lambda: port_is_free(HOST, port), timeout_s=30)


def test_an_impostor_on_the_port_of_a_loading_container_is_refused(
    docker_client, busybox_image, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from recipe_ledger.launch import DockerLauncher

    port, run_id = free_port(), f"impostor-{os.urandom(6).hex()}"
    gate = tmp_path / "gate"
    gate.mkdir()
    # The container's server binds only once /gate/go exists (the test never creates it): loading.
    boot = (
        "echo loading the model; while [ ! -e /gate/go ]; do /bin/busybox sleep 0.1; done;"
        f" exec /bin/busybox httpd -f -p {HOST}:{port} -h /www"
    )
    spec = docker_spec(tmp_path, busybox_image.id, port, run_id, boot, volumes={str(gate): "/gate:ro"})
    outcome: dict[str, BaseException] = {}

    def launch() -> None:
        try:
            DockerLauncher(client=docker_client, stop_timeout_s=2).start(spec).stop()
        except BaseException as error:  # noqa: BLE001 - the thread hands it to the test
            outcome["error"] = error

    thread = threading.Thread(target=launch)
    thread.start()
    try:
        assert wait_for(lambda: log_says(spec.log_path, "loading the model"), timeout_s=60)
        with impostor_on(port) as impostor:
            thread.join(120)
            failure = outcome.get("error")
            assert isinstance(failure, BootFailure) and failure.cause == "impostor", failure
            assert f"pid {impostor.pid}" in str(failure)
    finally:
        thread.join(120)
    assert wait_for(lambda: not containers_of(docker_client, run_id), timeout_s=60)


# ------------------------------------------------------------------------------------- real vLLM


def test_kill_9_of_a_process_serving_real_vllm_leaves_nothing(tmp_path) -> None:
    require("vllm", "the kill -9 test against a real vLLM")
    from helpers.servers import tiny_vllm_spec

    spec = tiny_vllm_spec(tmp_path, "orphan")
    code = textwrap.dedent(f"""\
        import pickle, sys, time
        from recipe_ledger.launch import ProcessLauncher
        spec = pickle.loads(bytes.fromhex("{pickle.dumps(spec).hex()}"))
        server = ProcessLauncher().start(spec)
        print("ready", server.pid, server.guard.tag, flush=True)
        time.sleep(900)
        """)
    tests_dir = Path(__file__).resolve().parents[1]
    launcher = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{SRC}:{tests_dir}"},
    )
    try:
        assert launcher.stdout is not None
        ready = launcher.stdout.readline().split()
        assert ready[:1] == ["ready"], "vLLM did not become healthy"
        tag = ready[2]
        assert procs.tagged(tag), "the server's processes carry the launch tag"
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert wait_for(lambda: not procs.tagged(tag), timeout_s=120), "vLLM processes left behind"
    assert wait_for(lambda: port_is_free(HOST, spec.port), timeout_s=30)


def test_an_impostor_bound_before_real_vllm_is_refused(tmp_path) -> None:
    require("vllm", "the impostor test against a real vLLM")
    from helpers.servers import tiny_vllm_spec

    spec = tiny_vllm_spec(tmp_path, "impostor")
    outcome: dict[str, BaseException] = {}

    def launch() -> None:
        try:
            ProcessLauncher().start(spec).stop()
        except BaseException as error:  # noqa: BLE001 - the thread hands it to the test
            outcome["error"] = error

    # vLLM binds its socket early but listens only once the engine is up (launcher.setup_server);
    # a server with SO_REUSEADDR (Python's http.server, the impostor here) can bind and listen on the
    # port in between. "non-default args" is logged just before vLLM's own bind.
    thread = threading.Thread(target=launch)
    thread.start()
    try:
        assert wait_for(lambda: log_says(spec.log_path, "non-default args"), timeout_s=240)
        with impostor_on(spec.port) as impostor:
            thread.join(300)
            assert not thread.is_alive()
    finally:
        thread.join(300)
    failure = outcome.get("error")
    assert isinstance(failure, BootFailure) and failure.cause == "impostor", failure
    assert f"pid {impostor.pid}" in str(failure)
    assert wait_for(lambda: port_is_free(HOST, spec.port), timeout_s=60)


def test_a_container_whose_owner_died_with_its_watchdog_is_removed_by_the_next_launch(
    docker_client, busybox_image
) -> None:  # type: ignore[no-untyped-def]
    import socket as sockets

    from recipe_ledger.launch.containers import (
        LABEL_MANAGED,
        LABEL_OWNER,
        LABEL_RUN,
        owner_label,
        remove_orphans,
    )

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone_identity = f"{procs.boot_id()}:1"  # a start time no live process of this pid has
    run_id = f"orphan-{os.urandom(6).hex()}"
    labels = {LABEL_MANAGED: "1", LABEL_RUN: run_id}
    orphan = docker_client.containers.create(
        busybox_image.id,
        command=["/bin/busybox", "sleep", "600"],
        labels={**labels, LABEL_OWNER: f"{sockets.gethostname()} {dead.pid} {gone_identity}"},
    )
    alive = docker_client.containers.create(
        busybox_image.id,
        command=["/bin/busybox", "sleep", "600"],
        labels={**labels, LABEL_OWNER: owner_label()},
    )
    try:
        removed = remove_orphans(docker_client)
        assert orphan.name in removed and alive.name not in removed
        assert containers_of(docker_client, run_id) == [alive.id]
    finally:
        for container in (orphan, alive):
            with contextlib.suppress(Exception):
                container.remove(force=True)


def environ_holds(pid: int, text: str) -> bool:
    try:
        return text.encode() in (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return False


def test_kill_9_of_ledger_run_serving_real_vllm_leaves_nothing_and_is_recorded(tmp_path) -> None:
    require("vllm", "the kill -9 test of `ledger run` against a real vLLM")
    from helpers.resources import SERVE_VLLM, TINY_MODEL
    from helpers.servers import VLLM_ENV

    repo = stand_in_repo(tmp_path)
    port, holding, cache = free_port(), tmp_path / "holding", tmp_path / "vllm-cache"
    (repo / "scripts" / "probe.py").write_text(HOLDING_PROBE)
    spec = json.loads(experiment_yaml(port, []))
    serve = [
        str(SERVE_VLLM),
        "serve",
        str(TINY_MODEL),
        "--served-model-name",
        "tiny",
        "--max-model-len",
        "1024",
    ]
    spec["control"] = {
        "argv": [*serve, "--dtype", "bfloat16", "--enforce-eager"],
        "env": {**VLLM_ENV, "VLLM_CACHE_ROOT": str(cache)},
    }
    spec["candidates"]["fast"] = {
        "argv": [*spec["control"]["argv"], "--seed", "1"],
        "env": spec["control"]["env"],
    }
    spec["server"]["health_timeout_s"] = 300
    write_committed(repo, "experiments/x.yaml", json.dumps(spec))
    runner = subprocess.Popen(
        [sys.executable, "-m", "recipe_ledger.cli", "run", "experiments/x.yaml", "--no-mlflow"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "runner.err").open("w"),
        env={**os.environ, "PROBE_HOLDING": str(holding), "PROBE_HOLD_ARM": "aa-control"},
    )
    try:
        assert wait_for(lambda: holding.exists() or runner.poll() is not None, timeout_s=400)
        assert holding.exists(), (tmp_path / "runner.err").read_text()[-3000:]
        served = [s.pid for s in procs.all_stats() if environ_holds(s.pid, f"VLLM_CACHE_ROOT={cache}")]
        assert served and not port_is_free(HOST, port)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    finally:
        if runner.poll() is None:
            runner.kill()
    assert wait_for(lambda: all(pid_is_gone(pid) for pid in served), timeout_s=120), "vLLM left running"
    assert wait_for(lambda: port_is_free(HOST, port), timeout_s=60)
    assert wait_for(lambda: not processes_naming(f"--parent {runner.pid}"), timeout_s=30)
    result = ledger(repo, "run", "experiments/x.yaml", "--plan")  # planning only: records nothing
    assert "recorded failure entry" not in result.stdout + result.stderr
    assert [e["kind"] for e in entries(repo)] == []
    note_id = ledger(repo, "note", "after the kill").stdout.split()[-1][:12]
    ledger(repo, "show", note_id)
    (failure,) = [e for e in entries(repo) if e["kind"] == "failure"]
    assert f"the ledger process {runner.pid} died" in failure["payload"]["cause"]
    assert "measured so far: nothing" in failure["payload"]["cause"]
