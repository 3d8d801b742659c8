"""`ledger run`'s progress bar follows the pipeline's typed events, never the wording of a notice."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress

from recipe_ledger.cli.progress import ProgressListener
from recipe_ledger.pipeline.events import Notice, PhaseStarted, PointMeasured


def test_phases_grow_the_total_and_points_advance_it():
    out = io.StringIO()
    with Progress(console=Console(file=out, width=200)) as bar:
        listen = ProgressListener(bar)
        listen(PhaseStarted("calibration", launches=2, points=3))
        listen(Notice("running [2] A/A launches of the control first"))  # no effect on the bar
        listen(PointMeasured("control", 1, 4))
        assert (bar.tasks[0].total, bar.tasks[0].completed) == (6, 1)
        listen(PhaseStarted("measurement", launches=4, points=3))
        assert (bar.tasks[0].total, bar.tasks[0].completed) == (18, 1)
        assert bar.tasks[0].description == "measurement"
        listen(PointMeasured("fast", 2, 1))
        assert bar.tasks[0].description == "measurement: fast #2 point 1"
    assert "running [2] A/A launches" in out.getvalue()  # printed as written, not as markup


def test_no_bar_is_drawn_before_the_first_phase():
    """A run refused before launching (a dirty tree, a bad spec) leaves no empty bar behind."""
    with Progress(console=Console(file=io.StringIO(), width=200)) as bar:
        listen = ProgressListener(bar)
        listen(Notice("power output_tps_total@4: no calibration"))
        listen(PointMeasured("control", 1, 4))  # ignored: no phase has started
        assert bar.tasks == []
