"""Planning for power: each bar's MDE with the planned repeats, from the matching calibration."""

from __future__ import annotations

from pathlib import Path

from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.pipeline.plan import plan_run
from recipe_ledger.pipeline.power import power_lines, power_plans
from recipe_ledger.recipes.catalog import RecipeRoot

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "experiments" / "examples" / "tiny-lane-v2.yaml"  # bars at points 4 and 1


def _plan():
    return plan_run(SPEC, load_experiment(SPEC), RecipeRoot(REPO / "recipes"), REPO)


def _calibration(cv: float, n: int) -> dict:
    """A calibration entry as the ledger holds it: one noise figure per point."""
    point = {"n": n, "mean": 100.0, "sigma": 100.0 * cv, "cv": cv, "sigma_log": cv, "max_spread": 2 * cv}
    return {"payload": {"metric": "output_tps_total", "points": {"1": point, "4": point}}}


def test_without_a_calibration_every_bar_point_says_the_mde_is_unknown():
    plans = power_plans(_plan(), lambda instrument, metric: None)
    assert [p.bar.point for p in plans] == [4, 1]
    assert all(p.mde is None and not p.reachable for p in plans)
    assert all(line.startswith("power ") and "no calibration" in line for line in power_lines(plans))


def test_a_tight_calibration_reaches_the_bar_with_the_planned_repeats():
    plans = power_plans(_plan(), lambda instrument, metric: _calibration(cv=0.01, n=6))
    assert all(p.reachable and p.mde is not None and p.mde <= p.bar.min_effect for p in plans)


def test_a_loose_calibration_says_before_any_launch_that_the_bar_is_out_of_reach():
    plans = power_plans(_plan(), lambda instrument, metric: _calibration(cv=0.15, n=6))
    assert all(not p.reachable and p.mde is not None and p.mde > p.bar.min_effect for p in plans)
    assert all("repeats" in line and "bar" in line for line in power_lines(plans))
