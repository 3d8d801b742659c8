"""Quality bars in the experiment file and in the record: what a bar with a margin is, what it may
name, how it rides on either design, and what it makes of a speed win."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from recipe_ledger.errors import SpecError
from recipe_ledger.experiment.spec import Bar, QualityBar, load_experiment
from recipe_ledger.ledger.models import BarVerdict, DesignRecord
from recipe_ledger.pipeline import quality as quality_bars
from recipe_ledger.pipeline.measure import PointRecord

SPEED = {"metric": "output_tps_total", "point": 1, "direction": "higher", "min_effect": 0.05}
QUALITY = {"metric": "probes_passed_rate", "instrument": "probes", "point": 1, "margin": 0.1}


def spec(tmp_path: Path, bars: list[dict], **changes) -> Path:
    doc = {
        "name": "x",
        "hypothesis": "h",
        "box": "cpu-only",
        "engine": "none",
        "control": {"argv": ["python3", "-c", "pass"]},
        "candidates": {"c": {"argv": ["python3", "-c", "pass"]}},
        "instruments": [
            {"name": "bench", "kind": "vllm_bench_serve"},
            {"name": "probes", "kind": "probes"},
        ],
        "points": [1],
        "bars": bars,
        **changes,
    }
    path = tmp_path / "x.yaml"
    path.write_text(json.dumps(doc))
    return path


def test_a_margin_makes_a_quality_bar_beside_the_speed_bars(tmp_path):
    experiment = load_experiment(spec(tmp_path, [SPEED, QUALITY]))
    assert [type(b) for b in experiment.bars] == [Bar, QualityBar]
    assert experiment.speed_bars == [experiment.bars[0]] and experiment.quality_bars == [experiment.bars[1]]
    assert experiment.chosen_design.kind == "sequential"


def test_quality_bars_alone_run_the_fixed_design_and_a_sequential_one_is_refused(tmp_path):
    assert load_experiment(spec(tmp_path, [QUALITY])).chosen_design.kind == "fixed"
    with pytest.raises(SpecError, match="quality bars alone run the fixed design"):
        load_experiment(spec(tmp_path, [QUALITY], design={"kind": "sequential"}))


@pytest.mark.parametrize(
    ("bar", "words"),
    [
        ({**QUALITY, "instrument": "bench"}, "instrument 'bench' (vllm_bench_serve) scores no such items"),
        ({**QUALITY, "metric": "probes_total"}, "its item metrics: probes_passed_rate"),
        ({**SPEED, "instrument": "probes"}, "measures answers, not speed: make it a quality bar"),
        ({**QUALITY, "margin": 0}, "margin"),
        ({**QUALITY, "margin": 1.5}, "margin"),
    ],
)
def test_a_bar_that_does_not_fit_its_instrument_is_refused_naming_the_file(tmp_path, bar, words):
    with pytest.raises(SpecError, match=re.escape(words)) as raised:
        load_experiment(spec(tmp_path, [SPEED, bar]))
    assert "x.yaml" in str(raised.value)


def record(arm: str, repeat: int, items: dict[str, float], refused: str = "") -> PointRecord:
    return PointRecord(
        arm,
        repeat,
        1,
        "probes",
        "v",
        0,
        {},
        items={"probes_passed_rate": items} if items else {},
        refused=refused,
    )


def decided(tmp_path, records, design=None):
    experiment = load_experiment(spec(tmp_path, [SPEED, QUALITY]))
    return quality_bars.quality_verdicts(experiment, records, quality_bars.quality_alpha(design), False)


ALL = {str(i): 1.0 for i in range(400)}
HALF = {str(i): float(i % 2) for i in range(400)}


def test_the_reference_launch_carries_no_evidence_and_the_rest_pair_by_item(tmp_path):
    records = [record("control", 1, {}), record("control", 2, ALL), record("c", 1, ALL), record("c", 2, ALL)]
    (verdict,) = decided(tmp_path, records)
    assert verdict.outcome == "non-inferior" and verdict.items == 400
    assert (verdict.control_launches, verdict.candidate_launches) == (1, 2)


def test_lost_answers_are_worse_and_a_refused_point_is_not_comparable(tmp_path):
    worse = decided(tmp_path, [record("control", 2, ALL), record("c", 1, HALF)])
    assert worse[0].outcome == "worse" and worse[0].difference == pytest.approx(-0.5)
    refused = decided(tmp_path, [record("control", 2, ALL), record("c", 1, {}, refused="invalid: x")])
    assert refused[0].outcome == "not-comparable" and "invalid: x" in refused[0].reason


def test_the_error_rate_is_the_designs_per_side():
    sequential = DesignRecord(
        kind="sequential", method="m", alpha=0.01, launches=4, stopped="decided", summary=""
    )
    assert quality_bars.quality_alpha(sequential) == 0.005
    assert quality_bars.quality_alpha(None) == 0.025


def speed(outcome: str, candidate: str = "c") -> BarVerdict:
    return BarVerdict(
        candidate=candidate,
        metric="output_tps_total",
        point=1,
        direction="higher",
        min_effect=0.05,
        outcome=outcome,
        reason="why",
        decision=f"decided after 4 launches: {outcome}",
    )


def test_a_win_is_published_only_when_every_quality_bar_is_non_inferior(tmp_path):
    kept = decided(tmp_path, [record("control", 2, ALL), record("c", 1, ALL)])
    lost = decided(tmp_path, [record("control", 2, ALL), record("c", 1, HALF)])
    few = decided(tmp_path, [record("control", 2, {"0": 1.0}), record("c", 1, {"0": 1.0})])
    assert quality_bars.with_quality([speed("win")], kept)[0].outcome == "win"
    (worse,) = quality_bars.with_quality([speed("win")], lost)
    assert worse.outcome == "faster, worse answers" and worse.quality == "worse"
    assert worse.decision == "decided after 4 launches: faster, worse answers"
    (unshown,) = quality_bars.with_quality([speed("win")], few)
    assert unshown.outcome == "faster, quality not shown" and unshown.quality == "not shown"
    # A regression stays one; a candidate without quality bars is untouched.
    assert quality_bars.with_quality([speed("regression")], lost)[0].outcome == "regression"
    assert quality_bars.with_quality([speed("win", "other")], lost)[0].quality is None
