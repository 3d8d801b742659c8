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


@pytest.mark.parametrize(("kind", "model"), [("result", ResultPayload), ("calibration", CalibrationPayload)])
def test_v1_entries_read_as_v2_and_stay_byte_for_byte(kind, model):
    line, entry = stored(kind)
    assert entry["payload"]["schema_version"] == 1
    payload = load_payload(kind, entry["payload"])
    assert isinstance(payload, model) and payload.schema_version == 2
    assert SEED_CHAIN.read_text().count(line) == 1  # the stored line is untouched


def test_a_payload_from_the_future_is_refused():
    with pytest.raises(StateError, match="newer than this tool reads"):
        load_payload("result", {"schema_version": 99, "subject": "x"})
