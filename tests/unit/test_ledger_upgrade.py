"""Stored payloads of an older schema_version are read through the upgrade path, never rewritten."""

import json
from pathlib import Path

import pytest

from recipe_ledger.errors import StateError
from recipe_ledger.ledger.models import CalibrationPayload, ResultPayload, load_payload

SEED_CHAIN = Path(__file__).resolve().parents[2] / "ledger" / "seed-000.jsonl"


def stored(kind):
    for line in SEED_CHAIN.read_text().splitlines():
        entry = json.loads(line)
        if entry["kind"] == kind:
            return line, entry
    raise AssertionError(kind)


@pytest.mark.parametrize(
    ("kind", "model", "current"), [("result", ResultPayload, 4), ("calibration", CalibrationPayload, 2)]
)
def test_v1_entries_read_as_current_and_stay_byte_for_byte(kind, model, current):
    line, entry = stored(kind)
    assert entry["payload"]["schema_version"] == 1
    payload = load_payload(kind, entry["payload"])
    assert isinstance(payload, model) and payload.schema_version == current
    assert SEED_CHAIN.read_text().count(line) == 1  # the stored line is untouched


def test_a_payload_from_the_future_is_refused():
    with pytest.raises(StateError, match="newer than this tool reads"):
        load_payload("result", {"schema_version": 99, "subject": "x"})


def test_a_v2_result_reads_as_current_with_the_fixed_design_implied():
    """v3 added the design record and each bar's launches; a stored v2 result has neither and reads
    as it was (no design: the fixed design, as every v2 result ran)."""
    v2 = {
        "schema_version": 2,
        "subject": "x",
        "experiment": {
            "name": "x",
            "spec": "experiments/x.yaml",
            "spec_sha256": "sha256:" + "0" * 64,
            "box": "cpu-only",
            "run_id": "x-1",
            "points": [1],
            "repeats": 2,
            "arms": {},
            "bars": [
                {
                    "candidate": "c",
                    "metric": "m",
                    "point": 1,
                    "direction": "higher",
                    "min_effect": 0.05,
                    "outcome": "win",
                }
            ],
        },
    }
    payload = load_payload("result", v2)
    assert isinstance(payload, ResultPayload) and payload.schema_version == 4
    assert payload.experiment is not None and payload.experiment.design is None
    assert payload.experiment.bars[0].launches is None and v2["schema_version"] == 2  # a copy upgraded
    # v4's quality bars: a result recorded before them had none, and its win stays a win.
    assert payload.experiment.quality is None and payload.experiment.bars[0].quality is None
    assert payload.experiment.bars[0].outcome == "win"
