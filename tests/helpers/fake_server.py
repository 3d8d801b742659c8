"""A stand-in for ``vllm serve`` (or, with ``--engine sglang``, for ``python -m sglang.launch_server``)
in launcher tests: stdlib only, one behaviour per flag.

    python fake_server.py --port P [--delay S] [--oom-after S] [--never-healthy] [--bind-when FILE]
                          [--ignore-sigterm] [--spawn-child] [--pid-file F] [--prefix-cache]
                          [--engine sglang [--fail-generate] [--flush-busy N] [--model-path DIR]
                           [--enable-metrics]]
                          [--engine openai [--model NAME] [--no-choices] [--no-models]]
                          [--completions [--diverge-at K [--diverge-only TEXT]] [--fail-on TEXT]
                           [--no-token-ids] [--completion-delay S] [--barrier N]
                           [--completion-text TEXT] [--fail-completions]]

SGLang mode answers ``POST /generate`` (a 500 with SGLang's error shape under --fail-generate),
``POST /flush_cache`` (400 the first N times, as SGLang does while requests drain) and logs the
lines SGLang's own code logs (quoted from sglang's source where the launcher classifies them).

``--completions`` answers ``POST /v1/completions`` greedy with scripted token ids and log-probabilities
(the answer-agreement instrument's request; either engine): each prompt's ids follow from its text
alone, so two servers answer alike unless told otherwise. ``--diverge-at K`` changes every answer
(or those whose prompt contains ``--diverge-only``) from token K on, its top-2 swapped there, as a
server with other numerics would; ``--fail-on`` answers 400 in the engine's error shape for a prompt
containing the text; ``--no-token-ids`` ignores ``return_token_ids``; ``--barrier N`` holds each
request until N are in flight (2 s at most), so ``GET /fake/completions`` (the bodies received and
the most requests seen in flight at once) shows the client's concurrency without timing luck.
``--completion-text TEXT`` answers every completion with that text instead (finish reason ``stop``,
no log-probabilities: what lm-eval's generate_until reads), and ``--fail-completions`` answers every
one with a 500 in the engine's error shape (a server that broke mid-run).

OpenAI mode (any OpenAI-compatible server: ``transformers serve``, llama.cpp...) answers ``GET
/v1/models`` (its health path; 503 until ``--delay`` passed, 404 forever under ``--no-models``: a
server that is up but lists nothing) and ``POST /v1/chat/completions`` with one choice, or with
none under ``--no-choices`` (a server that answers but completes nothing).

``--bind-when FILE`` waits (logging that it loads) until FILE exists before binding its port, as
vLLM binds only once the model is loaded: the window an impostor on the port would use.

It logs like a server (to stdout, unbuffered) so the launcher's log capture and classification are
exercised on real output.
"""

from __future__ import annotations

import argparse
import json
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
    parser.add_argument("--bind-when", default=None, help="bind the port only once this file exists")
    parser.add_argument("--ignore-sigterm", action="store_true", help="logs SIGTERM; only SIGKILL stops it")
    parser.add_argument("--spawn-child", action="store_true", help="start a worker process in the group")
    parser.add_argument("--pid-file", default=None, help="write 'leader_pid child_pid' here")
    parser.add_argument("--prefix-cache", action="store_true", help="answer POST /reset_prefix_cache")
    parser.add_argument("--engine", choices=["vllm", "sglang", "openai"], default="vllm")
    parser.add_argument("--model", default="fake-model", help="openai: the id /v1/models lists")
    parser.add_argument("--no-choices", action="store_true", help="openai: completions with no choices")
    parser.add_argument("--no-models", action="store_true", help="openai: /v1/models answers 404")
    parser.add_argument("--fail-generate", action="store_true", help="sglang: /generate answers 500")
    parser.add_argument("--flush-busy", type=int, default=0, help="sglang: /flush_cache answers 400 N times")
    parser.add_argument("--model-path", default=None, help="sglang: the model (only echoed)")
    parser.add_argument("--enable-metrics", action="store_true", help="sglang: accepted, like the real flag")
    parser.add_argument("--completions", action="store_true", help="answer POST /v1/completions")
    parser.add_argument("--diverge-at", type=int, default=None, help="completions: change tokens from K on")
    parser.add_argument("--diverge-only", default=None, help="completions: only prompts containing this")
    parser.add_argument("--fail-on", default=None, help="completions: 400 for prompts containing this")
    parser.add_argument("--no-token-ids", action="store_true", help="completions: no choices[0].token_ids")
    parser.add_argument("--completion-delay", type=float, default=0.0, help="completions: seconds per answer")
    parser.add_argument("--barrier", type=int, default=0, help="completions: wait for N in flight (2 s max)")
    parser.add_argument("--completion-text", default=None, help="completions: answer this text, always")
    parser.add_argument("--fail-completions", action="store_true", help="completions: answer 500, always")
    return parser.parse_args(argv)


# SGLang's words (python/sglang/srt/managers/scheduler.py flush_cache, http_server.py _wait_and_warmup).
SGLANG_READY = "The server is fired up and ready to roll!"
SGLANG_FLUSHED = "Cache flushed successfully!"
SGLANG_NOT_FLUSHED = "Cache not flushed because there are pending requests. #queue-req: 0, #running-req: 1"
SGLANG_OOM = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."


class SGLangState:
    """What an SGLang stand-in remembers between requests: flushes still to refuse, requests served."""

    def __init__(self, options: argparse.Namespace):
        self.busy_left = options.flush_busy
        self.lock = threading.Lock()

    def flush(self) -> int:
        with self.lock:
            if self.busy_left > 0:
                self.busy_left -= 1
                print(f"[fake] WARNING: {SGLANG_NOT_FLUSHED}", flush=True)
                return 400
        print(f"[fake] INFO: {SGLANG_FLUSHED}", flush=True)
        return 200


def generate_answer(options: argparse.Namespace, body: bytes) -> tuple[int, dict]:
    """SGLang's /generate: one piece of text, or (--fail-generate) _create_error_response's shape."""
    request = json.loads(body or b"{}")
    if options.fail_generate:
        print("[fake] ERROR: [http_server] Error: the attention backend failed", flush=True)
        return 500, {"object": "error", "message": "the attention backend failed", "code": 500}
    tokens = request.get("sampling_params", {}).get("max_new_tokens", 1)
    return 200, {"text": " there", "meta_info": {"completion_tokens": tokens}}


class CompletionsState:
    """What /v1/completions remembers: the bodies it received, requests in flight (now and at most)."""

    BARRIER_WAIT_S = 2.0

    def __init__(self, options: argparse.Namespace):
        self.options = options
        self.bodies: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.changed = threading.Condition()

    def answer(self, body: bytes) -> tuple[int, dict]:
        request = json.loads(body or b"{}")
        with self.changed:
            self.bodies.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.changed.notify_all()
            if self.options.barrier:
                self.changed.wait_for(lambda: self.in_flight >= self.options.barrier, self.BARRIER_WAIT_S)
        try:
            time.sleep(self.options.completion_delay)
            return completion_answer(self.options, request)
        finally:
            with self.changed:
                self.in_flight -= 1

    def report(self) -> dict:
        with self.changed:
            return {"bodies": list(self.bodies), "max_in_flight": self.max_in_flight}


def scripted_ids(prompt: str, count: int) -> list[int]:
    """A prompt's greedy token ids: a function of its text alone (the same on every fake server)."""
    start = 100 + sum(prompt.encode()) % 900
    return [start + 3 * position for position in range(count)]


def error_body(engine: str, message: str, kind: str, code: int) -> dict:
    """An error answer in the engine's shape: SGLang's flat one, vLLM's nested one."""
    if engine == "sglang":
        return {"object": "error", "message": message, "type": kind, "code": code}
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def fixed_text_answer(text: str, request: dict) -> tuple[int, dict]:
    """/v1/completions answering ``text`` to any prompt, as vLLM shapes a plain (no logprobs) answer."""
    choice = {"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}
    return 200, {"object": "text_completion", "model": request.get("model"), "choices": [choice]}


def completion_answer(options: argparse.Namespace, request: dict) -> tuple[int, dict]:
    """/v1/completions as vLLM 0.32 answers it with logprobs and return_token_ids (their shapes)."""
    if options.fail_completions:
        return 500, error_body(
            options.engine, "scripted failure of every completion", "InternalServerError", 500
        )
    if options.completion_text is not None:
        return fixed_text_answer(options.completion_text, request)
    prompt = str(request.get("prompt", ""))
    if options.fail_on and options.fail_on in prompt:
        message = f"scripted failure for a prompt containing {options.fail_on!r}"
        return 400, error_body(options.engine, message, "BadRequestError", 400)
    count, k = int(request.get("max_tokens", 16)), max(int(request.get("logprobs") or 0), 1)
    ids = scripted_ids(prompt, count)
    swapped = diverges(options, prompt, count)
    if swapped is not None:
        ids = ids[:swapped] + [i + 1 for i in ids[swapped:]]
    tops = [top_list(token, k, position == swapped) for position, token in enumerate(ids)]
    choice = {
        "index": 0,
        "text": "".join(f"t{token}" for token in ids),
        "finish_reason": "length",
        "logprobs": {
            "tokens": [f"t{token}" for token in ids],
            "token_logprobs": [top[f"t{token}"] for top, token in zip(tops, ids, strict=True)],
            "top_logprobs": tops,
            "text_offset": list(range(count)),
        },
    }
    if request.get("return_token_ids") and not options.no_token_ids:
        choice["token_ids"] = ids
        choice["prompt_token_ids"] = list(prompt.encode())
    return 200, {"object": "text_completion", "model": request.get("model"), "choices": [choice]}


def diverges(options: argparse.Namespace, prompt: str, count: int) -> int | None:
    """The position this prompt's answer diverges at, or None when it is the common answer."""
    if options.diverge_at is None or options.diverge_at >= count:
        return None
    if options.diverge_only is not None and options.diverge_only not in prompt:
        return None
    return options.diverge_at


def top_list(token: int, k: int, swapped: bool) -> dict[str, float]:
    """Top-k log-probabilities keyed by token text, the greedy token first. ``swapped``: the common
    answer's greedy token (token - 1) is the runner-up here, as when two servers' top-2 trade places."""
    runner_up = token - 1 if swapped else token + 1
    ranked = [token, runner_up, *(token + 1000 + i for i in range(k - 2))]
    logprobs = [-0.2, -1.9, *(-4.0 - i for i in range(k - 2))]
    return {f"t{t}": lp for t, lp in zip(ranked[:k], logprobs[:k], strict=True)}


def post_answer(
    options: argparse.Namespace,
    sglang: SGLangState | None,
    completions: CompletionsState | None,
    path: str,
    body: bytes,
) -> tuple[int, dict | None]:
    if sglang is not None and path == "/generate":
        return generate_answer(options, body)
    if sglang is not None and path == "/flush_cache":
        return sglang.flush(), None
    if completions is not None and path == "/v1/completions":
        return completions.answer(body)
    if options.engine == "openai" and path == "/v1/chat/completions":
        choices = (
            [] if options.no_choices else [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]
        )
        return 200, {"object": "chat.completion", "model": options.model, "choices": choices}
    return (200 if path == "/reset_prefix_cache" and options.prefix_cache else 404), None


def make_handler(options: argparse.Namespace, started: float) -> type[BaseHTTPRequestHandler]:
    sglang = SGLangState(options) if options.engine == "sglang" else None
    completions = CompletionsState(options) if options.completions else None

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            healthy = not options.never_healthy and time.monotonic() - started >= options.delay
            if self.path == "/health":
                self._answer(200 if healthy else 503)
            elif options.engine == "openai" and self.path == "/v1/models":
                listing = {"object": "list", "data": [{"id": options.model, "object": "model"}]}
                status = 404 if options.no_models else 200 if healthy else 503
                self._answer(status, listing if status == 200 else None)
            elif completions is not None and self.path == "/fake/completions":
                self._answer(200, completions.report())
            else:
                self._answer(404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            self._answer(*post_answer(options, sglang, completions, self.path, body))

        def _answer(self, status: int, payload: object | None = None) -> None:
            data = json.dumps(payload).encode() if payload is not None else b""
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            if data:
                self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *args: object) -> None:
            print(f"INFO: {self.address_string()} {fmt % args}", flush=True)

    return Handler


def oom_later(seconds: float, engine: str = "vllm") -> None:
    time.sleep(seconds)
    if engine == "sglang":
        # SGLang's shape: the scheduler child logs and SIGQUITs the launcher, which logs and exits.
        print("[fake TP0] Scheduler hit an exception: Traceback (most recent call last):", flush=True)
        print(SGLANG_OOM, flush=True)
        print("[fake] Received sigquit from a child process. It usually means the child failed.", flush=True)
        os._exit(1)
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
        oom_later(
            0, options.engine
        )  # at boot, before the port answers: never a race with the first health check
    if options.bind_when:
        print("INFO: loading the model (the port is not bound yet)", flush=True)
        while not os.path.exists(options.bind_when):
            time.sleep(0.05)
    server = ThreadingHTTPServer((options.host, options.port), make_handler(options, time.monotonic()))
    if options.oom_after is not None:
        threading.Thread(target=oom_later, args=(options.oom_after, options.engine), daemon=True).start()
    print("INFO: Application startup complete.", flush=True)
    if options.engine == "sglang":
        print(f"[fake] INFO: {SGLANG_READY}", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        print("INFO: Shutting down", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
