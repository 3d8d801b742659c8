"""The instrument registry (recipe_ledger.instruments): the spec's kinds are the registry's, each
built-in kind measures through its module with what the old if-chain passed, a plugin found through
an entry point (one file plus its registration) is accepted by the spec, checked before launch and
measured, a broken plugin is named, and one rule says which instrument a bar reads."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from recipe_ledger import instruments
from recipe_ledger.errors import InputError, SpecError, StateError
from recipe_ledger.experiment.spec import Experiment, Instrument, experiment_json_schema, load_experiment
from recipe_ledger.instruments import (
    agreement,
    aiperf_replay,
    command,
    lm_eval,
    probes,
    sglang_bench,
    tail,
    vllm_bench,
)
from recipe_ledger.instruments.base import InstrumentKind, MeasureContext
from recipe_ledger.pipeline import measure as measuring
from recipe_ledger.pipeline.plan import plan_run
from recipe_ledger.recipes.catalog import RecipeRoot

from helpers.plugins import write_distribution

REPO = Path(__file__).resolve().parents[2]
MODULE = "fake_instrument_plugin"

PLUGIN = """
from recipe_ledger.errors import InputError
from recipe_ledger.instruments.base import InstrumentKind, Measurement, sha256_file

CALLS = []


class Fake(InstrumentKind):
    kind = "fake"
    client = "fake-client"
    summary = "a plugin's instrument"
    needs_server = False

    def check_before_launch(self, spec, repo, max_model_len):
        if spec.options.get("refuse"):
            raise InputError(f"instrument {spec.name!r}: the fake refuses before launch")

    def measure(self, run):
        CALLS.append(run)
        run.ctx.out_dir.mkdir(parents=True, exist_ok=True)
        raw = run.ctx.out_dir / f"{run.ctx.stem}.fake.json"
        raw.write_text(f'{{"m": {run.ctx.point}}}')
        metrics = {"m": 10.0 * run.ctx.point}
        return Measurement(self.kind, "fake 1", run.ctx, metrics, raw, sha256_file(raw), 0.5)

    def refusals(self, options, server_side):
        return "the fake says no" if options.get("refuse_points") else None


class TailAgain(Fake):
    kind = "tail"


INSTRUMENT = Fake()
TAIL_AGAIN = TailAgain()
NOT_AN_INSTRUMENT = object()
"""


@pytest.fixture(autouse=True)
def fresh_registry() -> Iterator[None]:
    instruments.refresh()
    yield
    sys.modules.pop(MODULE, None)
    instruments.refresh()  # the next test sees the built-ins only, whatever this one installed


def install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry_points: str) -> None:
    """A distribution ``fake`` on sys.path: one module and the entry points that name it."""
    site = write_distribution(
        tmp_path / "site", {MODULE: PLUGIN}, {instruments.ENTRY_POINT_GROUP: entry_points}
    )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    sys.modules.pop(MODULE, None)  # another test's copy
    instruments.refresh()


def study(instrument: dict, **server: object) -> dict:
    return {
        "name": "plugin-study",
        "hypothesis": "a plugin's instrument measures like a built-in",
        "box": "cpu-only",
        "engine": "none",
        "server": {"needs_server": False, **server},
        "control": {"params": {"p": "a"}},
        "candidates": {"b": {"params": {"p": "b"}}},
        "instruments": [instrument],
        "points": [1, 2],
        "repeats": 1,
        "bars": [{"metric": "m", "point": 1, "direction": "higher", "min_effect": 0.1}],
    }


def plan_of(spec: dict, tmp_path: Path):
    experiment = Experiment.model_validate(spec)
    return plan_run(tmp_path / "x.yaml", experiment, RecipeRoot(REPO / "recipes"), tmp_path)


# --- the built-ins -------------------------------------------------------------------------------


def test_the_spec_s_kinds_are_the_registry_s_in_the_order_the_schema_lists_them():
    """One place for the kinds: the schema's enum, what validates, what measures and names a client."""
    kinds = (
        "vllm_bench_serve",
        "sglang_bench_serving",
        "command",
        "aiperf_replay",
        "tail",
        "probes",
        "agreement",
        "lm_eval",
        "openai_bench",
    )
    assert instruments.kinds() == kinds
    schema = experiment_json_schema()["$defs"]["Instrument"]["properties"]["kind"]
    assert schema["enum"] == list(kinds) and schema["type"] == "string"
    assert all(kind in schema["description"] for kind in kinds)
    for kind in kinds:
        instrument = instruments.get(kind)
        assert instrument.kind == kind and instrument.client and instrument.summary
        assert type(instrument).measure is not InstrumentKind.measure  # each kind measures
        assert Instrument(name="i", kind=kind, command=["true"]).kind == kind


def test_each_module_registers_its_one_object_under_its_own_name():
    for module in (vllm_bench, sglang_bench, command, aiperf_replay, tail, probes, agreement, lm_eval):
        assert instruments.get(module.NAME) is module.INSTRUMENT
    assert instruments.BUILT_IN == tuple(instruments.get(kind) for kind in instruments.kinds())


def test_an_unknown_kind_is_refused_by_the_spec_as_the_literal_was_and_by_the_registry(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(json.dumps(study({"name": "i", "kind": "nope"})))
    with pytest.raises(
        SpecError, match=r"instruments\[0\]\.kind: expected one of the allowed values, got \"nope\""
    ):
        load_experiment(path)
    with pytest.raises(
        ValueError, match="Input should be 'vllm_bench_serve', 'sglang_bench_serving', 'command', "
    ):
        Instrument(name="i", kind="nope")
    with pytest.raises(InputError, match="unknown instrument kind 'nope'; kinds: vllm_bench_serve, "):
        instruments.get("nope")


def test_the_spec_s_kind_rules_come_from_the_kinds():
    with pytest.raises(ValueError, match="an instrument of kind 'command' needs a 'command' argv template"):
        Instrument(name="i", kind="command")
    with pytest.raises(ValueError, match="with no server only 'command' instruments can measure"):
        Experiment.model_validate(study({"name": "i", "kind": "tail"}))


def _ctx(tmp_path: Path) -> MeasureContext:
    return MeasureContext("control", 4, 1, 1004, tmp_path / "raw", "http://127.0.0.1:1", "tiny", "/m")


@pytest.mark.parametrize(
    ("kind", "module", "expected"),
    [
        ("vllm_bench_serve", vllm_bench, lambda p, a, i, c, e: ((p.engine_bin, i.options, c), {"env": e})),
        (
            "sglang_bench_serving",
            sglang_bench,
            lambda p, a, i, c, e: ((p.sglang_python, i.options, c), {"env": e, "engine": a.engine}),
        ),
        ("command", command, lambda p, a, i, c, e: ((list(i.command), c), {"env": a.env, "root": REPO})),
        (
            "aiperf_replay",
            aiperf_replay,
            lambda p, a, i, c, e: ((p.aiperf_bin, i.options, c), {"env": e, "repo": REPO}),
        ),
        ("tail", tail, lambda p, a, i, c, e: ((p.engine_bin, i.options, c), {"env": e})),
        ("probes", probes, lambda p, a, i, c, e: ((i.options, c), {})),
        ("agreement", agreement, lambda p, a, i, c, e: ((i.options, c), {"repo": REPO})),
    ],
)
def test_measure_point_gives_each_built_in_what_the_if_chain_gave_it(
    kind, module, expected, tmp_path, monkeypatch
):
    plan = plan_of(study({"name": "probe", "kind": "command", "command": ["true"]}), tmp_path)
    plan = dataclasses.replace(plan, engine_bin="/v/vllm", sglang_python="/s/python", aiperf_bin="/a/aiperf")
    arm = dataclasses.replace(plan.arms["control"], env={"ARM": "1"}, engine="sglang")
    spec = Instrument(name="i", kind=kind, options={"num_prompts": 3}, command=["run", "{point}"])
    calls = []
    monkeypatch.setattr(module, "measure", lambda *args, **kwargs: calls.append((args, kwargs)) or "measured")
    monkeypatch.setenv("VLLM_TARGET_DEVICE", "cpu")
    ctx = _ctx(tmp_path)
    launch = measuring.Launch(plan, arm, 1, tmp_path, "run", REPO)
    assert measuring.measure_point(launch, spec, ctx) == "measured"
    assert calls == [expected(plan, arm, spec, ctx, measuring.client_env())]


def test_the_tail_kind_s_refusals_are_its_flattery():
    options = {"max_cache_hit_rate": 0.1, "requests": 9}
    counters = {"prefix_cache_hit_rate": 0.93}
    assert instruments.get("tail").refusals(options, counters) == tail.flattery(options, counters) is not None
    assert instruments.get("vllm_bench_serve").refusals(options, counters) is None


def test_the_replay_is_checked_before_launch_through_its_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("RECIPE_LEDGER_AIPERF", str(tmp_path / "no-such-aiperf"))
    spec = Instrument(name="replay", kind="aiperf_replay", options={"block_size": 16})
    with pytest.raises(InputError, match="AIPerf is not installed"):
        instruments.get("aiperf_replay").check_before_launch(spec, tmp_path, None)
    bad = Instrument(name="replay", kind="aiperf_replay", options={"schedul": "fixed"})
    with pytest.raises(InputError, match=r"instrument 'replay': options\.schedul: "):
        instruments.get("aiperf_replay").check_before_launch(bad, tmp_path, None)


# --- a plugin ------------------------------------------------------------------------------------


def test_a_plugin_from_one_file_is_registered_accepted_by_the_spec_and_measured(tmp_path, monkeypatch):
    install_plugin(tmp_path, monkeypatch, f"fake = {MODULE}:INSTRUMENT")
    assert instruments.kinds()[-1] == "fake" and instruments.get("fake").client == "fake-client"
    schema = experiment_json_schema()["$defs"]["Instrument"]["properties"]["kind"]
    assert schema["enum"][-1] == "fake" and "fake (a plugin's instrument)" in schema["description"]
    with pytest.raises(ValueError, match="with no server only 'command' or 'fake' instruments can measure"):
        Experiment.model_validate(study({"name": "i", "kind": "tail"}))

    plan = plan_of(study({"name": "probe", "kind": "fake", "options": {"x": 1}}), tmp_path)
    run_dir = tmp_path / "runs" / "r1"
    records = measuring.measure_launch(measuring.Launch(plan, plan.arms["b"], 1, run_dir, "r1", tmp_path))
    assert [(r.arm, r.point, r.instrument, r.instrument_version, r.metrics) for r in records] == [
        ("b", 1, "probe", "fake 1", {"m": 10.0}),
        ("b", 2, "probe", "fake 1", {"m": 20.0}),
    ]
    assert records[0].raw_file == "raw/b-p1-r1.fake.json" and (run_dir / records[0].raw_file).is_file()
    assert not any(r.refused for r in records)
    run = next(call for call in sys.modules[MODULE].CALLS if call.ctx.point == 1)
    assert run.spec.name == "probe" and run.engine == "none" and run.repo == tmp_path
    assert run.clients.vllm_bin == plan.engine_bin and run.client_env["HF_HUB_OFFLINE"] == "1"


def test_a_plugin_s_check_before_launch_and_refusals_are_the_pipeline_s(tmp_path, monkeypatch):
    install_plugin(tmp_path, monkeypatch, f"fake = {MODULE}:Fake")  # a subclass is instantiated
    with pytest.raises(InputError, match="instrument 'probe': the fake refuses before launch"):
        plan_of(study({"name": "probe", "kind": "fake", "options": {"refuse": True}}), tmp_path)
    plan = plan_of(study({"name": "probe", "kind": "fake", "options": {"refuse_points": True}}), tmp_path)
    records = measuring.measure_launch(
        measuring.Launch(plan, plan.arms["control"], 1, tmp_path, "r", tmp_path)
    )
    assert [r.refused for r in records] == ["the fake says no", "the fake says no"]


@pytest.mark.parametrize(
    ("entry_point", "message"),
    [
        (
            f"fake = {MODULE}:NOT_AN_INSTRUMENT",
            "is a object, not a recipe_ledger.instruments.base.InstrumentKind",
        ),
        (f"other = {MODULE}:INSTRUMENT", "is named 'fake', its entry point 'other'"),
        (f"tail = {MODULE}:TAIL_AGAIN", "names itself 'tail', which is already registered"),
        ("fake = no_such_module_here:INSTRUMENT", "does not load: ModuleNotFoundError"),
    ],
)
def test_a_broken_plugin_is_named_with_its_entry_point(entry_point, message, tmp_path, monkeypatch):
    install_plugin(tmp_path, monkeypatch, entry_point)
    with pytest.raises(StateError, match=message) as caught:
        instruments.kinds()
    assert f"entry point {instruments.ENTRY_POINT_GROUP}:{entry_point.split(' ')[0]}" in str(caught.value)


# --- which instrument a bar reads ----------------------------------------------------------------


def test_a_bar_reads_the_instrument_it_names_else_the_first():
    spec = study({"name": "first", "kind": "command", "command": ["true"]})
    spec["instruments"].append({"name": "second", "kind": "command", "command": ["true"]})
    spec["bars"].append(
        {"metric": "m", "point": 2, "direction": "higher", "min_effect": 0.1, "instrument": "second"}
    )
    experiment = Experiment.model_validate(spec)
    assert experiment.default_instrument.name == "first"
    assert [experiment.instrument_of(bar).name for bar in experiment.bars] == ["first", "second"]


# --- a kind's own numbers in the result --------------------------------------------------------


def test_the_tail_test_s_and_the_replay_s_own_numbers_join_the_result_s_medians():
    """What pipeline.run once listed for the kinds "tail" and "aiperf_replay" is now their own."""
    from types import SimpleNamespace

    from recipe_ledger.pipeline.measure import PointRecord
    from recipe_ledger.pipeline.run import extra_summary_metrics, summary_metrics

    kinds = {"t": "tail", "r": "aiperf_replay", "b": "vllm_bench_serve"}
    specs = [Instrument(name=name, kind=kind) for name, kind in kinds.items()]
    extras = extra_summary_metrics(SimpleNamespace(experiment=SimpleNamespace(instruments=specs)))
    assert (
        set(extras) == {"t", "r"} and "prefill_tps" in extras["t"] and "cache_reuse_achieved" in extras["r"]
    )
    numbers = {"output_tps_total": 2.0, "prefill_tps": 9.0, "ttft_ms_p99": 5.0, "cache_reuse_achieved": 0.5}
    records = [PointRecord("control", 1, 1, name, "v", 0, dict(numbers)) for name in kinds]
    summary = summary_metrics(records, extras, per_instrument=True)
    assert {key for key in summary if key.startswith("control.c1.t/")} == {
        "control.c1.t/output_tps_total",
        "control.c1.t/prefill_tps",
        "control.c1.t/ttft_ms_p99",
    }
    assert "control.c1.r/cache_reuse_achieved" in summary and "control.c1.r/prefill_tps" not in summary
    assert {key for key in summary if key.startswith("control.c1.b/")} == {"control.c1.b/output_tps_total"}
