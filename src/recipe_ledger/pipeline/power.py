"""Planning for power: what each bar can see with the planned repeats, said before any launch.

From the calibration that matches the run (the ledger's, or the one a run has just measured), each
bar gets one sentence: its minimum detectable effect with the experiment's repeats and, when that
is above the bar, the repeats that would bring it under (verdict.plan_power). A bar the experiment
cannot reach is then known before the machine time is spent, not after.
"""

from __future__ import annotations

from collections.abc import Callable

from recipe_ledger import verdict as verdicts
from recipe_ledger.pipeline.plan import RunPlan
from recipe_ledger.pipeline.run import to_verdict_calibration, verdict_bar

# (instrument, metric) -> the calibration entry that stands for this run's noise, if any
CalibrationLookup = Callable[[str, str], dict | None]


def power_plans(plan: RunPlan, calibration_of: CalibrationLookup) -> list[verdicts.PowerPlan]:
    """One plan per bar and point (a bar on "all" points plans each of them)."""
    out: list[verdicts.PowerPlan] = []
    experiment = plan.experiment
    for bar in experiment.speed_bars:
        entry = calibration_of(plan.experiment.instrument_of(bar).name, bar.metric)
        calibration = to_verdict_calibration(entry)
        for point in experiment.compared_points(bar):
            refused = entry["payload"].get("conditions", {}).get(f"refused.p{point}") if entry else None
            if entry and refused:  # calibrated as refused: "no calibration" would send one to calibrate again
                reason = (
                    f"{bar.metric}@{point}: the calibration {entry['id'][:12]} refused every point "
                    f"({refused}), so this bar will be not comparable"
                )
                out.append(
                    verdicts.PowerPlan(
                        verdict_bar(bar, point), experiment.repeats, None, None, False, None, reason
                    )
                )
                continue
            noise = calibration.for_point(point) if calibration else None
            out.append(verdicts.plan_power(noise, verdict_bar(bar, point), experiment.repeats))
    return out


def power_lines(plans: list[verdicts.PowerPlan]) -> list[str]:
    """What `ledger run --plan` and the run's start print: one sentence per bar and point."""
    return [f"power {p.reason}" for p in plans]
