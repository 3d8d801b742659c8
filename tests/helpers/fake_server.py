"""A stand-in for ``vllm serve`` in launcher tests: stdlib only, one behaviour per flag.

    python fake_server.py --port P [--delay S] [--oom-after S] [--never-healthy]
                          [--ignore-sigterm] [--spawn-child] [--pid-file F] [--prefix-cache]

It logs like a server (to stdout, unbuffered) so the launcher's log capture and classification are
exercised on real output.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before /health answers 200")
    parser.add_argument("--oom-after", type=float, default=None, help="print a CUDA OOM and exit 1")
    parser.add_argument("--never-healthy", action="store_true", help="/health answers 503 forever")
    parser.add_argument("--ignore-sigterm", action="store_true", help="logs SIGTERM; only SIGKILL stops it")
    parser.add_argument("--spawn-child", action="store_true", help="start a worker process in the group")
    parser.add_argument("--pid-file", default=None, help="write 'leader_pid child_pid' here")
    parser.add_argument("--prefix-cache", action="store_true", help="answer POST /reset_prefix_cache")
    return parser.parse_args(argv)


def make_handler(options: argparse.Namespace, started: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                healthy = not options.never_healthy and time.monotonic() - started >= options.delay
                self._answer(200 if healthy else 503)
            else:
                self._answer(404)

        def do_POST(self) -> None:
            self._answer(200 if self.path == "/reset_prefix_cache" and options.prefix_cache else 404)

        def _answer(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, fmt: str, *args: object) -> None:
            print(f"INFO: {self.address_string()} {fmt % args}", flush=True)

    return Handler


def oom_later(seconds: float) -> None:
    time.sleep(seconds)
    print("ERROR: Traceback (most recent call last):", flush=True)
    print(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 139.81 GiB of which 1.06 GiB is free.",
        flush=True,
    )
    os._exit(1)


def spawn_child(ignore_sigterm: bool) -> int:
    # A worker like vLLM's engine core: same process group, and it also ignores SIGTERM when the
    # leader does, so only a group-wide SIGKILL ends it.
    code = (
        "import signal,sys,time\n"
        "if sys.argv[1]=='1': signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "time.sleep(3600)"
    )
    return subprocess.Popen([sys.executable, "-c", code, "1" if ignore_sigterm else "0"]).pid


def log_and_ignore_sigterm(*_: object) -> None:
    # Logged, so a test can see that SIGTERM came first, before the SIGKILL that ends this process.
    print("INFO: SIGTERM received and ignored", flush=True)


def main(argv: list[str]) -> None:
    options = parse_args(argv)
    if options.ignore_sigterm:
        signal.signal(signal.SIGTERM, log_and_ignore_sigterm)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    child = spawn_child(options.ignore_sigterm) if options.spawn_child else 0
    if options.pid_file:
        with open(options.pid_file, "w") as handle:
            handle.write(f"{os.getpid()} {child}\n")
    print(f"INFO: fake server pid {os.getpid()} starting on {options.host}:{options.port}", flush=True)
    if options.oom_after == 0:
        oom_later(0)  # at boot, before the port answers: never a race with the first health check
    server = ThreadingHTTPServer((options.host, options.port), make_handler(options, time.monotonic()))
    if options.oom_after is not None:
        threading.Thread(target=oom_later, args=(options.oom_after,), daemon=True).start()
    print("INFO: Application startup complete.", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        print("INFO: Shutting down", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
