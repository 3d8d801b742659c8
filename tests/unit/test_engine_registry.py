"""The engine registry (recipe_ledger.engines): the built-ins, a plugin found through an entry point
(one file plus its registration), the refusals of a broken plugin, and the rule that no code outside
the engines package tests an engine by its name."""

from __future__ import annotations

import copy
import importlib
import json
import pickle
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from recipe_ledger import engines
from recipe_ledger.engines import none, sglang, vllm
from recipe_ledger.errors import InputError, StateError
from recipe_ledger.experiment.engines import why_cannot_measure
from recipe_ledger.experiment.spec import Instrument, experiment_json_schema, load_experiment
from recipe_ledger.pipeline.plan import plan_run
from recipe_ledger.recipes import sglang as recipes_sglang
from recipe_ledger.recipes.catalog import RecipeRoot

from helpers.plugins import write_distribution

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "recipe_ledger"

PLUGIN = """
from recipe_ledger.engines.base import Engine


class Tgi(Engine):
    name = "tgi"
    health_path = "/healthz"
    memory_hint = "lower --max-total-tokens"


ENGINE = Tgi()
NOT_AN_ENGINE = object()
"""


@pytest.fixture(autouse=True)
def fresh_registry() -> Iterator[None]:
    engines.refresh()
    yield
    sys.modules.pop("fake_engine_plugin", None)
    engines.refresh()  # the next test sees the built-ins only, whatever this one installed


def install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry_points: str) -> None:
    """A distribution ``fake`` on sys.path: one module and the entry points that name it."""
    write_distribution(tmp_path, {"fake_engine_plugin": PLUGIN}, {engines.ENTRY_POINT_GROUP: entry_points})
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    sys.modules.pop("fake_engine_plugin", None)  # another test's copy
    engines.refresh()


# --- the built-ins -------------------------------------------------------------------------------


def test_the_built_ins_in_the_order_the_schema_lists_them():
    assert engines.names() == ("vllm", "sglang", "transformers", "openai", "none")
    assert engines.names(stand_ins=False) == ("vllm", "sglang", "transformers", "openai")
    assert engines.get("vllm") is vllm.ENGINE and engines.get("sglang") is sglang.ENGINE
    assert engines.get("none") is none.ENGINE and none.ENGINE.stand_in


def test_an_unknown_engine_is_an_input_error_naming_the_known_ones():
    with pytest.raises(InputError) as caught:
        engines.get("tgi")
    assert caught.value.exit_code == 2
    assert "unknown engine 'tgi'; engines: vllm, sglang, transformers, openai, none" in str(caught.value)


def test_an_engine_stays_one_object_across_copies_and_pickles():
    for engine in (vllm.ENGINE, sglang.ENGINE, none.ENGINE):
        assert pickle.loads(pickle.dumps(engine)) is engine
        assert copy.deepcopy(engine) is engine and copy.copy(engine) is engine


def test_the_recipe_engines_agree_with_the_registry():
    """recipes.sglang is pure and cannot import the registry: this ties its list to it."""
    for name in recipes_sglang.ENGINES:
        assert engines.get(name).recipe_engine == name
    rendered = {engines.get(name).recipe_engine for name in engines.names()} - {None}
    assert rendered == set(recipes_sglang.ENGINES)
    assert recipes_sglang.RECIPE_ENGINE == vllm.ENGINE.recipe_engine
    assert recipes_sglang.LAUNCH_PROGRAM[1:] == ("-m", sglang.LAUNCH_MODULE)


# --- a plugin ------------------------------------------------------------------------------------


def test_a_plugin_engine_is_found_through_its_entry_point(tmp_path, monkeypatch):
    install_plugin(tmp_path, monkeypatch, "tgi = fake_engine_plugin:ENGINE")
    assert engines.names() == ("vllm", "sglang", "transformers", "openai", "none", "tgi")
    assert engines.names(stand_ins=False) == ("vllm", "sglang", "transformers", "openai", "tgi")
    tgi = engines.get("tgi")
    assert tgi.health_path == "/healthz" and pickle.loads(pickle.dumps(tgi)) is tgi
    instrument = Instrument(name="b", kind="sglang_bench_serving")
    assert why_cannot_measure(instrument, "tgi") is None  # it names no client it refuses


def experiment(control_engine: str | None = None, **top: object) -> dict:
    control: dict = {"argv": ["tgi-launcher", "--model-id", "/m"]}
    if control_engine:
        control["engine"] = control_engine
    return {
        "name": "plugin",
        "hypothesis": "h",
        "box": "cpu-only",
        "control": control,
        "candidates": {"other": {"argv": ["tgi-launcher", "--model-id", "/m", "--max-batch", "8"]}},
        "instruments": [{"name": "bench", "kind": "vllm_bench_serve"}],
        "points": [1],
        "bars": [{"metric": "output_tps_total", "point": 1, "direction": "higher", "min_effect": 0.1}],
        **top,
    }


def test_the_experiment_spec_accepts_a_plugin_engine_and_lists_it(tmp_path, monkeypatch):
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(experiment("tgi", engine="tgi")))
    with pytest.raises(InputError, match='engine: expected one of the allowed values, got "tgi"'):
        load_experiment(path)  # refused while the plugin is not installed
    install_plugin(tmp_path, monkeypatch, "tgi = fake_engine_plugin:ENGINE")
    exp = load_experiment(path)
    assert exp.engine_of("control") == "tgi" and exp.engines == {"tgi"}
    schema = experiment_json_schema()
    assert "tgi" in schema["properties"]["engine"]["enum"]
    arm_engine = schema["$defs"]["CommandArm"]["properties"]["engine"]["anyOf"][0]
    assert arm_engine == {"enum": ["vllm", "sglang", "transformers", "openai", "tgi"], "type": "string"}


def test_an_arm_on_a_plugin_engine_plans_with_the_engines_defaults(tmp_path, monkeypatch):
    install_plugin(tmp_path, monkeypatch, "tgi = fake_engine_plugin:ENGINE")
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(experiment(engine="tgi")))
    plan = plan_run(path, load_experiment(path), RecipeRoot(REPO / "recipes"), tmp_path)
    control = plan.arms["control"]
    assert control.engine == "tgi" and control.served_model == "model"
    assert control.argv == ["tgi-launcher", "--model-id", "/m", "--host", "127.0.0.1", "--port", "8000"]
    recipe = experiment(engine="tgi") | {"control": {"recipe": "recipe-ledger/tiny-qwen2"}}
    path.write_text(json.dumps(recipe))
    with pytest.raises(InputError, match="engine 'tgi' has no recipe commands"):
        plan_run(path, load_experiment(path), RecipeRoot(REPO / "recipes"), tmp_path)


@pytest.mark.parametrize(
    ("entry_point", "refusal"),
    [
        ("tgi = fake_engine_plugin:NOT_AN_ENGINE", "is a object, not a recipe_ledger.engines.base.Engine"),
        ("other = fake_engine_plugin:ENGINE", "is named 'tgi', its entry point 'other'"),
        ("tgi = fake_engine_plugin:MISSING", "does not load: AttributeError"),
        (
            "tgi = fake_engine_plugin:ENGINE\nvllm = fake_engine_plugin:Tgi",
            "is named 'tgi', its entry point 'vllm'",
        ),
    ],
)
def test_a_broken_plugin_is_named_not_a_traceback(tmp_path, monkeypatch, entry_point, refusal):
    install_plugin(tmp_path, monkeypatch, entry_point)
    with pytest.raises(StateError) as caught:
        engines.names()
    assert refusal in str(caught.value) and "recipe_ledger.engines:" in str(caught.value)


def test_a_plugin_cannot_take_a_built_in_name(tmp_path, monkeypatch):
    install_plugin(tmp_path, monkeypatch, "tgi = fake_engine_plugin:ENGINE")
    (tmp_path / "fake_engine_plugin.py").write_text(PLUGIN.replace('name = "tgi"', 'name = "vllm"'))
    (tmp_path / "fake-0.dist-info" / "entry_points.txt").write_text(
        f"[{engines.ENTRY_POINT_GROUP}]\nvllm = fake_engine_plugin:ENGINE\n"
    )
    sys.modules.pop("fake_engine_plugin", None)
    importlib.invalidate_caches()
    engines.refresh()
    with pytest.raises(StateError, match="names itself 'vllm', which is already registered"):
        engines.get("vllm")


# --- no engine tested by name outside the package ------------------------------------------------

# `engine == "x"`, `x.engine != 'y'`, `"x" == engine`, `engine in ("x", ...)`, `engine not in ["x"]`.
ENGINE_NAME_TEST = re.compile(
    r"""engine\w*\s*(?:==|!=)\s*["']"""
    r"""|["']\s*(?:==|!=)\s*[\w.]*engine\b"""
    r"""|engine\w*\s+(?:not\s+)?in\s+[(\[{]\s*["']"""
)


@pytest.mark.parametrize(
    "line",
    [
        'if arm.engine == "sglang":',
        "if self.spec.engine != 'vllm':",
        'return "none" == arm.engine',
        'if engine in ("vllm", "sglang"):',
        'if request.engine not in ["vllm"]:',
    ],
)
def test_the_rule_sees_an_engine_tested_by_name(line):
    assert ENGINE_NAME_TEST.search(line)


def test_no_code_outside_the_engines_package_tests_an_engine_by_name():
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        if SRC / "engines" not in path.parents
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if ENGINE_NAME_TEST.search(line)
    ]
    assert not found, "ask the engine (recipe_ledger.engines.get(name)) instead:\n" + "\n".join(found)
