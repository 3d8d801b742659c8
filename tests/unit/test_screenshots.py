"""The README's screenshots are not stale: docs/screenshots/manifest.json records what each was
drawn from (scripts/screenshots.py), and the committed site must still be that. Pixels differ
between machines, so the check compares inputs, not images; no browser is needed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.scripts import REPO, load_script

shots = load_script("scripts/screenshots.py")
SITE = REPO / "site"


def recorded() -> dict:
    return json.loads(shots.MANIFEST.read_text())


def test_every_screenshot_was_drawn_from_the_committed_site():
    stale = shots.stale(SITE, recorded())
    assert not stale, f"stale screenshots {stale}: run .venv/bin/python scripts/screenshots.py and commit"


def test_the_readme_shows_every_screenshot_and_only_those():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    named = {shot.name for shot in shots.SHOT_LIST}
    assert {name for name in named if f"docs/screenshots/{name}.png" not in readme} == set()
    assert {p.stem for p in shots.SHOTS.glob("*.png")} == named


@pytest.mark.parametrize("changed", ["page", "style"])
def test_a_changed_page_or_stylesheet_makes_its_shots_stale(tmp_path: Path, changed: str):
    site = tmp_path / "site"
    for shot in shots.SHOT_LIST:
        for name in (shot.page, *shots.STATIC):
            (site / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(SITE / name, site / name)
    manifest = shots.manifest_for(site)
    assert shots.stale(site, manifest) == []
    target = shots.SHOT_LIST[1]
    edited = site / (target.page if changed == "page" else shots.STATIC[0])
    edited.write_text(edited.read_text() + "\n<!-- edited -->\n")
    expected = (
        [s.name for s in shots.SHOT_LIST if s.page == target.page]
        if changed == "page"
        else [s.name for s in shots.SHOT_LIST]
    )
    assert shots.stale(site, manifest) == expected


def test_check_exits_1_naming_the_command_when_a_shot_is_stale(tmp_path: Path, capsys, monkeypatch):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({name: {} for name in recorded()}))
    monkeypatch.setattr(shots, "MANIFEST", manifest)
    assert shots.main(["--check", "--site", str(SITE)]) == 1
    out = capsys.readouterr().out
    assert out.count("stale: docs/screenshots/") == len(shots.SHOT_LIST) and "scripts/screenshots.py" in out
