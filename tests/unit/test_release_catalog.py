"""Release payload v2, the imported Sixty-K Agent lane, and `ledger release list|show|diff` /
`ledger reproduce` on it (the committed seed chain, copied: nothing here writes to the project's ledger)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import InputError, UnknownIdError
from recipe_ledger.ledger.models import ReleasePayload, load_payload, validate_payload
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.releases import catalog, diff

SEED_CHAIN = Path(__file__).resolve().parents[2] / "ledger" / "seed-000.jsonl"


@pytest.fixture()
def seeded(tmp_path) -> Path:
    """A ledger holding exactly the committed seed chain, bytes unchanged."""
    Ledger.init(tmp_path)
    shutil.copy(SEED_CHAIN, tmp_path / "ledger" / "seed-000.jsonl")
    return tmp_path


def cli(root: Path, *args: str):
    return CliRunner().invoke(main, [*args, "--root", str(root)])


def test_v1_release_entries_read_as_v2_unverified_and_stay_byte_for_byte():
    before = SEED_CHAIN.read_bytes()
    lines = [json.loads(line) for line in before.decode().splitlines()]
    releases = [e for e in lines if e["kind"] == "release"]
    assert [e["payload"]["schema_version"] for e in releases] == [1, 1, 1]
    for entry in releases:
        payload = load_payload("release", entry["payload"])
        assert isinstance(payload, ReleasePayload) and payload.schema_version == 2
        assert payload.verified is False
        assert payload.unverified[0] == "published before releases carried pins (release schema 1)"
    v14 = load_payload("release", releases[-1]["payload"])
    assert "image vllm/vllm-openai:deepseekv41-flash-0909 is given by tag only (unpinned)" in v14.unverified
    assert v14.model.revision_source == "folder-name"
    assert SEED_CHAIN.read_bytes() == before


def test_a_release_is_verified_exactly_when_it_gives_no_reason_against_it():
    with pytest.raises(InputError, match="verified exactly when"):
        validate_payload("release", {"lane": "l", "version": "v1", "verified": True, "unverified": ["x"]})
    bare = validate_payload("release", {"lane": "l", "version": "v1"})
    assert bare.verified is False
    assert bare.unverified[0].startswith("not published with `ledger release publish`")


def test_the_imported_lane_is_listed_with_its_status_and_v14_unpinned(seeded):
    found = catalog.releases(Ledger.open(seeded))
    assert [(r.payload.version, r.verification, r.status) for r in found] == [
        ("v12", "imported", "superseded"),
        ("v13", "imported", "superseded"),
        ("v14", "imported", "active"),
    ]
    v14 = catalog.summary(found[-1])
    assert v14["pins"]["image"] == {
        "ref": "vllm/vllm-openai:deepseekv41-flash-0909",
        "digest": None,
        "image_id": None,
        "state": "unpinned",
    }
    assert v14["imported"] is True and v14["status"] == "imported"


def test_release_list_json_prints_lane_version_status_and_pins(seeded):
    result = cli(seeded, "release", "list", "--json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [(r["lane"], r["version"], r["status"]) for r in rows] == [
        ("sixty-k-agent", "v12", "imported"),
        ("sixty-k-agent", "v13", "imported"),
        ("sixty-k-agent", "v14", "imported"),
    ]
    assert rows[-1]["pins"]["image"]["state"] == "unpinned"


def test_release_show_accepts_the_lane_title_and_says_why_it_is_unverified(seeded):
    result = cli(seeded, "release", "show", "Sixty-K Agent@v14")
    assert result.exit_code == 0, result.output
    assert "imported" in result.output and "(unpinned)" in result.output
    assert "k-schedule: dspark k=5; batch 1-4: k=5, batch 5-16: k=1" in result.output


def test_diff_shows_the_k_schedule_flags_and_numbers_side_by_side(seeded):
    ledger = Ledger.open(seeded)
    v12, v14 = catalog.find(ledger, "sixty-k-agent@v12"), catalog.find(ledger, "sixty-k-agent@v14")
    rows = {(r.section, r.name): r for r in diff.diff(v12, v14)}
    assert rows[("k-schedule", "speculation")].a == "none"
    assert rows[("k-schedule", "speculation")].b == "dspark k=5; batch 1-4: k=5, batch 5-16: k=1"
    assert rows[("flags", "--cpu-offload-gb")].same and rows[("flags", "--cpu-offload-gb")].a == "60"
    assert (
        rows[("numbers", "gain_vs_off70_pct_low")].a == "12"
        and rows[("numbers", "gain_vs_off70_pct_low")].b == "-"
    )
    result = cli(seeded, "release", "diff", "sixty-k-agent@v13", "sixty-k-agent@v14", "--changes", "--json")
    assert result.exit_code == 0 and all(not json.loads(line)["same"] for line in result.output.splitlines())


def test_unknown_and_malformed_release_references_are_named(seeded):
    with pytest.raises(UnknownIdError, match="no release sixty-k-agent@v99"):
        catalog.find(Ledger.open(seeded), "sixty-k-agent@v99")
    with pytest.raises(InputError, match="is not LANE@VERSION"):
        catalog.parse_ref("sixty-k-agent")


def test_reproducing_an_imported_release_is_refused_naming_why(seeded):
    result = cli(seeded, "reproduce", "sixty-k-agent@v14")
    assert result.exit_code == 3
    assert "no numbers linked to result entries (imported" in result.output


@pytest.mark.parametrize(
    ("image", "text"),
    [
        (None, diff.ABSENT),
        ({"ref": "vllm/vllm-openai:v1", "digest": None}, "vllm/vllm-openai:v1 (unpinned)"),
        ({"ref": "r/x:1", "digest": "sha256:ab"}, "r/x:1 @ sha256:ab"),
        ({"ref": "r/x@sha256:ab", "digest": "sha256:ab"}, "r/x@sha256:ab"),
    ],
)
def test_an_image_pin_is_shown_once_with_its_digest(image, text):
    assert diff.image_text(image) == text
