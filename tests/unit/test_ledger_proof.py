"""A ledger that proves itself: verify checks meaning, signed heads, witnesses and box binding.

Every attack here is one a committer could make by hand: lines that hash well but mean nothing, a
chain rewritten consistently (ids and prevs recomputed), a chain cut back, an entry under another
writer's name, a retraction of someone else's result. Keys are made per test in a temp folder.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import InputError, StateError
from recipe_ledger.ledger import actions, chain, signing, views
from recipe_ledger.ledger.semantics import history_problem
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import verify


@pytest.fixture(autouse=True)
def _this_box(monkeypatch, tmp_path):
    monkeypatch.setenv(signing.KEY_DIR_ENV, str(tmp_path / "keys"))
    monkeypatch.setenv("RECIPE_LEDGER_BOX_ID", "box-one")
    monkeypatch.setenv("RECIPE_LEDGER_CACHE_DIR", str(tmp_path / "cache"))


def _ledger(tmp_path, writer="box", n=3):
    ledger = Ledger.init(tmp_path / "project" if (tmp_path / "project").is_dir() else _mkdir(tmp_path))
    for i in range(n):
        ledger.append("note", {"text": f"note {i}"}, writer=writer, git=None)
    return ledger


def _mkdir(tmp_path):
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


def _entries(ledger, writer="box"):
    return [json.loads(line) for line in (ledger.dir / f"{writer}.jsonl").read_bytes().splitlines()]


def _rewrite(ledger, entries, writer="box"):
    """Write ``entries`` as a consistent chain: every seq, prev and id recomputed, as a forger would."""
    lines, prev = [], None
    for seq, entry in enumerate(entries):
        body = {k: v for k, v in entry.items() if k != "id"} | {"seq": seq, "prev": prev}
        prev, line = chain.encode_line(body)
        lines.append(line)
    (ledger.dir / f"{writer}.jsonl").write_bytes(b"".join(lines))
    ledger.refresh()


def _append_raw(ledger, writer, kind, payload, refs=(), ts=None, box="stated:box-one"):
    """A well-hashed, well-linked line appended by hand, past every check `append` makes."""
    path = ledger.dir / f"{writer}.jsonl"
    last = _entries(ledger, writer)[-1] if path.exists() else None
    body = {
        "v": 1,
        "seq": 0 if last is None else last["seq"] + 1,
        "prev": None if last is None else last["id"],
        "writer": writer,
        "kind": kind,
        "refs": list(refs),
        "ts": ts or chain.utc_now(),
        "payload": payload,
        "git": None,
        "box": box,
    }
    entry_id, line = chain.encode_line(body)
    with path.open("ab") as handle:
        handle.write(line)
    ledger.refresh()
    return entry_id


def _messages(ledger):
    return [str(f) for f in verify(ledger).findings]


# -- meaning ----------------------------------------------------------------------------------


def test_a_well_hashed_bogus_kind_fails_verify_and_readers_skip_it(tmp_path):
    ledger = _ledger(tmp_path)
    _append_raw(ledger, "box", "bogus", {"schema_version": 1, "text": "x"})
    assert _messages(ledger) == ["ledger/box.jsonl:4: unknown entry kind 'bogus'"]
    assert len(ledger.entries()) == 3 and ledger.rejected[0].reason == "unknown entry kind 'bogus'"
    assert len(views.query(ledger)) == 3  # log filters envelopes; the bogus line is left out, no crash
    result = CliRunner().invoke(main, ["log", "--root", str(ledger.root)])
    assert result.exit_code == 0 and "note 2" in result.output


def test_a_failure_without_cause_fails_verify_and_is_left_out_of_the_validated_view(tmp_path):
    ledger = _ledger(tmp_path)
    _append_raw(ledger, "box", "failure", {"schema_version": 1, "subject": "x", "cause_class": "oom"})
    (message,) = _messages(ledger)
    assert message.startswith("ledger/box.jsonl:4: invalid failure payload: failure cause")
    assert [e["kind"] for e in ledger.entries()] == ["note"] * 3
    assert len(ledger.envelopes()) == 4 and "cause" in ledger.rejected[0].reason


def test_time_only_advances_within_a_chain(tmp_path):
    ledger = _ledger(tmp_path)
    first_ts = _entries(ledger)[0]["ts"]
    _append_raw(
        ledger,
        "box",
        "note",
        {"schema_version": 1, "text": "backdated"},
        ts=first_ts[:4] + "-01-01T00:00:00.000000Z",
    )
    (message,) = _messages(ledger)
    assert "is earlier than the line before" in message and message.startswith("ledger/box.jsonl:4:")


def test_a_note_cannot_retract_through_the_back_door(tmp_path):
    ledger = _ledger(tmp_path)
    target = _entries(ledger)[0]["id"]
    _append_raw(
        ledger, "box", "note", {"schema_version": 1, "text": "gone"}, refs=[{"rel": "retracts", "id": target}]
    )
    assert _messages(ledger) == [
        "ledger/box.jsonl:4: a note entry cannot use relation 'retracts' (only a retraction can)"
    ]


def test_a_retraction_by_another_writer_is_refused_and_flagged_unless_a_maintainer(tmp_path):
    ledger = _ledger(tmp_path, writer="box-a")
    target = _entries(ledger, "box-a")[1]["id"]
    with pytest.raises(InputError, match="'box-b' may not retract 'box-a'"):
        actions.retract(ledger, target, reason="mine now", writer="box-b", git=None)
    payload = {"schema_version": 1, "target": target, "reason": "mine now", "evidence": []}
    _append_raw(ledger, "box-b", "retraction", payload, refs=[{"rel": "retracts", "id": target}])
    (message,) = _messages(ledger)
    assert "'box-b' retracts 'box-a''s entry" in message and "ledger/maintainers" in message
    (ledger.dir / "maintainers").write_text("# may retract anyone's entries\nbox-b\n")
    assert _messages(ledger) == []


# -- signed heads -----------------------------------------------------------------------------


def _signed(tmp_path, writer="box"):
    ledger = _ledger(tmp_path, writer=writer, n=2)
    with pytest.raises(StateError, match="unsigned chain of 2 entries"):
        actions.key_init(ledger, writer=writer)  # signing an old chain is asked for: --adopt
    setup, head = actions.key_init(ledger, writer=writer, adopt=True)
    assert setup.created_key and setup.added_signer and (head["seq"], head["kind"]) == (2, "key")
    assert oct(setup.key_file.stat().st_mode & 0o777) == "0o600"
    ledger.append("note", {"text": "signed on append"}, writer=writer, git=None)
    return ledger


def test_a_signed_chain_verifies_and_legacy_chains_are_unsigned_not_failed(tmp_path):
    ledger = _signed(tmp_path)
    _append_raw(ledger, "legacy", "note", {"schema_version": 1, "text": "old"}, box=None)
    report = verify(ledger)
    assert report.ok and report.signed == ["box"] and report.notices == []
    assert report.warnings == [
        "ledger/legacy.jsonl: unsigned chain of 'legacy' (1 entries): anyone can rewrite it consistently;"
        " `RECIPE_LEDGER_WRITER=legacy ledger key init --adopt` on its box signs it from now on"
    ]
    assert json.loads((ledger.dir / "heads" / "box.json").read_text())["seq"] == 3


def test_a_consistently_rewritten_signed_chain_fails_verify(tmp_path):
    ledger = _signed(tmp_path)
    entries = _entries(ledger)
    entries[1]["payload"]["text"] = "a better number"
    _rewrite(ledger, entries)
    (message,) = _messages(ledger)
    assert "the signed head (seq 3" in message and "truncated or rewritten" in message
    result = CliRunner().invoke(main, ["verify", "--root", str(ledger.root)])
    assert result.exit_code == 1 and "ledger is not whole: 1 problem(s)" in result.output


def test_a_truncated_signed_chain_fails_verify(tmp_path):
    ledger = _signed(tmp_path)
    path = ledger.dir / "box.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in path.read_bytes().splitlines()[:-1]))
    (message,) = _messages(ledger)
    assert "the signed head (seq 3" in message and "is not in the chain" in message


def test_an_entry_under_a_signing_writers_name_without_its_key(tmp_path, monkeypatch):
    ledger = _signed(tmp_path)
    monkeypatch.setenv(signing.KEY_DIR_ENV, str(tmp_path / "another-box-keys"))
    with pytest.raises(StateError, match="signs its chain .* this box has no key for it"):
        ledger.append("note", {"text": "impostor"}, writer="box", git=None)
    _append_raw(ledger, "box", "note", {"schema_version": 1, "text": "impostor by hand"})
    (message,) = _messages(ledger)
    assert "1 entry after the signed head (seq 3) carry no signature" in message


def test_a_head_signed_by_another_key_or_edited_fails(tmp_path, monkeypatch):
    ledger = _signed(tmp_path)
    head_file = ledger.dir / "heads" / "box.json"
    record = json.loads(head_file.read_text())
    head_file.write_text(json.dumps({**record, "seq": 1, "id": _entries(ledger)[1]["id"]}))
    assert "head signature does not verify" in _messages(ledger)[0]
    monkeypatch.setenv(signing.KEY_DIR_ENV, str(tmp_path / "forger"))
    forger = signing.init_key(tmp_path, "box")  # a key of its own, listed nowhere in this ledger
    signing.write_head(ledger.dir, "box", _entries(ledger)[-1], signing._load_private(forger.key_file))
    assert "signed by a key that is not 'box''s" in _messages(ledger)[0]


def test_key_init_again_signs_the_current_head(tmp_path):
    ledger = _signed(tmp_path)
    (ledger.dir / "heads" / "box.json").unlink()  # as if the head write never happened
    assert "has no signed head" in _messages(ledger)[0]
    setup, head = actions.key_init(ledger, writer="box")
    assert not setup.created_key and not setup.added_signer and head["seq"] == 3
    assert _messages(ledger) == []


# -- witnesses --------------------------------------------------------------------------------


def test_a_witnessed_chain_cut_back_is_named_by_its_witness(tmp_path):
    ledger = _ledger(tmp_path, writer="box-a", n=3)
    ledger.append("note", {"text": "b's first"}, writer="box-b", git=None)
    entry = actions.witness(ledger, writer="box-b", git=None)
    assert entry["payload"]["heads"] == {"box-a": {"seq": 2, "id": _entries(ledger, "box-a")[2]["id"]}}
    assert _messages(ledger) == []
    path = ledger.dir / "box-a.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in path.read_bytes().splitlines()[:2]))
    assert (
        "ledger/box-b.jsonl:2: 'box-b' witnessed the head of 'box-a' here,"
        " whose chain now ends before seq 2: it was truncated"
    ) in _messages(ledger)


def test_witness_command_refuses_a_ledger_that_does_not_verify(tmp_path):
    ledger = _ledger(tmp_path, writer="box-a")
    _append_raw(ledger, "box-a", "bogus", {})
    result = CliRunner().invoke(main, ["witness", "--root", str(ledger.root), "--writer", "box-b"])
    assert result.exit_code == 3 and "nothing was witnessed" in result.output


# -- box binding (issue 17.2) -----------------------------------------------------------------


def test_a_second_box_under_a_bound_writer_name_is_refused_at_append(tmp_path, monkeypatch):
    ledger = _ledger(tmp_path, writer="vm")
    assert {e["box"] for e in _entries(ledger, "vm")} == {"stated:box-one"}
    monkeypatch.setenv("RECIPE_LEDGER_BOX_ID", "box-two")
    with pytest.raises(StateError, match="writer 'vm' belongs to another box") as caught:
        ledger.append("note", {"text": "from the second vm"}, writer="vm", git=None)
    assert "RECIPE_LEDGER_WRITER" in caught.value.hint
    assert len(_entries(ledger, "vm")) == 3


def test_a_merge_that_mixes_two_boxes_in_one_chain_is_flagged(tmp_path):
    ledger = _ledger(tmp_path, writer="vm")
    _append_raw(ledger, "vm", "note", {"schema_version": 1, "text": "other vm"}, box="stated:box-two")
    (message,) = _messages(ledger)
    assert "entry from box stated:box-two in a chain bound to box stated:box-one" in message
    assert "set RECIPE_LEDGER_WRITER" in message


# -- history rules ----------------------------------------------------------------------------


def test_history_lets_a_signed_head_advance_but_never_go_back():
    old = b'{"id":"a","seq":4}\n'
    assert history_problem("ledger/heads/box.json", old, b'{"id":"b","seq":5}\n') is None
    assert "moved a signed head back from seq 4 to 3" in history_problem(
        "ledger/heads/box.json", old, b'{"id":"c","seq":3}\n'
    )
    assert history_problem("ledger/maintainers", b"box-a\n", b"") is None
    assert history_problem("ledger/box.jsonl", b"x\ny\n", b"x\n") == "removed everything from line 2 on"


# -- log filters read only the lines that can matter ------------------------------------------


def test_log_filters_match_the_full_fold_for_every_kind_and_status(tmp_path):
    from recipe_ledger.ledger.fold import STATUSES, fold_statuses
    from recipe_ledger.ledger.kinds import KINDS

    ledger = _ledger(tmp_path, n=4)
    notes = _entries(ledger)
    actions.retract(ledger, notes[0]["id"], reason="wrong", writer="box", git=None)
    reproduction = {"schema_version": 1, "target": notes[1]["id"], "outcome": "not-reproduced"}
    _append_raw(
        ledger, "box", "reproduction", reproduction, refs=[{"rel": "reproduces", "id": notes[1]["id"]}]
    )
    ledger.append(
        "note", {"text": 'tricky ,"refs":[] "kind":"retraction","payload":'}, writer="box", git=None
    )
    everything = ledger.envelopes()
    statuses = fold_statuses(everything)
    for kind in (None, *KINDS):
        for status in (None, *STATUSES):
            expected = [
                (e["id"], statuses[e["id"]])
                for e in everything
                if kind in (None, e["kind"]) and status in (None, statuses[e["id"]])
            ]
            got = [(e["id"], s) for e, s in views.query(Ledger.open(ledger.root), kind=kind, status=status)]
            assert got == expected, (kind, status)


def test_the_box_fingerprint_is_salted_stable_and_overridable(monkeypatch):
    from recipe_ledger.ledger import fingerprint

    monkeypatch.delenv("RECIPE_LEDGER_BOX_ID")
    own = fingerprint.box_fingerprint()
    kind, _, digest = own.partition(":")
    assert kind in ("machine-id", "host") and len(digest) == 16 and own == fingerprint.box_fingerprint()
    machine_id = next((p.read_text().strip() for p in fingerprint.MACHINE_ID_FILES if p.is_file()), "")
    assert not machine_id or machine_id not in own  # the raw id never reaches a committed line
    monkeypatch.setenv("RECIPE_LEDGER_BOX_ID", "rack-3")
    assert fingerprint.box_fingerprint() == "stated:rack-3"


def test_a_line_orjson_refuses_is_still_read_as_json_reads_it():
    huge = 2**70  # beyond orjson's 64-bit integers; valid JSON all the same
    assert chain.parse_line(b'{"n":%d}' % huge) == {"n": huge}
    with pytest.raises(ValueError):
        chain.parse_line(b'{"n":1} trailing')


def test_a_second_verify_validates_no_payload_it_validated_before(tmp_path, monkeypatch):
    from recipe_ledger.ledger import verify as verify_module

    ledger = _ledger(tmp_path)
    assert verify(ledger).ok  # validates the three payloads, remembers their ids

    def no_models():
        raise AssertionError("the payload models were needed")

    monkeypatch.setattr(verify_module, "_models", no_models)
    assert verify(ledger).ok
    # a remembered id on a line whose bytes changed is still caught (the bytes are hashed)
    path = ledger.dir / "box.jsonl"
    path.write_bytes(path.read_bytes().replace(b"note 1", b"note X"))
    assert _messages(ledger) == [
        "ledger/box.jsonl:2: content does not match its id (a byte of this line was changed)"
    ]
