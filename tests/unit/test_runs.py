"""The run folder: versioned files, one reading policy, and the folders already committed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from recipe_ledger import runs
from recipe_ledger.errors import InputError, StateError
from recipe_ledger.pipeline.measure import PointRecord
from recipe_ledger.pipeline.run import write_records

REPO = Path(__file__).resolve().parents[2]
EVIDENCE_RUNS = sorted(p.parent for p in (REPO / "evidence").glob("*/*/measurements.jsonl"))


def point(arm: str, repeat: int, value: float) -> PointRecord:
    return PointRecord(arm, repeat, 4, "bench", "v", repeat, {"output_tps_total": value})


def test_records_written_by_the_runner_carry_a_header_and_read_back(tmp_path):
    path = tmp_path / runs.MEASUREMENTS
    records = [point("control", 1, 100.0), point("fast", 1, 130.0)]
    write_records(path, records)
    header = json.loads(path.read_text().splitlines()[0])
    assert header == {"format": runs.RECORDS_FORMAT, "version": runs.RECORDS_VERSION}
    found = runs.read_records(path)
    assert found.version == runs.RECORDS_VERSION and found.problems == []
    assert found.records == [json.loads(r.to_json()) for r in records]
    assert not list(tmp_path.glob(".*.tmp"))  # written whole through a temporary file


@pytest.mark.parametrize("folder", EVIDENCE_RUNS, ids=lambda p: p.name)
def test_the_committed_evidence_folders_read_whole_at_their_version(folder):
    """Folders from before the headers read as version 0, later ones at the version they say; no
    line of either is skipped or reported."""
    for name in (runs.MEASUREMENTS, runs.CALIBRATION):
        if not (folder / name).is_file():
            continue
        found = runs.read_records(folder / name)
        lines = [line for line in (folder / name).read_text().splitlines() if line.strip()]
        headed = json.loads(lines[0]).get("format") == runs.RECORDS_FORMAT
        assert found.version == (runs.RECORDS_VERSION if headed else runs.LEGACY_VERSION)
        assert found.problems == []
        assert len(found.records) == len(lines) - headed and all("arm" in r for r in found.records)
    plan = runs.read_json(folder / runs.PLAN)
    assert plan["arms"] and "format_version" not in plan  # the reader takes the header off


def test_evidence_folders_exist_to_be_checked():
    assert EVIDENCE_RUNS, "evidence/*/<run>/measurements.jsonl: the committed folders this reader must accept"


def test_a_torn_last_line_is_reported_with_its_line_and_the_good_records_kept(tmp_path):
    path = tmp_path / runs.MEASUREMENTS
    write_records(path, [point("control", 1, 100.0)])
    path.write_text(path.read_text() + '{"arm": "fast", "rep')
    found = runs.read_records(path)
    assert len(found.records) == 1
    assert [str(p) for p in found.problems] == [f"{path}:3: torn last line (the run stopped mid-write?)"]
    with pytest.raises(InputError) as info:
        found.raise_if_problems()
    assert info.value.where == f"{path}:3" and info.value.exit_code == 2


def test_a_bad_line_in_the_middle_is_reported_and_the_lines_after_it_still_read(tmp_path):
    path = tmp_path / runs.MEASUREMENTS
    good = [point("control", r, 100.0 + r).to_json() for r in (1, 2)]
    path.write_text("\n".join([good[0], "{not json", "[1, 2]", "", good[1]]) + "\n")
    found = runs.read_records(path)
    assert [r["repeat"] for r in found.records] == [1, 2] and found.version == runs.LEGACY_VERSION
    assert [(p.line, p.why.split(" (")[0]) for p in found.problems] == [
        (2, "not JSON"),
        (3, "expected a JSON object, got list"),
    ]
    with pytest.raises(InputError, match=r"and 1 more bad lines"):
        found.raise_if_problems()


def test_a_newer_records_file_is_refused_not_half_read(tmp_path):
    path = tmp_path / runs.MEASUREMENTS
    header = {"format": runs.RECORDS_FORMAT, "version": runs.RECORDS_VERSION + 1}
    path.write_text(json.dumps(header) + "\n" + point("control", 1, 1.0).to_json() + "\n")
    with pytest.raises(StateError, match="newer than this tool reads") as info:
        runs.read_records(path)
    assert info.value.where == f"{path}:1"


def test_json_files_carry_a_format_version_that_reading_removes(tmp_path):
    path = tmp_path / runs.PLAN
    runs.write_json(path, {"arms": {"control": {"fingerprint": "sha256:" + "a" * 64}}})
    assert json.loads(path.read_text())["format_version"] == runs.JSON_VERSION
    assert runs.read_json(path) == {"arms": {"control": {"fingerprint": "sha256:" + "a" * 64}}}
    path.write_text(json.dumps({"format_version": runs.JSON_VERSION + 1}))
    with pytest.raises(StateError, match="newer than this tool reads"):
        runs.read_json(path)
    path.write_text("[]")
    with pytest.raises(InputError, match="expected a JSON object"):
        runs.read_json(path)


def test_artifact_hashes_pin_the_folder_s_own_files_that_exist(tmp_path):
    folder = runs.create(tmp_path, "exp-20260101T000000Z-abcd")
    assert (folder / runs.RAW).is_dir() and runs.artifact_hashes(folder) == {}
    write_records(folder / runs.MEASUREMENTS, [point("control", 1, 100.0)])
    (folder / "server-control-r1.log").write_text("not pinned by the entry\n")
    hashes = runs.artifact_hashes(folder)
    expected = "sha256:" + hashlib.sha256((folder / runs.MEASUREMENTS).read_bytes()).hexdigest()
    assert hashes == {runs.MEASUREMENTS: expected}


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "", ".hidden", None])
def test_a_run_id_never_names_a_path_outside_runs(name, tmp_path):
    assert not runs.is_run_id(name)
    with pytest.raises(InputError):
        runs.run_dir(tmp_path, name)  # type: ignore[arg-type]


def test_the_run_folder_lives_under_the_repository_s_runs(tmp_path):
    assert runs.runs_dir(tmp_path) == tmp_path / "runs"
    assert runs.run_dir(tmp_path, "exp-1") == tmp_path / "runs" / "exp-1"
