"""Agent-session traces for the replay instrument: a seeded generator and a strict reader.

The format is AIPerf's mooncake-style JSONL, one request per line: ``session_id``, ``input_length``,
``output_length``, ``hash_ids`` (one id per cache block: equal ids mean content the server may
serve from its cache) and ``delay`` (milliseconds before this turn, after the previous turn of the
same session answered) or ``timestamp`` (milliseconds from the start, for a fixed schedule). AIPerf
sends a session's later turns with the session's history in front, so their ``input_length`` is
what the turn adds; a line without a session is a request of its own.

The generator stands in for real agent transcripts, which nobody may download: each session is a
system prompt shared by every session and a user message, then turns that each add a tool result,
with tool-call-sized outputs. Same seed and shape, same bytes, on any machine.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from recipe_ledger.errors import InputError

# The ids of the shared system prompt's blocks; a session's own blocks are numbered after them, so
# hash ids never collide between the shared prompt and any session.
_SHARED_BASE = 1


@dataclass(frozen=True)
class SessionShape:
    """What one synthetic agent session looks like. Lengths are in tokens."""

    sessions: int = 4
    turns: int = 24
    system_tokens: int = 256  # shared by every session: the cache's best case across sessions
    user_tokens: int = 48  # the first user message
    tool_result_tokens: tuple[int, int] = (16, 96)  # each later turn adds a tool result of this size
    output_tokens: tuple[int, int] = (8, 48)  # tool-call-sized answers
    think_ms: tuple[int, int] = (50, 400)  # the agent's pause between an answer and its next request
    block_size: int = 64  # tokens per hash id (AIPerf's --isl-block-size)

    def check(self) -> None:
        for name in ("sessions", "turns", "system_tokens", "user_tokens", "block_size"):
            if getattr(self, name) < 1:
                raise InputError(f"trace shape: {name} must be at least 1, got {getattr(self, name)}")
        for name in ("tool_result_tokens", "output_tokens", "think_ms"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise InputError(f"trace shape: {name} must be a range low <= high, both >= 0")
        if self.output_tokens[0] < 1:
            raise InputError("trace shape: output_tokens must ask for at least 1 token")


@dataclass(frozen=True)
class TraceRequest:
    """One line of a trace."""

    session_id: str
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()
    delay_ms: float | None = None
    timestamp_ms: float | None = None
    line: int = 0  # where it was read (file:line in an error); 0 when generated

    def to_json(self) -> str:
        line: dict[str, object] = {
            "session_id": self.session_id,
            "input_length": self.input_length,
            "output_length": self.output_length,
        }
        if self.hash_ids:
            line["hash_ids"] = list(self.hash_ids)
        if self.delay_ms is not None:
            line["delay"] = self.delay_ms
        if self.timestamp_ms is not None:
            line["timestamp"] = self.timestamp_ms
        return json.dumps(line, separators=(",", ":"))


def generate_sessions(shape: SessionShape, seed: int) -> Iterator[TraceRequest]:
    """The trace, session after session; each turn carries only what is new in it.

    AIPerf replays a session as a conversation: every turn is sent with the session's history (the
    earlier prompts and the server's answers) in front of it, so a turn's ``input_length`` is its
    delta: the first turn the system prompt and the user's message, each later turn a tool result.
    The context therefore grows as an agent's does, and a prefix cache can serve all of it but the
    delta. Hash ids name the delta's blocks: the system prompt's blocks are the same ids in every
    session (the cross-session reuse an agent fleet has), every other block is new.
    """
    shape.check()
    rng = random.Random(seed)
    system_blocks = shape.system_tokens // shape.block_size  # whole blocks only are shareable
    shared = tuple(range(_SHARED_BASE, _SHARED_BASE + system_blocks))
    next_id = _SHARED_BASE + system_blocks
    for index in range(shape.sessions):
        session = f"s{seed}-{index:06d}"
        for turn in range(shape.turns):
            if turn == 0:
                delta = shape.system_tokens + shape.user_tokens
                own = _blocks(delta, shape.block_size) - system_blocks
                ids = shared + tuple(range(next_id, next_id + own))
            else:
                delta = rng.randint(max(1, shape.tool_result_tokens[0]), max(1, shape.tool_result_tokens[1]))
                ids = tuple(range(next_id, next_id + _blocks(delta, shape.block_size)))
            next_id = max(next_id, ids[-1] + 1) if ids else next_id
            yield TraceRequest(
                session,
                delta,
                rng.randint(*shape.output_tokens),
                ids,
                delay_ms=None if turn == 0 else float(rng.randint(*shape.think_ms)),
            )


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def write_trace(path: Path, requests: Iterator[TraceRequest]) -> int:
    """Write the trace atomically (a temp file renamed into place); return its line count."""
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with tmp.open("w") as handle:
        for request in requests:
            handle.write(request.to_json() + "\n")
            count += 1
    tmp.replace(path)
    return count


@dataclass(frozen=True)
class TraceSummary:
    requests: int
    sessions: int
    max_input_length: int  # the longest prompt as sent: the session's history plus the turn's delta
    max_total_length: int  # that prompt plus its answer: what must fit the model's context
    expected_cache_reuse: float  # share of prompt tokens a prefix cache could serve: its ceiling
    block_size: int = 64  # tokens per hash id the sizes above were counted with
    schedule_s: float = 0.0  # the trace's own timing: last timestamp, else the longest session's delays

    def for_people(self) -> str:
        """The trace as --plan prints it (not ``TraceRequest.line``, the file line a request came from)."""
        return (
            f"{self.requests} requests in {self.sessions} sessions, expected prefix reuse "
            f"{self.expected_cache_reuse:.1%} at block size {self.block_size}, longest prompt "
            f"{self.max_input_length} tokens, {self.schedule_s:,.1f} s of its own timing per launch"
        )


def summarize(requests: list[TraceRequest], block_size: int = 64) -> TraceSummary:
    """Sizes as the server sees them. A turn's prompt is its session's history (earlier prompts and
    answers, which the cache holds in whole blocks) plus its delta; a first turn can reuse the whole
    blocks of a system prompt another session sent before (equal hash ids)."""
    history: dict[str, int] = {}
    seen: set[int] = set()
    prompt_tokens = reusable = longest = longest_total = 0
    for request in requests:
        before = history.get(request.session_id, 0)
        prompt = before + request.input_length
        shared = 0
        for block in request.hash_ids:
            if block not in seen:
                break
            shared += block_size  # a prefix of blocks seen before: a cache may hold them
        seen.update(request.hash_ids)
        reusable += (before // block_size) * block_size + min(shared, request.input_length)
        prompt_tokens += prompt
        longest = max(longest, prompt)
        longest_total = max(longest_total, prompt + request.output_length)
        history[request.session_id] = prompt + request.output_length
    return TraceSummary(
        requests=len(requests),
        sessions=len(history),
        max_input_length=longest,
        max_total_length=longest_total,
        expected_cache_reuse=reusable / prompt_tokens if prompt_tokens else 0.0,
        block_size=block_size,
        schedule_s=schedule_seconds(requests),
    )


def schedule_seconds(requests: list[TraceRequest]) -> float:
    """How long the trace's own timing lasts: its last timestamp (a fixed schedule), else the
    longest session's think times added up (a floor: generation comes on top)."""
    stamps = [r.timestamp_ms for r in requests if r.timestamp_ms is not None]
    if stamps:
        return (max(stamps) - min(stamps)) / 1000.0
    delays: dict[str, float] = {}
    for request in requests:
        delays[request.session_id] = delays.get(request.session_id, 0.0) + (request.delay_ms or 0.0)
    return max(delays.values(), default=0.0) / 1000.0


# Block sizes a trace's hash ids are tried against (Mooncake's FAST'25 traces use 512; AIPerf's
# synthetic traces, vLLM's and SGLang's caches use 16 to 64).
BLOCK_SIZES = tuple(2**k for k in range(4, 13))


def hash_block_problem(request: TraceRequest, block_size: int) -> str | None:
    """AIPerf's own rule (its prompt generator: the last hash id's block holds 1 to block_size
    tokens when the ids cover more than the input), in words, or None when the line keeps it."""
    ids = len(request.hash_ids)
    if ids and (ids - 1) * block_size >= request.input_length:
        return (
            f"{ids} hash ids at block size {block_size} need more than {(ids - 1) * block_size} input "
            f"tokens; the line has input_length {request.input_length} (AIPerf refuses it after a boot)"
        )
    return None


def inferred_block_size(requests: list[TraceRequest]) -> int | None:
    """The one block size at which every line's hash ids tile its input exactly
    (``len(hash_ids) == ceil(input_length / block)``), or None when none or several do."""
    lines = [(len(r.hash_ids), r.input_length) for r in requests if r.hash_ids]
    if not lines:
        return None
    fitting = [b for b in BLOCK_SIZES if all(ids == _blocks(length, b) for ids, length in lines)]
    return fitting[0] if len(fitting) == 1 else None


def block_size_for(path: Path, requests: list[TraceRequest], stated: int | None) -> int:
    """The block size to replay ``requests`` with: the stated one, checked, else the trace's own
    (else 64, AIPerf's default). A stated size the hash ids contradict, and a line AIPerf would
    refuse, are InputErrors naming the file and line, before any launch."""
    inferred = inferred_block_size(requests)
    if stated is not None and inferred is not None and stated != inferred:
        raise InputError(
            f"the trace's hash ids tile every input at block size {inferred} "
            f"(len(hash_ids) = ceil(input_length / {inferred}) on every line), not {stated}: "
            "replayed at the stated size, prompts would share only their first blocks",
            where=str(path),
            hint=f"set options.block_size: {inferred}, or leave it out to take the trace's",
        )
    size = stated or inferred or 64
    for request in requests:
        problem = hash_block_problem(request, size)
        if problem:
            raise InputError(problem, where=f"{path}:{request.line}", hint="fix that line, or the block size")
    return size


_OTHER_INPUT_MODES = ("text_input", "messages", "payload")  # AIPerf's; the replay sizes by tokens


def _field_int(line: dict, name: str, where: str, *, minimum: int) -> int:
    value = line.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name} must be an integer, got {value!r}", where=where, hint="fix that line")
    if value < minimum:
        raise InputError(f"{name} must be at least {minimum}, got {value}", where=where, hint="fix that line")
    return value


def _parse_line(text: str, where: str, number: int) -> TraceRequest:
    try:
        line = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not a JSON object: {exc.msg}", where=where, hint="fix that line") from None
    if not isinstance(line, dict):
        raise InputError("not a JSON object", where=where, hint="fix that line")
    if "input_length" not in line:
        other = [mode for mode in _OTHER_INPUT_MODES if mode in line]
        what = f" (it has {other[0]}, which the replay cannot size)" if other else ""
        raise InputError(f"missing field input_length{what}", where=where, hint="fix that line")
    hash_ids = line.get("hash_ids") or []
    if not isinstance(hash_ids, list) or not all(isinstance(h, int) for h in hash_ids):
        raise InputError("hash_ids must be a list of integers", where=where, hint="fix that line")
    for name in ("delay", "timestamp"):
        value = line.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0
        ):
            raise InputError(
                f"{name} must be a number >= 0, got {value!r}", where=where, hint="fix that line"
            )
    return TraceRequest(
        str(line["session_id"]) if line.get("session_id") is not None else f"~line-{number}",
        _field_int(line, "input_length", where, minimum=1),
        _field_int(line, "output_length", where, minimum=1) if "output_length" in line else 1,
        tuple(hash_ids),
        line.get("delay"),
        line.get("timestamp"),
        number,
    )


def read_trace(path: Path) -> list[TraceRequest]:
    """Every request of a trace file; a bad line is an InputError naming ``file:line``."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read the trace: {exc.strerror}", where=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("the trace is not UTF-8 text (JSON lines)", where=str(path)) from None
    requests = [
        _parse_line(raw, f"{path}:{number}", number)
        for number, raw in enumerate(text.splitlines(), start=1)
        if raw.strip()
    ]
    if not requests:
        raise InputError(
            "the trace holds no request",
            where=str(path),
            hint="one JSON object per line; or leave the trace option out to generate one",
        )
    return requests


def check_fits_context(path: Path, summary: TraceSummary, max_model_len: int) -> None:
    """A request longer than the model's context would be refused by the server mid-replay: say so
    before any launch, with the size that does not fit."""
    if summary.max_total_length > max_model_len:
        raise InputError(
            f"the trace's longest request needs {summary.max_total_length} tokens (input + output), "
            f"more than the model's context of {max_model_len}",
            where=str(path),
            hint="shorten the trace (fewer turns) or serve with a larger --max-model-len",
        )
