"""Every recipe of the upstream snapshot and of this project loads and validates."""

from pathlib import Path

import pytest

from recipe_ledger.recipes.catalog import RecipeRoot

PROJECT_RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def test_all_173_upstream_recipes_validate(compat_dir):
    root = RecipeRoot(compat_dir / "vllm-recipes")
    loaded = root.load_all()
    assert len(loaded) == 173
    assert len(root.taxonomy.hardware_profiles) == 26
    assert len(root.strategies) == 9


def test_project_recipes_validate():
    root = RecipeRoot(PROJECT_RECIPES)
    refs = {item.ref for item in root.load_all()}
    assert {"models/deepseek-ai/DeepSeek-V4.1-Flash.yaml", "models/recipe-ledger/tiny-qwen2.yaml"} <= refs
    assert "cpu_x86" in root.taxonomy.hardware_profiles


@pytest.mark.parametrize(
    "name",
    ["deepseek-v4.1-flash", "deepseek-ai/DeepSeek-V4.1-Flash", "models/deepseek-ai/DeepSeek-V4.1-Flash.yaml"],
)
def test_a_recipe_is_found_by_slug_name_or_path(name):
    assert RecipeRoot(PROJECT_RECIPES).load(name).recipe.meta.slug == "deepseek-v4.1-flash"


def test_the_project_recipes_lint_clean_of_offload_traps():
    from recipe_ledger.recipes.lint import Vocabulary, lint_recipe

    root = RecipeRoot(PROJECT_RECIPES)
    vocab = Vocabulary.from_taxonomy(root.taxonomy, list(root.strategies))
    codes = {w.code for item in root.load_all() for w in lint_recipe(item, vocab)}
    assert not codes & {"offload-pattern-glob", "offload-pattern-unmatched", "conflicting-defaults"}
