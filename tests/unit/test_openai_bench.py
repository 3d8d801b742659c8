"""The tool's own OpenAI client (kind ``openai_bench``): what it sends, how it counts, how it fails.

A strict in-process server stands in for ``transformers serve``: it answers 422 to any field outside
OpenAI's schema (as transformers 5.17's ``_validate_request`` does) and streams one chunk per token
with ``usage`` in the last, so the client is checked against the rule that made it necessary.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from recipe_ledger import instruments
from recipe_ledger.errors import InputError
from recipe_ledger.instruments import openai_bench, openai_bench_client
from recipe_ledger.instruments.base import InstrumentError, MeasureContext

# OpenAI's completion and chat-completion request fields (the ones a strict server accepts).
SCHEMA_FIELDS = {
    "model", "prompt", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
    "stream", "stream_options", "stop", "seed", "n", "logprobs", "frequency_penalty", "presence_penalty",
}  # fmt: skip


class StrictServer(BaseHTTPRequestHandler):
    tokens = 5  # streamed per request
    fail_all = False
    seen: list[dict] = []

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        unexpected = set(body) - SCHEMA_FIELDS
        if unexpected or self.fail_all:
            self._reply(422, json.dumps({"detail": f"Unexpected fields in the request: {unexpected}"}))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        tokens = min(self.tokens, body["max_tokens"])
        chat = "messages" in body
        for i in range(tokens):
            choice = {"delta": {"content": f"t{i} "}} if chat else {"text": f"t{i} "}
            self.wfile.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
            self.wfile.flush()
        usage = {"prompt_tokens": 7, "completion_tokens": tokens, "total_tokens": 7 + tokens}
        self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())

    def _reply(self, status: int, text: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text.encode())


@pytest.fixture
def server() -> Iterator[str]:
    StrictServer.seen, StrictServer.fail_all = [], False
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), StrictServer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def context(tmp_path: Path, base_url: str, point: int = 2, seed: int = 3) -> MeasureContext:
    return MeasureContext("control", point, 1, seed, tmp_path, base_url=base_url, model_name="m")


def test_it_is_registered_with_its_options_model() -> None:
    assert instruments.get("openai_bench") is openai_bench.INSTRUMENT
    with pytest.raises(InputError, match="options.ignore_eos"):
        openai_bench.parse_options({"ignore_eos": True})


@pytest.mark.parametrize("endpoint", [openai_bench_client.COMPLETIONS, openai_bench_client.CHAT])
def test_requests_hold_only_schema_fields(endpoint: str) -> None:
    body = openai_bench_client.request_body(endpoint, "m", "hi there", 16)
    assert set(body) <= SCHEMA_FIELDS
    assert body["stream"] is True and body["max_tokens"] == 16 and body["temperature"] == 0
    assert ("messages" in body) == (endpoint == openai_bench_client.CHAT)
    assert "model" not in openai_bench_client.request_body(endpoint, None, "hi", 4)


def test_prompts_repeat_per_seed_and_never_share_a_first_word() -> None:
    same = [openai_bench_client.prompt_for(5, i, 12) for i in range(4)]
    assert same == [openai_bench_client.prompt_for(5, i, 12) for i in range(4)]
    assert same != [openai_bench_client.prompt_for(6, i, 12) for i in range(4)]
    assert len({p.split()[0] for p in same}) == 4 and all(len(p.split()) == 12 for p in same)


def test_summarize_counts_tokens_and_times_as_documented() -> None:
    # Two requests, 1 s apart in start, tokens by usage; one failed.
    def done(start: float, chunks: list[float], end: float, tokens: int) -> dict:
        usage = {"prompt_tokens": 10, "completion_tokens": tokens}
        return {"start": start, "chunk_times": chunks, "end": end, "usage": usage}

    failed = {"start": 1.0, "chunk_times": [], "end": 1.1, "error": "HTTP 500: boom"}
    raw = {
        "num_prompts": 3,
        "requests": [done(0.0, [0.1, 0.2, 0.3], 0.3, 3), done(1.0, [1.3, 1.5], 2.0, 2), failed],
    }
    m = openai_bench.summarize(raw)
    assert m["completed"] == 2 and m["failed"] == 1
    assert m["duration_s"] == pytest.approx(2.0)
    assert m["output_tps_total"] == pytest.approx(5 / 2.0)
    assert m["total_tps"] == pytest.approx(25 / 2.0)
    assert m["ttft_ms_p50"] == pytest.approx(200.0)  # 100 and 300 ms
    assert m["ttft_ms_mean"] == pytest.approx(200.0)
    assert (m["itl_ms_p50"], m["itl_ms_p90"]) == (pytest.approx(100.0), pytest.approx(180.0))  # 100, 100, 200
    assert m["tpot_ms_p50"] == pytest.approx(150.0)  # (0.3-0.1)/2 and (1.5-1.3)/1 -> 100, 200
    assert m["decode_tps_per_stream"] == pytest.approx(1000 / 150)
    assert m["e2el_ms_p99"] == pytest.approx(300 + 0.99 * 700)


def test_a_chunk_per_token_when_the_server_sends_no_usage() -> None:
    raw = {"num_prompts": 1, "requests": [{"start": 0.0, "chunk_times": [0.5, 1.0, 1.5, 2.0], "end": 2.0}]}
    assert openai_bench.summarize(raw)["output_tps_total"] == pytest.approx(2.0)


def test_a_request_whose_tokens_came_only_in_its_usage_is_completed_without_latencies() -> None:
    # Seen on the tiny model: 8 tokens of byte fragments the streamer held back, then the usage chunk.
    quiet = {"start": 0.0, "chunk_times": [], "end": 1.0, "usage": {"completion_tokens": 8}}
    loud = {"start": 0.0, "chunk_times": [0.5, 1.0], "end": 1.0, "usage": {"completion_tokens": 2}}
    m = openai_bench.summarize({"num_prompts": 2, "requests": [quiet, loud]})
    assert m["completed"] == 2 and m["failed"] == 0 and m["output_tps_total"] == pytest.approx(10.0)
    assert m["ttft_ms_p50"] == pytest.approx(500.0)  # the loud one's alone


def test_percentile_is_linear_between_order_statistics() -> None:
    assert openai_bench.percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert openai_bench.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == pytest.approx(4.6)
    assert openai_bench.percentile([7.0], 99) == 7.0


def test_a_point_measured_against_a_strict_server(server: str, tmp_path: Path) -> None:
    options = openai_bench.parse_options({"num_prompts": 6, "input_len": 8, "output_len": 4})
    measured = openai_bench.measure(options, context(tmp_path, server), env={})
    assert measured.metrics["completed"] == 6 and measured.metrics["failed"] == 0
    assert measured.metrics["output_tps_total"] > 0 and measured.metrics["ttft_ms_p50"] > 0
    assert measured.instrument_version == openai_bench.VERSION
    assert measured.raw_sha256.startswith("sha256:") and measured.raw_path.is_file()
    # One untimed warm-up, then the six; every body named the model and held only schema fields.
    assert len(StrictServer.seen) == 7 and all(b["model"] == "m" for b in StrictServer.seen)
    assert "--concurrency" in measured.argv and measured.argv[measured.argv.index("--concurrency") + 1] == "2"
    raw = json.loads(measured.raw_path.read_text())
    assert [r["usage"]["completion_tokens"] for r in raw["requests"]] == [4] * 6


def test_a_server_that_refuses_every_request_fails_the_point_with_its_words(
    server: str, tmp_path: Path
) -> None:
    StrictServer.fail_all = True
    options = openai_bench.parse_options({"num_prompts": 2, "warmup_requests": 0})
    with pytest.raises(
        InstrumentError, match=r"no request completed.*2 failed.*HTTP 422: .*Unexpected fields"
    ):
        openai_bench.measure(options, context(tmp_path, server), env={})
