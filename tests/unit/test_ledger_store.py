"""Models, appending, lookup, status folding and the refusals around them."""

from __future__ import annotations

import json
from typing import Literal

import pytest

from recipe_ledger.errors import InputError, StateError, UnknownIdError
from recipe_ledger.ledger import actions, models
from recipe_ledger.ledger.fold import fold_statuses, referrers
from recipe_ledger.ledger.models import (
    Envelope,
    NotePayload,
    ReleasePayload,
    load_payload,
    register_upgrade,
    validate_payload,
)
from recipe_ledger.ledger.store import Ledger, check_writer, default_writer
from recipe_ledger.ledger.views import query, summarize


@pytest.fixture
def ledger(tmp_path):
    return Ledger.init(tmp_path)


def _note(ledger, text="n", **kw):
    return actions.note(ledger, text, writer=kw.pop("writer", "box"), git=None, **kw)


def test_init_is_idempotent_and_open_requires_it(tmp_path):
    with pytest.raises(StateError, match="no ledger here"):
        Ledger.open(tmp_path)
    Ledger.init(tmp_path)
    marker = (tmp_path / "ledger" / "format.json").read_bytes()
    Ledger.init(tmp_path)
    assert (
        (tmp_path / "ledger" / "format.json").read_bytes()
        == marker
        == b'{"format":"recipe-ledger","version":1}\n'
    )
    assert "-text" in (tmp_path / "ledger" / ".gitattributes").read_text()


def test_an_appended_entry_has_every_envelope_field(ledger):
    entry = _note(ledger, "hello")
    Envelope.model_validate(entry)
    assert entry["kind"] == "note" and entry["writer"] == "box" and entry["ts"].endswith("Z")
    assert entry["payload"] == {
        "schema_version": 1,
        "origin": {"how": "stated"},
        "scripts": [],
        "artifacts": {},
        "text": "hello",
        "numbers": {},
        "tags": [],
    }
    assert load_payload("note", entry["payload"]) == NotePayload(text="hello")


def test_payload_models_are_strict_and_forbid_extra_fields():
    with pytest.raises(InputError, match="note colour: Extra inputs are not permitted"):
        validate_payload("note", {"schema_version": 1, "text": "x", "colour": "red"})
    with pytest.raises(InputError, match="failure minutes_lost"):
        validate_payload(
            "failure", {"subject": "s", "cause_class": "oom", "cause": "c", "minutes_lost": "12"}
        )
    with pytest.raises(InputError, match="failure cause_class"):
        validate_payload("failure", {"subject": "s", "cause_class": "bad luck", "cause": "c"})
    with pytest.raises(InputError, match="unknown entry kind 'rumour'"):
        validate_payload("rumour", {})


def test_release_image_by_tag_is_unpinned_and_pinned_needs_a_digest():
    release = ReleasePayload(lane="sixty-k-agent", version="v14", image={"ref": "vllm/x:tag"})
    assert release.image.pinned is False
    with pytest.raises(ValueError, match="pinned must be true exactly when a digest is given"):
        ReleasePayload(lane="l", version="v1", image={"ref": "vllm/x:tag", "pinned": True})


def test_older_payloads_are_upgraded_step_by_step_on_a_copy(monkeypatch):
    class NoteV2(models.Payload):
        kind = "note"
        schema_version: Literal[2] = 2
        body: str

    monkeypatch.setitem(models.MODELS, "note", NoteV2)
    monkeypatch.setattr(models, "_UPGRADES", {})
    register_upgrade("note", 1)(
        lambda d: {**{k: v for k, v in d.items() if k != "text"}, "body": d["text"], "schema_version": 2}
    )
    stored = {"schema_version": 1, "text": "old words"}
    assert load_payload("note", stored) == NoteV2(body="old words")
    assert stored == {"schema_version": 1, "text": "old words"}


def test_a_payload_newer_than_the_tool_is_refused_clearly():
    with pytest.raises(
        StateError, match="note payload schema_version 3 is newer than this tool reads \\(1\\)"
    ):
        load_payload("note", {"schema_version": 3, "text": "from the future"})
    with pytest.raises(StateError, match="unknown entry kind 'verdict'"):
        load_payload("verdict", {"schema_version": 1})


def test_a_one_megabyte_note_is_refused_with_the_limit_and_nothing_is_written(ledger):
    with pytest.raises(
        InputError, match="note entry would be 1,048,[0-9]{3} bytes; the limit is 16,384"
    ) as info:
        _note(ledger, "x" * 1_048_576)
    assert "content hash" in info.value.hint
    assert not (ledger.dir / "box.jsonl").exists()


def test_unknown_and_ambiguous_ids(ledger):
    entry = _note(ledger, "n")
    with pytest.raises(UnknownIdError, match="no entry with id ffffffff"):
        ledger.get("ffffffff")
    with pytest.raises(InputError, match="not an entry id"):
        ledger.get("zz")
    assert ledger.get(entry["id"][:10].upper())["id"] == entry["id"]
    with pytest.raises(UnknownIdError):
        _note(ledger, "dangling", refs=["abcdef" * 10 + "abcd"])
    twins = {"abcd" + "0" * 60: {}, "abcd" + "1" * 60: {}}
    ledger._by_id = {**ledger.by_id(), **twins}
    with pytest.raises(InputError, match="id prefix abcd is ambiguous: abcd00000000, abcd11111111"):
        ledger.get("abcd")


def test_a_long_lived_instance_sees_entries_other_processes_appended(ledger):
    ledger.entries()  # fills the cache
    other = Ledger.open(ledger.root)
    written = actions.note(other, "from another process", writer="box-b", git=None)
    assert ledger.get(written["id"][:8])["id"] == written["id"]


def test_refs_accept_prefixes_and_store_full_ids(ledger):
    first = _note(ledger, "first")
    second = _note(ledger, "about first", refs=[first["id"][:8]])
    assert second["refs"] == [{"rel": "see", "id": first["id"]}]


def test_retraction_folds_the_target_to_retracted_and_leaves_it_byte_for_byte(ledger):
    result = ledger.append("result", {"subject": "lane", "metrics": {"tps": 124.0}}, writer="box", git=None)
    evidence = _note(ledger, "re-ran it three times")
    before = (ledger.dir / "box.jsonl").read_bytes()
    notice = actions.retract(
        ledger, result["id"][:6], reason="not reproducible", evidence=[evidence["id"]], writer="box", git=None
    )
    assert (ledger.dir / "box.jsonl").read_bytes().startswith(before)
    assert notice["refs"] == [
        {"rel": "retracts", "id": result["id"]},
        {"rel": "evidence", "id": evidence["id"]},
    ]
    statuses = fold_statuses(ledger.entries())
    assert statuses[result["id"]] == "retracted" and statuses[notice["id"]] == "active"
    assert [(rel, e["id"]) for rel, e in referrers(ledger.entries(), result["id"])] == [
        ("retracts", notice["id"])
    ]
    assert [e["id"] for e, _ in query(ledger, status="retracted")] == [result["id"]]


def test_retracting_a_retraction_or_retracting_twice_is_refused(ledger):
    target = _note(ledger, "wrong")
    notice = actions.retract(ledger, target["id"], reason="wrong", writer="box", git=None)
    with pytest.raises(InputError, match="a retraction cannot be retracted"):
        actions.retract(ledger, notice["id"], reason="undo", writer="box", git=None)
    with pytest.raises(StateError, match="already retracted"):
        actions.retract(ledger, target["id"], reason="again", writer="box", git=None)
    with pytest.raises(InputError, match="needs a reason"):
        actions.retract(ledger, _note(ledger)["id"], reason="  ", writer="box", git=None)


def test_supersession_and_reproduction_fold_and_a_retracted_claim_counts_for_nothing(ledger):
    v1 = ledger.append("release", {"lane": "l", "version": "v1"}, writer="box", git=None)
    v2 = ledger.append(
        "release", {"lane": "l", "version": "v2", "supersedes": v1["id"]}, writer="box", git=None
    )
    ledger.append("reproduction", {"target": v2["id"], "outcome": "reproduced"}, writer="box", git=None)
    statuses = fold_statuses(ledger.entries())
    assert (statuses[v1["id"]], statuses[v2["id"]]) == ("superseded", "reproduced")
    ledger.append("reproduction", {"target": v2["id"], "outcome": "not-reproduced"}, writer="b2", git=None)
    assert fold_statuses(ledger.entries())[v2["id"]] == "not-reproduced"
    actions.retract(ledger, v2["id"], reason="bad release", writer="box", git=None)
    statuses = fold_statuses(ledger.entries())
    assert (statuses[v1["id"]], statuses[v2["id"]]) == ("active", "retracted")


def test_a_foreign_retraction_of_a_retraction_does_not_revive_the_original():
    def entry(i, refs=(), kind="note"):
        return {"id": str(i) * 64, "kind": kind, "refs": [{"rel": r, "id": str(t) * 64} for r, t in refs]}

    entries = [entry(1), entry(2, [("retracts", 1)], "retraction"), entry(3, [("retracts", 2)], "retraction")]
    assert fold_statuses(entries) == {"1" * 64: "retracted", "2" * 64: "retracted", "3" * 64: "active"}


def test_writer_names_must_be_file_safe(ledger, monkeypatch):
    with pytest.raises(InputError, match="not file-safe"):
        check_writer("../etc")
    monkeypatch.setenv("RECIPE_LEDGER_WRITER", "DGX Station #2")
    assert default_writer() == "dgx-station-2"


def test_failure_payload_keeps_cause_class_and_a_bounded_log_tail(ledger):
    entry = ledger.append(
        "failure",
        {
            "subject": "s",
            "cause_class": "oom",
            "cause": "CUDA out of memory",
            "log_tail": "torch.OutOfMemoryError: ...",
        },
        writer="box",
        git=None,
    )
    assert load_payload("failure", entry["payload"]).cause_class == "oom"
    with pytest.raises(InputError, match="log_tail"):
        validate_payload(
            "failure", {"subject": "s", "cause_class": "oom", "cause": "c", "log_tail": "x" * 5000}
        )


def test_summaries_are_one_line(ledger):
    _note(ledger, "line one\nline two")
    entry, status = query(ledger)[0]
    assert summarize(entry) == "line one line two" and status == "active"
    assert json.loads((ledger.dir / "box.jsonl").read_text())["payload"]["text"] == "line one\nline two"
