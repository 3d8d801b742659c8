"""Writers that cannot be impersonated: keys from the chain's own history (issue 26.2).

A new writer signs from its first entry; a key changes only through a rotation entry signed by
the old key or a root-of-trust maintainer; allowed_signers must agree with the chain; a head may
not move back from what this box saw. Each attack is one a committer could make by hand.
"""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import StateError
from recipe_ledger.ledger import chain, seenheads, signing
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import verify


@pytest.fixture(autouse=True)
def _signing_box(monkeypatch, tmp_path):
    monkeypatch.delenv(signing.SIGNING_ENV, raising=False)  # the default: on
    monkeypatch.setenv(signing.KEY_DIR_ENV, str(tmp_path / "keys"))
    monkeypatch.setenv(seenheads.STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setenv("RECIPE_LEDGER_BOX_ID", "box-one")
    monkeypatch.setenv("RECIPE_LEDGER_CACHE_DIR", str(tmp_path / "cache"))


def _project(tmp_path):
    (tmp_path / "project").mkdir(exist_ok=True)
    return Ledger.init(tmp_path / "project")


def _note(ledger, text, writer="box"):
    return ledger.append("note", {"text": text}, writer=writer, git=None)


def _lines(ledger, writer="box"):
    return (ledger.dir / f"{writer}.jsonl").read_bytes().splitlines(keepends=True)


def _entries(ledger, writer="box"):
    return [json.loads(line) for line in _lines(ledger, writer)]


def _messages(ledger):
    return [str(f) for f in verify(ledger, remember=False).findings]


def _forger_key(tmp_path, name="forger"):
    path = tmp_path / "forger-keys" / f"{name}.key"
    signing.ensure_key_file(path)
    return signing.load_private(path)


def _append_raw(ledger, writer, kind, payload):
    """A well-hashed, well-linked line appended by hand, past every check `append` makes."""
    last = _entries(ledger, writer)[-1]
    body = {
        "v": 1,
        "seq": last["seq"] + 1,
        "prev": last["id"],
        "writer": writer,
        "kind": kind,
        "refs": [],
        "ts": chain.utc_now(),
        "payload": payload,
        "git": None,
        "box": "stated:box-one",
    }
    _, line = chain.encode_line(body)
    with (ledger.dir / f"{writer}.jsonl").open("ab") as handle:
        handle.write(line)
    ledger.refresh()
    return json.loads(line)


def _swap_signer(ledger, writer, public):
    (ledger.dir / "allowed_signers").write_text(f"{writer} {public} forged\n")


# -- on by default ------------------------------------------------------------------------------


def test_a_new_writers_first_append_makes_its_key_outside_the_repo_and_a_key_entry_first(tmp_path):
    ledger = _project(tmp_path)
    _note(ledger, "first words")
    kinds = [(e["seq"], e["kind"]) for e in _entries(ledger)]
    assert kinds == [(0, "key"), (1, "note")]
    key_file = tmp_path / "keys" / "box.key"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert not any(p.name.endswith(".key") for p in ledger.root.rglob("*"))  # no private half in the repo
    public = signing.public_text(signing.load_private(key_file))
    first = _entries(ledger)[0]["payload"]
    assert (first["action"], first["public_key"], first["signed_by"]) == ("first", public, public)
    assert signing.allowed_signers(ledger.dir) == {"box": {public}}
    report = verify(ledger)
    assert report.ok and report.signed == ["box"] and report.warnings == []


def test_ledger_init_makes_the_key_and_is_safe_to_run_again(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    run = CliRunner().invoke
    first = run(main, ["init", "--root", str(root), "--writer", "box-a"])
    assert first.exit_code == 0, first.output
    assert "box-a signs its chain: SHA256:" in first.output
    again = run(main, ["init", "--root", str(root), "--writer", "box-a"])
    assert again.exit_code == 0, again.output
    ledger = Ledger.open(root)
    assert [e["kind"] for e in _entries(ledger, "box-a")] == ["key"]  # one key entry, not two
    assert verify(ledger).signed == ["box-a"]


def test_signing_off_leaves_a_new_chain_unsigned_and_every_verify_warns(tmp_path, monkeypatch):
    monkeypatch.setenv(signing.SIGNING_ENV, "off")
    ledger = _project(tmp_path)
    _note(ledger, "plain")
    result = CliRunner().invoke(main, ["verify", "--root", str(ledger.root)])
    assert result.exit_code == 0
    assert "warning: ledger/box.jsonl: unsigned chain of 'box' (1 entries)" in result.output
    assert "ledger key init --adopt" in result.output


def test_adopt_signs_an_unsigned_chain_forward(tmp_path, monkeypatch):
    monkeypatch.setenv(signing.SIGNING_ENV, "off")
    ledger = _project(tmp_path)
    for i in range(3):
        _note(ledger, f"old {i}")
    refused = CliRunner().invoke(main, ["key", "init", "--root", str(ledger.root), "--writer", "box"])
    assert refused.exit_code == 3 and "--adopt" in refused.output
    adopted = CliRunner().invoke(
        main, ["key", "init", "--adopt", "--root", str(ledger.root), "--writer", "box"]
    )
    assert adopted.exit_code == 0, adopted.output
    _note(ledger, "signed from now on")
    assert [e["kind"] for e in _entries(ledger)] == ["note"] * 3 + ["key", "note"]
    report = verify(ledger)
    assert report.ok and report.signed == ["box"] and report.warnings == []


# -- impersonation --------------------------------------------------------------------------------


def test_a_key_swapped_in_allowed_signers_with_a_re_signed_impersonated_entry_fails(tmp_path):
    ledger = _project(tmp_path)
    _note(ledger, "mine")
    forger = _forger_key(tmp_path)
    _swap_signer(ledger, "box", signing.public_text(forger))
    impostor = _append_raw(ledger, "box", "note", {"schema_version": 1, "text": "not mine"})
    signing.write_head(ledger.dir, "box", impostor, forger)
    (message,) = _messages(ledger)
    assert message.startswith("ledger/box.jsonl: ledger/allowed_signers gives 'box' SHA256:")
    assert "but its chain's key entries (line 1) give" in message


def test_a_rotation_signed_by_anyone_but_the_old_key_changes_nothing(tmp_path):
    ledger = _project(tmp_path)
    _note(ledger, "mine")
    old = _entries(ledger)[0]["payload"]["public_key"]
    forger = _forger_key(tmp_path)
    forged = signing.rotation_payload("box", old, signing.public_text(forger), forger)
    rotation = _append_raw(ledger, "box", "key", forged)
    signing.write_head(ledger.dir, "box", rotation, forger)
    _swap_signer(ledger, "box", signing.public_text(forger))
    messages = _messages(ledger)
    assert messages[0].startswith("ledger/box.jsonl:3: a rotation signed by SHA256:")
    assert "neither the key it replaces nor a maintainer key in ledger/root_of_trust" in messages[0]
    assert "allowed_signers gives 'box'" in messages[1]


def test_a_second_first_key_entry_is_no_rotation(tmp_path):
    ledger = _project(tmp_path)
    _note(ledger, "mine")
    forger = _forger_key(tmp_path)
    entry = _append_raw(ledger, "box", "key", signing.first_key_payload("box", forger))
    signing.write_head(ledger.dir, "box", entry, forger)
    assert "ledger/box.jsonl:3: a second first key for 'box'" in _messages(ledger)[0]


def test_dropping_a_signing_writer_to_unsigned_fails(tmp_path):
    ledger = _project(tmp_path)
    _note(ledger, "mine")
    (ledger.dir / "allowed_signers").unlink()
    (ledger.dir / "heads" / "box.json").unlink()
    _append_raw(ledger, "box", "note", {"schema_version": 1, "text": "downgraded"})
    (message,) = _messages(ledger)
    assert "allowed_signers gives 'box' no key" in message


def test_a_rotation_by_the_old_key_verifies_and_the_new_key_signs(tmp_path):
    ledger = _project(tmp_path)
    _note(ledger, "before")
    old_public = _entries(ledger)[0]["payload"]["public_key"]
    result = CliRunner().invoke(main, ["key", "rotate", "--root", str(ledger.root), "--writer", "box"])
    assert result.exit_code == 0, result.output
    assert "rotated box: SHA256:" in result.output
    _note(ledger, "after")
    rotation = _entries(ledger)[2]["payload"]
    assert (rotation["action"], rotation["previous_key"], rotation["signed_by"]) == (
        "rotate",
        old_public,
        old_public,
    )
    new_public = rotation["public_key"]
    assert signing.allowed_signers(ledger.dir) == {"box": {new_public}}
    assert json.loads((ledger.dir / "heads" / "box.json").read_text())["key"] == new_public
    assert list((tmp_path / "keys").glob("box.key.retired-*"))
    assert verify(ledger).signed == ["box"] and _messages(ledger) == []
    # the retired key can no longer sign, nor can it come back through an old rotation
    back = signing.rotation_payload(
        "box", new_public, old_public, signing.load_private(tmp_path / "keys" / "box.key")
    )
    entry = _append_raw(ledger, "box", "key", back)
    signing.write_head(ledger.dir, "box", entry, signing.load_private(tmp_path / "keys" / "box.key"))
    assert "a rotation back to a retired key" in _messages(ledger)[0]


def test_a_maintainer_of_the_root_of_trust_grants_a_rotation_when_the_key_is_lost(tmp_path, monkeypatch):
    ledger = _project(tmp_path)
    _note(ledger, "before the box died")
    maintainer = _forger_key(tmp_path, "alice")
    (tmp_path / "keys" / "box.key").unlink()  # the box is gone with its key
    next_public = (
        CliRunner()
        .invoke(main, ["key", "rotate", "--request", "--root", str(ledger.root), "--writer", "box"])
        .output.strip()
    )
    monkeypatch.setenv(signing.KEY_DIR_ENV, str(tmp_path / "forger-keys"))
    granted = CliRunner().invoke(
        main, ["key", "grant", "box", next_public, "--as", "alice", "--root", str(ledger.root)]
    )
    assert granted.exit_code == 3 and "not in ledger/root_of_trust" in granted.output  # no root of trust yet
    (ledger.dir / "root_of_trust").write_text(f"alice {signing.public_text(maintainer)}\n")
    granted = CliRunner().invoke(
        main, ["key", "grant", "box", next_public, "--as", "alice", "--root", str(ledger.root)]
    )
    assert granted.exit_code == 0, granted.output
    monkeypatch.setenv(signing.KEY_DIR_ENV, str(tmp_path / "keys"))
    rotated = CliRunner().invoke(
        main,
        ["key", "rotate", "--grant", granted.output.strip(), "--root", str(ledger.root), "--writer", "box"],
    )
    assert rotated.exit_code == 0, rotated.output
    _note(ledger, "the new box")
    assert _messages(ledger) == [] and verify(ledger).signed == ["box"]
    (ledger.dir / "root_of_trust").unlink()  # without the maintainer's standing the rotation is void
    assert "neither the key it replaces nor a maintainer key" in _messages(ledger)[0]


def test_an_append_without_the_writers_key_is_refused(tmp_path, monkeypatch):
    ledger = _project(tmp_path)
    _note(ledger, "mine")
    monkeypatch.setenv(signing.KEY_DIR_ENV, str(tmp_path / "other-box"))
    with pytest.raises(StateError, match="this box has no key for it"):
        _note(ledger, "impostor")


# -- a head may not move back ----------------------------------------------------------------------


def test_a_chain_rolled_back_with_its_older_signed_head_fails_once_this_box_saw_it(tmp_path):
    ledger = _project(tmp_path)
    _note(ledger, "one")
    chain_file, head_file = ledger.dir / "box.jsonl", ledger.dir / "heads" / "box.json"
    old_chain, old_head = chain_file.read_bytes(), head_file.read_bytes()
    _note(ledger, "two")
    assert verify(ledger).ok  # this box sees seq 2 and remembers it
    chain_file.write_bytes(old_chain)
    head_file.write_bytes(old_head)
    assert _messages(ledger) == [
        "ledger/box.jsonl: this box saw this chain at seq 2 ("
        + seenheads.remembered(ledger.dir)["box"][1][:12]
        + f"); it now ends at seq 1: it was rolled back (seen heads: {tmp_path / 'state' / 'heads.json'})"
    ]
    shutil.rmtree(tmp_path / "state")  # another box (a fresh clone) has seen nothing: signatures hold
    assert _messages(ledger) == []


def test_a_rewritten_unsigned_chain_fails_once_this_box_saw_it(tmp_path, monkeypatch):
    monkeypatch.setenv(signing.SIGNING_ENV, "off")
    ledger = _project(tmp_path)
    for text in ("a", "b"):
        _note(ledger, text)
    assert verify(ledger).ok
    entries = _entries(ledger)
    entries[1]["payload"]["text"] = "B"
    body = {k: v for k, v in entries[1].items() if k != "id"}
    _, line = chain.encode_line(body)
    (ledger.dir / "box.jsonl").write_bytes(_lines(ledger)[0] + line)
    (message,) = _messages(ledger)
    assert "this box saw" in message and "at seq 1; the chain now holds" in message and "rewritten" in message
