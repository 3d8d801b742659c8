"""Parity with the recipes.vllm.ai command builder: every shared compat case, byte for byte.

The compat files hold the reference builder's output for 2,061 (recipe, variant, strategy,
hardware, features, nodes) selections and 80 omni task renderings. The whole set runs through
the same core function the `ledger recipe render --batch` command uses, in one process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli.recipe import render
from recipe_ledger.errors import InputError, ResolutionError
from recipe_ledger.recipes import resolve, shell
from recipe_ledger.recipes.corpus import Corpus, resolve_case

CASE_FILES = {"expected-commands.jsonl": 2061, "expected-omni-commands.jsonl": 80}


def _run_file(corpus: Corpus, path: Path) -> tuple[int, int, list[str]]:
    passed, total, report = 0, 0, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        case = json.loads(line)
        expected = {k: case[k] for k in ("result", "error") if k in case}
        got = resolve_case(corpus, case)
        total += 1
        # Same values AND same key order (the site's JSON is what people diff against).
        if got == expected and json.dumps(got) == json.dumps(expected):
            passed += 1
        elif len(report) < 5:
            report.append(_describe_mismatch(path.name, number, case, expected, got))
    return passed, total, report


def _describe_mismatch(name: str, number: int, case: dict, expected: dict, got: dict) -> str:
    selection = {k: v for k, v in case.items() if k not in ("result", "error")}
    lines = [f"{name}:{number} {json.dumps(selection)}"]
    exp, act = expected.get("result", expected), got.get("result", got)
    for key in list(dict.fromkeys([*exp, *act])):
        if exp.get(key) != act.get(key):
            lines += [
                f"  {key}:",
                f"    expected {json.dumps(exp.get(key))[:600]}",
                f"    got      {json.dumps(act.get(key))[:600]}",
            ]
    if list(exp) != list(act):
        lines.append(f"  key order: expected {list(exp)} got {list(act)}")
    return "\n".join(lines)


def test_all_shared_cases_match_the_reference(compat_dir: Path) -> None:
    corpus = Corpus(compat_dir / "vllm-recipes")
    summary, mismatches = [], []
    for name, expected_total in CASE_FILES.items():
        passed, total, report = _run_file(corpus, compat_dir / name)
        assert total == expected_total
        summary.append(f"{name}: {passed}/{total}")
        mismatches += report
    print("parity: " + ", ".join(summary))
    assert not mismatches, "\n".join(summary + mismatches)


def test_the_cli_batch_prints_the_reference_lines(compat_dir: Path, tmp_path: Path) -> None:
    lines = (compat_dir / "expected-commands.jsonl").read_text(encoding="utf-8").splitlines()[:40]
    cases = [{k: v for k, v in json.loads(line).items() if k != "result"} for line in lines]
    batch = tmp_path / "cases.jsonl"
    batch.write_text("\n".join(json.dumps(c) for c in cases) + "\n", encoding="utf-8")
    out = CliRunner().invoke(render, ["--batch", str(batch), "--recipes", str(compat_dir / "vllm-recipes")])
    assert out.exit_code == 0, out.output
    expected = [
        json.dumps({"result": json.loads(line)["result"]}, separators=(",", ":"), ensure_ascii=False)
        for line in lines
    ]
    assert out.output.splitlines() == expected


def test_the_cli_names_the_bad_line(compat_dir: Path, tmp_path: Path) -> None:
    batch = tmp_path / "cases.jsonl"
    batch.write_text('{"recipe": "models/none.yaml", "variant": "default", "hardware": "h200"}\n{oops\n')
    out = CliRunner().invoke(render, ["--batch", str(batch), "--recipes", str(compat_dir / "vllm-recipes")])
    assert isinstance(out.exception, InputError)
    assert f"{batch}:1" in str(out.exception)
    batch.write_text("\n{oops\n")
    out = CliRunner().invoke(render, ["--batch", str(batch), "--recipes", str(compat_dir / "vllm-recipes")])
    assert isinstance(out.exception, InputError) and f"{batch}:2" in str(out.exception)


def test_a_missing_root_is_input_error(tmp_path: Path) -> None:
    out = CliRunner().invoke(render, ["--batch", "-", "--recipes", str(tmp_path / "nope")], input="")
    assert isinstance(out.exception, InputError) and "nope" in str(out.exception)


# ---------------------------------------------------------------------------
# Focused semantics on small inline recipes.

TAXONOMY = {
    "hardware_profiles": {
        "h200": {"brand": "NVIDIA", "generation": "hopper", "gpu_count": 8, "vram_gb": 1128},
        "b200": {"brand": "NVIDIA", "generation": "blackwell", "gpu_count": 8, "vram_gb": 1440},
        "mi300x": {"brand": "AMD", "generation": "amd", "gpu_count": 8, "vram_gb": 1536},
    }
}
STRATEGIES = {
    "single_node_tp": {
        "name": "single_node_tp",
        "deploy_type": "single_node",
        "vllm_args": [],
        "parallel_flag": "--tensor-parallel-size",
    },
    "multi_node_tp": {
        "name": "multi_node_tp",
        "deploy_type": "multi_node",
        "vllm_args": [],
        "env": {"NCCL_SOCKET_IFNAME": "$IFACE_NAME"},
    },
}


def _recipe(**extra) -> dict:
    base = {
        "model": {"model_id": "org/m", "base_args": ["--max-model-len", "4096"]},
        "variants": {"default": {"precision": "bf16", "vram_minimum_gb": 2000}},
        "features": {},
        "compatible_strategies": ["single_node_tp", "multi_node_tp"],
    }
    return {**base, **extra}


def _argv(recipe: dict, hw: str = "h200", features=(), strategy="single_node_tp", nodes=1) -> list:
    result = resolve.resolve_command(
        recipe, "default", strategy, hw, list(features), STRATEGIES, TAXONOMY, nodes
    )
    return result["argv"] if "argv" in result else result["head_argv"]


def test_shell_quoting_keeps_vars_and_safe_words_bare() -> None:
    assert shell.shell_quote("$HEAD_IP") == "$HEAD_IP"
    assert shell.shell_quote("a/b:c=1,2") == "a/b:c=1,2"
    assert shell.shell_quote('{"k":"v"}') == '\'{"k":"v"}\''
    assert shell.shell_quote("it's") == "'it'\\''s'"
    assert shell.shell_quote("$lower") == "'$lower'"


def test_dedupe_is_last_wins_by_exact_flag_text() -> None:
    assert shell.dedupe_args(["--x", "1", "--y", "--x", "2"]) == ["--y", "--x", "2"]
    # `--x=1` is a different flag name from `--x`: both survive.
    assert shell.dedupe_args(["--x=1", "--x", "2"]) == ["--x=1", "--x", "2"]
    # A value starting with "-" is read as a flag of its own.
    assert shell.dedupe_args(["--shift", "-1", "--shift", "2"]) == ["-1", "--shift", "2"]


def test_merge_order_features_beat_overrides_beat_strategy() -> None:
    recipe = _recipe(
        strategy_overrides={"single_node_tp": {"extra_args": ["--tensor-parallel-size", "2"]}},
        hardware_overrides={"hopper": {"extra_args": ["--max-model-len", "8192"]}},
        features={"long": {"args": ["--max-model-len", "65536"]}},
    )
    argv = _argv(recipe, features=["long"])
    assert argv == ["vllm", "serve", "org/m", "--tensor-parallel-size", "2", "--max-model-len", "65536"]
    assert _argv(recipe)[-2:] == ["--max-model-len", "8192"]


def test_an_empty_generation_block_hides_the_nvidia_fallback() -> None:
    recipe = _recipe(hardware_overrides={"hopper": {}, "nvidia": {"extra_args": ["--nv"]}})
    assert "--nv" not in _argv(recipe, "h200")
    assert "--nv" in _argv(recipe, "b200")
    assert "--nv" not in _argv(recipe, "mi300x")


def test_strategy_generation_block_replaces_recipe_and_variant_blocks() -> None:
    recipe = _recipe(
        hardware_overrides={"hopper": {"extra_args": ["--recipe-hopper"]}},
        strategy_overrides={
            "single_node_tp": {
                "hardware_overrides": {
                    "hopper": {"extra_args": ["--strategy-hopper"]},
                    "h200": {"extra_args": ["--exact-h200"]},
                }
            }
        },
    )
    argv = _argv(recipe, "h200")
    assert "--recipe-hopper" not in argv and argv[-2:] == ["--strategy-hopper", "--exact-h200"]


def test_explain_flags_names_the_winning_layer() -> None:
    recipe = _recipe(features={"long": {"args": ["--max-model-len", "65536"]}})
    sel = resolve.Selection(
        recipe,
        "default",
        "single_node_tp",
        resolve.hardware_for(TAXONOMY, "h200"),
        ["long"],
        STRATEGIES,
        TAXONOMY,
    )
    assert ("--max-model-len", "65536", "features.long") in resolve.explain_flags(sel)
    assert ("--tensor-parallel-size", "8", "strategy.parallelism") in resolve.explain_flags(sel)


def test_multi_node_renders_one_worker_per_follower() -> None:
    result = resolve.resolve_command(
        _recipe(), "default", "multi_node_tp", "h200", [], STRATEGIES, TAXONOMY, 3
    )
    assert result["deploy_type"] == "multi_node" and len(result["worker_commands"]) == 2
    assert "--node-rank 2" in result["worker_commands"][1] and "--headless" in result["worker_commands"][1]
    assert result["head_argv"][5:7] == ["--tensor-parallel-size", "24"]
    assert "-e NCCL_SOCKET_IFNAME=$IFACE_NAME" in result["head_docker_command"]


def test_multi_node_strategy_at_one_node_fails_like_the_reference() -> None:
    with pytest.raises(ResolutionError, match="reading 'match'"):
        resolve.resolve_command(_recipe(), "default", "multi_node_tp", "h200", [], STRATEGIES, TAXONOMY, 1)


def test_a_number_in_args_fails_like_the_reference() -> None:
    recipe = _recipe(features={"bad": {"args": ["--max-num-seqs", 8]}})
    with pytest.raises(ResolutionError, match="next.startsWith is not a function"):
        _argv(recipe, features=["bad"])


def test_site_defaults() -> None:
    recipe = _recipe(features={"a": {"args": ["--a"]}, "b": {"args": ["--b"]}}, opt_in_features=["b"])
    assert resolve.default_variant(recipe) == "default"
    assert resolve.default_hardware(recipe, "default", TAXONOMY) == "h200"
    assert resolve.default_features(recipe, "h200") == ["a"]
    # 2 TB of weights do not fit one H200 node, so the site recommends two nodes of TP.
    assert resolve.default_strategy(recipe, "default", "h200", STRATEGIES, TAXONOMY) == ("multi_node_tp", 2)
