"""The experiment's design: which one a file runs, its cap, and one set of defaults everywhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from recipe_ledger import sequential, verdict
from recipe_ledger.errors import InputError, SpecError
from recipe_ledger.experiment.spec import Experiment, load_experiment
from recipe_ledger.pipeline import sequence

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "experiments" / "examples").glob("*.yaml"))
LANES = {"tiny-lane.yaml", "tiny-lane-v2.yaml"}  # release lanes: their published numbers ran fixed
# The quality demo: two launches per arm for four arms keep each of its five runs near ten minutes
# (its point is the quality bar, decided once at the end in either design).
FIXED_BY_CHOICE = {"tiny-quality.yaml"}


def spec(tmp_path: Path, **changes) -> Path:
    doc = {
        "name": "x",
        "hypothesis": "h",
        "box": "cpu-only",
        "engine": "none",
        "control": {"argv": ["python3", "-c", "pass"]},
        "candidates": {"c": {"argv": ["python3", "-c", "pass"]}},
        "instruments": [{"name": "probe", "kind": "command", "command": ["python3", "probe.py"]}],
        "points": [1],
        "bars": [{"metric": "m", "point": 1, "direction": "higher", "min_effect": 0.05}],
        **changes,
    }
    path = tmp_path / "x.yaml"
    path.write_text(json.dumps(doc))
    return path


def test_a_file_that_says_nothing_runs_sequential_and_one_that_sets_repeats_runs_fixed(tmp_path):
    assert load_experiment(spec(tmp_path)).chosen_design.kind == "sequential"
    fixed = load_experiment(spec(tmp_path, repeats=2))
    assert fixed.chosen_design.kind == "fixed" and fixed.repeats == 2
    named = load_experiment(spec(tmp_path, design={"kind": "fixed"}))
    assert named.chosen_design.kind == "fixed" and named.repeats == verdict.DEFAULT_REPEATS


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"repeats": 3, "design": {"kind": "sequential"}}, "repeats is the fixed design's launches per arm"),
        ({"design": {"kind": "fixed", "cap": 10}}, "cap belong to the sequential design"),
        ({"design": {"cap": 1}}, "design.cap"),
        ({"design": {"cap": sequential.MAX_CAP + 1}}, "design.cap"),
        ({"design": {"budget_box_hours": 0}}, "design.budget_box_hours"),
    ],
)
def test_a_design_that_contradicts_itself_is_refused_naming_the_file(tmp_path, changes, words):
    with pytest.raises(SpecError, match=re.escape(words)) as raised:
        load_experiment(spec(tmp_path, **changes))
    assert "x.yaml" in str(raised.value)


def test_the_cap_comes_from_the_file_else_the_budget_at_the_boxs_launch_time_else_the_default(tmp_path):
    default, why = sequence.design_for(load_experiment(spec(tmp_path)), None)
    assert default.cap == sequential.DEFAULT_CAP and "the default" in why
    budget = load_experiment(spec(tmp_path, design={"budget_box_hours": 4}))
    eight_minutes, why = sequence.design_for(budget, 480.0)
    assert eight_minutes.cap == 15 and "4 box-hours at 8.0 min a launch" in why  # 30 launches, 15 per arm
    unknown, why = sequence.design_for(budget, None)
    assert unknown.cap == sequential.DEFAULT_CAP and "needs a recorded launch" in why
    own, why = sequence.design_for(load_experiment(spec(tmp_path, design={"cap": 7, "alpha": 0.02})), 480.0)
    assert (own.cap, own.alpha) == (7, 0.02) and "the experiment's" in why
    with pytest.raises(InputError, match="fewer than the 2 a decision needs"):
        sequence.design_for(load_experiment(spec(tmp_path, design={"budget_box_hours": 0.2})), 480.0)


def test_the_boxs_launch_time_is_read_from_its_recorded_runs():
    def result(box: str, **experiment) -> dict:
        return {"kind": "result", "payload": {"experiment": {"box": box, **experiment}}}

    entries = [
        result("gb300", design={"launch_seconds": 500.0}),
        result("gb300", schedule=["control#1", "c#1"], duration_s=900.0),  # 450 s a launch
        result("gb300", schedule=["control#1"], duration_s=10.0, calibration_inline=True),  # not counted
        result("other", design={"launch_seconds": 5.0}),
        {"kind": "note", "payload": {}},
    ]
    assert sequence.recorded_launch_seconds(entries, "gb300") == 475.0
    assert sequence.recorded_launch_seconds(entries, "nowhere") is None


def test_pairs_alternate_which_arm_goes_first():
    assert sequence.pair_order(1, ["a", "b"]) == ["control", "a", "b"]
    assert sequence.pair_order(2, ["a", "b"]) == ["b", "a", "control"]
    assert sequence.pair_order(3, ["a"]) == ["control", "a"]


def test_one_set_of_defaults_in_the_spec_the_code_and_the_docs():
    fields = Experiment.model_fields
    assert fields["repeats"].default == verdict.DEFAULT_REPEATS
    calibration = fields["calibration"].default_factory()  # type: ignore[misc]
    assert calibration.repeats == verdict.DEFAULT_CALIBRATION_REPEATS
    assert verdict.MIN_PLANNING_CALIBRATION <= verdict.DEFAULT_CALIBRATION_REPEATS  # the plan can use it
    design = sequential.Design()
    docs = (REPO / "docs" / "verdicts.md").read_text()
    defaults = docs.split("## Defaults", 1)[1].split("\n## ", 1)[0]
    assert f"| repeats per arm and point (fixed design) | **{verdict.DEFAULT_REPEATS}** |" in defaults
    assert f"| **{verdict.DEFAULT_CALIBRATION_REPEATS}** A/A launches of the control |" in defaults
    assert "| design | **sequential** (`rl-sequential/1`)" in defaults
    sequential_defaults = docs.split("## The sequential design", 1)[1].split("### Defaults", 1)[1]
    assert f"{design.alpha:.0%} over the whole sequence" in sequential_defaults
    assert f"{design.cap} launches per arm" in sequential_defaults


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_runs_the_default_design_unless_it_is_a_release_lane(path):
    experiment = load_experiment(path)
    expected = "fixed" if path.name in LANES | FIXED_BY_CHOICE else "sequential"
    assert experiment.chosen_design.kind == expected
