"""A release pinned to a loopback registry (127.0.0.1, localhost) says in `ledger release show`
that no other box can pull it, and how this repository rebuilds the image."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.cli.release import IMAGE_BUILDERS, local_registry, local_registry_lines
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.releases import catalog

REPO = Path(__file__).resolve().parents[2]
DIGEST = "@sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("ref", "registry"),
    [
        ("127.0.0.1:5000/recipe-ledger/vllm-cpu" + DIGEST, "127.0.0.1:5000"),
        ("localhost:5000/org/name:tag", "localhost:5000"),
        ("localhost/org/name", "localhost"),
        ("[::1]:5000/org/name", "[::1]:5000"),
        ("registry.example.com:5000/org/name" + DIGEST, None),
        ("vllm/vllm-openai:v0.32.0", None),  # a hub repository: anyone can pull it
        ("ubuntu", None),
        ("", None),
    ],
)
def test_local_registries_are_the_loopback_ones(ref, registry):
    assert local_registry(ref) == registry
    assert bool(local_registry_lines(ref)) == (registry is not None)


def test_each_image_builder_is_a_script_that_builds_that_repository():
    for repository, (script, _) in IMAGE_BUILDERS.items():
        body = (REPO / script).read_text()
        assert re.search(rf"IMAGE_REPO=\$\{{IMAGE_REPO:-{re.escape(repository)}\}}", body), script


def test_release_show_says_the_registry_is_local_and_how_to_rebuild(tmp_path):
    Ledger.init(tmp_path)
    shutil.copy(REPO / "ledger" / "cpu-ci-box.jsonl", tmp_path / "ledger" / "cpu-ci-box.jsonl")
    local = next(
        r
        for r in catalog.releases(Ledger.open(tmp_path))
        if r.payload.image and local_registry(r.payload.image.ref or "")
    )
    result = CliRunner().invoke(
        main, ["release", "show", local.ref, "--root", str(tmp_path)], env={"NO_COLOR": "1"}
    )
    assert result.exit_code == 0, result.output
    registry = local_registry(local.payload.image.ref or "")
    assert f"registry: {registry} is local to the box that published this release" in result.output
    assert "rebuild: scripts/build_cpu_image.sh builds it from this repository" in result.output
