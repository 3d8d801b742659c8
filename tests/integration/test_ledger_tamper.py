"""The tamper matrix of issue 26.2 against real git: each attack in each git state (working tree,
staged, committed) must fail both `ledger verify` and `ledger verify --history`; what only the
history sees is refused by `ledger tables` too; `ledger sync` never takes a rewrite of a local
chain; a clean clone without any private key verifies from the public keys in the repository.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import StateError
from recipe_ledger.ledger import chain, seenheads, signing
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.sync import sync

STATES = ("working tree", "staged", "committed")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.fixture(autouse=True)
def _signing_box(monkeypatch, tmp_path):
    monkeypatch.delenv(signing.SIGNING_ENV, raising=False)
    monkeypatch.setenv(signing.KEY_DIR_ENV, str(tmp_path / "keys"))
    monkeypatch.setenv(seenheads.STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setenv("RECIPE_LEDGER_BOX_ID", "box-one")
    monkeypatch.setenv("RECIPE_LEDGER_CACHE_DIR", str(tmp_path / "cache"))


def _commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    ledger = Ledger.init(root)
    for text in ("a1", "a2"):
        ledger.append("note", {"text": text}, writer="box-a", git=None)
    monkeypatch.setenv(signing.SIGNING_ENV, "off")
    for text in ("old 1", "old 2"):
        ledger.append("note", {"text": text}, writer="legacy", git=None)
    monkeypatch.delenv(signing.SIGNING_ENV)
    maintainer = tmp_path / "maintainer.key"
    signing.ensure_key_file(maintainer)
    (ledger.dir / "root_of_trust").write_text(
        f"alice {signing.public_text(signing.load_private(maintainer))}\n"
    )
    _commit(root, "start")
    ledger.append("note", {"text": "a3"}, writer="box-a", git=None)
    _commit(root, "a3")
    assert CliRunner().invoke(main, ["verify", "--history", "--root", str(root)]).exit_code == 0  # seen
    return root


def _entries(root: Path, writer: str) -> list[dict]:
    return [json.loads(line) for line in (root / "ledger" / f"{writer}.jsonl").read_bytes().splitlines()]


def _append_raw(root: Path, writer: str, kind: str, payload: dict) -> dict:
    last = _entries(root, writer)[-1]
    body = {
        **{k: v for k, v in last.items() if k not in ("id", "payload", "kind", "seq", "prev", "ts")},
        "seq": last["seq"] + 1,
        "prev": last["id"],
        "kind": kind,
        "payload": payload,
        "ts": chain.utc_now(),
    }
    _, line = chain.encode_line(body)
    with (root / "ledger" / f"{writer}.jsonl").open("ab") as handle:
        handle.write(line)
    return json.loads(line)


def _forger(tmp_path: Path):
    path = tmp_path / "forger.key"
    signing.ensure_key_file(path)
    return signing.load_private(path)


def swap_key(root: Path, tmp_path: Path) -> None:
    forger = _forger(tmp_path)
    (root / "ledger" / "allowed_signers").write_text(f"box-a {signing.public_text(forger)} new laptop\n")
    entry = _append_raw(root, "box-a", "note", {"schema_version": 1, "text": "box-a never said this"})
    signing.write_head(root / "ledger", "box-a", entry, forger)


def forged_rotation(root: Path, tmp_path: Path) -> None:
    forger = _forger(tmp_path)
    old = _entries(root, "box-a")[0]["payload"]["public_key"]
    _append_raw(
        root, "box-a", "key", signing.rotation_payload("box-a", old, signing.public_text(forger), forger)
    )
    (root / "ledger" / "allowed_signers").write_text(f"box-a {signing.public_text(forger)}\n")
    entry = _append_raw(root, "box-a", "note", {"schema_version": 1, "text": "signed by the new key"})
    signing.write_head(root / "ledger", "box-a", entry, forger)


def roll_back(root: Path, tmp_path: Path) -> None:
    git(root, "checkout", "HEAD~1", "--", "ledger/box-a.jsonl", "ledger/heads/box-a.json")
    git(root, "reset", "-q")  # keep the old files in the working tree only


def rewrite_unsigned(root: Path, tmp_path: Path) -> None:
    entries = _entries(root, "legacy")
    entries[0]["payload"]["text"] = "a better number"
    lines, prev = [], None
    for entry in entries:
        prev, line = chain.encode_line({k: v for k, v in entry.items() if k != "id"} | {"prev": prev})
        lines.append(line)
    (root / "ledger" / "legacy.jsonl").write_bytes(b"".join(lines))


ATTACKS = {"swap_key": swap_key, "forged_rotation": forged_rotation, "roll_back": roll_back}


def _put_in_state(root: Path, state: str) -> None:
    if state == "staged":
        git(root, "add", "-A")
    elif state == "committed":
        _commit(root, "tamper")


def _verify(root: Path, *extra: str) -> int:
    return CliRunner().invoke(main, ["verify", *extra, "--root", str(root)]).exit_code


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_impersonation_or_rollback_fails_verify_and_history_in_every_git_state(
    project, tmp_path, attack, state
):
    ATTACKS[attack](project, tmp_path)
    _put_in_state(project, state)
    assert _verify(project) == 1
    assert _verify(project, "--history") == 1
    refused = CliRunner().invoke(main, ["tables", "--root", str(project), "--out", "tables"])
    assert refused.exit_code == 3 and "the ledger does not verify, so nothing is published" in refused.output


@pytest.mark.parametrize("state", STATES)
def test_an_unsigned_chain_rewritten_consistently_is_seen_by_this_box_and_by_history(
    project, tmp_path, state
):
    rewrite_unsigned(project, tmp_path)
    _put_in_state(project, state)
    assert _verify(project) == 1  # this box saw the legacy chain's head
    assert _verify(project, "--history") == 1
    (tmp_path / "state" / "heads.json").unlink()  # a box that never saw it: only the history knows
    assert _verify(project) == 0
    assert _verify(project, "--history") == 1
    refused = CliRunner().invoke(main, ["tables", "--root", str(project), "--out", "tables"])
    assert refused.exit_code == 3 and "legacy.jsonl" in refused.output  # it publishes what history refuses


@pytest.mark.parametrize("state", STATES)
def test_the_root_of_trust_is_committed_once(project, state):
    path = project / "ledger" / "root_of_trust"
    path.write_text(path.read_text() + "mallory ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGt8Iu2F5Jv3wHh\n")
    _put_in_state(project, state)
    result = CliRunner().invoke(main, ["verify", "--history", "--root", str(project)])
    assert result.exit_code == 1 and "changed ledger/root_of_trust, which is committed once" in result.output


def test_a_clean_clone_without_any_private_key_verifies_the_signed_chains(project, tmp_path, monkeypatch):
    clone = tmp_path / "ci"
    subprocess.run(["git", "clone", "-q", str(project), str(clone)], check=True)
    monkeypatch.setenv(signing.KEY_DIR_ENV, str(tmp_path / "no-keys"))
    monkeypatch.setenv(seenheads.STATE_DIR_ENV, str(tmp_path / "ci-state"))
    result = CliRunner().invoke(main, ["verify", "--history", "--json", "--root", str(clone)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (
        report["signed"] == ["box-a"] and len(report["warnings"]) == 1 and "legacy" in report["warnings"][0]
    )
    assert not (tmp_path / "no-keys").exists()


def test_sync_refuses_a_remote_rewrite_of_a_local_chain_naming_the_first_differing_entry(project, tmp_path):
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(project), str(bare)], check=True)
    boxes = {}
    for name in ("box-a", "box-b"):
        boxes[name] = tmp_path / name
        subprocess.run(["git", "clone", "-q", str(bare), str(boxes[name])], check=True)
    sync(boxes["box-a"])  # box-a has seen the chains as they are
    rewrite_unsigned(boxes["box-b"], tmp_path)  # box-b rewrites the unsigned chain and pushes it
    _commit(boxes["box-b"], "a consistent rewrite")
    git(boxes["box-b"], "push", "-q", "origin", "main")
    before = (boxes["box-a"] / "ledger" / "legacy.jsonl").read_bytes()
    with pytest.raises(
        StateError,
        match=r"would replace ledger/legacy.jsonl with a rewrite of it: line 1 \(seq 0, \w{12}\) differs",
    ):
        sync(boxes["box-a"])
    assert (boxes["box-a"] / "ledger" / "legacy.jsonl").read_bytes() == before
