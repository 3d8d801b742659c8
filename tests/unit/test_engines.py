"""Engine as an axis of an experiment: the spec (engine per arm), planning an SGLang arm, the rule
that one client measures both arms of a bar, SGLang's preflight, and what the record keeps."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from recipe_ledger.engines import sglang as sglang_engine
from recipe_ledger.errors import InputError, StateError
from recipe_ledger.experiment.engines import check_one_client_per_bar, clients_by_bar, why_cannot_measure
from recipe_ledger.experiment.spec import Experiment, Instrument, load_experiment
from recipe_ledger.ledger.models import ArmRecord, ExperimentRecord
from recipe_ledger.pipeline import preflight
from recipe_ledger.pipeline.plan import ArmPlan, plan_run
from recipe_ledger.recipes.catalog import RecipeRoot

REPO = Path(__file__).resolve().parents[2]
MODEL = str(REPO / ".cache" / "tiny-model")
SGLANG_ARGV = ["python3", "-m", "sglang.launch_server", "--model-path", MODEL, "--device", "cpu"]
VLLM_ARGV = ["vllm", "serve", MODEL, "--max-num-seqs", "4"]
BENCH = {"name": "bench", "kind": "vllm_bench_serve", "options": {"backend": "openai"}}


def experiment(control: dict, candidate: dict, instrument: dict = BENCH, **top: object) -> dict:
    return {
        "name": "engines",
        "hypothesis": "h",
        "box": "cpu-only",
        "server": {"port": 30000},
        "control": control,
        "candidates": {"sglang": candidate},
        "instruments": [instrument],
        "points": [1, 4],
        "bars": [{"metric": "output_tps_total", "point": 4, "direction": "higher", "min_effect": 0.1}],
        **top,
    }


def write(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(spec, indent=1))
    return path


def plan(tmp_path: Path, spec: dict):
    path = write(tmp_path, spec)
    return plan_run(path, load_experiment(path), RecipeRoot(REPO / "recipes"), tmp_path)


# --- the spec ------------------------------------------------------------------------------------


def test_an_arm_engine_defaults_to_the_experiments(tmp_path):
    spec = experiment({"argv": VLLM_ARGV}, {"argv": SGLANG_ARGV, "engine": "sglang"})
    exp = load_experiment(write(tmp_path, spec))
    assert exp.engine_of("control") == "vllm" and exp.engine_of("sglang") == "sglang"
    assert exp.engines == {"vllm", "sglang"}
    flipped = load_experiment(
        write(tmp_path, {**spec, "engine": "sglang"} | {"control": {"argv": SGLANG_ARGV}})
    )
    assert flipped.engine_of("control") == "sglang"


def test_every_experiment_written_before_engines_per_arm_keeps_its_engine():
    """Experiments whose arms name no engine of their own load with the experiment's engine for
    every arm, as before arms could name one (tiny-engines.yaml is the one that names one)."""
    for path in sorted((REPO / "experiments").rglob("*.yaml")):
        exp = load_experiment(path)
        if any(getattr(exp.arm(name), "engine", None) for name in exp.arm_names):
            assert len(exp.engines) == 2, path  # a cross-engine experiment: vLLM against SGLang
            continue
        assert {exp.engine_of(name) for name in exp.arm_names} <= {exp.engine, "none"}, path


def test_an_unknown_engine_is_one_line_at_file_and_line(tmp_path):
    spec = experiment({"argv": VLLM_ARGV}, {"argv": SGLANG_ARGV, "engine": "sglangg"})
    with pytest.raises(InputError) as caught:
        load_experiment(write(tmp_path, spec))
    text = str(caught.value)
    assert caught.value.exit_code == 2 and "\n" not in text
    line = next(
        n
        for n, text_line in enumerate(write(tmp_path, spec).read_text().splitlines(), 1)
        if "sglangg" in text_line
    )
    assert f"exp.yaml:{line}" in text and "candidates.sglang.engine" in text


# --- one client per bar --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "options", "engine", "fits"),
    [
        ("vllm_bench_serve", {}, "sglang", True),  # the default backend is openai
        ("vllm_bench_serve", {"backend": "openai-chat", "endpoint": "/v1/chat/completions"}, "sglang", True),
        ("vllm_bench_serve", {"backend": "vllm"}, "sglang", False),
        ("vllm_bench_serve", {"backend": "openai", "endpoint": "/generate"}, "sglang", False),
        ("vllm_bench_serve", {"backend": "vllm"}, "vllm", True),
        ("sglang_bench_serving", {}, "vllm", False),  # the default backend posts to /generate
        ("sglang_bench_serving", {"backend": "vllm"}, "vllm", True),
        ("sglang_bench_serving", {"backend": "sglang-oai"}, "vllm", True),
        ("sglang_bench_serving", {}, "sglang", True),
        ("command", {}, "sglang", True),
    ],
)
def test_which_client_can_measure_which_engine(kind, options, engine, fits):
    instrument = Instrument(
        name="i", kind=kind, options=options, command=["x"] if kind == "command" else None
    )
    assert (why_cannot_measure(instrument, engine) is None) is fits


def test_a_bar_whose_client_cannot_measure_the_other_engine_is_refused_naming_bar_and_fix(tmp_path):
    spec = experiment(
        {"argv": VLLM_ARGV},
        {"argv": SGLANG_ARGV, "engine": "sglang"},
        {"name": "native", "kind": "sglang_bench_serving"},
    )
    with pytest.raises(InputError) as caught:
        plan(tmp_path, spec)
    message = str(caught.value)
    assert "output_tps_total@4" in message and "'control' (vllm)" in message
    assert "backend vllm" in message and caught.value.exit_code == 2 and "\n" not in message


def test_one_client_for_both_engines_passes_and_is_named_per_bar(tmp_path):
    exp = Experiment.model_validate(
        experiment({"argv": VLLM_ARGV}, {"argv": SGLANG_ARGV, "engine": "sglang"})
    )
    check_one_client_per_bar(exp)
    assert clients_by_bar(exp, {"bench": "0.32.0"}) == {
        "output_tps_total@4": "vllm bench serve 0.32.0 (instrument bench)"
    }


# --- planning ------------------------------------------------------------------------------------


def test_an_sglang_command_arm_runs_from_the_sglang_venv_with_address_and_metrics(tmp_path, monkeypatch):
    monkeypatch.delenv("RECIPE_LEDGER_SGLANG_PYTHON", raising=False)
    run = plan(tmp_path, experiment({"argv": VLLM_ARGV}, {"argv": SGLANG_ARGV, "engine": "sglang"}))
    arm = run.arms["sglang"]
    assert arm.engine == "sglang" and run.arms["control"].engine == "vllm"
    assert arm.argv[0] == str(tmp_path / ".venv-sglang" / "bin" / "python") == run.sglang_python
    assert arm.argv[1:7] == SGLANG_ARGV[1:]
    assert arm.argv[7:] == ["--host", "127.0.0.1", "--port", "30000", "--enable-metrics"]
    assert arm.served_model == MODEL and arm.model_dir == (MODEL if Path(MODEL).is_dir() else None)
    assert "--enable-metrics" not in run.arms["control"].argv


def test_metrics_already_on_are_not_doubled_and_docker_keeps_the_images_python(tmp_path):
    argv = [*SGLANG_ARGV, "--enable-metrics", "--served-model-name", "tiny"]
    spec = experiment(
        {"argv": VLLM_ARGV},
        {"argv": argv, "engine": "sglang"},
        server={"launcher": "docker", "image": "lmsysorg/sglang@sha256:" + "a" * 64, "port": 30000},
    )
    arm = plan(tmp_path, spec).arms["sglang"]
    assert arm.argv[:3] == ["python3", "-m", "sglang.launch_server"]
    assert arm.argv.count("--enable-metrics") == 1 and arm.served_model == "tiny"


def test_a_recipe_arm_on_sglang_launches_the_recipes_sglang_command_on_the_experiment_model():
    spec = REPO / "experiments" / "examples" / "tiny-engines.yaml"
    run = plan_run(spec, load_experiment(spec), RecipeRoot(REPO / "recipes"), REPO)
    sglang, vllm = run.arms["sglang"], run.arms["control"]
    assert sglang.engine == "sglang" and vllm.engine == "vllm"
    assert sglang.argv[1:3] == ["-m", "sglang.launch_server"]
    model = str((REPO / ".cache" / "tiny-model").resolve())
    assert sglang.argv[sglang.argv.index("--model-path") + 1] == model == vllm.argv[2]
    assert "--enable-metrics" in sglang.argv and sglang.argv[-4:] == ["--host", "127.0.0.1", "--port", "8126"]
    assert sglang.env.get("SGLANG_USE_CPU_ENGINE") == "1"  # from the recipe's sglang: block for cpu_x86


def test_vllm_arms_plan_as_before_engines_were_an_axis():
    spec = REPO / "experiments" / "examples" / "tiny-batching.yaml"
    run = plan_run(spec, load_experiment(spec), RecipeRoot(REPO / "recipes"), REPO)
    for arm in run.arms.values():
        assert arm.engine == "vllm" and "--enable-metrics" not in arm.argv
        assert arm.argv[-4:] == ["--host", "127.0.0.1", "--port", "8123"]


# --- preflight -----------------------------------------------------------------------------------


def test_a_missing_sglang_venv_is_refused_naming_the_setup_command(tmp_path, monkeypatch):
    monkeypatch.delenv("RECIPE_LEDGER_SGLANG_PYTHON", raising=False)
    run = plan(tmp_path, experiment({"argv": [sys.executable]}, {"argv": SGLANG_ARGV, "engine": "sglang"}))
    with pytest.raises(StateError) as caught:
        preflight.check_engine(run)
    assert caught.value.exit_code == 3 and "./dev serve-setup" in caught.value.one_line()
    assert "'sglang'" in str(caught.value) and ".venv-sglang" in str(caught.value)


def sglang_arm(env: dict[str, str] | None = None, argv: list[str] | None = None) -> ArmPlan:
    return ArmPlan(
        "cand", argv or [*SGLANG_ARGV, "--tp-size", "2"], env or {}, "x", None, "m", engine="sglang"
    )


def check_caches(arm: ArmPlan, caches: list[sglang_engine.CompileCache]) -> str | None:
    return sglang_engine.check_compile_caches(arm.name, preflight.autotune_fingerprint(arm.argv), caches)


def test_compile_cache_roots_follow_the_servers_environment():
    home = Path("/home/u")
    default = sglang_engine.compile_caches({}, home, "u")
    assert [c.path for c in default] == [
        home / ".triton" / "cache",
        home / ".tilelang" / "cache",
        Path("/tmp/torchinductor_u"),
    ]
    moved = sglang_engine.compile_caches({"TRITON_CACHE_DIR": "/fast/triton"}, home, "u")
    assert moved[0].path == Path("/fast/triton") and moved[1:] == default[1:]


def test_empty_compile_caches_announce_a_cold_compile_then_a_new_flag_set_then_nothing(tmp_path):
    caches = sglang_engine.compile_caches({}, tmp_path, "u")
    caches[2] = sglang_engine.CompileCache("torch inductor", "TORCHINDUCTOR_CACHE_DIR", tmp_path / "inductor")
    arm = sglang_arm()
    cold = check_caches(arm, caches)
    assert "compile caches are empty" in cold and "TileLang" in cold and "$TRITON_CACHE_DIR" in cold
    for cache in caches:
        cache.path.mkdir(parents=True)
        (cache.path / "kernel.bin").write_text("x")
    assert "is new to SGLang's compile caches" in check_caches(arm, caches)
    env = {"TRITON_CACHE_DIR": str(caches[0].path), "TILELANG_CACHE_DIR": str(caches[1].path)}
    preflight.remember_flagset(sglang_arm(env))
    assert check_caches(arm, caches) is None
    other = sglang_arm(argv=[*SGLANG_ARGV, "--tp-size", "4"])
    assert check_caches(other, caches) is not None


def test_a_container_without_its_compile_caches_mounted_is_announced():
    arm = sglang_arm({"TORCHINDUCTOR_CACHE_DIR": "/root/.cache/inductor"})
    lost = sglang_engine.unpersisted_container_caches(arm.env, {"/srv/triton": "/root/.triton"})
    assert [c.name for c in lost] == ["TileLang", "torch inductor"]
    volumes = {
        "/srv/triton": "/root/.triton",
        "/srv/tl": "/root/.tilelang/cache:rw",
        "/srv/c": "/root/.cache",
    }
    assert sglang_engine.unpersisted_container_caches(arm.env, volumes) == []
    notice = preflight.boot_cache_notice(arm, {"/srv/triton": "/root/.triton"})
    assert "die with it" in notice and "TileLang (/root/.tilelang/cache)" in notice
    assert preflight.boot_cache_notice(arm, volumes) is None


# --- the record ----------------------------------------------------------------------------------


def test_records_from_before_engines_load_unchanged_and_new_ones_carry_engine_and_clients():
    old = {"source": "s", "fingerprint": "sha256:" + "0" * 64, "argv": ["vllm", "serve", "m"], "env": {}}
    assert ArmRecord.model_validate(old).engine is None
    assert ArmRecord.model_validate(old).model_dump(exclude_none=True) == old
    record = {
        "name": "e",
        "spec": "e.yaml",
        "spec_sha256": "sha256:" + "1" * 64,
        "box": "cpu-only",
        "run_id": "r",
        "points": [4],
        "repeats": 1,
        "arms": {"control": old},
    }
    assert ExperimentRecord.model_validate(record).model_dump(mode="json", exclude_none=True)["arms"] == {
        "control": old
    }
    assert "clients" not in ExperimentRecord.model_validate(record).model_dump(exclude_none=True)
    new = ExperimentRecord.model_validate(
        record | {"arms": {"control": old | {"engine": "vllm"}}, "clients": {"output_tps_total@4": "x"}}
    )
    assert new.arms["control"].engine == "vllm" and new.clients == {"output_tps_total@4": "x"}


def test_every_instrument_kind_names_its_client():
    """A cross-engine tail test ended in KeyError: 'tail' at the verdict, after every launch. The
    client is now the registered kind's own: every kind the spec accepts names one."""
    from recipe_ledger import instruments
    from recipe_ledger.experiment import engines
    from recipe_ledger.experiment.spec import experiment_json_schema

    kinds = experiment_json_schema()["$defs"]["Instrument"]["properties"]["kind"]["enum"]
    assert kinds == list(instruments.kinds())
    for kind in kinds:
        assert engines.client_of(Instrument(name="i", kind=kind, command=["true"])).strip()


def test_the_cross_engine_tail_example_says_which_client_measured_each_bar():
    from recipe_ledger.experiment import engines
    from recipe_ledger.experiment.spec import load_experiment

    experiment = load_experiment(REPO / "experiments" / "examples" / "tiny-tail-engines.yaml")
    clients = engines.clients_by_bar(experiment, {"tail": "vllm 0.32.0+cpu"})  # as the record has it
    assert set(clients.values()) >= {"vllm bench serve vllm 0.32.0+cpu (instrument tail)"}
    assert any("(instrument tail-flattered)" in c for c in clients.values())
