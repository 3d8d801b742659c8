"""The vLLM -> SGLang flag translation as a corpus: vLLM command lines and the SGLang flags they
become, the ones refused (with their reason), parsers mapped by both engines' registries, the
parallel layout, the dotted config form, and the strategy-level sglang blocks.

Every expected SGLang flag below is one SGLang 0.5.23's parser accepts (ServerArgs.add_cli_args);
the parser names are those of its registries (function_call/parser_names.py,
parser/reasoning_parser_names.py)."""

import ast
import json
import os
import shlex
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import ResolutionError
from recipe_ledger.recipes import sglang_flags
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.command import CommandRequest, resolve_for_people
from recipe_ledger.recipes.flags import flag_values
from recipe_ledger.recipes.lint import Vocabulary, lint_recipe
from recipe_ledger.recipes.sglang_flags import (
    REASONING_PARSER_RENAMED,
    SGLANG_REASONING_PARSERS,
    SGLANG_TOOL_CALL_PARSERS,
    TOOL_CALL_PARSER_RENAMED,
    VllmArgs,
    human_int,
    translate_env,
    translate_vllm_args,
)

from helpers.projects import scratch_recipes_root

REPO = Path(__file__).resolve().parents[2]
PROJECT_RECIPES = REPO / "recipes"


def sg(command: str, **kw) -> list[str]:
    return translate_vllm_args(shlex.split(command), **kw).args


def warned(command: str, **kw) -> str:
    return " | ".join(translate_vllm_args(shlex.split(command), **kw).warnings)


# ------------------------------------------------------------------------------ the corpus

# (vLLM flags, the SGLang flags they become). No warning is expected for these.
CARRIED = [
    # parallel layout
    ("--tensor-parallel-size 8", "--tp-size 8"),
    ("-tp 4 -pp 2", "--tp-size 4 --pp-size 2"),
    ("--tensor-parallel-size 8 --enable-expert-parallel", "--tp-size 8 --ep-size 8"),
    ("--data-parallel-size 8 --enable-expert-parallel", "--tp-size 8 --attn-dp-size 8 --ep-size 8"),
    ("-tp 2 -dp 4 --enable-expert-parallel", "--tp-size 8 --attn-dp-size 4 --ep-size 8"),
    ("-dp 2 --enable-expert-parallel --no-enable-expert-parallel", "--dp-size 2"),
    ("--data-parallel-size 2", "--dp-size 2"),
    # tool-call parsers: mapped where the names differ, passed where SGLang knows the name
    ("--tool-call-parser hermes --enable-auto-tool-choice", "--tool-call-parser hermes"),
    ("--enable-auto-tool-choice --tool-call-parser llama3_json", "--tool-call-parser llama3"),
    ("--tool-call-parser llama4_pythonic", "--tool-call-parser pythonic"),
    ("--tool-call-parser deepseek_v3", "--tool-call-parser deepseekv3"),
    ("--tool-call-parser deepseek_v31", "--tool-call-parser deepseekv31"),
    ("--tool-call-parser deepseek_v32", "--tool-call-parser deepseekv32"),
    ("--tool-call-parser deepseek_v4", "--tool-call-parser deepseekv4"),
    ("--tool-call-parser deepseek_v41", "--tool-call-parser deepseekv41"),
    ("--tool-call-parser qwen3_coder", "--tool-call-parser qwen3_coder"),
    ("--tool-call-parser qwen3_xml", "--tool-call-parser qwen3_coder"),
    ("--tool-call-parser qwen3_json", "--tool-call-parser qwen"),
    ("--tool-call-parser glm45", "--tool-call-parser glm45"),
    ("--tool-call-parser glm47", "--tool-call-parser glm47"),
    ("--tool-call-parser openai", "--tool-call-parser gpt-oss"),
    ("--tool-call-parser minimax_m2", "--tool-call-parser minimax-m2"),
    ("--tool-call-parser minimax_m3", "--tool-call-parser minimax-m3"),
    ("--tool-call-parser kimi_k2", "--tool-call-parser kimi_k2"),
    ("--tool-call-parser internlm", "--tool-call-parser interns1"),
    ("--tool-call-parser hy_v3", "--tool-call-parser hunyuan"),
    ("--tool-call-parser muse_glimmer", "--tool-call-parser muse"),
    ("--tool-call-parser apertus", "--tool-call-parser apertus2509"),
    ("--tool-call-parser gemma4", "--tool-call-parser gemma4"),
    ("--tool-call-parser step3p5", "--tool-call-parser step3p5"),
    ("--tool-call-parser mistral", "--tool-call-parser mistral"),
    # reasoning parsers
    ("--reasoning-parser qwen3", "--reasoning-parser qwen3"),
    ("--reasoning-parser deepseek_r1", "--reasoning-parser deepseek-r1"),
    ("--reasoning-parser deepseek_v3", "--reasoning-parser deepseek-v3"),
    ("--reasoning-parser deepseek_v4", "--reasoning-parser deepseek-v4"),
    ("--reasoning-parser deepseek_v41", "--reasoning-parser deepseek-v41"),
    ("--reasoning-parser glm45", "--reasoning-parser glm45"),
    ("--reasoning-parser glm47", "--reasoning-parser glm45"),
    ("--reasoning-parser openai_gptoss", "--reasoning-parser gpt-oss"),
    ("--reasoning-parser minimax_m2", "--reasoning-parser minimax"),
    ("--reasoning-parser minimax_m2_append_think", "--reasoning-parser minimax-append-think"),
    ("--reasoning-parser nemotron_v3", "--reasoning-parser nemotron_3"),
    ("--reasoning-parser kimi_k2", "--reasoning-parser kimi_k2"),
    ("--reasoning-parser hy_v3", "--reasoning-parser hunyuan"),
    # KV cache, memory, lengths
    ("--kv-cache-dtype fp8", "--kv-cache-dtype fp8_e4m3"),
    ("--kv-cache-dtype fp8_ds_mla", "--kv-cache-dtype fp8_e4m3"),
    ("--kv-cache-dtype fp8_e5m2", "--kv-cache-dtype fp8_e5m2"),
    ("--kv-cache-dtype bfloat16", "--kv-cache-dtype bfloat16"),
    ("--max-model-len 131072", "--context-length 131072"),
    ("--max-model-len 32k", "--context-length 32000"),
    ("--max-model-len 1M", "--context-length 1048576"),  # vLLM's M is 2**20, SGLang's 10**6
    ("--max_model_len 8192", "--context-length 8192"),  # vLLM reads _ as -
    ("--max-num-seqs 128", "--max-running-requests 128"),
    # MoE runner
    ("--moe-backend triton", "--moe-runner-backend triton"),
    ("--moe-backend flashinfer_cutlass", "--moe-runner-backend flashinfer_cutlass"),
    ("--moe-backend aiter", "--moe-runner-backend aiter"),
    ("--moe-backend deep_gemm_mega_moe", "--moe-runner-backend megamoe"),
    ('--kernel-config \'{"moe_backend":"deep_gemm_mega_moe"}\'', "--moe-runner-backend megamoe"),
    ("--kernel-config.moe_backend marlin", "--moe-runner-backend marlin"),
    # multimodal
    ("--mm-encoder-tp-mode data", "--mm-enable-dp-encoder --enable-multimodal"),
    ("--language-model-only", "--language-model-only"),
    (
        '--limit-mm-per-prompt \'{"image":2,"video":0}\'',
        '--limit-mm-data-per-request \'{"image":2,"video":0}\'',
    ),
    (
        "--limit-mm-per-prompt.image 0 --limit-mm-per-prompt.video 0",
        '--limit-mm-data-per-request \'{"image":0,"video":0}\'',
    ),
    # speculative decoding: the JSON form and the dotted form are one config
    (
        '--speculative-config \'{"method":"mtp","num_speculative_tokens":3}\'',
        "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4",
    ),
    (
        "--speculative-config.method mtp --speculative-config.num_speculative_tokens 1",
        "--speculative-algorithm NEXTN --speculative-num-steps 1 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 2",
    ),
    (
        "--speculative_config.method=mtp --speculative_config.num_speculative_tokens=2",
        "--speculative-algorithm NEXTN --speculative-num-steps 2 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 3",
    ),
    (
        '--speculative-config \'{"method": "step3p5_mtp", "num_speculative_tokens": 1}\'',
        "--speculative-algorithm NEXTN --speculative-num-steps 1 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 2",
    ),
    (
        '--speculative-config \'{"model":"org/kimi-eagle3-mla","num_speculative_tokens":3}\'',
        "--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4 --speculative-draft-model-path org/kimi-eagle3-mla",
    ),
    (
        '--speculative-config \'{"model":"google/gemma-4-31B-it-assistant","num_speculative_tokens":4}\'',
        "--speculative-algorithm NEXTN --speculative-num-steps 4 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 5 --speculative-draft-model-path google/gemma-4-31B-it-assistant",
    ),
    (
        '--speculative-config \'{"method":"dflash","model":"org/d-DFlash","num_speculative_tokens":15}\'',
        "--speculative-algorithm DFLASH --speculative-num-draft-tokens 16 "
        "--speculative-draft-model-path org/d-DFlash",
    ),
    # how drafts are sampled and verified, where SGLang does it alike (vLLM 0.32.0 config/speculative.py)
    (  # SGLang samples DSpark drafts by default
        '--speculative-config \'{"method":"dspark","num_speculative_tokens":7,'
        '"draft_sample_method":"probabilistic"}\'',
        "--speculative-algorithm DSPARK --speculative-dspark-block-size 7",
    ),
    (  # block verification (Sun et al.) in both
        '--speculative-config \'{"method":"dspark","num_speculative_tokens":5,'
        '"rejection_sample_method":"block"}\'',
        "--speculative-algorithm DSPARK --speculative-dspark-block-size 5 "
        "--speculative-use-block-verification",
    ),
    (
        '--speculative-config \'{"method":"eagle3","model":"m","num_speculative_tokens":2,'
        '"rejection_sample_method":"block"}\'',
        "--speculative-algorithm EAGLE3 --speculative-num-steps 2 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 3 --speculative-draft-model-path m "
        "--speculative-use-block-verification",
    ),
    # the rest, same meaning
    (
        "--hf-overrides '{\"num_nextn_predict_layers\": 1}'",
        "--json-model-override-args '{\"num_nextn_predict_layers\":1}'",
    ),
    ("--default-chat-template-kwargs.thinking true", "--default-chat-template-kwargs '{\"thinking\":true}'"),
    ("--trust-remote-code --served-model-name m", "--trust-remote-code --served-model-name m"),
    ("--load-format fastsafetensors", "--load-format fastsafetensors"),
    ("--quantization awq", "--quantization awq"),
    ("--no-enable-prefix-caching", "--disable-radix-cache"),
    ("--no-enable-chunked-prefill", "--chunked-prefill-size -1"),
    ("--no-async-scheduling", "--disable-overlap-schedule"),
    ("--mamba-ssm-cache-dtype float16", "--mamba-ssm-dtype float16"),
    ("--enforce-eager", "--cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled"),
    ("--tokenizer-mode slow", "--tokenizer-mode slow"),
    # what SGLang does by default: nothing to pass, nothing to warn about
    ("--enable-prefix-caching --enable-chunked-prefill --async-scheduling", ""),
    ("--tokenizer-mode deepseek_v41", ""),  # SGLang picks V4.1's chat encoder from the architecture
]


@pytest.mark.parametrize(("vllm", "expected"), CARRIED, ids=[c[0][:60] for c in CARRIED])
def test_vllm_flags_become_these_sglang_flags(vllm, expected):
    out = translate_vllm_args(shlex.split(vllm))
    assert out.args == shlex.split(expected)
    assert out.warnings == []


# (vLLM flags, words the warning must hold). Nothing is carried for these.
REFUSED = [
    ("--tool-call-parser seed_oss", "registers no tool-call parser"),
    ("--tool-call-parser hunyuan_a13b", "Hunyuan-A13B"),
    ("--tool-call-parser olmo3", "newline-separated"),
    ("--reasoning-parser granite", "granite_thinking_parser"),
    ("--reasoning-parser nano_v3", "registers no reasoning parser"),
    ("--reasoning-parser-plugin /x.py", "plugin"),
    ("--kv-cache-dtype fp8_inc", "not one of SGLang's"),
    ("--quantization hqq", "not a method SGLang names alike"),
    ("--moe-backend b12x", "no MoE runner of that name"),
    ("--max-model-len auto", "the model's own length"),
    ("--max-num-batched-tokens 8192", "--chunked-prefill-size"),
    ("--block-size 128", "page size"),
    ("--attention-backend TRITON_ATTN", "picks its own"),
    ('--compilation-config \'{"cudagraph_mode":"FULL_DECODE_ONLY"}\'', "model runner"),
    ("-cc.pass_config.fuse_rope_kvcache=true", "--compilation-config"),
    ("--chat-template examples/tool_chat_template_gemma4.jinja", "vLLM's repository"),
    ("--tokenizer-mode mistral", "auto or slow"),
    ('--limit-mm-per-prompt \'{"image":{"count":2,"width":512}}\'', "count per modality"),
    ('--speculative-config \'{"method":"ngram","num_speculative_tokens":4}\'', "trie"),
    ('--speculative-config \'{"method":"suffix","num_speculative_tokens":4}\'', "suffix"),
    ('--speculative-config \'{"method":"mtp"}\'', "not a count"),
    ("--speculative-config not-json", "not a JSON object"),
    ("--cpu-offload-gb 60", "reserves host RAM"),
    ("--frobnicate 3", "no clear SGLang equivalent"),
]


@pytest.mark.parametrize(("vllm", "reason"), REFUSED, ids=[r[0][:60] for r in REFUSED])
def test_vllm_flags_refused_with_their_reason(vllm, reason):
    out = translate_vllm_args(shlex.split(vllm))
    assert out.args == []
    assert len(out.warnings) == 1 and reason in out.warnings[0]
    head = sglang_flags.vllm_name(shlex.split(vllm)[0].partition("=")[0])[0]
    assert head in out.warnings[0]  # the flag is named, never dropped silently


def test_gpu_memory_utilization_is_carried_with_its_caveat():
    out = translate_vllm_args(["--gpu-memory-utilization", "0.9"])
    assert out.args == ["--mem-fraction-static", "0.9"]
    assert len(out.warnings) == 1 and "weights and the KV pool only" in out.warnings[0]


def test_speculative_keys_without_a_flag_are_named_the_rest_carried():
    config = {"method": "dspark", "num_speculative_tokens": 5, "enable_adaptive_verification": True}
    out = translate_vllm_args(["--speculative-config", json.dumps(config)])
    assert out.args == ["--speculative-algorithm", "DSPARK", "--speculative-dspark-block-size", "5"]
    assert out.warnings == [
        "--speculative-config keys without an SGLang flag, not carried over: enable_adaptive_verification"
    ]


def test_greedy_dspark_drafts_are_sglangs_argmax_drafts():
    config = {"method": "dspark", "num_speculative_tokens": 5, "draft_sample_method": "greedy"}
    out = translate_vllm_args(["--speculative-config", json.dumps(config)])
    assert out.env == {"SGLANG_DSPARK_USE_GREEDY_DRAFT": "1"} and out.warnings == []


@pytest.mark.parametrize(
    ("config", "named"),
    [
        # SGLang may run an MTP draft as FROZEN_KV_MTP, where block verification is refused
        (
            {"method": "mtp", "num_speculative_tokens": 2, "rejection_sample_method": "block"},
            "rejection_sample_method",
        ),
        (
            {"method": "dspark", "num_speculative_tokens": 5, "rejection_sample_method": "synthetic"},
            "rejection_sample_method",
        ),
        (
            {
                "method": "eagle3",
                "model": "m",
                "num_speculative_tokens": 2,
                "draft_sample_method": "probabilistic",
            },
            "draft_sample_method",
        ),
    ],
)
def test_sampling_keys_sglang_does_not_do_alike_are_still_named(config, named):
    out = translate_vllm_args(["--speculative-config", json.dumps(config)])
    assert out.warnings == [f"--speculative-config keys without an SGLang flag, not carried over: {named}"]
    assert "--speculative-use-block-verification" not in out.args and out.env == {}


def test_dotted_keys_replace_the_json_form_as_vllm_reads_them():
    # vLLM appends the dotted keys as one JSON argument after the others: the last one wins.
    argv = ["--speculative-config", '{"method":"eagle3","num_speculative_tokens":7,"model":"m"}']
    argv += ["--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens", "2"]
    assert flag_values(translate_vllm_args(argv).args)["--speculative-algorithm"] == "NEXTN"
    assert VllmArgs.read(argv).config("--speculative-config")[0] == {
        "method": "mtp",
        "num_speculative_tokens": 2,
    }


def test_dspark_under_attention_dp_gets_the_dp_lm_head_sglang_requires():
    argv = ["--data-parallel-size", "8", "--enable-expert-parallel"]
    argv += ["--speculative-config", '{"method":"dspark","num_speculative_tokens":5}']
    assert translate_vllm_args(argv).args[-1] == "--enable-dp-lm-head"
    assert "--enable-dp-lm-head" not in translate_vllm_args(["-tp", "8", *argv[3:]]).args


def test_a_multimodal_recipe_served_with_images_enables_multimodal():
    assert sg("--tensor-parallel-size 2", multimodal=True) == ["--tp-size", "2", "--enable-multimodal"]
    assert "--enable-multimodal" not in sg("--language-model-only", multimodal=True)
    assert "--enable-multimodal" not in sg("--limit-mm-per-prompt.image 0", multimodal=True)
    assert "--enable-multimodal" not in sg("--tensor-parallel-size 2")


def test_the_last_occurrence_wins_as_vllm_reads_it():
    assert sg("--max-num-seqs 8 --max-num-seqs 32") == ["--max-running-requests", "32"]
    assert sg("--quantization hqq --quantization fp8") == ["--quantization", "fp8"]
    assert sg("--no-enable-prefix-caching --enable-prefix-caching") == []
    assert sg("--enable-prefix-caching --no-enable-prefix-caching") == ["--disable-radix-cache"]
    assert sg("--language-model-only --no-language-model-only", multimodal=True) == ["--enable-multimodal"]


@pytest.mark.parametrize(
    ("text", "number"),
    [("32k", 32000), ("1K", 1024), ("1M", 1048576), ("1m", 1000000), ("25.6k", 25600), ("4096", 4096)]
    + [("-1", -1), ("1.5M", None), ("auto", None)],
)
def test_human_readable_ints_read_as_vllm_reads_them(text, number):
    assert human_int(text) == number


def test_env_nccl_symmetric_memory_becomes_the_flag_the_rest_of_vllm_env_is_named():
    out = translate_env({"VLLM_USE_NCCL_SYMM_MEM": "1", "VLLM_USE_V1": "1", "NCCL_CUMEM_ENABLE": "1"})
    assert out.args == ["--enable-symm-mem"] and out.env == {"NCCL_CUMEM_ENABLE": "1"}
    assert out.warnings == ["vLLM environment not carried over: VLLM_USE_V1"]
    assert translate_env({"VLLM_USE_NCCL_SYMM_MEM": "0"}).args == []


def test_engram_cpu_offload_becomes_sglangs_host_table():
    out = translate_vllm_args(["--engram-config", '{"cpu_offload":true,"use_thp":true}'])
    assert out.args == [] and out.env == {"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE": "1"}
    assert out.warnings == ["--engram-config keys without an SGLang flag, not carried over: use_thp"]


# ------------------------------------------------------------------------------ the registries


def test_parser_names_map_into_sglangs_registries():
    assert set(TOOL_CALL_PARSER_RENAMED.values()) <= SGLANG_TOOL_CALL_PARSERS
    assert set(REASONING_PARSER_RENAMED.values()) <= SGLANG_REASONING_PARSERS
    # a renamed vLLM parser is never also an SGLang name of another format
    assert not (set(TOOL_CALL_PARSER_RENAMED) & SGLANG_TOOL_CALL_PARSERS)
    assert not (set(REASONING_PARSER_RENAMED) & SGLANG_REASONING_PARSERS)


def _registry(path: Path, name: str) -> list[str]:
    """The list literal a registry module assigns to ``name`` (read, never imported)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{path} assigns no {name}")


@pytest.mark.parametrize(
    ("relative", "name", "table"),
    [
        ("function_call/parser_names.py", "TOOL_CALL_PARSER_NAMES", SGLANG_TOOL_CALL_PARSERS),
        ("parser/reasoning_parser_names.py", "REASONING_PARSER_NAMES", SGLANG_REASONING_PARSERS),
    ],
)
def test_the_tables_are_sglangs_own_registries_where_the_venv_is_here(relative, name, table):
    found = sorted(REPO.glob(f".venv-sglang/lib/python*/site-packages/sglang/srt/{relative}"))
    if not found:
        pytest.skip("no .venv-sglang here")
    assert set(_registry(found[0], name)) == table


# ------------------------------------------------------------------------------ blocks and strategies

BASE = """\
meta:
  title: "T"
  slug: "t"
  provider: "P"
  description: "d"
  tasks: [text, multimodal]
model:
  model_id: "org/t"
  base_args: ["--max-num-seqs", "64", "--tool-call-parser", "hermes", "--enable-auto-tool-choice"]
variants:
  default:
    precision: bf16
    vram_minimum_gb: 1
compatible_strategies:
  - single_node_tp
  - single_node_dep
  - multi_node_tp
"""


@pytest.fixture()
def root(tmp_path):
    return scratch_recipes_root(tmp_path)


def write(root, extra: str = "") -> RecipeRoot:
    (root / "models" / "org" / "t.yaml").write_text(BASE + textwrap.dedent(extra))
    return RecipeRoot(root)


STRATEGY_BLOCKS = """\
strategy_overrides:
  single_node_dep:
    sglang:
      args: ["--enable-dp-lm-head"]
    hardware_overrides:
      hopper:
        sglang:
          args: ["--max-running-requests", "16"]
          env: {A: "dep-hopper"}
"""


def test_without_blocks_the_whole_vllm_command_is_translated(root):
    resolved = resolve_for_people(
        write(root), CommandRequest("org/t", "h200", "single_node_dep", engine="sglang")
    )
    flags = flag_values(resolved.argv)
    assert flags["--tp-size"] == "8" and flags["--attn-dp-size"] == "8" and flags["--ep-size"] == "8"
    assert flags["--tool-call-parser"] == "hermes" and flags["--max-running-requests"] == "64"
    assert "--enable-multimodal" in flags and resolved.warnings == []


def test_strategy_blocks_apply_to_their_strategy_on_top_of_its_layout(root):
    recipes = write(root, STRATEGY_BLOCKS)
    dep = resolve_for_people(recipes, CommandRequest("org/t", "h200", "single_node_dep", engine="sglang"))
    flags = flag_values(dep.argv)
    assert dep.result["source"] == "sglang block"
    assert flags["--tp-size"] == "8" and flags["--attn-dp-size"] == "8" and flags["--ep-size"] == "8"
    assert "--enable-dp-lm-head" in flags and flags["--max-running-requests"] == "16"
    assert "--tool-call-parser" not in flags  # base_args are vLLM's: the blocks replace them
    assert dep.env == {"A": "dep-hopper"}
    tp = resolve_for_people(recipes, CommandRequest("org/t", "h200", "single_node_tp", engine="sglang"))
    assert tp.result["source"] == "translated from the vLLM flags"
    assert "--enable-dp-lm-head" not in tp.argv
    b200 = resolve_for_people(recipes, CommandRequest("org/t", "b200", "single_node_dep", engine="sglang"))
    assert "--max-running-requests" not in b200.argv  # the hopper block is not Blackwell's


def test_a_blocks_own_layout_flag_replaces_the_strategys(root):
    recipes = write(root, 'hardware_overrides:\n  h200:\n    sglang:\n      args: ["--tp-size", "2"]\n')
    resolved = resolve_for_people(recipes, CommandRequest("org/t", "h200", "single_node_tp", engine="sglang"))
    assert flag_values(resolved.argv)["--tp-size"] == "2" and resolved.argv.count("--tp-size") == 1


def test_strategy_blocks_are_read_places_for_the_lint(root):
    recipes = write(root, STRATEGY_BLOCKS + "  pd_cluster:\n    prefill:\n      sglang: {args: []}\n")
    vocab = Vocabulary.from_taxonomy(recipes.taxonomy, list(recipes.strategies))
    codes = [(w.code, w.message) for w in lint_recipe(recipes.load("org/t"), vocab)]
    assert [c for c, _ in codes] == ["sglang-block-ignored"]
    assert "strategy_overrides.pd_cluster.prefill.sglang" in codes[0][1]


def test_the_vllm_command_does_not_change_with_strategy_blocks(root):
    plain = resolve_for_people(write(root), CommandRequest("org/t", "h200", "single_node_dep")).result
    with_blocks = resolve_for_people(
        write(root, STRATEGY_BLOCKS), CommandRequest("org/t", "h200", "single_node_dep")
    )
    assert with_blocks.result == plain


# ------------------------------------------------------------------------------ the multi-node refusal


def test_the_refusal_names_the_whole_selection_in_its_next_command(root):
    recipes = write(root)
    request = CommandRequest(
        "org/t", "h200", "multi_node_tp", "default", [], 2, engine="sglang", recipes=str(root)
    )
    with pytest.raises(ResolutionError) as caught:
        resolve_for_people(recipes, request)
    hint = caught.value.hint or ""
    expected = "ledger recipe command org/t -H h200 -v default -s single_node_tp --engine sglang"
    assert hint == f"{expected} --recipes {root}"


def test_following_the_next_command_resolves_the_same_selection():
    args = ["recipe", "command", "deepseek-v4.1-flash", "-H", "b200", "-v", "default", "-s", "multi_node_tep"]
    args += ["--nodes", "2", "-f", "reasoning", "--engine", "sglang", "--recipes", "recipes"]
    old = os.getcwd()
    os.chdir(REPO)
    try:
        refused = CliRunner().invoke(main, args)
        assert refused.exit_code == 2
        hint = refused.output.split("(next: ", 1)[1].rsplit(")", 1)[0]
        words = shlex.split(hint)
        assert words[:3] == ["ledger", "recipe", "command"]
        assert words[3:] == [
            "deepseek-ai/DeepSeek-V4.1-Flash",
            "-H",
            "b200",
            "-v",
            "default",
            "-s",
            "single_node_tep",
            "-f",
            "reasoning",
            "--engine",
            "sglang",
            "--recipes",
            "recipes",
        ]
        followed = CliRunner().invoke(main, [*words[1:], "--json"])
        assert followed.exit_code == 0, followed.output
        data = json.loads(followed.stdout)
    finally:
        os.chdir(old)
    assert (data["hardware"], data["variant"], data["strategy"]) == ("b200", "default", "single_node_tep")
    assert flag_values(data["argv"])["--reasoning-parser"] == "deepseek-v41"


def test_no_features_is_kept_when_the_site_would_enable_some():
    recipes = RecipeRoot(PROJECT_RECIPES)
    request = CommandRequest("deepseek-v4.1-flash", "h200", "multi_node_tp", None, [], 2, engine="sglang")
    with pytest.raises(ResolutionError) as caught:
        resolve_for_people(recipes, request)
    assert "--no-features" in (caught.value.hint or "")
    assert "--recipes" not in (caught.value.hint or "")  # none given: the project's


# ------------------------------------------------------------------------------ the shipped blocks


def test_deepseek_v41_flash_on_h200_comes_from_its_block():
    recipes = RecipeRoot(PROJECT_RECIPES)
    resolved = resolve_for_people(recipes, CommandRequest("deepseek-v4.1-flash", "h200", engine="sglang"))
    assert resolved.result["source"] == "sglang block"
    assert resolved.env == {"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE": "1"}
    flags = flag_values(resolved.argv)
    assert flags["--tp-size"] == "4"  # the strategy's TP4 on H200
    assert flags["--tool-call-parser"] == "deepseekv41" and flags["--reasoning-parser"] == "deepseek-v41"
    assert "--mm-enable-dp-encoder" in flags and "--enable-multimodal" in flags
    assert resolved.warnings == []


@pytest.mark.parametrize(
    ("hardware", "running"), [("b200", "8"), ("b300", "256"), ("gb200", "128"), ("gb300", "128")]
)
def test_deepseek_v41_flash_blackwell_tp_blocks(hardware, running):
    recipes = RecipeRoot(PROJECT_RECIPES)
    resolved = resolve_for_people(recipes, CommandRequest("deepseek-v4.1-flash", hardware, engine="sglang"))
    flags = flag_values(resolved.argv)
    assert resolved.result["source"] == "sglang block" and resolved.warnings == []
    assert flags["--tp-size"] == "2" and flags["--max-running-requests"] == running
    assert resolved.env == {"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE": "1"}


def test_deepseek_v41_flash_without_a_block_is_translated():
    recipes = RecipeRoot(PROJECT_RECIPES)
    request = CommandRequest(
        "deepseek-v4.1-flash", "b200", "single_node_dep", features=["spec_decoding"], engine="sglang"
    )
    resolved = resolve_for_people(recipes, request)
    flags = flag_values(resolved.argv)
    assert resolved.result["source"] == "translated from the vLLM flags"
    assert (flags["--tp-size"], flags["--attn-dp-size"], flags["--ep-size"]) == ("8", "8", "8")
    assert flags["--moe-runner-backend"] == "megamoe" and flags["--kv-cache-dtype"] == "fp8_e4m3"
    assert flags["--speculative-algorithm"] == "DSPARK" and flags["--speculative-dspark-block-size"] == "5"
    assert "--enable-dp-lm-head" in flags


def test_a_block_row_names_only_the_speculative_keys_sglang_really_drops():
    """V4.1's DSpark config on the h200 block: probabilistic drafts are SGLang's default and block
    verification is its flag, so neither is named; adaptive verification has no SGLang flag."""
    recipes = RecipeRoot(PROJECT_RECIPES)
    request = CommandRequest("deepseek-v4.1-flash", "h200", features=["spec_decoding"], engine="sglang")
    resolved = resolve_for_people(recipes, request)
    assert resolved.result["source"] == "sglang block"
    flags = flag_values(resolved.argv)
    assert flags["--speculative-algorithm"] == "DSPARK" and "--speculative-use-block-verification" in flags
    assert resolved.warnings == [
        "--speculative-config keys without an SGLang flag, not carried over: enable_adaptive_verification"
    ]


# The shipped DeepSeek-V4-Flash and GLM-5.2 blocks: the exact SGLang argv (after the program) per row,
# its env, and what is still named. Features: tool calling, reasoning and speculative decoding.
SPEC_FEATURES = ["tool_calling", "reasoning", "spec_decoding"]
V4_FLASH = "deepseek-ai/DeepSeek-V4-Flash"
V4_MODEL = ["--model-path", "deepseek-ai/DeepSeek-V4-Flash-0731"]
V4_FEATURES = "--tool-call-parser deepseekv4 --reasoning-parser deepseek-v4 "
V4_FEATURES += "--speculative-algorithm DSPARK --speculative-dspark-block-size 7"
V4_REASONING_CONFIG = "--reasoning-config (vLLM) has no clear SGLang equivalent; not carried over"
GLM = "zai-org/GLM-5.2"
GLM_FEATURES = "--tool-call-parser glm47 --reasoning-parser glm45 --speculative-algorithm NEXTN "
GLM_FEATURES += "--speculative-num-steps 5 --speculative-eagle-topk 1 --speculative-num-draft-tokens 6"
AITER = {"SGLANG_USE_AITER": "1"}

SHIPPED_ROWS = [
    # Blackwell TEP: MegaMoE with the prefill chunk its per-rank token budget covers
    (
        V4_FLASH,
        "b200",
        "single_node_tep",
        None,
        V4_MODEL,
        "--tp-size 8 --ep-size 8 --moe-runner-backend megamoe --chunked-prefill-size 8192 " + V4_FEATURES,
        {},
    ),
    (
        V4_FLASH,
        "gb200",
        "single_node_dep",
        None,
        V4_MODEL,
        "--tp-size 4 --attn-dp-size 4 --ep-size 4 "
        "--moe-runner-backend megamoe --chunked-prefill-size 8192 " + V4_FEATURES + " --enable-dp-lm-head",
        {},
    ),
    # TP only, and sm_120: SGLang's default MoE runner, as vLLM keeps its own
    (
        V4_FLASH,
        "b200",
        "single_node_tp",
        None,
        V4_MODEL,
        "--tp-size 8 --chunked-prefill-size 8192 --moe-runner-backend auto " + V4_FEATURES,
        {},
    ),
    (
        V4_FLASH,
        "rtx_pro_6000_8x",
        "single_node_tep",
        None,
        V4_MODEL,
        "--tp-size 8 --ep-size 8 --chunked-prefill-size 8192 --moe-runner-backend auto " + V4_FEATURES,
        {},
    ),
    # AMD: SGLang's AITER switch and vLLM's caps
    (
        V4_FLASH,
        "mi355x",
        "single_node_tep",
        None,
        V4_MODEL,
        "--tp-size 8 --ep-size 8 --max-running-requests 512 --chunked-prefill-size 8192 " + V4_FEATURES,
        AITER,
    ),
    (
        GLM,
        "mi355x",
        "single_node_tp",
        None,
        ["--model-path", "zai-org/GLM-5.2-FP8"],
        "--tp-size 8 --kv-cache-dtype fp8_e4m3 " + GLM_FEATURES,
        AITER,
    ),
    (
        GLM,
        "mi300x",
        "single_node_tep",
        None,
        ["--model-path", "zai-org/GLM-5.2-FP8"],
        "--tp-size 8 --ep-size 8 --kv-cache-dtype fp8_e4m3 " + GLM_FEATURES,
        AITER,
    ),
    (
        GLM,
        "mi355x",
        "single_node_tp",
        "mxfp4",
        ["--model-path", "amd/GLM-5.2-MXFP4"],
        "--tp-size 8 --kv-cache-dtype fp8_e4m3 --trust-remote-code " + GLM_FEATURES,
        AITER,
    ),
]


@pytest.mark.parametrize(
    ("recipe", "hardware", "strategy", "variant", "model", "expected", "env"),
    SHIPPED_ROWS,
    ids=[f"{r[0].split('/')[1]}-{r[1]}-{r[2]}-{r[3] or 'default'}" for r in SHIPPED_ROWS],
)
def test_the_shipped_blocks_give_this_sglang_command(
    recipe, hardware, strategy, variant, model, expected, env
):
    request = CommandRequest(recipe, hardware, strategy, variant, SPEC_FEATURES, engine="sglang")
    resolved = resolve_for_people(RecipeRoot(PROJECT_RECIPES), request)
    assert resolved.result["source"] == "sglang block"
    assert resolved.argv == [
        "python",
        "-m",
        "sglang.launch_server",
        *model,
        *shlex.split(expected),
        "--port",
        "30000",
    ]
    assert resolved.env == env
    # What is left is what SGLang really does not get: V4's reasoning config (its parser needs none).
    assert resolved.warnings == ([V4_REASONING_CONFIG] if recipe == V4_FLASH else [])


@pytest.mark.parametrize(("recipe", "hardware"), [(V4_FLASH, "h200"), (GLM, "b200"), (GLM, "h200")])
def test_rows_without_a_block_are_translated(recipe, hardware):
    request = CommandRequest(recipe, hardware, "single_node_tep", None, SPEC_FEATURES, engine="sglang")
    resolved = resolve_for_people(RecipeRoot(PROJECT_RECIPES), request)
    flags = flag_values(resolved.argv)
    assert resolved.result["source"] == "translated from the vLLM flags"
    assert flags["--kv-cache-dtype"] == "fp8_e4m3" and flags["--ep-size"] == "8"


def _vllm_matrix(corpus, ref: str) -> dict:
    """Every (variant, strategy, hardware) vLLM result of one recipe (an error as its text)."""
    raw = corpus.recipe(ref)
    out = {}
    for variant in raw["variants"]:
        for strategy in raw["compatible_strategies"]:
            for hardware in [*raw["meta"]["hardware"], "nvidia", "amd"]:
                for features in ([], SPEC_FEATURES):
                    try:
                        got = corpus.resolve(ref, variant, strategy, hardware, list(features))
                    except ResolutionError as error:
                        got = {"error": str(error)}
                    out[(variant, strategy, hardware, tuple(features))] = got
    return out


@pytest.mark.parametrize("ref", ["models/deepseek-ai/DeepSeek-V4-Flash.yaml", "models/zai-org/GLM-5.2.yaml"])
def test_the_sglang_blocks_leave_the_vllm_commands_as_upstream_has_them(compat_dir, ref):
    from recipe_ledger.recipes.corpus import Corpus

    ours, upstream = Corpus(PROJECT_RECIPES), Corpus(compat_dir / "vllm-recipes")
    theirs = _vllm_matrix(upstream, ref)
    assert len(theirs) > 100 and _vllm_matrix(ours, ref) == theirs


def test_the_reference_builders_v4_flash_cases_match_our_copy(compat_dir):
    from recipe_ledger.recipes.corpus import Corpus, resolve_case

    ours = Corpus(PROJECT_RECIPES)
    cases = [json.loads(line) for line in (compat_dir / "expected-commands.jsonl").read_text().splitlines()]
    cases = [case for case in cases if case["recipe"] == "models/deepseek-ai/DeepSeek-V4-Flash.yaml"]
    assert len(cases) == 62
    for case in cases:
        expected = {key: case[key] for key in ("result", "error") if key in case}
        assert json.dumps(resolve_case(ours, case)) == json.dumps(expected), case


@pytest.mark.parametrize("ref", ["deepseek-ai/DeepSeek-V4-Flash", "zai-org/GLM-5.2"])
def test_the_new_recipes_lint_without_our_own_findings(ref):
    recipes = RecipeRoot(PROJECT_RECIPES)
    vocab = Vocabulary.from_taxonomy(recipes.taxonomy, list(recipes.strategies))
    codes = {warning.code for warning in lint_recipe(recipes.load(ref), vocab)}
    # V4-Flash's upstream exact-GPU dgx_spark_gb10 overrides lose vLLM's last-wins dedupe; not ours.
    assert codes <= {"exact-override-shadowed"}
