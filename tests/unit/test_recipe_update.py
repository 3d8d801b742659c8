"""`ledger init` makes a lab and `ledger recipe update --from PATH` takes in upstream snapshots
(recipes.lab, recipes.upstream): what changed is listed, the overlay is never touched, a dry run
replaces nothing, nothing the lab has is overwritten."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.recipes import upstream
from recipe_ledger.recipes.catalog import RecipeRoot

REPO = Path(__file__).resolve().parents[2]
TINY_REF = "models/recipe-ledger/tiny-qwen2.yaml"


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.setenv("RECIPE_LEDGER_SIGNING", "off")  # no key files under ~ from these tests


def _checkout(path: Path, *, extra_arg: str | None = None, models: tuple[str, ...] = (TINY_REF,)) -> Path:
    """A recipes checkout holding the tiny recipe at each of ``models``."""
    path.mkdir(parents=True)
    shutil.copy(REPO / "recipes" / "taxonomy.yaml", path / "taxonomy.yaml")
    shutil.copytree(REPO / "recipes" / "strategies", path / "strategies")
    text = (REPO / "recipes" / TINY_REF).read_text()
    if extra_arg:
        text = text.replace("  base_args:\n", f"  base_args:\n    - {extra_arg}\n", 1)
        assert extra_arg in text
    for ref in models:
        (path / ref).parent.mkdir(parents=True, exist_ok=True)
        (path / ref).write_text(text)
    return path


def _init(lab: Path) -> str:
    lab.mkdir(parents=True, exist_ok=True)
    result = CliRunner().invoke(main, ["init", "--root", str(lab), "--writer", "box"])
    assert result.exit_code == 0, result.output
    return result.output


def _update(lab: Path, source: Path, *more: str) -> str:
    result = CliRunner().invoke(main, ["recipe", "update", "--from", str(source), "--root", str(lab), *more])
    assert result.exit_code == 0, result.output
    return result.output


def test_init_makes_a_lab_and_a_second_run_changes_nothing(tmp_path):
    lab = tmp_path / "lab"
    first = _init(lab)
    for path in (
        "lab.yaml",
        f"recipes/overlay/{TINY_REF}",
        "experiments/example-sort.yaml",
        "dvc.yaml",
        ".gitignore",
    ):
        assert f"created {path}" in first and (lab / path).is_file()
    box = next((lab / "boxes").glob("*.yaml"))
    example = (lab / "experiments/example-sort.yaml").read_text()
    assert f"box: {box.stem}\n" in example
    (lab / "dvc.yaml").write_text("# ours\n")
    again = _init(lab)
    assert "created" not in again and (lab / "dvc.yaml").read_text() == "# ours\n"
    assert [item.ref for item in RecipeRoot(lab / "recipes").load_all()] == [TINY_REF]


def test_init_in_a_project_with_flat_recipes_makes_only_its_ledger(tmp_path):
    project = tmp_path / "project"
    _checkout(project / "recipes")
    output = _init(project)
    assert "no lab files made" in output
    assert sorted(p.name for p in project.iterdir()) == ["ledger", "recipes"]


def test_update_lists_added_removed_and_changed_commands_and_keeps_the_overlay(tmp_path):
    lab = tmp_path / "lab"
    _init(lab)
    overlay = sorted((lab / "recipes" / "overlay").rglob("*"))
    overlay_bytes = [p.read_bytes() for p in overlay if p.is_file()]
    first = _update(lab, _checkout(tmp_path / "v1", models=(TINY_REF, "models/old/gone.yaml")))
    assert f"added    {TINY_REF}" in first and "added    models/old/gone.yaml" in first
    record = (lab / "recipes" / "UPSTREAM.yaml").read_text()
    assert upstream.content_hash(tmp_path / "v1") in record
    v2 = _checkout(tmp_path / "v2", extra_arg="--max-num-seqs=3", models=(TINY_REF, "models/new/here.yaml"))
    second = _update(lab, v2)
    assert "added    models/new/here.yaml" in second and "removed  models/old/gone.yaml" in second
    assert f"changed  {TINY_REF} on cpu_x86:" in second and "--max-num-seqs=3" in second
    assert sorted(
        p.relative_to(lab / "recipes/upstream").as_posix()
        for p in (lab / "recipes/upstream/models").rglob("*.yaml")
    ) == [
        "models/new/here.yaml",
        TINY_REF,
    ]
    assert sorted((lab / "recipes" / "overlay").rglob("*")) == overlay
    assert [p.read_bytes() for p in overlay if p.is_file()] == overlay_bytes


def test_a_dry_run_replaces_nothing(tmp_path):
    lab = tmp_path / "lab"
    _init(lab)
    output = _update(lab, _checkout(tmp_path / "v1"), "--dry-run")
    assert f"added    {TINY_REF}" in output and "dry run: nothing replaced" in output
    assert not (lab / "recipes" / "upstream").exists() and not (lab / "recipes" / "UPSTREAM.yaml").exists()


def test_an_archive_with_its_checkout_one_level_down_is_taken_in(tmp_path):
    source = _checkout(tmp_path / "recipes-abc123")
    archive = tmp_path / "recipes.tar.gz"
    with tarfile.open(archive, "w:gz") as tarred:
        tarred.add(source, arcname="recipes-abc123")
    lab = tmp_path / "lab"
    _init(lab)
    _update(lab, archive)
    assert (lab / "recipes" / "upstream" / TINY_REF).is_file()
    assert upstream.content_hash(source) in (lab / "recipes" / "UPSTREAM.yaml").read_text()


def test_a_flat_recipes_root_and_a_folder_without_models_are_refused(tmp_path):
    flat = _checkout(tmp_path / "project" / "recipes")
    refused = CliRunner().invoke(main, ["recipe", "update", "--from", str(flat), "--recipes", str(flat)])
    assert refused.exit_code == 2 and "flat recipes root" in refused.output
    lab = tmp_path / "lab"
    _init(lab)
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = CliRunner().invoke(main, ["recipe", "update", "--from", str(empty), "--root", str(lab)])
    assert refused.exit_code == 2 and "no models/ folder" in refused.output


def test_the_lab_s_title_is_read_from_lab_yaml_and_defaults_without_one(tmp_path):
    from recipe_ledger.errors import SpecError
    from recipe_ledger.recipes.lab import DEFAULT_TITLE, LabInfo, read_lab

    assert read_lab(tmp_path).site_title == DEFAULT_TITLE
    (tmp_path / "lab.yaml").write_text('name: "lab-one"\nsite_title: "Lab One numbers"\n')
    assert read_lab(tmp_path) == LabInfo("lab-one", "Lab One numbers")
    (tmp_path / "lab.yaml").write_text("name: lab-one\nsite_title: [not, text]\n")
    with pytest.raises(SpecError, match="lab.yaml:1"):
        read_lab(tmp_path)


def test_an_archive_s_lint_names_each_file_where_the_lab_will_hold_it(tmp_path):
    # a flag written two ways is a lint warning; the archive's extraction folder is gone afterwards
    source = _checkout(tmp_path / "recipes-abc123", extra_arg="--max-model-len=2048")
    archive = tmp_path / "recipes.tgz"
    with tarfile.open(archive, "w:gz") as tarred:
        tarred.add(source, arcname="recipes-abc123")
    lab = tmp_path / "lab"
    _init(lab)
    lint = [line for line in _update(lab, archive, "--dry-run").splitlines() if line.startswith("  lint: ")]
    assert lint and all(line.startswith(f"  lint: recipes/upstream/{TINY_REF}:") for line in lint), lint
