"""A lab's layered recipes (recipes.layers): the overlay over the upstream snapshot, the packaged
taxonomy and strategies where neither has them, box profiles found without a recipes root; and this
repository's flat recipes/ read as before."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from recipe_ledger.errors import SpecError, UnknownIdError
from recipe_ledger.recipes.boxes import list_boxes, load_box
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.command import CommandRequest, resolve_for_people
from recipe_ledger.recipes.layers import PACKAGED_BOXES, PACKAGED_RECIPES, layers_of

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "recipes" / "models" / "recipe-ledger" / "tiny-qwen2.yaml"


def _recipe(folder: Path, ref: str, text: str | None = None) -> Path:
    path = folder / ref
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text is not None else TINY.read_text())
    return path


def _lab(tmp_path: Path, *, upstream: bool = True) -> Path:
    recipes = tmp_path / "lab" / "recipes"
    if upstream:
        up = recipes / "upstream"
        _recipe(up, "models/recipe-ledger/tiny-qwen2.yaml")
        _recipe(up, "models/up/only-upstream.yaml")
        shutil.copy(REPO / "recipes" / "taxonomy.yaml", up / "taxonomy.yaml")
        shutil.copytree(REPO / "recipes" / "strategies", up / "strategies")
    (recipes / "overlay" / "models").mkdir(parents=True)
    return recipes


def test_the_overlay_replaces_an_upstream_recipe_at_its_path_and_adds_its_own(tmp_path):
    recipes = _lab(tmp_path)
    changed = TINY.read_text().replace('title: "Tiny random Qwen2 (CPU)"', 'title: "Our tiny"')
    _recipe(recipes / "overlay", "models/recipe-ledger/tiny-qwen2.yaml", changed)
    _recipe(recipes / "overlay", "models/lab/ours.yaml")
    root = RecipeRoot(recipes)
    loaded = {item.ref: item for item in root.load_all()}
    assert sorted(loaded) == [
        "models/lab/ours.yaml",
        "models/recipe-ledger/tiny-qwen2.yaml",
        "models/up/only-upstream.yaml",
    ]
    assert loaded["models/recipe-ledger/tiny-qwen2.yaml"].recipe.meta.title == "Our tiny"
    assert root.find("recipe-ledger/tiny-qwen2") == recipes / "overlay/models/recipe-ledger/tiny-qwen2.yaml"
    assert root.find("up/only-upstream") == recipes / "upstream/models/up/only-upstream.yaml"
    # Resolution reads the overlay's file too (one corpus, the same ref).
    resolved = resolve_for_people(root, CommandRequest("recipe-ledger/tiny-qwen2", hardware="cpu_x86"))
    assert resolved.loaded.recipe.meta.title == "Our tiny"


def test_an_upstream_file_the_overlay_replaces_is_refused_by_path(tmp_path):
    recipes = _lab(tmp_path)
    _recipe(recipes / "overlay", "models/recipe-ledger/tiny-qwen2.yaml")
    shadowed = recipes / "upstream/models/recipe-ledger/tiny-qwen2.yaml"
    with pytest.raises(SpecError, match="replaced by the lab's overlay"):
        RecipeRoot(recipes).load(str(shadowed))


def test_a_lab_without_upstream_resolves_its_overlay_with_the_packaged_taxonomy(tmp_path):
    recipes = _lab(tmp_path, upstream=False)
    _recipe(recipes / "overlay", "models/recipe-ledger/tiny-qwen2.yaml")
    root = RecipeRoot(recipes)
    assert "cpu_x86" in root.hardware_ids() and "single_node_tp" in root.strategies
    argv = resolve_for_people(root, CommandRequest("recipe-ledger/tiny-qwen2", hardware="cpu_x86")).argv
    assert argv[:2] == ["vllm", "serve"]


def test_this_repository_is_read_as_a_flat_root_unchanged():
    layers = layers_of(REPO / "recipes")
    assert layers is not None and not layers.layered
    root = RecipeRoot(REPO / "recipes")
    refs = [item.ref for item in root.load_all()]
    expected = sorted(
        p.relative_to(REPO / "recipes").as_posix() for p in (REPO / "recipes").glob("models/**/*.yaml")
    )
    assert refs == expected
    assert root.boxes_dirs == (REPO / "recipes" / "boxes",)


def test_a_folder_of_neither_form_is_not_a_recipes_root(tmp_path):
    with pytest.raises(SpecError, match="not a recipes root"):
        RecipeRoot(tmp_path)


def test_a_project_without_recipes_still_has_boxes_and_no_recipe(tmp_path):
    root = RecipeRoot.of_project(tmp_path)
    assert root.load_all() == []
    assert load_box(root.boxes_dirs, "cpu-only").id == "cpu-only"  # the packaged profile
    with pytest.raises(UnknownIdError):
        root.find("recipe-ledger/tiny-qwen2")


def test_the_lab_s_own_box_wins_over_the_packaged_one_of_the_same_name(tmp_path):
    recipes = _lab(tmp_path)
    boxes = recipes.parent / "boxes"
    boxes.mkdir()
    own = (PACKAGED_BOXES / "cpu-only.yaml").read_text().replace("ram_gib: 24", "ram_gib: 7")
    (boxes / "cpu-only.yaml").write_text(own)
    root = RecipeRoot(recipes)
    assert load_box(root.boxes_dirs, "cpu-only").host.ram_gib == 7
    ids = [box.id for box in list_boxes(root.boxes_dirs)]
    assert ids.count("cpu-only") == 1 and "h200-x1" in ids  # the packaged ones still listed


@pytest.mark.parametrize(
    ("packaged", "source"),
    [
        (PACKAGED_BOXES, "recipes/boxes"),
        (PACKAGED_RECIPES / "strategies", "recipes/strategies"),
        (PACKAGED_RECIPES / "taxonomy.yaml", "recipes/taxonomy.yaml"),
        (
            PACKAGED_RECIPES / "models/recipe-ledger/tiny-qwen2.yaml",
            "recipes/models/recipe-ledger/tiny-qwen2.yaml",
        ),
    ],
)
def test_the_packaged_defaults_are_links_to_this_repository_s_files(packaged: Path, source: str):
    # Links, not copies, so they cannot drift; a checkout that lost them (a copy of the tree that
    # turned each link into a text file holding its target) fails here, not in `ledger init`.
    assert packaged.is_symlink() and packaged.resolve() == (REPO / source).resolve()
