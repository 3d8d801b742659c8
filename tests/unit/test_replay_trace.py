"""The synthetic agent-session generator and the strict trace reader."""

from __future__ import annotations

import json

import pytest

from recipe_ledger.errors import InputError
from recipe_ledger.instruments import replay_trace
from recipe_ledger.instruments.replay_trace import (
    SessionShape,
    TraceRequest,
    check_fits_context,
    generate_sessions,
    read_trace,
    summarize,
    write_trace,
)

SHAPE = SessionShape(sessions=3, turns=5, system_tokens=128, user_tokens=40, block_size=32)


def test_same_seed_same_bytes_other_seed_other_trace(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    write_trace(a, generate_sessions(SHAPE, seed=7))
    write_trace(b, generate_sessions(SHAPE, seed=7))
    write_trace(c, generate_sessions(SHAPE, seed=8))
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_sessions_are_first_turn_then_deltas_with_fresh_blocks():
    requests = list(generate_sessions(SHAPE, seed=1))
    assert len(requests) == SHAPE.sessions * SHAPE.turns
    by_session: dict[str, list] = {}
    for request in requests:
        by_session.setdefault(request.session_id, []).append(request)
    assert len(by_session) == SHAPE.sessions
    for turns in by_session.values():
        first, later = turns[0], turns[1:]
        assert first.delay_ms is None and first.input_length == SHAPE.system_tokens + SHAPE.user_tokens
        for turn in later:
            assert turn.delay_ms is not None
            assert SHAPE.tool_result_tokens[0] <= turn.input_length <= SHAPE.tool_result_tokens[1]
            assert SHAPE.output_tokens[0] <= turn.output_length <= SHAPE.output_tokens[1]
        for turn in turns:
            assert len(turn.hash_ids) == -(-turn.input_length // SHAPE.block_size)


def test_the_system_prompt_is_shared_across_sessions_and_nothing_else():
    requests = list(generate_sessions(SHAPE, seed=1))
    firsts = [set(r.hash_ids) for r in requests if r.delay_ms is None]
    shared = set.intersection(*firsts)
    assert len(shared) == SHAPE.system_tokens // SHAPE.block_size
    counts: dict[int, int] = {}
    for request in requests:
        for block in request.hash_ids:
            counts[block] = counts.get(block, 0) + 1
    assert {b for b, n in counts.items() if n > 1} == shared


def test_summary_sizes_prompts_with_their_history():
    # Two turns of one session: the second is sent with the first prompt and answer in front.
    lines = [
        TraceRequest("a", 100, 10, (1, 2)),
        TraceRequest("a", 30, 5, (3,), delay_ms=0.0),
        TraceRequest("b", 100, 10, (1, 4)),
    ]
    summary = summarize(lines, block_size=64)
    assert summary.sessions == 2 and summary.requests == 3
    assert summary.max_input_length == 100 + 10 + 30
    assert summary.max_total_length == 100 + 10 + 30 + 5
    # reusable: a's second turn 64 of its 110-token history, b's first block (id 1, seen before)
    assert summary.expected_cache_reuse == (64 + 64) / (100 + 140 + 100)


def test_a_generated_trace_reads_back_and_checks_its_context(tmp_path):
    path = tmp_path / "t.jsonl"
    write_trace(path, generate_sessions(SHAPE, seed=3))
    requests = read_trace(path)
    summary = summarize(requests, SHAPE.block_size)
    assert summary.sessions == SHAPE.sessions and summary.requests == len(requests)
    assert summary.max_input_length > max(r.input_length for r in requests)  # histories add up
    assert 0.5 < summary.expected_cache_reuse < 1.0  # growing sessions reuse most of their prompt
    check_fits_context(path, summary, summary.max_total_length)
    with pytest.raises(InputError, match="more than the model's context") as info:
        check_fits_context(path, summary, summary.max_total_length - 1)
    assert info.value.where == str(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"input_length": 10, "output_length": 4', "not a JSON object"),
        ('{"input_length": -3, "output_length": 4}', "input_length must be at least 1"),
        ('{"output_length": 4}', "missing field input_length"),
        ('{"messages": [], "output_length": 4}', "it has messages"),
        ('{"input_length": 8, "hash_ids": ["x"]}', "hash_ids must be a list of integers"),
        ('{"input_length": 8, "delay": -1}', "delay must be a number >= 0"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_a_bad_line_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "user.jsonl"
    good = json.dumps({"input_length": 8, "output_length": 2})
    path.write_text(f"{good}\n\n{line}\n")  # a blank line still counts
    with pytest.raises(InputError, match=message) as info:
        read_trace(path)
    assert info.value.where == f"{path}:3"


def test_an_empty_or_missing_trace_is_refused(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(InputError, match="no request"):
        read_trace(empty)
    with pytest.raises(InputError, match="cannot read"):
        read_trace(tmp_path / "absent.jsonl")
    binary = tmp_path / "trace.gz"
    binary.write_bytes(b"\x1f\x8b\x08\xff\xfe")
    with pytest.raises(InputError, match="not UTF-8"):
        read_trace(binary)


def test_a_shape_that_cannot_make_sessions_is_refused():
    with pytest.raises(InputError, match="turns must be at least 1"):
        list(generate_sessions(SessionShape(turns=0), seed=0))
    with pytest.raises(InputError, match="output_tokens"):
        list(generate_sessions(SessionShape(output_tokens=(9, 3)), seed=0))


# --- a Mooncake-format trace (FAST'25's conversation trace: 512-token blocks, timestamps in ms) ----


def mooncake_lines(block: int = 512) -> list[str]:
    """Six requests in Mooncake's format: timestamp, input_length, output_length, hash_ids (one id
    per 512-token block, the last block partial); requests 2, 4 and 6 share the first one's prefix."""
    rows = [
        (0, 1000, 40),
        (150, 1536, 20),
        (900, 700, 64),
        (1200, 2100, 10),
        (3000, 513, 8),
        (3537000, 1024, 4),
    ]
    lines, next_id = [], 0
    for number, (stamp, length, out) in enumerate(rows):
        count = -(-length // block)
        if number % 2 == 1:
            ids = [0, *range(next_id, next_id + count - 1)]  # a shared first block
        else:
            ids = list(range(next_id, next_id + count))
        next_id = max(ids) + 1
        lines.append(
            json.dumps({"timestamp": stamp, "input_length": length, "output_length": out, "hash_ids": ids})
        )
    return lines


def test_the_block_size_is_the_traces_own_when_none_is_stated(tmp_path):
    path = tmp_path / "mooncake.jsonl"
    path.write_text("\n".join(mooncake_lines()) + "\n")
    requests = replay_trace.read_trace(path)
    assert replay_trace.inferred_block_size(requests) == 512
    assert replay_trace.block_size_for(path, requests, None) == 512
    summary = replay_trace.summarize(requests, 512)
    assert summary.schedule_s == pytest.approx(3537.0)  # its own timing: the last timestamp
    assert "6 requests in 6 sessions" in summary.for_people() and "block size 512" in summary.for_people()
    # At 64 the first blocks share 64 tokens instead of 512: the reuse the replay expects collapses.
    assert replay_trace.summarize(requests, 64).expected_cache_reuse < summary.expected_cache_reuse


def test_a_stated_block_size_the_hash_ids_contradict_is_refused(tmp_path):
    path = tmp_path / "mooncake.jsonl"
    path.write_text("\n".join(mooncake_lines()) + "\n")
    with pytest.raises(InputError, match=r"tile every input at block size 512 .* not 64") as caught:
        replay_trace.block_size_for(path, replay_trace.read_trace(path), 64)
    assert "options.block_size: 512" in caught.value.hint


def test_a_line_aiperf_would_refuse_names_its_line_before_any_launch(tmp_path):
    lines = mooncake_lines()
    lines[3] = json.dumps(
        {"timestamp": 1200, "input_length": 100, "output_length": 10, "hash_ids": [1, 2, 3]}
    )
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="3 hash ids at block size 512 need more than 1024") as caught:
        replay_trace.block_size_for(path, replay_trace.read_trace(path), 512)
    assert caught.value.where == f"{path}:4"
