"""One owner for "which features are on by default": recipes.resolve.default_features.

The site and `ledger recipe command` ask it per hardware and variant (the builder's rule, which
the parity suite holds to recipes.vllm.ai); `ledger recipe lint` asks it of the recipe as written
(``hw_id=None, variant_key=None``). These pin both questions on one recipe that tells them apart.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from recipe_ledger.recipes import resolve
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.lint import Vocabulary, lint_recipe

PROJECT_RECIPES = Path(__file__).resolve().parents[2] / "recipes"

# Kimi-K2.5's shape: text_only is opt-in everywhere, encoder_parallel only on gb200 (the two are
# mutually exclusive); DeepSeek-V4-Flash's: an opt-in spec_decoding that one variant forces on.
RECIPE = {
    "features": {
        "text_only": {"args": ["--language-model-only"], "conflicts_with": ["encoder_parallel"]},
        "encoder_parallel": {"args": ["--mm-encoder-tp-mode", "data"]},
        "spec_decoding": {"args": ["--speculative-config", "{}"]},
        "prefix_caching": {"args": ["--enable-prefix-caching"]},
    },
    "opt_in_features": ["text_only", "spec_decoding"],
    "hardware_opt_in_features": {"gb200": ["encoder_parallel"]},
    "variants": {"default": {}, "mtp": {"default_modes": {"spec_decoding": "mtp"}}},
}


def test_on_a_box_hardware_opt_ins_remove_and_a_variant_s_default_modes_force_on() -> None:
    assert resolve.default_features(RECIPE, "h200") == ["encoder_parallel", "prefix_caching"]
    assert resolve.default_features(RECIPE, "gb200") == ["prefix_caching"]
    assert resolve.default_features(RECIPE, "h200", "mtp") == [
        "encoder_parallel",
        "spec_decoding",
        "prefix_caching",
    ]


def test_the_recipe_as_written_counts_only_its_own_opt_ins() -> None:
    recipe_level = ["encoder_parallel", "prefix_caching"]
    assert resolve.default_features(RECIPE, hw_id=None, variant_key=None) == recipe_level
    # Neither gb200's opt-in nor the mtp variant's forced mode enters the recipe-level answer.
    assert resolve.default_features(RECIPE, "gb200", None) != recipe_level
    assert resolve.default_features(RECIPE, None, "mtp") != recipe_level


BASE = """\
meta: {title: "T", slug: "t", provider: "P", description: "d"}
model: {model_id: "org/t", base_args: []}
variants:
  default: {precision: bf16, vram_minimum_gb: 1}
compatible_strategies: [single_node_tp]
features:
  text_only: {args: ["--language-model-only"], conflicts_with: [encoder_parallel]}
  encoder_parallel: {args: ["--mm-encoder-tp-mode", "data"]}
"""


def _lint_codes(tmp_path: Path, extra: str) -> list[str]:
    shutil.copy(PROJECT_RECIPES / "taxonomy.yaml", tmp_path / "taxonomy.yaml")
    shutil.copytree(PROJECT_RECIPES / "strategies", tmp_path / "strategies")
    (tmp_path / "models" / "org").mkdir(parents=True)
    (tmp_path / "models" / "org" / "t.yaml").write_text(BASE + textwrap.dedent(extra))
    recipes = RecipeRoot(tmp_path)
    vocab = Vocabulary.from_taxonomy(recipes.taxonomy, list(recipes.strategies))
    return [warning.code for warning in lint_recipe(recipes.load("org/t"), vocab)]


def test_lint_asks_the_recipe_level_question_one_hardware_s_opt_in_does_not_settle_it(tmp_path) -> None:
    # Off on gb200 only: on every other box both are on, so the recipe still has the trap.
    codes = _lint_codes(tmp_path, "hardware_opt_in_features: {gb200: [encoder_parallel]}\n")
    assert "conflicting-defaults" in codes


def test_lint_is_quiet_once_the_recipe_itself_makes_one_of_them_opt_in(tmp_path) -> None:
    assert "conflicting-defaults" not in _lint_codes(tmp_path, "opt_in_features: [text_only]\n")
