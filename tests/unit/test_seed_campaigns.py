"""The seeds' campaigns as data files (src/recipe_ledger/ledger/seeds/*.yaml) and their one loader.

Every number in them says the seed line it comes from; the seed documents are fixtures
(tests/fixtures/seeds/), so each number is looked up on its line here: a figure mistyped, or cited
at the wrong line, fails. The loader's refusals are one line at the campaign file's line.
"""

from __future__ import annotations

import fnmatch
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

from recipe_ledger.errors import SpecError
from recipe_ledger.ledger import seed_campaigns
from recipe_ledger.ledger.seed_campaigns import SEEDS_DIR, Item, Seed

from helpers.seedtext import numbers_in, seed_lines

REPO = Path(__file__).resolve().parents[2]
SEEDS = seed_campaigns.all_seeds()


def _cited(seed: Seed, source: str) -> str:
    """The seed text a ``source`` ("004:98-111") names, after checking it names this seed."""
    name, _, lines = source.partition(":")
    assert name == seed.name, source
    return seed_lines(seed.source, lines)


def _numbers(value: Any, at: tuple = ()) -> dict[tuple, float]:
    """Every number in a payload, by its path."""
    if isinstance(value, dict):
        return {p: v for key, child in value.items() for p, v in _numbers(child, (*at, key)).items()}
    if isinstance(value, list):
        return {p: v for i, child in enumerate(value) for p, v in _numbers(child, (*at, i)).items()}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {at: value}
    return {}


def test_the_campaigns_shipped_are_000_and_004_in_import_order():
    assert seed_campaigns.seed_names() == ("000", "004")
    assert [seed.name for seed in SEEDS.values()] == ["000", "004"]
    assert {seed.writer for seed in SEEDS.values()} == {"seed-000", "seed-004"}
    assert SEEDS["000"].as_of == "2026-09-16" and SEEDS["004"].as_of is None


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_every_number_is_on_the_seed_line_it_cites(name):
    seed = SEEDS[name]
    checked = 0
    for item in seed.items:
        assert set(item.sources) == set(_numbers(item.payload)), item.key  # none without a source
        for path, number in item.sources.items():
            text = _cited(seed, number.source)
            if number.derived:
                continue  # not printed: `derived` says how it follows from the line's figures
            stated = numbers_in(text)
            assert round(abs(number.value), 6) in stated, (
                f"{item.key} {path}={number.value} not on {number.source}"
            )
            checked += 1
    assert checked >= 40  # 000 prints 45 of its 50 numbers, 004 all of its 152


def test_a_derived_number_says_how_and_its_line_states_what_it_is_derived_from():
    failures = {item.key: item for item in SEEDS["000"].items}
    autotune = failures["failure/autotune-74-minutes"].sources[("minutes_lost",)]
    assert (autotune.value, autotune.derived) == (296.0, "74 minutes, four times")
    assert {74.0, 4.0} <= numbers_in(_cited(SEEDS["000"], autotune.source))
    derived = {
        (item.key, path[-1])
        for seed in SEEDS.values()
        for item in seed.items
        for path, n in item.sources.items()
        if n.derived
    }
    probes = "result/sglang-correctness-probes"
    assert derived == {  # every other number is printed on its line
        ("failure/autotune-74-minutes", "minutes_lost"),
        ("failure/boot-from-network-share", "minutes_lost"),
        # a probe that passed is 1: the line says passed, the number is ours
        (probes, "arithmetic.probe_passed"),
        (probes, "tool-call-parsing.probe_passed"),
        (probes, "reasoning-mode.probe_passed"),
    }


def test_the_number_check_catches_a_figure_the_line_does_not_state():
    stated = numbers_in(_cited(SEEDS["000"], "000:10"))
    assert {74, 4, 8, 92} <= stated
    assert 296 not in stated and 84 not in stated and 75 not in stated


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_every_claim_cites_lines_of_its_own_document(name):
    seed = SEEDS[name]
    for item in seed.items:
        assert item.source.startswith(f"{name}:"), item.key
        assert _cited(seed, item.source).strip(), f"{item.key} cites only empty lines"


def test_refs_become_items_named_before_them():
    items = {item.key: item for item in SEEDS["000"].items}
    retraction = items["retraction/overnight-replay-win"]
    assert retraction.payload["target"] == Item("result/overnight-replay-win")
    assert retraction.payload["evidence"][0] == Item("result/morning-replay-reruns")
    assert items["result/morning-replay-reruns"].refs == [("see", Item("result/overnight-replay-win"))]


def test_the_campaign_files_are_package_data():
    """A pip-installed wheel carries the files: pyproject's package-data names every one."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["recipe_ledger"]
    package = REPO / "src" / "recipe_ledger"
    files = sorted(path.relative_to(package).as_posix() for path in SEEDS_DIR.iterdir())
    assert files == ["ledger/seeds/000.yaml", "ledger/seeds/004.yaml"]
    for file in files:
        assert any(fnmatch.fnmatch(file, pattern) for pattern in patterns), file


# -- what the loader refuses ---------------------------------------------------------------------

_GOOD = """\
schema_version: 1
name: "009"
title: A test campaign
document: 009_test.txt
writer: seed-009
items:
  - key: note/first
    kind: note
    source: "009:1"
    payload:
      title: First
      text: The first note.
      numbers:
        share_pct: {value: 98.7, source: "009:2"}
  - key: note/second
    kind: note
    source: "009:3-4, 6"
    refs:
      - {rel: see, item: note/first}
    payload:
      title: Second
      text: The second note.
      numbers:
        tps: {value: 85, source: "009:5", derived: "from the first"}
"""


def _load(tmp_path: Path, text: str, name: str = "009") -> Seed:
    (tmp_path / f"{name}.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    return seed_campaigns.load_seed(name, folder=tmp_path)


def test_a_campaign_file_loads_into_items_with_their_sources(tmp_path):
    seed = _load(tmp_path, _GOOD)
    assert (seed.name, seed.source, seed.writer, seed.as_of) == ("009", "009_test.txt", "seed-009", None)
    first, second = seed.items
    assert first.payload["numbers"] == {"share_pct": 98.7} and first.source == "009:1"
    assert first.sources[("numbers", "share_pct")].source == "009:2"
    assert second.refs == [("see", Item("note/first"))]
    assert second.sources[("numbers", "tps")].derived == "from the first"


BROKEN = [
    # (what is wrong, the text replaced, its replacement, the message, the line it is reported at)
    ("a bare number", '{value: 98.7, source: "009:2"}', "98.7", "has no source", 14),
    ("a number citing another seed", '"009:2"}', '"004:2"}', "cites seed 004", 14),
    ("a source that is not a line", '"009:2"}', '"009:two"}', 'such as "004:98-111"', 14),
    ("a ref to an item not before it", "item: note/first}", "item: note/third}", "'note/third' is not", 19),
    ("an unknown field", 'source: "009:1"', 'source: "009:1"\n    sauce: x', "unknown field", 10),
    ("a number given as text", "{value: 98.7,", '{value: "98.7",', "expected a number", 14),
    ("an empty derivation", 'derived: "from the first"', 'derived: ""', "at least 1 character", 24),
    ("an item given twice", "key: note/second", "key: note/first", "given twice", 15),
    ("a kind the ledger has not", "kind: note", "kind: memo", "expected one of the allowed values", 8),
    ("the file's name", 'name: "009"', 'name: "008"', "'008' is not the file's name (009.yaml)", 2),
    (
        "a date without its line",
        "writer: seed-009",
        'writer: seed-009\nas_of: "2026-09-16"',
        "as_of_source",
        1,
    ),
    ("a newer file", "schema_version: 1", "schema_version: 2", "newer than this tool", 1),
]


@pytest.mark.parametrize(("wrong", "old", "new", "message", "line"), BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_campaign_file_is_one_line_at_its_line(tmp_path, wrong, old, new, message, line):
    assert old in _GOOD, wrong
    with pytest.raises(SpecError) as caught:
        _load(tmp_path, _GOOD.replace(old, new, 1))
    assert message in caught.value.message, caught.value.one_line()
    assert caught.value.where == f"{tmp_path / '009.yaml'}:{line}", caught.value.one_line()
