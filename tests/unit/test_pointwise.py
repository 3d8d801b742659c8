"""``{point}`` in server arguments and instrument options (experiment.pointwise), through the spec
and the plan: InferenceX's prompts and warm-ups that scale with the concurrency, a server flag set
from it, and the refusals that name the field and the point."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipe_ledger.errors import InputError
from recipe_ledger.experiment import pointwise
from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.pipeline.plan import ArmPlan, RunPlan, instrument_at

from helpers.launching import FakeServer

BASE = """
schema_version: 1
name: pw
hypothesis: h
box: cpu-only
engine: openai
control:
  argv: [srv, --model, m{CONTROL_ARGS}]
candidates:
  b:
    argv: [srv, --model, m, --x, "1"]
instruments:
  - name: bench
    kind: openai_bench
    options: {OPTIONS}
points: [1, 8]
bars:
  - metric: output_tps_total
    point: 8
    direction: higher
    min_effect: 0.1
"""


def write(tmp_path: Path, options: str = "{}", control_args: str = "") -> Path:
    path = tmp_path / "pw.yaml"
    path.write_text(BASE.replace("{OPTIONS}", options).replace("{CONTROL_ARGS}", control_args))
    return path


@pytest.mark.parametrize(
    ("text", "point", "value"),
    [
        ("{point} * 10", 8, 80),
        ("{point}*2 + 1", 3, 7),
        ("({point} + 1) // 2", 8, 4),
        ("{point} / 4", 2, 0.5),
        ("{point}", 32, 32),
        ("p{point}", 4, "p4"),  # not arithmetic: text
        ('{"n": {point}}', 2, '{"n": 2}'),  # JSON around a placeholder: text
        ("plain", 1, "plain"),
        ("5 * 2", 1, "5 * 2"),  # no placeholder: left exactly as written
        ('{"k": 1, "n": {point}}', 3, '{"k": 1, "n": 3}'),  # the last value of a JSON object
    ],
)
def test_values_at_a_point(text, point, value):
    assert pointwise.value_at(text, point) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{conc} * 10", r"\{conc\} is not a placeholder"),
        ("{point} * * 10", "is not an expression"),
        ("10 / ({point} - 8)", "divides by zero"),
        ("{point} ** 99", "only numbers"),
    ],
)
def test_what_cannot_be_filled_is_refused(text, message):
    with pytest.raises(pointwise.PointwiseError, match=message):
        pointwise.check({"instruments[bench].options.num_prompts": text}, [1, 8])


def test_json_arguments_are_not_placeholders():
    arg = '{"method": "mtp", "num_speculative_tokens": 2}'
    assert pointwise.placeholders(arg) == [] and pointwise.args_at([arg], 4) == [arg]


def test_options_are_filled_nested_and_other_types_kept():
    options = {
        "num_prompts": "{point} * 10",
        "extra": {"max": "{point}"},
        "tags": ["c{point}"],
        "n": 3,
        "x": True,
    }
    assert pointwise.options_at(options, 4) == {
        "num_prompts": 40,
        "extra": {"max": 4},
        "tags": ["c4"],
        "n": 3,
        "x": True,
    }


def test_an_unknown_placeholder_names_the_field_and_the_point(tmp_path):
    path = write(tmp_path, options='{num_prompts: "{conc} * 10"}')
    with pytest.raises(
        InputError, match=r"instruments\[bench\]\.options\.num_prompts at point 1: .*\{conc\}"
    ):
        load_experiment(path)


def test_an_expression_failing_at_one_point_names_that_point(tmp_path):
    path = write(tmp_path, options='{num_prompts: "64 // ({point} - 8)"}')
    with pytest.raises(InputError, match=r"num_prompts at point 8: .*divides by zero"):
        load_experiment(path)


def test_a_server_argument_with_an_unknown_placeholder_is_refused(tmp_path):
    path = write(tmp_path, control_args=', --cuda-graph-max-bs, "{CONC}"')
    with pytest.raises(InputError, match=r"control\.argv\[4\] at point 1: .*\{CONC\} is not a placeholder"):
        load_experiment(path)


def plan_of(experiment) -> RunPlan:
    arms = {
        name: ArmPlan(name, list(experiment.arm(name).argv), dict(experiment.arm(name).env), "", None, "m")
        for name in experiment.arm_names
    }
    return RunPlan(experiment, None, arms, [], "pw.yaml", "")  # type: ignore[arg-type]


def test_an_arm_whose_command_names_the_point_relaunches_per_point_with_it_filled(tmp_path):
    experiment = load_experiment(write(tmp_path, control_args=', --cuda-graph-max-bs, "{point} * 2"'))
    plan = plan_of(experiment)
    assert plan.launches_per_point() and experiment.arm_depends_on_point("control")
    assert not experiment.arm_depends_on_point("b")
    assert plan.point_arm(plan.arms["control"], 8).argv[-2:] == ["--cuda-graph-max-bs", "16"]
    assert plan.point_arm(plan.arms["b"], 8) == plan.arms["b"]


def test_an_experiment_without_placeholders_launches_once_for_all_points(tmp_path):
    experiment = load_experiment(write(tmp_path, options="{num_prompts: 16}"))
    assert not plan_of(experiment).launches_per_point()
    assert instrument_at(experiment.instruments[0], 8) is experiment.instruments[0]


def test_the_instrument_measures_each_point_with_its_own_counts(tmp_path):
    experiment = load_experiment(write(tmp_path, options='{num_prompts: "{point} * 10", input_len: 64}'))
    bench = experiment.instruments[0]
    assert instrument_at(bench, 8).options == {"num_prompts": 80, "input_len": 64}
    assert instrument_at(bench, 1).options["num_prompts"] == 10
    assert bench.options["num_prompts"] == "{point} * 10"  # the spec (and calibration keys) keep the template


PIPELINE_SPEC = """
schema_version: 1
name: pw-run
hypothesis: h
box: cpu-only
engine: openai
control:
  argv: [srv, --model, m, --max-num-seqs, "{point}", --tensor-parallel-size, "2"]
candidates:
  b:
    argv: [srv, --model, m, --max-num-seqs, "{point} * 2", --tensor-parallel-size, "2"]
instruments:
  - name: bench
    kind: openai_bench
    options: {num_prompts: "{point} * 10", input_len: 8}
points: [1, 4]
bars:
  - {metric: output_tps_per_gpu, point: 4, direction: higher, min_effect: 0.1}
"""


def test_a_run_relaunches_per_point_with_the_point_in_the_command_and_the_counts(tmp_path, monkeypatch):
    from recipe_ledger.instruments.base import Measurement
    from recipe_ledger.pipeline import measure as measuring
    from recipe_ledger.pipeline.stages import plan_experiment

    repo = Path(__file__).resolve().parents[2]
    spec = tmp_path / "pw-run.yaml"
    spec.write_text(PIPELINE_SPEC)
    plan = plan_experiment(spec, repo)
    launches: list[tuple[str, ...]] = []

    class Launcher:
        def start(self, launch_spec):
            launches.append(tuple(launch_spec.argv))
            return FakeServer()

    monkeypatch.setattr(measuring, "launcher_for", lambda plan: Launcher())
    monkeypatch.setattr(measuring, "remember_flagset", lambda arm: None)
    monkeypatch.setattr(measuring, "warm_up", lambda *a: None)
    monkeypatch.setattr(measuring.server_metrics, "scrape", lambda url: None)
    seen = []

    def fake_measure(launch, instrument, ctx):
        argv = launch.arm.argv
        seen.append(
            (ctx.point, ctx.client_concurrency, argv[argv.index("--max-num-seqs") + 1], instrument.options)
        )
        raw = ctx.out_dir / f"{ctx.stem}.json"
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text("{}")
        return Measurement("fake", "1", ctx, {"output_tps_total": 100.0 * ctx.point}, raw, "sha256:x", 0.1)

    monkeypatch.setattr(measuring, "measure_point", fake_measure)
    assert plan.launches_per_point()
    for arm, doubled in (("control", 1), ("b", 2)):
        records = measuring.measure_launch(measuring.Launch(plan, plan.arms[arm], 1, tmp_path, "run", repo))
        # Each point its own launch, the point in the command, the counts and the concurrency.
        assert [r.point for r in records] == [1, 4]
        assert {r.point: r.metrics["output_tps_per_gpu"] for r in records} == {1: 50.0, 4: 200.0}  # TP 2
        assert [s[:3] for s in seen[-2:]] == [(1, 1, str(doubled)), (4, 4, str(4 * doubled))]
        assert [s[3]["num_prompts"] for s in seen[-2:]] == [10, 40]
    assert len(launches) == 4
