"""SGLang launch commands from recipes: blocks merged, vLLM flags translated or named, never dropped
silently; the printed text and the argv agree; bad input is one line."""

import json
import os
import shlex
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.engines.sglang import ENGINE as SGLANG
from recipe_ledger.errors import InputError, SpecError
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.command import CommandRequest, resolve_for_people, text_for_people
from recipe_ledger.recipes.flags import LaunchCommand, flag_values, last_value
from recipe_ledger.recipes.lint import Vocabulary, lint_recipe
from recipe_ledger.recipes.sglang import LAUNCH_PROGRAM, SGLANG_DEFAULT_PORT, model_path, translate_vllm_args

from helpers.projects import scratch_recipes_root

REPO = Path(__file__).resolve().parents[2]
PROJECT_RECIPES = REPO / "recipes"

BASE = """\
meta:
  title: "T"
  slug: "t"
  provider: "P"
  description: "d"
variants:
  default:
    precision: bf16
    vram_minimum_gb: 1
compatible_strategies:
  - single_node_tp
"""


@pytest.fixture()
def root(tmp_path):
    return scratch_recipes_root(tmp_path)


def write(root, body: str) -> RecipeRoot:
    body = textwrap.dedent(body)
    base = BASE
    if ("\n" + body).count("\nvariants:"):  # a key given twice is refused: the body's variants replace BASE's
        base = BASE.replace("variants:\n  default:\n    precision: bf16\n    vram_minimum_gb: 1\n", "")
    (root / "models" / "org" / "t.yaml").write_text(base + body)
    return RecipeRoot(root)


def sglang(recipes: RecipeRoot, hardware: str = "h200", **kw):
    return resolve_for_people(recipes, CommandRequest("org/t", hardware, engine="sglang", **kw))


def argv_of_text(text: str) -> list[str]:
    """The argv a shell would run for a printed command."""
    return shlex.split(text.replace("\\\n", " "))


# ------------------------------------------------------------------------------ the tiny recipe


def test_tiny_qwen2_on_cpu_comes_from_its_block_with_the_cpu_workarounds():
    recipes = RecipeRoot(PROJECT_RECIPES)
    vllm = resolve_for_people(recipes, CommandRequest("recipe-ledger/tiny-qwen2", "cpu_x86"))
    sg = resolve_for_people(recipes, CommandRequest("recipe-ledger/tiny-qwen2", "cpu_x86", engine="sglang"))
    assert sg.engine == "sglang" and sg.result["source"] == "sglang block"
    assert sg.argv[:3] == list(LAUNCH_PROGRAM)
    assert model_path(sg.argv) == vllm.argv[2]  # the model id, exactly as the vLLM command has it
    flags = flag_values(sg.argv)
    assert flags["--device"] == "cpu" and flags["--attention-backend"] == "torch_native"
    assert "--max-total-tokens" in flags and "--enable-metrics" in flags
    assert sg.argv[-2:] == ["--port", str(SGLANG_DEFAULT_PORT)] and sg.port == SGLANG_DEFAULT_PORT
    assert sg.env["SGLANG_USE_CPU_ENGINE"] == "1" and sg.env["HF_HUB_OFFLINE"] == "1"
    assert not [k for k in sg.env if k.startswith("VLLM_")]
    assert sg.warnings == []


def test_the_printed_command_is_the_argv():
    recipes = RecipeRoot(PROJECT_RECIPES)
    request = CommandRequest(
        "recipe-ledger/tiny-qwen2", "cpu_x86", features=["single_sequence"], engine="sglang"
    )
    sg = resolve_for_people(recipes, request)
    assert argv_of_text(sg.result["command"]) == sg.argv
    text = text_for_people(sg, docker=False)
    assert text.splitlines()[0].endswith("engine: sglang (sglang block)")
    assert "export SGLANG_USE_CPU_ENGINE=1" in text


def test_enabled_features_are_translated_on_top_of_the_block():
    recipes = RecipeRoot(PROJECT_RECIPES)
    features = ["single_sequence", "no_prefix_caching"]
    request = CommandRequest("recipe-ledger/tiny-qwen2", "cpu_x86", features=features, engine="sglang")
    flags = flag_values(resolve_for_people(recipes, request).argv)
    assert flags["--max-running-requests"] == "1"
    assert "--disable-radix-cache" in flags


def test_the_vllm_path_does_not_change_with_an_sglang_block():
    recipes = RecipeRoot(PROJECT_RECIPES)
    vllm = resolve_for_people(recipes, CommandRequest("recipe-ledger/tiny-qwen2", "cpu_x86"))
    assert vllm.engine == "vllm" and vllm.argv[:2] == ["vllm", "serve"]
    assert "engine" not in vllm.result and "--device" not in vllm.argv


# ------------------------------------------------------------------------------ translation


def test_without_a_block_vllm_flags_are_translated_and_the_rest_named(root):
    recipes = write(
        root,
        """\
        model:
          model_id: "org/t"
          base_args: ["--max-model-len", "32k", "--max-num-seqs", "64", "--trust-remote-code",
                      "--gpu-memory-utilization", "0.9", "--no-enable-prefix-caching", "--frobnicate", "3"]
          base_env: {VLLM_USE_V1: "1", HF_TOKEN: "$HF_TOKEN"}
        """,
    )
    sg = sglang(recipes)
    vllm = resolve_for_people(recipes, CommandRequest("org/t", "h200"))
    flags = flag_values(sg.argv)
    assert sg.result["source"] == "translated from the vLLM flags"
    assert flags["--context-length"] == "32000" and flags["--max-running-requests"] == "64"
    assert flags["--tp-size"] == flag_values(vllm.argv)["--tensor-parallel-size"]
    assert "--trust-remote-code" in flags and "--disable-radix-cache" in flags
    assert "--gpu-memory-utilization" not in flags and "--frobnicate" not in flags
    warned = " | ".join(sg.warnings)
    assert "--frobnicate" in warned
    assert "--gpu-memory-utilization" in warned and "--mem-fraction-static" in warned
    assert "VLLM_USE_V1" in warned
    assert sg.env == {"HF_TOKEN": "$HF_TOKEN"}


def test_every_vllm_flag_is_either_carried_or_named():
    args = ["--tensor-parallel-size", "2", "--enable-prefix-caching", "--quantization", "fp8"]
    args += ["--quantization", "hqq", "--kv-cache-dtype", "fp8", "--enforce-eager", "--weird"]
    out = translate_vllm_args(args)
    flags = flag_values(out.args)
    assert flags["--tp-size"] == "2" and flags["--kv-cache-dtype"] == "fp8_e4m3"
    assert flags["--cuda-graph-backend-decode"] == "disabled"
    assert "--quantization" not in out.args  # the last one wins, as vLLM reads it: hqq, named
    assert any("'hqq'" in w for w in out.warnings) and any("--weird" in w for w in out.warnings)
    assert not any("--enable-prefix-caching" in w for w in out.warnings)  # SGLang's default


@pytest.mark.parametrize(("method", "algorithm"), [("eagle3", "EAGLE3"), ("mtp", "NEXTN")])
def test_speculative_config_becomes_chain_drafting(method, algorithm):
    config = json.dumps({"method": method, "num_speculative_tokens": 3, "model": "org/draft"})
    out = translate_vllm_args(["--speculative-config", config])
    assert last_value(out.args, "--speculative-algorithm") == algorithm
    assert last_value(out.args, "--speculative-num-steps") == "3"
    assert last_value(out.args, "--speculative-num-draft-tokens") == "4"
    assert last_value(out.args, "--speculative-draft-model-path") == "org/draft"


def test_an_unknown_speculative_method_is_named():
    out = translate_vllm_args(["--speculative-config", '{"method": "suffix", "num_speculative_tokens": 4}'])
    assert out.args == [] and "suffix" in out.warnings[0]


# ------------------------------------------------------------------------------ blocks


BLOCKS = """\
model:
  model_id: "org/t"
  base_args: ["--max-num-seqs", "8"]
  sglang:
    args: ["--tp-size", "1", "--mem-fraction-static", "0.8"]
    env: {A: "model"}
variants:
  default:
    precision: bf16
    vram_minimum_gb: 1
    sglang:
      env: {B: "variant"}
    hardware_overrides:
      hopper:
        sglang:
          args: ["--mem-fraction-static", "0.85"]
          port: 31000
          docker_image: "lmsysorg/sglang@sha256:abc"
"""


def test_blocks_merge_model_variant_hardware_last_wins(root):
    recipes = write(root, BLOCKS)
    sg = sglang(recipes)
    flags = flag_values(sg.argv)
    assert flags["--mem-fraction-static"] == "0.85" and flags["--tp-size"] == "1"
    assert "--max-running-requests" not in flags  # base_args are vLLM's: the blocks replace them
    assert sg.env == {"A": "model", "B": "variant"}
    assert sg.port == 31000 and sg.argv[-2:] == ["--port", "31000"]
    assert sg.result["docker_image"] == "lmsysorg/sglang@sha256:abc"


def test_a_block_for_another_generation_does_not_apply(root):
    recipes = write(root, BLOCKS)
    sg = sglang(recipes, hardware="b200")
    assert flag_values(sg.argv)["--mem-fraction-static"] == "0.8" and sg.port == SGLANG_DEFAULT_PORT


def test_docker_form_listens_on_all_interfaces_at_the_port(root):
    recipes = write(root, BLOCKS)
    sg = sglang(recipes)
    docker_argv = sg.result["docker_argv"]
    assert argv_of_text(sg.result["docker_command"]) == docker_argv
    assert docker_argv[docker_argv.index("-p") + 1] == "31000:31000"
    image_at = docker_argv.index("lmsysorg/sglang@sha256:abc")
    inner = docker_argv[image_at + 1 :]
    assert inner[:3] == ["python3", "-m", "sglang.launch_server"]
    assert last_value(inner, "--host") == "0.0.0.0" and last_value(inner, "--port") == "31000"
    assert "-e" in docker_argv and "A=model" in docker_argv


def test_the_sglang_engine_replaces_the_model_in_place():
    argv = [*LAUNCH_PROGRAM, "--model-path", "org/t", "--tp-size", "1"]
    assert SGLANG.with_model(LaunchCommand.parse(argv), "/models/t").render() == [
        *LAUNCH_PROGRAM,
        "--model-path",
        "/models/t",
        "--tp-size",
        "1",
    ]


def test_an_unknown_key_in_a_block_is_refused_at_its_line(root):
    recipes = write(root, 'model:\n  model_id: "org/t"\n  sglang:\n    argz: ["--tp-size", "1"]\n')
    with pytest.raises(SpecError) as caught:
        recipes.load("org/t")
    assert "t.yaml:" in str(caught.value) and "argz" in str(caught.value)


# ------------------------------------------------------------------------------ lint


def lint(recipes: RecipeRoot):
    vocab = Vocabulary.from_taxonomy(recipes.taxonomy, list(recipes.strategies))
    return lint_recipe(recipes.load("org/t"), vocab)


def line_of(lines: list[str], word: str) -> int:
    return next(number for number, line in enumerate(lines, start=1) if word in line)


def test_lint_names_each_engines_flags_in_the_other_ones_list(root):
    body = """\
    model:
      model_id: "org/t"
      base_args: ["--tp-size", "2"]
      sglang:
        args: ["--max-model-len", "4096", "--port", "1"]
    features:
      f:
        description: "x"
        sglang: {args: []}
    """
    warnings = lint(write(root, body))
    by_code = {w.code: w for w in warnings}
    text = (root / "models" / "org" / "t.yaml").read_text().splitlines()
    assert by_code["sglang-flag-in-vllm-args"].where.endswith(f"t.yaml:{line_of(text, '--tp-size')}")
    assert "--tp-size" in by_code["sglang-flag-in-vllm-args"].message
    assert by_code["vllm-flag-in-sglang-args"].where.endswith(f"t.yaml:{line_of(text, '--max-model-len')}")
    assert "--port" in by_code["sglang-reserved-flag"].message
    assert "features.f.sglang" in by_code["sglang-block-ignored"].message
    assert "flag-written-two-ways" not in by_code  # sglang args are not vLLM args


def test_a_vllm_flag_in_a_block_is_also_a_command_warning(root):
    body = 'model:\n  model_id: "org/t"\n  sglang:\n    args: ["--enforce-eager"]\n'
    sg = sglang(write(root, body))
    assert any("--enforce-eager" in w and "vLLM flag" in w for w in sg.warnings)


# ------------------------------------------------------------------------------ CLI


def run(*args):
    old = os.getcwd()
    os.chdir(REPO)
    try:
        return CliRunner().invoke(main, list(args))
    finally:
        os.chdir(old)


def test_an_unknown_engine_is_one_line_exit_2():
    result = run("recipe", "command", "recipe-ledger/tiny-qwen2", "--engine", "sglangg")
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and "did you mean 'sglang'" in result.output


def test_docker_without_an_image_for_the_platform_is_one_line_exit_2():
    result = run(
        "recipe", "command", "recipe-ledger/tiny-qwen2", "-H", "cpu_x86", "--engine", "sglang", "--docker"
    )
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "docker_image" in result.output


def test_json_output_carries_the_engine_and_warnings():
    # h100 has no sglang block: the translation names what it leaves out.
    result = run("recipe", "command", "deepseek-v4.1-flash", "-H", "h100", "--engine", "sglang", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["engine"] == "sglang" and data["argv"][:3] == list(LAUNCH_PROGRAM)
    assert data["warnings"] and all(isinstance(w, str) for w in data["warnings"])


def test_multi_node_strategies_are_refused_for_sglang():
    recipes = RecipeRoot(PROJECT_RECIPES)
    request = CommandRequest("deepseek-v4.1-flash", "h200", "multi_node_tp", node_count=2, engine="sglang")
    with pytest.raises(InputError) as caught:
        resolve_for_people(recipes, request)
    assert "single-node" in str(caught.value)


def test_the_schema_includes_the_sglang_block():
    result = run("recipe", "schema")
    schema = json.loads(result.output)
    assert set(schema["$defs"]["SglangBlock"]["properties"]) == {"args", "env", "port", "docker_image"}
