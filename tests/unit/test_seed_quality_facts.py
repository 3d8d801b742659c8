"""The seeds' quality facts (ledger/seeds/000.yaml and 004.yaml, the items after the releases):
what was kept for quality's sake, what degraded a model silently, what the probes said.

They quote the seed documents, so every phrase an item puts in double quotes is looked up, as
written, on the lines the item cites. They came after the first imports, so a ledger imported
before them must gain exactly these items on the next `ledger import-seed`, linked to the releases
already in it, and nothing on the one after.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.ledger import seed_campaigns, seed_import
from recipe_ledger.ledger.seed_campaigns import Item, Seed
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import verify

from helpers.seedtext import seed_lines

SEEDS = seed_campaigns.all_seeds()
QUALITY = {
    "000": [
        "result/sglang-correctness-probes",
        "note/agent-needs-tool-call-and-reasoning-parsers",
        "failure/reasoning-effort-medium-refused",
        "note/reasoning-spends-a-small-budget",
        "note/v14-serves-the-weights-as-shipped",
    ],
    "004": [
        "note/native-fp8-shared-expert-over-fused-fp4",
        "failure/dspark-draft-without-shared-expert",
    ],
}
_QUOTED = re.compile(r'"([^"]+)"')
_PROSE = ("title", "text", "cause", "fix", "reason")


def _items(name: str) -> dict[str, seed_campaigns.SeedEntry]:
    return {item.key: item for item in SEEDS[name].items}


def _cited(seed: Seed, source: str) -> str:
    return seed_lines(seed.source, source.partition(":")[2])


def _quotes(payload: dict[str, Any]) -> list[str]:
    return [q for key in _PROSE if isinstance(payload.get(key), str) for q in _QUOTED.findall(payload[key])]


def _release_refs(item: seed_campaigns.SeedEntry) -> set[str]:
    return {ref.key for _, ref in item.refs if ref.key.startswith("release/")}


def test_the_quality_facts_come_after_every_earlier_item():
    # Appended last in each file, so an older ledger gains them in the order a fresh import writes.
    for name, keys in QUALITY.items():
        assert [item.key for item in SEEDS[name].items][-len(keys) :] == keys, name


def test_the_004_facts_link_the_quality_first_release():
    items = _items("004")
    decision = items["note/native-fp8-shared-expert-over-fused-fp4"]
    numbers = decision.payload["numbers"]
    # The seed's own claim: the fused FP4 path was the (slightly) faster one, on both workloads.
    assert numbers["fused_fp4_code_review_tps"] > numbers["native_fp8_code_review_tps"]
    assert numbers["fused_fp4_story_chat_tps"] > numbers["native_fp8_story_chat_tps"]
    assert {"decision", "quality"} <= set(decision.payload["tags"])
    bug = items["failure/dspark-draft-without-shared-expert"]
    assert bug.payload["cause_class"] == "bad-output"
    assert "shared_experts" in bug.payload["log_tail"]
    conditions = bug.payload["conditions"]
    assert conditions["story_decode_tps_after"] > conditions["story_decode_tps_before"]
    assert conditions["code_accepted_tokens_after_low"] > conditions["code_accepted_tokens_before_high"]
    for item in (decision, bug):
        assert _release_refs(item) == {"release/sglang-native-fp8"}, item.key
    assert ("see", Item("note/sglang-dspark-shared-expert-loader-bug")) in bug.refs


def test_the_000_facts_link_the_lane_they_shaped_and_only_that():
    items = _items("000")
    probes = items["result/sglang-correctness-probes"]
    assert probes.payload["conditions"]["engine"] == "sglang"
    assert set(probes.payload["metrics"]) == {
        "arithmetic.probe_passed",
        "tool-call-parsing.probe_passed",
        "reasoning-mode.probe_passed",
    }
    assert all(n.derived for n in probes.sources.values())  # the seed prints no figure for a pass
    assert not _release_refs(probes)  # SGLang's probes: the Sixty-K Agent lane is vLLM's
    refused = items["failure/reasoning-effort-medium-refused"]
    assert refused.payload["cause_class"] == "config"
    assert refused.payload["conditions"]["http_status"] == 400
    for key in QUALITY["000"][1:]:
        assert _release_refs(items[key]) == {"release/v14"}, key
    assert ("see", Item("note/no-pruning")) in items["note/v14-serves-the-weights-as-shipped"].refs


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_every_quoted_phrase_is_on_the_lines_its_item_cites(name):
    seed = SEEDS[name]
    quoted = 0
    for item in seed.items:
        text = _cited(seed, item.source)
        for phrase in _quotes(item.payload):
            assert phrase in text, f"{item.key} quotes {phrase!r}, which is not on {item.source}"
            quoted += 1
    assert quoted >= {"000": 8, "004": 3}[name]


def test_the_quote_check_catches_a_phrase_the_seed_does_not_say():
    seed, line = SEEDS["004"], _cited(SEEDS["004"], "004:217")
    assert "for a miniscule increase in speed" in line
    assert "for a minuscule increase in speed" not in line  # the seed's spelling, kept as written
    decision = _items("004")["note/native-fp8-shared-expert-over-fused-fp4"]
    assert "checkpoint’s" in _quotes(decision.payload)[0]  # the seed's apostrophe, not ASCII's
    assert "checkpoint's FP8" not in _cited(seed, decision.source)


@pytest.mark.parametrize("name", sorted(QUALITY))
def test_a_ledger_imported_before_them_gains_exactly_them(tmp_path: Path, name: str):
    seed = SEEDS[name]
    earlier = [item for item in seed.items if item.key not in QUALITY[name]]
    before = seed_import.import_seed(Ledger.init(tmp_path), seed=seed, items=earlier)
    releases = {key: entry_id for key, entry_id in before.added if key.startswith("release/")}
    runner = CliRunner()
    again = runner.invoke(main, ["import-seed", name, "--root", str(tmp_path)])
    assert again.exit_code == 0, again.output
    assert f"seed {name}: {len(QUALITY[name])} added, {len(earlier)} already present" in again.output
    ledger = Ledger.open(tmp_path)
    chain = [e for e in ledger.entries() if e["writer"] == seed.writer]
    assert [e["payload"]["origin"]["item"] for e in chain[-len(QUALITY[name]) :]] == QUALITY[name]
    for entry in chain[-len(QUALITY[name]) :]:
        linked = {ref["id"] for ref in entry["refs"]}
        wanted = {releases[key] for key in _release_refs(_items(name)[entry["payload"]["origin"]["item"]])}
        assert wanted <= linked  # the release entry that was already there
    assert verify(ledger).ok
    last = runner.invoke(main, ["import-seed", name, "--root", str(tmp_path)])
    assert last.exit_code == 0 and f"seed {name}: 0 added, {len(seed.items)} already present" in last.output
    assert len([e for e in Ledger.open(tmp_path).entries() if e["writer"] == seed.writer]) == len(seed.items)
