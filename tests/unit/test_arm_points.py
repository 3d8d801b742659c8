"""Points per arm (`points:` on an arm): some of the sweep's points, compared where both arms are."""

from __future__ import annotations

import pytest

from recipe_ledger.experiment.spec import Experiment
from recipe_ledger.pipeline.events import PhaseStarted


def spec(control_points=None, candidate_points=None, bars=None, points=(1, 2, 4, 8)) -> dict:
    control: dict = {"params": {"p": "a"}}
    candidate: dict = {"params": {"p": "b"}}
    if control_points is not None:
        control["points"] = control_points
    if candidate_points is not None:
        candidate["points"] = candidate_points
    return {
        "name": "per-arm",
        "hypothesis": "h",
        "box": "cpu-only",
        "engine": "none",
        "server": {"needs_server": False},
        "control": control,
        "candidates": {"b": candidate, "c": {"params": {"p": "c"}}},
        "instruments": [{"name": "probe", "kind": "command", "command": ["true"]}],
        "points": list(points),
        "repeats": 2,
        "bars": bars or [{"metric": "m", "point": "all", "direction": "higher", "min_effect": 0.1}],
    }


def load(doc: dict) -> Experiment:
    return Experiment.model_validate(doc)


def test_an_arm_without_points_is_measured_at_every_point():
    exp = load(spec())
    assert exp.arm_points("control") == [1, 2, 4, 8] and not exp.arms_have_own_points
    assert exp.compared_points(exp.bars[0], "b") == [1, 2, 4, 8]
    assert exp.uncompared_points("control") == []


def test_a_bar_on_all_points_compares_where_control_and_candidate_both_are():
    exp = load(spec(control_points=[1, 2, 4], candidate_points=[8, 4, 2]))
    assert exp.arm_points("b") == [2, 4, 8]  # in the sweep's order, whatever the file's
    assert exp.compared_points(exp.bars[0], "b") == [2, 4]
    assert exp.compared_points(exp.bars[0], "c") == [1, 2, 4]  # c has every point; control has 3
    assert exp.compared_points(exp.bars[0]) == [1, 2, 4]  # any candidate: what the plan prices
    assert exp.uncompared_points("b") == [8]
    assert exp.uncompared_points("control") == []


def test_points_outside_the_sweep_are_refused_naming_the_arm():
    with pytest.raises(ValueError, match=r"candidates\.b\.points \[16\] are not among"):
        load(spec(candidate_points=[4, 16]))


def test_a_bar_at_a_point_an_arm_is_not_measured_at_is_refused():
    bars = [{"metric": "m", "point": 8, "direction": "higher", "min_effect": 0.1}]
    with pytest.raises(ValueError, match=r"bar m@8: arm 'control' is not measured at point 8"):
        load(spec(control_points=[1, 2, 4], bars=bars))


def test_a_candidate_sharing_no_point_with_the_control_is_refused():
    with pytest.raises(ValueError, match=r"candidate 'b' \[8\] and the control \[1, 2\] share no point"):
        load(spec(control_points=[1, 2], candidate_points=[8]))


def test_a_phase_counts_each_launch_at_its_arm_points():
    exp = load(spec(control_points=[1, 2], candidate_points=[2, 4, 8]))
    phase = PhaseStarted.of_launches("pair 1", exp, ["control", "b", "c"])
    assert (phase.launches, phase.total_points) == (3, 2 + 3 + 4)
    assert PhaseStarted("x", launches=2, points=3).total_points == 6
