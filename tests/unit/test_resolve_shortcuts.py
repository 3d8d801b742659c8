"""The shortcuts resolution takes for speed give what the plain definitions give.

The parity test checks the end result against the reference; these check each shortcut
against its own straightforward definition, on inputs the compat cases do not reach (random
token lists, more than two nodes), so a shortcut that only happens to agree on the corpus fails.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from recipe_ledger.recipes import resolve, shell
from recipe_ledger.recipes.corpus import Corpus

TOKENS = ["--a", "--b", "--a=1", "-1", "x", "y", "", 3, 0, None, False, "--c"]


def _dedupe_by_units(args: list) -> list:
    """Last-wins dedupe spelled out: group into units, keep each flag's last unit."""
    units = shell.split_units(args)
    last = {unit[1]: index for index, unit in enumerate(units) if unit[0] == "flag"}
    return [
        token
        for index, unit in enumerate(units)
        if unit[0] == "pos" or last[unit[1]] == index
        for token in unit[1:]
    ]


def test_dedupe_agrees_with_the_unit_definition_on_random_lists() -> None:
    rng = random.Random(18)
    for _ in range(5000):
        args = [rng.choice(TOKENS) for _ in range(rng.randint(0, 12))]
        assert shell.dedupe_args(args) == _dedupe_by_units(args), args


def test_render_serve_is_format_command_and_format_argv() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        args = [rng.choice(["--a", "--b", "-1", "x y", "$HEAD_IP", "it's", "--a=1"]) for _ in range(8)]
        assert shell.render_serve("org/m", args) == (
            shell.format_command("org/m", args),
            shell.format_argv("org/m", args),
        )


def _multi_node_selections(compat_dir: Path, node_count: int):
    corpus = Corpus(compat_dir / "vllm-recipes")
    for line in (compat_dir / "expected-commands.jsonl").read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        if "result" not in case or case["result"].get("deploy_type") != "multi_node":
            continue
        yield resolve.Selection(
            corpus.recipe(case["recipe"]),
            case["variant"],
            case["strategy"],
            resolve.hardware_for(corpus.taxonomy, case["hardware"]),
            case["features"],
            corpus.strategies,
            corpus.taxonomy,
            node_count,
        )


def test_render_ranks_builds_each_rank_as_render_does(compat_dir: Path) -> None:
    """Shared layers built once must not leak one rank's sizing flags into another's."""
    checked = 0
    for sel in _multi_node_selections(compat_dir, node_count=4):
        ranks = resolve.follower_ranks(sel.node_count)
        head, workers = resolve.render_ranks(sel, ranks)
        assert head == resolve.render(sel, None, "head")
        assert workers == [resolve.render(sel, None, "worker", rank) for rank in ranks]
        assert len({w.command for w in workers}) == len(ranks)  # each rank is its own command
        checked += 1
    assert checked > 500


def test_a_selection_derives_its_values_from_its_own_inputs() -> None:
    """Cached derived values belong to one selection: a second one on the same recipe with
    another variant and hardware sees its own."""
    taxonomy = {
        "hardware_profiles": {
            "h200": {"brand": "NVIDIA", "generation": "hopper", "gpu_count": 8},
            "b200": {"brand": "NVIDIA", "generation": "blackwell", "gpu_count": 8},
        }
    }
    recipe = {
        "model": {"model_id": "org/m"},
        "variants": {"default": {}, "fp4": {"model_id": "org/m-fp4"}},
        "hardware_overrides": {"hopper": {"extra_args": ["--h"]}, "blackwell": {"extra_args": ["--b"]}},
    }
    strategies = {"single_node_tp": {"deploy_type": "single_node"}}

    def argv(variant: str, hw: str) -> list:
        sel = resolve.Selection(
            recipe, variant, "single_node_tp", resolve.hardware_for(taxonomy, hw), [], strategies, taxonomy
        )
        return resolve.resolve_selection(sel)["argv"]

    assert argv("default", "h200") == ["vllm", "serve", "org/m", "--tensor-parallel-size", "8", "--h"]
    assert argv("fp4", "b200") == ["vllm", "serve", "org/m-fp4", "--tensor-parallel-size", "8", "--b"]
