"""Launch-flag sweeps: each point relaunches with its value, a value refused at boot is a recorded
rejected point with the engine's words, and the sweep goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from recipe_ledger.errors import InputError
from recipe_ledger.experiment.spec import LaunchSweep
from recipe_ledger.instruments.base import Measurement
from recipe_ledger.launch.failures import BootFailure
from recipe_ledger.pipeline import measure as measuring
from recipe_ledger.pipeline import run as runner
from recipe_ledger.pipeline.stages import plan_experiment

from helpers.launching import FakeServer

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "experiments" / "examples" / "tiny-flag-sweep.yaml"
PYDANTIC_LOG = """INFO starting
Traceback (most recent call last):
  File "x.py", line 1, in <module>
pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig
max_num_seqs
  Input should be greater than or equal to 1 [type=greater_than_equal, input_value=0, input_type=int]
    For further information visit https://errors.pydantic.dev/2.14/v/greater_than_equal
"""


def test_the_sweep_must_say_where_the_value_goes():
    with pytest.raises(ValueError, match=r"must contain \{point\}"):
        LaunchSweep(args=["--max-num-seqs", "4"])
    sweep = LaunchSweep(args=["--speculative-config", '{"num_speculative_tokens": {point}}'])
    assert sweep.args_for(6) == ["--speculative-config", '{"num_speculative_tokens": 6}']


def test_each_point_s_arm_carries_its_value_once(tmp_path):
    plan = plan_experiment(EXAMPLE, REPO)
    for name, arm in plan.arms.items():
        at_four = plan.point_arm(arm, 4).argv
        assert at_four.count("--max-num-seqs") == 1 and at_four[at_four.index("--max-num-seqs") + 1] == "4"
        assert plan.point_arm(arm, 1).argv != at_four
        assert arm.argv == plan.arms[name].argv  # the plan's arm itself is untouched


def test_the_engine_s_reason_is_its_error_line_with_the_refused_field():
    reason = measuring.engine_reason(PYDANTIC_LOG)
    assert reason.startswith(
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig"
    )
    assert "max_num_seqs" in reason and "greater than or equal to 1" in reason
    assert "For further information" not in reason
    assert measuring.engine_reason("") == "the server exited before answering its health check"


class FakeLauncher:
    """Boots every argv except one whose --max-num-seqs is 0, which it refuses as vLLM does."""

    def __init__(self, launches: list[list[str]]):
        self.launches = launches

    def start(self, spec):
        self.launches.append(spec.argv)
        if spec.argv[spec.argv.index("--max-num-seqs") + 1] == "0":
            raise BootFailure("crash", "server exited with 1", log_tail=PYDANTIC_LOG)
        return FakeServer()


def test_a_rejected_value_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    plan = plan_experiment(EXAMPLE, REPO)
    launches: list[list[str]] = []
    monkeypatch.setattr(measuring, "launcher_for", lambda plan: FakeLauncher(launches))
    monkeypatch.setattr(measuring, "remember_flagset", lambda arm: None)
    monkeypatch.setattr(measuring, "warm_up", lambda *a: None)
    monkeypatch.setattr(measuring.server_metrics, "scrape", lambda url: None)

    def fake_measure(launch, instrument, ctx):
        raw = ctx.out_dir / f"{ctx.stem}.json"
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text("{}")
        assert ctx.client_concurrency == launch.plan.experiment.launch_sweep.concurrency
        value = float(launch.arm.argv[launch.arm.argv.index("--max-num-seqs") + 1])
        return Measurement("fake", "1", ctx, {"output_tps_total": 10 * value}, raw, "sha256:x", 0.1)

    monkeypatch.setattr(measuring, "measure_point", fake_measure)
    launch = measuring.Launch(plan, plan.arms["control"], 1, tmp_path, "run", REPO)
    records = measuring.measure_launch(launch)
    assert len(launches) == len(plan.experiment.points)  # one launch per point
    by_point = {r.point: r for r in records}
    assert "rejected at boot: crash" in by_point[0].refused and "max_num_seqs" in by_point[0].refused
    assert not by_point[0].metrics
    assert {p: r.metrics["output_tps_total"] for p, r in by_point.items() if p} == {1: 10.0, 4: 40.0}
    # The rejected point makes its bar not comparable, with the engine's words; the others decide.
    bar = plan.experiment.bars[0]
    verdict = runner.decide_point(records + [_as(records, "ngram")], "ngram", "bench", bar, 0, None)
    assert verdict.outcome == "not-comparable" and "max_num_seqs" in verdict.reason


def _as(records, arm):
    first = next(r for r in records if not r.refused)
    return measuring.PointRecord(arm, 1, first.point, first.instrument, "1", 0, dict(first.metrics))


def test_an_experiment_with_a_sweep_without_its_placeholder_is_refused_at_load(tmp_path):
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["launch_sweep"]["args"] = ["--max-num-seqs", "2"]
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    from recipe_ledger.experiment.spec import load_experiment

    with pytest.raises(InputError, match=r"\{point\}"):
        load_experiment(path)


SPEC_SWEEP = REPO / "experiments" / "examples" / "tiny-spec-sweep.yaml"


def test_a_sweep_on_named_arms_leaves_the_control_as_it_is_at_every_point():
    """004's k sweep: each k of the candidate against a control without speculation."""
    plan = plan_experiment(SPEC_SWEEP, REPO)
    control, ngram = plan.arms["control"], plan.arms["ngram"]
    for point in plan.experiment.points:
        assert plan.point_arm(control, point).argv == control.argv
        assert "--speculative-config" not in plan.point_arm(control, point).argv
        at_point = plan.point_arm(ngram, point).argv
        assert at_point.count("--speculative-config") == 1
        config = at_point[at_point.index("--speculative-config") + 1]
        assert f'"num_speculative_tokens": {point},' in config


def test_a_sweep_naming_an_arm_the_experiment_lacks_is_refused_at_load(tmp_path):
    from recipe_ledger.experiment.spec import load_experiment

    spec = yaml.safe_load(SPEC_SWEEP.read_text())
    spec["launch_sweep"]["arms"] = ["ngarm"]
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(InputError, match=r"launch_sweep.arms names \['ngarm'\]"):
        load_experiment(path)
