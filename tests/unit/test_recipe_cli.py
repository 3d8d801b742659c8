"""The recipe commands as a person meets them: golden commands, defaults, one-line errors."""

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.recipes.flags import parse_flags

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"

# The exact command of release "Sixty-K Agent" v14, as seed 000 prints it (server flags only).
V14_FLAGS = [
    "--model",
    "/model",
    "--served-model-name",
    "dsv41-flash-uva",
    "--trust-remote-code",
    "--tensor-parallel-size",
    "1",
    "--offload-backend",
    "uva",
    "--cpu-offload-gb",
    "60",
    "--cpu-offload-params",
    "routed_experts.w13_weight",
    "routed_experts.w2_weight",
    "--engram-config",
    '{"cpu_offload": true}',
    "--speculative-config",
    '{"method":"dspark","num_speculative_tokens":5,"num_speculative_tokens_per_batch_size":[[1,4,5],[5,16,1]]}',
    "--max-model-len",
    "1048576",
    "--max-num-seqs",
    "16",
    "--max-num-batched-tokens",
    "8192",
    "--gpu-memory-utilization",
    "0.97",
    "--long-prefill-token-threshold",
    "6144",
    "--tool-call-parser",
    "deepseek_v41",
    "--reasoning-parser",
    "deepseek_v41",
    "--enable-auto-tool-choice",
    "--port",
    "30006",
]


def run(*args, cwd=REPO):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, list(args))
    finally:
        os.chdir(old)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"golden file {path} is missing: run with UPDATE_GOLDEN=1"
    assert text == path.read_text()


@pytest.mark.parametrize(
    ("golden", "args"),
    [
        (
            "dsv41-station-v14-features.txt",
            [
                "deepseek-v4.1-flash",
                "-H",
                "dgx_station_gb300",
                "-f",
                "spec_decoding",
                "-f",
                "tool_calling",
                "-f",
                "reasoning",
            ],
        ),
        ("dsv41-h200-defaults.txt", ["deepseek-v4.1-flash", "-H", "h200"]),
        ("dsv41-station-docker.txt", ["deepseek-v4.1-flash", "-H", "dgx_station_gb300", "--docker"]),
        ("tiny-qwen2-cpu.txt", ["tiny-qwen2"]),
    ],
)
def test_commands_match_golden_files(golden, args):
    result = run("recipe", "command", *args)
    assert result.exit_code == 0, result.output
    check_golden(golden, result.output)


def _values(argv):
    return {flag.name: flag.values for flag in parse_flags(argv)}


def test_recipe_and_release_v14_agree_except_where_the_recipe_moved_on():
    result = run(
        "recipe",
        "command",
        "deepseek-v4.1-flash",
        "-H",
        "dgx_station_gb300",
        "--json",
        "-f",
        "spec_decoding",
        "-f",
        "tool_calling",
        "-f",
        "reasoning",
    )
    recipe, v14 = _values(json.loads(result.output)["argv"]), _values(V14_FLAGS)
    shared = [
        "--tensor-parallel-size",
        "--offload-backend",
        "--cpu-offload-gb",
        "--cpu-offload-params",
        "--max-model-len",
        "--max-num-batched-tokens",
        "--gpu-memory-utilization",
        "--long-prefill-token-threshold",
        "--tool-call-parser",
        "--reasoning-parser",
        "--enable-auto-tool-choice",
    ]
    for flag in shared:
        assert recipe[flag] == v14[flag], flag
    assert json.loads(recipe["--engram-config"][0]) == json.loads(v14["--engram-config"][0])
    # Where the recipe moved on after v14: more sequences, and the k-schedule's upper bound.
    assert (v14["--max-num-seqs"], recipe["--max-num-seqs"]) == (("16",), ("24",))
    k_v14 = json.loads(v14["--speculative-config"][0])["num_speculative_tokens_per_batch_size"]
    k_now = json.loads(recipe["--speculative-config"][0])["num_speculative_tokens_per_batch_size"]
    assert (k_v14, k_now) == ([[1, 4, 5], [5, 16, 1]], [[1, 4, 5], [5, 24, 1]])


def test_defaults_follow_the_site():
    result = run("recipe", "command", "deepseek-v4.1-flash", "-H", "dgx_station_gb300", "--json")
    argv = json.loads(result.output)["argv"]
    assert "--mm-encoder-tp-mode" in argv  # encoder_parallel is on unless opted out
    assert "--speculative-config" not in argv  # spec_decoding is opt-in


def test_conflicting_features_warn_on_stderr():
    result = run(
        "recipe", "command", "deepseek-v4.1-flash", "-H", "h200", "-f", "text_only", "-f", "encoder_parallel"
    )
    assert result.exit_code == 0
    assert "mutually exclusive" in result.stderr


@pytest.fixture()
def broken_root(tmp_path):
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    return tmp_path / "recipes"


def _one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


def test_malformed_yaml(broken_root):
    path = broken_root / "models" / "recipe-ledger" / "tiny-qwen2.yaml"
    path.write_text(path.read_text().replace('  slug: "tiny-qwen2"', '  slug: ["tiny-qwen2"'))
    result = run("recipe", "command", "tiny-qwen2", "--recipes", str(broken_root))
    _one_line_error(result, "tiny-qwen2.yaml:", "malformed YAML")


def test_wrong_type(broken_root):
    path = broken_root / "models" / "recipe-ledger" / "tiny-qwen2.yaml"
    path.write_text(path.read_text().replace("vram_minimum_gb: 0.1", 'vram_minimum_gb: "lots"'))
    result = run("recipe", "command", "tiny-qwen2", "--recipes", str(broken_root))
    _one_line_error(
        result, "tiny-qwen2.yaml:59:", 'variants.default.vram_minimum_gb: expected a number, got "lots"'
    )


def test_unknown_hardware():
    _one_line_error(
        run("recipe", "command", "tiny-qwen2", "-H", "h2000"), "unknown hardware id 'h2000'", "h200"
    )


def test_missing_recipe_file():
    _one_line_error(run("recipe", "command", "recipes/models/nope/missing.yaml"), "no recipe")


def test_unknown_feature():
    _one_line_error(run("recipe", "command", "tiny-qwen2", "-f", "turbo"), "no feature 'turbo'")


def test_fit_reproduces_the_station_ladder():
    for offload, fits in ((40, False), (55, False), (60, True), (70, True)):
        result = run(
            "fit", "deepseek-v4.1-flash", "--box", "dgx-station-gb300", "--offload-gb", str(offload), "--json"
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["fits"] is fits, offload


def test_fit_unknown_box():
    _one_line_error(run("fit", "deepseek-v4.1-flash", "--box", "dgx-sttion"), "unknown box")


def test_schema_describes_our_additions():
    schema = json.loads(run("recipe", "schema").output)
    assert "memory" in schema["properties"]
    assert "conflicts_with" in schema["$defs"]["Feature"]["properties"]
