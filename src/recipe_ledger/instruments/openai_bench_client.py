"""The ``openai_bench`` instrument's client: streamed OpenAI requests at a fixed concurrency.

    python -m recipe_ledger.instruments.openai_bench_client --base-url URL --output FILE \
        [--endpoint /v1/completions] [--model NAME] [--num-prompts 32] [--concurrency 4] \
        [--input-words 128] [--output-len 64] [--seed 0] [--warmup-requests 1] [--timeout-s 600]

Why the tool has its own: a strict OpenAI server refuses what the engines' clients add to the
schema (``transformers serve`` answers 422 "Unexpected fields in the request" to SGLang's
``ignore_eos`` and vLLM's ``repetition_penalty``), and the lent GPU box can install neither
client. This one sends only fields of OpenAI's schema (``model`` when named, ``prompt`` or
``messages``, ``max_tokens``, ``temperature: 0``, ``stream``, ``stream_options.include_usage``)
and needs nothing beyond the standard library, so it runs wherever the tool does.

It writes one JSON object per request (start, time to first token, the gaps between streamed
chunks, end, tokens as the server's ``usage`` counts them, or the error) and nothing else: the
statistics are ``instruments.openai_bench.summarize``'s, a pure function of this file. It runs in
its own process, as the engines' clients do, so that the tool's own threads never share its
interpreter while it times requests.

Prompts are ``--input-words`` words drawn from a fixed list by a generator seeded with the seed
and the prompt's index: the same seed gives both arms of a repeat the same prompts, and no prompt
repeats another's beginning (its first word is its index), so no prefix cache is flattered. The
server's ``usage.prompt_tokens`` says how many tokens that made. Without ``ignore_eos`` (outside
the schema) a request may stop before ``--output-len`` tokens: its tokens are counted as generated.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"
# A plain vocabulary: common words that every byte-level BPE splits into one to three tokens.
WORDS = (
    "the of and to in is for with on as by at from that this it be are was or an not which but all "
    "can has have will one their more some time about into other only new when also most any "
    "these two may first then each such over use used how many after where well much work before "
    "must through back years under three state high most part long day same place between both "
    "serve model batch token cache prefix recipe ledger engine launch point memory expert layer"
).split()
ERROR_TEXT_LIMIT = 300  # characters of an error body kept in the record


def prompt_for(seed: int, index: int, words: int) -> str:
    rng = random.Random(f"{seed}:{index}")
    return " ".join([f"#{index}", *(rng.choice(WORDS) for _ in range(max(words - 1, 0)))])


def request_body(endpoint: str, model: str | None, prompt: str, output_len: int) -> dict[str, Any]:
    body: dict[str, Any] = {
        "max_tokens": output_len,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if model:
        body["model"] = model
    if endpoint == CHAT:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def chunk_text(chunk: dict[str, Any]) -> str:
    """The text a streamed chunk carries: ``choices[0].text`` or ``choices[0].delta.content``."""
    choices = chunk.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    first = choices[0]
    delta = first.get("delta")
    text = delta.get("content") if isinstance(delta, dict) else first.get("text")
    return text if isinstance(text, str) else ""


def one_request(base_url: str, endpoint: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Send one streamed request; the record of what came back and when (perf_counter seconds)."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(
        parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout_s
    )
    record: dict[str, Any] = {"start": time.perf_counter(), "chunk_times": [], "text_chars": 0}
    try:
        connection.request(
            "POST",
            parts.path.rstrip("/") + endpoint,
            body=json.dumps(body),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        response = connection.getresponse()
        if response.status != 200:
            text = response.read().decode(errors="replace")[:ERROR_TEXT_LIMIT]
            record["error"] = f"HTTP {response.status}: {text}"
            return record
        read_stream(response, record)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_LIMIT]
    finally:
        record["end"] = time.perf_counter()
        connection.close()
    return record


def read_stream(response: http.client.HTTPResponse, record: dict[str, Any]) -> None:
    """Server-sent events, one ``data:`` line per chunk, until ``[DONE]`` or the end of the body."""
    for raw in response:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            record["usage"] = chunk["usage"]
        text = chunk_text(chunk)
        if text:
            record["chunk_times"].append(time.perf_counter())
            record["text_chars"] += len(text)


def run(args: argparse.Namespace) -> dict[str, Any]:
    bodies = [
        request_body(args.endpoint, args.model, prompt_for(args.seed, i, args.input_words), args.output_len)
        for i in range(args.num_prompts)
    ]
    for i in range(args.warmup_requests):  # not timed: a first request may compile or capture graphs
        warm = request_body(args.endpoint, args.model, prompt_for(args.seed, -1 - i, args.input_words), 4)
        one_request(args.base_url, args.endpoint, warm, args.timeout_s)
    records: list[dict[str, Any] | None] = [None] * len(bodies)
    next_index = iter(range(len(bodies)))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                index = next(next_index, None)
            if index is None:
                return
            records[index] = one_request(args.base_url, args.endpoint, bodies[index], args.timeout_s)

    started = time.perf_counter()
    threads = [
        threading.Thread(target=worker, daemon=True) for _ in range(min(args.concurrency, len(bodies)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {
        "client": "openai_bench_client/1",
        "endpoint": args.endpoint,
        "model": args.model,
        "concurrency": args.concurrency,
        "num_prompts": args.num_prompts,
        "input_words": args.input_words,
        "output_len": args.output_len,
        "seed": args.seed,
        "started": started,
        "finished": time.perf_counter(),
        "requests": records,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--output", required=True, type=Path)
    p.add_argument("--endpoint", choices=(COMPLETIONS, CHAT), default=COMPLETIONS)
    p.add_argument("--model", default=None, help="the request's model; none: the server's own")
    p.add_argument("--num-prompts", type=int, default=32)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--input-words", type=int, default=128)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup-requests", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=600.0)
    args = p.parse_args(argv)
    for name in ("num_prompts", "concurrency", "input_words", "output_len"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    tmp = args.output.with_name(args.output.name + ".tmp")
    tmp.write_text(json.dumps(result) + "\n")
    tmp.replace(args.output)  # a killed client leaves no half-written result
    failed = sum(1 for r in result["requests"] if r is None or "error" in r)
    print(
        f"openai_bench_client: {args.num_prompts - failed} of {args.num_prompts} completed -> {args.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
