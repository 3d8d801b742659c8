"""The YAML -> builder-input step matches the reference's loaded form for every upstream recipe."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from recipe_ledger.recipes.corpus import Corpus
from recipe_ledger.recipes.preprocess import preprocess_recipe, synthesize_install, to_js_values


def test_all_173_recipes_preprocess_to_the_loaded_form(compat_dir: Path) -> None:
    loaded = json.loads((compat_dir / "loaded" / "recipes.json").read_text(encoding="utf-8"))
    corpus = Corpus(compat_dir / "vllm-recipes")
    assert len(loaded) == 173
    different = [
        path for path, want in loaded.items() if json.dumps(corpus.recipe(path)) != json.dumps(want)
    ]  # key order included
    assert not different, f"{len(different)} differ, first: {different[:5]}"


def test_taxonomy_and_strategies_match_the_loaded_form(compat_dir: Path) -> None:
    corpus = Corpus(compat_dir / "vllm-recipes")
    for name, have in (("taxonomy.json", corpus.taxonomy), ("strategies.json", corpus.strategies)):
        want = json.loads((compat_dir / "loaded" / name).read_text(encoding="utf-8"))
        assert json.dumps(have) == json.dumps(want), name


def test_js_values_dates_numbers_and_key_order() -> None:
    data = {
        "when": dt.date(2025, 8, 28),
        "at": dt.datetime(2025, 8, 28, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-2))),
        "n": 8.0,
        "keys": {"b": 1, "10": 2, "2": 3, 7: 4},
    }
    out = to_js_values(data)
    assert out["when"] == "2025-08-28" and out["at"] == "2025-08-29" and out["n"] == 8
    assert list(out["keys"]) == ["2", "7", "10", "b"]  # JS puts integer-like keys first


def test_install_is_synthesized_and_dependencies_move_into_it() -> None:
    recipe = preprocess_recipe(
        {
            "model": {
                "model_id": "o/m",
                "install": {"pip": False},
                "docker_image": {"cu129": "img:129", "cu130": "img:130"},
            },
            "dependencies": [{"command": "pip install x"}],
        },
        "models/o/m.yaml",
    )
    assert recipe["hf_id"] == "o/m" and "dependencies" not in recipe
    assert recipe["model"]["install"] == {
        "docker": {"command": "docker pull img:130"},
        "extras": [{"command": "pip install x"}],
    }
    nightly = synthesize_install({"model": {"nightly_required": True, "min_vllm_version": "0.30.0"}})
    assert nightly["pip"]["note"] == "vLLM 0.30.0 isn't released yet — nightly required."
    assert nightly["docker"]["command"] == "docker pull vllm/vllm-openai:latest"
