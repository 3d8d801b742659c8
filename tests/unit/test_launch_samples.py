"""Samples inside one launch (instrument.samples_per_launch) count as one launch, never as several."""

from __future__ import annotations

import math

from recipe_ledger.pipeline.measure import PointRecord
from recipe_ledger.pipeline.run import launch_samples, samples


def record(arm: str, repeat: int, value: float, sample: int = 0, refused: str = "") -> PointRecord:
    return PointRecord(
        arm, repeat, 4, "bench", "v", 1000 * repeat + 4, {"tps": value}, refused=refused, sample=sample
    )


def test_a_launch_with_two_samples_is_one_number_their_geometric_mean():
    records = [
        record("control", 1, 100.0),
        record("control", 1, 121.0, sample=1),
        record("control", 2, 110.0),
        record("fast", 1, 130.0),
    ]
    assert launch_samples(records, "control", "bench", "tps", 4) == {1: [100.0, 121.0], 2: [110.0]}
    got = samples(records, "control", "bench", "tps", 4)
    assert len(got) == 2 and math.isclose(got[0], 110.0) and got[1] == 110.0


def test_one_sample_a_launch_reads_exactly_as_before_and_refused_points_have_none():
    records = [
        record("control", 1, 100.3),
        record("control", 2, 99.7),
        record("control", 3, 1.0, refused="flattered"),
    ]
    assert samples(records, "control", "bench", "tps", 4) == [100.3, 99.7]  # not exp(log(x)): bit for bit


def test_a_later_sample_is_named_apart_in_the_record_only_when_it_is_one():
    assert '"sample"' not in record("control", 1, 1.0).to_json()  # records as they always were
    assert '"sample": 1' in record("control", 1, 1.0, sample=1).to_json()
