"""scripts/profile_probe.py against a fake engine (stdlib HTTP in a thread) that writes a trace on
/stop_profile the way vLLM does: the worker's and the front end's, named by the prefix it was given."""

from __future__ import annotations

import gzip
import importlib.util
import json
import random
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "profile_probe.py"


def load_probe():
    spec = importlib.util.spec_from_file_location("profile_probe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worker_trace(padding: int = 0) -> dict:
    events = [
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": 0,
            "ts": 0,
            "dur": 1000,
        },
        {"ph": "X", "cat": "cpu_op", "name": "_C::onednn_mm", "pid": 1, "tid": 1, "ts": 100, "dur": 300},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "_C::cpu_attention_with_kv_cache",
            "pid": 1,
            "tid": 1,
            "ts": 500,
            "dur": 100,
        },
    ]
    # Random hex, so the padding survives gzip and the file really is that large.
    return {"traceEvents": events, "padding": random.Random(0).randbytes(padding).hex()}


class FakeEngine:
    """Answers completions; profiles only when ``profiler`` is set, writing ``trace`` into ``trace_dir``."""

    def __init__(self, trace_dir: Path, profiler: bool, trace: dict):
        self.trace_dir, self.profiler, self.trace = trace_dir, profiler, trace
        self.prefix = ""
        self.calls: list[str] = []

    def handle(self, path: str, body: dict) -> tuple[int, dict]:
        self.calls.append(path)
        if path in ("/start_profile", "/stop_profile") and not self.profiler:
            return 404, {"detail": "Not Found"}
        if path == "/start_profile":
            self.prefix = body["profile_prefix"]
        if path == "/stop_profile":
            for name, document in (
                (f"{self.prefix}_rank0.1.pt.trace.json.gz", self.trace),
                (f"{self.prefix}_vm_9.async_llm.2.pt.trace.json.gz", {"traceEvents": []}),
            ):
                (self.trace_dir / name).write_bytes(gzip.compress(json.dumps(document).encode()))
        return 200, {}


@pytest.fixture()
def serve() -> Iterator:
    servers = []

    def start(engine: FakeEngine) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.reply(200, {"data": [{"id": "tiny"}]})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                self.reply(*engine.handle(self.path, json.loads(raw) if raw else {}))

            def reply(self, code: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # socketserver prints a traceback to stderr for any connection its handler fails on; in the
        # full suite a stray connection to a reused port (not the probe's: its requests are checked
        # below) put 19 such lines into the stderr a test counts. The probe's own stderr is the subject.
        server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def run_probe(url: str, tmp_path: Path, *extra: str) -> tuple[int, Path]:
    out = tmp_path / "run" / "control.p1.r0.out.json"
    argv = ["--url", url, "--trace-dir", str(tmp_path / "traces"), "--out", str(out), "--requests", "2"]
    return load_probe().main([*argv, *extra]), out


def test_the_probe_summarises_the_workers_trace_and_keeps_it(serve, tmp_path, capsys):
    (tmp_path / "traces").mkdir()
    engine = FakeEngine(tmp_path / "traces", profiler=True, trace=worker_trace())
    code, out = run_probe(serve(engine), tmp_path)
    assert code == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics["profile_share_gemm"] == pytest.approx(0.3)
    assert metrics["profile_share_attention"] == pytest.approx(0.1)
    assert metrics["profile_share_idle"] == pytest.approx(0.6)
    assert metrics["profile_window_s"] == pytest.approx(0.001)
    assert metrics["profile_overhead"] > 0
    record = json.loads(out.read_text())
    assert [t["name"] for t in record["traces"]] == [
        f"{engine.prefix}_rank0.1.pt.trace.json.gz"
    ]  # no async_llm
    kept = out.parent / record["kept"]
    assert kept.name == "control.p1.r0.trace.json.gz"
    assert json.loads(gzip.decompress(kept.read_bytes())) == worker_trace()
    # Warm-up (1) + unprofiled (2) + profiled (2) completions, the profiled ones inside start/stop.
    assert engine.calls.count("/v1/completions") == 5
    assert engine.calls.index("/start_profile") == 3 and engine.calls[-1] == "/stop_profile"


def test_a_trace_over_the_cap_is_not_kept_but_its_metrics_and_hash_are(serve, tmp_path, capsys):
    (tmp_path / "traces").mkdir()
    engine = FakeEngine(tmp_path / "traces", profiler=True, trace=worker_trace(padding=20_000))
    code, out = run_probe(serve(engine), tmp_path, "--max-trace-mb", "0.01")
    captured = capsys.readouterr()
    assert code == 0
    # Only the probe's own lines: another test's server thread in this process can print a
    # socketserver traceback for a stray connection into the same captured stderr.
    own = [line for line in captured.err.splitlines() if line.startswith("profile_probe:")]
    assert "over the 0.01 MB cap: not kept" in captured.err and len(own) == 1
    record = json.loads(out.read_text())
    assert record["kept"] is None and len(record["traces"][0]["sha256"]) == 64
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]  # nothing else, nothing half written
    assert "profile_share_gemm" in json.loads(captured.out.strip().splitlines()[-1])


def test_an_engine_without_the_profiler_gets_one_line_and_exit_2(serve, tmp_path, capsys):
    engine = FakeEngine(tmp_path, profiler=False, trace=worker_trace())
    code, out = run_probe(serve(engine), tmp_path)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "has no profiler" in err[0] and "--profiler-config" in err[0]
    assert not out.parent.exists() or not any(out.parent.iterdir())
