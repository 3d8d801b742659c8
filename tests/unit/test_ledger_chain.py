"""The chain format and `verify`: every kind of damage is named by file, line and what is wrong."""

from __future__ import annotations

import hashlib
import json

import pytest

from recipe_ledger.errors import StateError
from recipe_ledger.ledger import chain
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import repair, verify


def _ledger(tmp_path, n=5, writer="box"):
    ledger = Ledger.init(tmp_path)
    for i in range(n):
        ledger.append("note", {"text": f"note {i}"}, writer=writer, git=None)
    return ledger


def _lines(ledger, writer="box"):
    return (ledger.dir / f"{writer}.jsonl").read_bytes().split(b"\n")[:-1]


def _write(ledger, lines, writer="box", tail=b""):
    (ledger.dir / f"{writer}.jsonl").write_bytes(b"".join(line + b"\n" for line in lines) + tail)


def _messages(ledger):
    return [str(f) for f in verify(ledger).findings]


def test_line_layout_id_first_and_hash_of_the_stored_body():
    body = {"b": 1, "a": [1.5, "x"], "seq": 0}
    entry_id, line = chain.encode_line(body)
    assert line.startswith(b'{"id":"' + entry_id.encode() + b'",')
    assert line.endswith(b"\n")
    assert json.loads(line) == {"id": entry_id, **body}
    assert hashlib.sha256(chain.canonical(body)).hexdigest() == entry_id
    assert chain.line_hash_problem(line[:-1]) is None


def test_canonical_json_is_sorted_compact_ascii_and_refuses_nan():
    assert chain.canonical({"b": "é", "a": 1}) == b'{"a":1,"b":"\\u00e9"}'
    with pytest.raises(ValueError):
        chain.canonical({"x": float("nan")})


def test_appends_chain_seq_and_prev(tmp_path):
    ledger = _ledger(tmp_path, 3)
    entries = [json.loads(line) for line in _lines(ledger)]
    assert [e["seq"] for e in entries] == [0, 1, 2]
    assert entries[0]["prev"] is None
    assert [e["prev"] for e in entries[1:]] == [e["id"] for e in entries[:-1]]
    report = verify(ledger)
    assert report.ok and report.entries == 3 and report.chains == 1


def test_a_changed_byte_is_named_by_file_and_line(tmp_path):
    ledger = _ledger(tmp_path)
    lines = _lines(ledger)
    lines[2] = lines[2].replace(b"note 2", b"note 7")
    _write(ledger, lines)
    assert _messages(ledger) == [
        "ledger/box.jsonl:3: content does not match its id (a byte of this line was changed)"
    ]


def test_a_removed_line(tmp_path):
    ledger = _ledger(tmp_path)
    lines = _lines(ledger)
    del lines[1]
    _write(ledger, lines)
    assert _messages(ledger) == [
        "ledger/box.jsonl:2: line(s) removed or moved before this one (seq jumps from 0 to 2)"
    ]


def test_the_first_line_removed(tmp_path):
    ledger = _ledger(tmp_path)
    _write(ledger, _lines(ledger)[1:])
    assert "ledger/box.jsonl:1: line(s) removed" in _messages(ledger)[0]


def test_reordered_lines(tmp_path):
    ledger = _ledger(tmp_path)
    lines = _lines(ledger)
    lines[1], lines[2] = lines[2], lines[1]
    _write(ledger, lines)
    messages = _messages(ledger)
    assert messages[0].startswith("ledger/box.jsonl:2: line(s) removed or moved")
    assert messages[1].startswith("ledger/box.jsonl:3: line out of order or inserted")


def test_an_inserted_line_with_a_valid_hash_still_breaks_the_chain(tmp_path):
    ledger = _ledger(tmp_path)
    lines = _lines(ledger)
    first = json.loads(lines[0])
    forged = {k: v for k, v in json.loads(lines[1]).items() if k != "id"}
    forged["payload"] = {**forged["payload"], "text": "forged"}
    forged["prev"] = first["id"]
    _, forged_line = chain.encode_line(forged)
    lines.insert(1, forged_line[:-1])
    _write(ledger, lines)
    assert _messages(ledger) == ["ledger/box.jsonl:3: line out of order or inserted (seq 1 after seq 1)"]


def test_a_broken_link(tmp_path):
    ledger = _ledger(tmp_path)
    lines = _lines(ledger)
    body = {k: v for k, v in json.loads(lines[3]).items() if k != "id"}
    body["prev"] = "0" * 64
    _, relinked = chain.encode_line(body)
    lines[3] = relinked[:-1]
    _write(ledger, lines)
    messages = _messages(ledger)
    assert messages[0].startswith("ledger/box.jsonl:4: broken link: prev is 000000000000")
    assert messages[1].startswith("ledger/box.jsonl:5: broken link")


def test_a_dangling_ref_is_a_broken_link(tmp_path):
    ledger = _ledger(tmp_path, 2)
    target = json.loads(_lines(ledger)[0])["id"]
    ledger.append("note", {"text": "about it"}, writer="other", refs=[target], git=None)
    _write(ledger, [], writer="box")  # the chain holding the referenced entry is emptied
    assert any(m.startswith("ledger/other.jsonl:1: broken link: refers to") for m in _messages(ledger))


def test_a_hand_edited_line_that_is_not_json(tmp_path):
    ledger = _ledger(tmp_path)
    lines = _lines(ledger)
    lines[4] = lines[4][:-3]
    _write(ledger, lines)
    assert _messages(ledger) == ["ledger/box.jsonl:5: not valid JSON (the line was edited or is garbage)"]


def test_an_entry_in_the_wrong_writer_file(tmp_path):
    ledger = _ledger(tmp_path, 1)
    (ledger.dir / "box.jsonl").rename(ledger.dir / "elsewhere.jsonl")
    assert _messages(ledger) == [
        "ledger/elsewhere.jsonl:1: entry of writer 'box' in the chain of 'elsewhere'"
    ]


def test_a_torn_last_line_is_reported_then_repaired_into_quarantine(tmp_path):
    ledger = _ledger(tmp_path, 3)
    lines = _lines(ledger)
    torn = b'{"id":"abc","kind":"no'
    _write(ledger, lines, tail=torn)
    report = verify(ledger)
    assert report.only_torn
    assert str(report.findings[0]).startswith("ledger/box.jsonl:4: torn last line (22 bytes, no newline)")
    with pytest.raises(StateError, match="torn last line"):
        ledger.append("note", {"text": "refused"}, writer="box", git=None)
    assert repair(ledger) == [("ledger/box.jsonl", 22, "ledger/quarantine/box.torn")]
    assert verify(ledger).ok
    quarantined = (ledger.dir / "quarantine" / "box.torn").read_bytes()
    assert quarantined.endswith(b"\n" + torn + b"\n") and quarantined.startswith(b"# ")
    assert repair(ledger) == []
    ledger.append("note", {"text": "after repair"}, writer="box", git=None)
    assert verify(ledger).ok


def test_the_last_line_is_checked_before_anything_is_chained_onto_it(tmp_path):
    ledger = _ledger(tmp_path, 2)
    lines = _lines(ledger)
    lines[-1] = lines[-1].replace(b"note 1", b"note 9")
    _write(ledger, lines)
    with pytest.raises(StateError, match="does not match its id"):
        ledger.append("note", {"text": "x"}, writer="box", git=None)


def test_an_entry_from_a_newer_format_is_reported_clearly_and_left_alone(tmp_path):
    ledger = _ledger(tmp_path, 2)
    body = {
        "v": 2,
        "seq": 2,
        "prev": json.loads(_lines(ledger)[1])["id"],
        "writer": "box",
        "kind": "note",
        "ts": "2030-01-01T00:00:00Z",
        "refs": [],
        "git": None,
        "payload": {"schema_version": 9},
    }
    _, line = chain.encode_line(body)
    path = ledger.dir / "box.jsonl"
    before = path.read_bytes() + line
    path.write_bytes(before)
    messages = _messages(ledger)
    assert len(messages) == 1 and "ledger format 2, newer than this tool reads (1)" in messages[0]
    assert messages[0].startswith("ledger/box.jsonl:3:")
    assert path.read_bytes() == before


def test_a_ledger_marker_from_a_newer_version_stops_every_command(tmp_path):
    ledger = _ledger(tmp_path, 1)
    (ledger.dir / "format.json").write_text('{"format":"recipe-ledger","version":2}\n')
    with pytest.raises(StateError, match="newer than this tool reads"):
        Ledger.open(tmp_path)
    with pytest.raises(StateError, match="newer than this tool reads"):
        verify(ledger)


def test_read_tail_finds_the_last_line_across_block_boundaries(tmp_path):
    path = tmp_path / "f"
    long_line = b"x" * 200_000
    path.write_bytes(b"a\n" + long_line + b"\n" + b"torn")
    import os

    fd = os.open(path, os.O_RDONLY)
    try:
        assert chain.read_tail(fd) == (long_line, b"torn")
    finally:
        os.close(fd)
