"""The ledger commands end to end through click (no git: every call passes --root)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, [*args, "--root", str(tmp_path)], env={"RECIPE_LEDGER_WRITER": "box-a"})

    assert invoke("init").exit_code == 0
    return invoke


def test_note_prints_the_new_id_and_show_accepts_a_prefix(run):
    result = run("note", "offload 55 does not boot at 1M")
    assert result.exit_code == 0
    entry_id = result.output.strip()
    assert len(entry_id) == 64
    shown = run("show", entry_id[:7])
    assert shown.exit_code == 0
    assert f"id: {entry_id}" in shown.output and shown.output.startswith("status: active")
    assert "referred to by: nothing" in shown.output


def test_retract_then_log_json_and_status_filter(run):
    target = run("note", "a win on the replay").output.strip()
    evidence = run("note", "re-runs: 90, 119, 124 tok/s").output.strip()
    retraction = run("retract", target[:8], "--reason", "replay swings +/-17", "--evidence", evidence[:8])
    assert retraction.exit_code == 0, retraction.output
    rows = [json.loads(line) for line in run("log", "--json").output.splitlines()]
    assert [r["status"] for r in rows] == ["retracted", "active", "active"]
    assert rows[0]["id"] == target and rows[0]["payload"]["text"] == "a win on the replay"
    assert set(rows[0]) == {
        "box",
        "id",
        "v",
        "seq",
        "prev",
        "ts",
        "writer",
        "kind",
        "refs",
        "git",
        "payload",
        "status",
    }
    retracted = run("log", "--status", "retracted", "--json").output.splitlines()
    assert [json.loads(line)["id"] for line in retracted] == [target]
    kinds = [
        json.loads(line)["kind"] for line in run("log", "--kind", "retraction", "--json").output.splitlines()
    ]
    assert kinds == ["retraction"]
    shown = run("show", target)
    assert "status: retracted" in shown.output
    assert f"retracts  {retraction.output.strip()[:12]}" in shown.output
    table = run("log")
    assert table.exit_code == 0 and "retracted" in table.output and target[:12] in table.output


def test_errors_are_one_line_with_exit_codes(run):
    unknown = run("show", "deadbeef")
    assert unknown.exit_code == 2
    assert unknown.output.strip().startswith("error: ") and "no entry with id deadbeef" in unknown.output
    assert "(next: ledger log)" in unknown.output and "Traceback" not in unknown.output
    big = run("note", "x" * 1_048_576)
    assert big.exit_code == 2 and "the limit is 16,384 bytes per entry" in big.output
    first = run("note", "wrong").output.strip()
    notice = run("retract", first, "--reason", "wrong").output.strip()
    again = run("retract", notice, "--reason", "undo")
    assert again.exit_code == 2 and "a retraction cannot be retracted" in again.output
    assert run("log", "--status", "bogus").exit_code == 2


def test_verify_passes_then_names_file_and_line_of_a_hand_edit(run, tmp_path):
    for i in range(3):
        run("note", f"n{i}")
    ok = run("verify")
    assert ok.exit_code == 0 and ok.output.strip().splitlines()[-1] == "ok: 3 entries in 1 chain(s)"
    assert "warning: ledger/box-a.jsonl: unsigned chain of 'box-a' (3 entries)" in ok.output  # not failed
    path = tmp_path / "ledger" / "box-a.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"n1"', b'"N1"'))
    bad = run("verify")
    assert bad.exit_code == 1
    assert "ledger/box-a.jsonl:2: content does not match its id" in bad.output
    assert "error: ledger: ledger is not whole: 1 problem(s) (next: git log -p -- ledger/)" in bad.output


def test_verify_repair_moves_a_torn_tail_and_nothing_else(run, tmp_path):
    run("note", "whole")
    path = tmp_path / "ledger" / "box-a.jsonl"
    with path.open("ab") as handle:
        handle.write(b'{"id":"12')
    torn = run("verify")
    assert torn.exit_code == 1 and "box-a.jsonl:2: torn last line (9 bytes" in torn.output
    assert "(next: ledger verify --repair)" in torn.output
    assert run("note", "refused").exit_code == 3
    repaired = run("verify", "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "moved a torn tail of 9 bytes to ledger/quarantine/box-a.torn" in repaired.output
    assert run("note", "works again").exit_code == 0


def test_a_newer_payload_schema_is_shown_with_a_warning_and_nothing_lost(run, tmp_path):
    from recipe_ledger.ledger import chain

    body = {
        "v": 1,
        "seq": 0,
        "prev": None,
        "writer": "box-b",
        "kind": "note",
        "ts": "2026-01-01T00:00:00.000000Z",
        "refs": [],
        "git": None,
        "payload": {"schema_version": 7, "text": "from the future", "mood": "x"},
    }
    entry_id, line = chain.encode_line(body)
    (tmp_path / "ledger" / "box-b.jsonl").write_bytes(line)
    shown = run("show", entry_id[:8])
    assert shown.exit_code == 0
    assert "note payload schema_version 7 is newer than this tool reads (1)" in shown.output
    assert "from the future" in shown.output
    assert run("verify").exit_code == 0
    assert (tmp_path / "ledger" / "box-b.jsonl").read_bytes() == line


def test_commands_need_an_initialised_ledger(tmp_path):
    result = CliRunner().invoke(main, ["log", "--root", str(tmp_path / "nowhere")])
    assert (
        result.exit_code == 3 and "no ledger here" in result.output and "ledger init --root" in result.output
    )
