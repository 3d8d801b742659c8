"""Each lint check fires on the trap it names, at the right line, and stays quiet otherwise."""

import textwrap

import pytest

from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.lint import Vocabulary, lint_recipe

from helpers.projects import scratch_recipes_root

BASE = """\
meta:
  title: "T"
  slug: "t"
  provider: "P"
  description: "d"
model:
  model_id: "org/t"
  base_args: []
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


def lint(root, extra):
    (root / "models" / "org" / "t.yaml").write_text(BASE + textwrap.dedent(extra))
    recipes = RecipeRoot(root)
    vocab = Vocabulary.from_taxonomy(recipes.taxonomy, list(recipes.strategies))
    return lint_recipe(recipes.load("org/t"), vocab)


def codes(warnings):
    return [w.code for w in warnings]


def test_a_clean_recipe_has_no_warnings(root):
    assert lint(root, "") == []


def test_flag_written_two_ways(root):
    warnings = lint(
        root,
        """\
        hardware_overrides:
          hopper:
            extra_args:
              - "--max-num-seqs=8"
          amd:
            extra_args:
              - "--max-num-seqs"
              - "16"
        """,
    )
    assert codes(warnings) == ["flag-written-two-ways"]
    assert warnings[0].where.endswith("t.yaml:18")  # the "--max-num-seqs=8" item
    assert "hardware_overrides.amd.extra_args[0]" in warnings[0].message


def test_offload_glob_matches_nothing(root):
    warnings = lint(
        root,
        """\
        hardware_overrides:
          blackwell:
            extra_args:
              - "--cpu-offload-params"
              - "experts.*"
        """,
    )
    assert codes(warnings) == ["offload-pattern-glob"]
    assert "experts.*" in warnings[0].message


def test_offload_pattern_checked_against_memory_param_names(root):
    warnings = lint(
        root,
        """\
        hardware_overrides:
          blackwell:
            extra_args:
              - "--cpu-offload-params"
              - "experts"
              - "routed_experts.w2_weight"
        memory:
          components:
            - name: experts
              kind: experts
              stored_gib: 10
              offload: uva
              param_names: ["model.layers.{i}.ffn.routed_experts.w2_weight"]
        """,
    )
    assert codes(warnings) == ["offload-pattern-unmatched"]
    assert "'experts'" in warnings[0].message


def test_unknown_hardware_and_strategy(root):
    warnings = lint(
        root,
        """\
        hardware_overrides:
          h2000:
            extra_args: ["--x"]
        strategy_overrides:
          single_node_tpp:
            tp: 2
        """,
    )
    assert sorted(codes(warnings)) == ["unknown-hardware", "unknown-strategy"]


def test_conflicting_features_on_by_default(root):
    warnings = lint(
        root,
        """\
        features:
          text_only:
            description: "Skip the vision encoder. Mutually exclusive with encoder_parallel."
            args: ["--language-model-only"]
            conflicts_with: [encoder_parallel]
          encoder_parallel:
            description: "Data-parallel encoder."
            args: ["--mm-encoder-tp-mode", "data"]
        """,
    )
    assert codes(warnings) == ["conflicting-defaults"]


def test_prose_conflict_without_the_field_is_pointed_out(root):
    warnings = lint(
        root,
        """\
        features:
          text_only:
            description: "Skip the vision encoder. Mutually exclusive with encoder_parallel."
            args: ["--language-model-only"]
          encoder_parallel:
            description: "Data-parallel encoder."
            args: ["--mm-encoder-tp-mode", "data"]
        opt_in_features: [text_only]
        """,
    )
    assert codes(warnings) == ["conflict-undeclared"]


def lint_all(root, extra):
    from recipe_ledger.recipes.lint import lint_items

    if extra:
        (root / "models" / "org" / "t.yaml").write_text(BASE + textwrap.dedent(extra))
    recipes = RecipeRoot(root)
    return lint_items(recipes, [recipes.load("org/t")])


SHADOWED = BASE.replace(
    "    vram_minimum_gb: 1\n",
    "    vram_minimum_gb: 1\n"
    "    hardware_overrides:\n"
    "      b200:\n"
    '        extra_args: ["--moe-backend", "cutlass"]\n'
    "      blackwell:\n"
    '        extra_args: ["--moe-backend", "triton"]\n',
)


def test_exact_gpu_override_shadowed_by_a_generation_block(root):
    (root / "models" / "org" / "t.yaml").write_text(SHADOWED)
    warnings = lint_all(root, "")
    shadowed = [w for w in warnings if w.code == "exact-override-shadowed"]
    assert shadowed and "--moe-backend" in shadowed[0].message
    assert "variants.default.hardware_overrides.blackwell" in shadowed[0].message
    assert shadowed[0].where.endswith("t.yaml:15")  # the b200 extra_args


def test_generation_block_hides_the_nvidia_fallback(root):
    warnings = lint_all(
        root,
        """\
        hardware_overrides:
          nvidia:
            extra_env: {A: "1"}
          hopper: {}
        """,
    )
    assert [w.code for w in warnings] == ["generation-hides-nvidia"]
    assert warnings[0].where.endswith("t.yaml:18")
