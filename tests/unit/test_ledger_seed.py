"""The 000 seed's campaign as the ledger's first history."""

from __future__ import annotations

import pytest

from recipe_ledger.ledger import seed_campaigns, seed_import
from recipe_ledger.ledger.fold import fold_statuses
from recipe_ledger.ledger.models import load_payload
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import verify

SEED = seed_campaigns.load_seed("000")


def _by_item(ledger):
    # The chain's key entry (signing adopted) is the writer's, not the seed's: no origin item.
    imported = (e for e in ledger.entries() if e["writer"] == SEED.writer and e["kind"] != "key")
    return {e["payload"]["origin"]["item"]: e for e in imported}


@pytest.fixture
def imported(tmp_path):
    ledger = Ledger.init(tmp_path)
    seed_import.import_seed(ledger, seed=SEED)
    return Ledger.open(tmp_path)


def test_every_item_is_imported_and_marked_as_imported_from_the_document(imported):
    items = _by_item(imported)
    assert list(items) == [item.key for item in SEED.items]
    for entry in items.values():
        origin = entry["payload"]["origin"]
        assert origin == {
            "how": "imported",
            "source": "000_81e52e8820647c96.txt",
            "item": origin["item"],
            "as_of": "2026-09-16",
        }
        load_payload(entry["kind"], entry["payload"])  # every payload is a valid current model
    assert verify(imported).ok


def test_the_story_folds_to_the_right_statuses(imported):
    items = _by_item(imported)
    statuses = fold_statuses(imported.entries())
    status = {key: statuses[entry["id"]] for key, entry in items.items()}
    assert status["result/overnight-replay-win"] == "retracted"
    assert status["release/v12"] == status["release/v13"] == "superseded"
    assert status["release/v14"] == "active"
    retraction = items["retraction/overnight-replay-win"]
    assert {r["rel"] for r in retraction["refs"]} == {"retracts", "evidence"}
    assert len(retraction["payload"]["evidence"]) == 3


def test_the_figures_of_the_seed_are_in_the_entries(imported):
    items = _by_item(imported)
    kinds = [e["kind"] for e in items.values()]
    assert kinds.count("failure") >= 4 and kinds.count("note") >= 4 and kinds.count("release") == 3
    assert items["failure/offload-55-at-1m"]["payload"]["conditions"]["cpu_offload_gb"] == 55
    assert items["failure/autotune-74-minutes"]["payload"]["conditions"]["autotune_minutes"] == 74
    assert (
        items["failure/boot-from-network-share"]["payload"]["conditions"]["boot_minutes_network_share"] == 92
    )
    assert items["note/draft-token-expert-prefetch"]["payload"]["numbers"] == {
        "predicted_pct": 3.16,
        "chance_pct": 3.12,
    }
    assert items["note/verify-window-unique-experts"]["payload"]["numbers"]["unique_expert_multiplier"] == 3.7
    hot_cold = items["note/hot-cold-expert-placement"]["payload"]["numbers"]
    assert (
        hot_cold["placed_read_gbps_low"],
        hot_cold["placed_read_gbps_high"],
        hot_cold["uva_read_gbps"],
    ) == (90, 155, 340)
    layer = items["note/layer-copy-offload"]["payload"]["numbers"]
    assert (layer["layer_copy_tps"], layer["uva_tps"]) == (3.3, 85)
    assert items["result/morning-replay-reruns"]["payload"]["metrics"] == {
        "run1_output_tps": 90.0,
        "run2_output_tps": 119.0,
        "run3_output_tps": 124.0,
    }
    v14 = items["release/v14"]["payload"]
    assert v14["lane_title"] == "Sixty-K Agent"
    assert v14["image"] == {"ref": "vllm/vllm-openai:deepseekv41-flash-0909", "pinned": False}
    assert "--cpu-offload-gb 60" in v14["flags"] and "--long-prefill-token-threshold 6144" in v14["command"]


def test_the_import_is_idempotent_and_finishes_a_partial_run(tmp_path):
    ledger = Ledger.init(tmp_path)
    first = seed_import.import_seed(ledger, seed=SEED, items=SEED.items[:7])
    assert len(first.added) == 7
    rest = seed_import.import_seed(Ledger.open(tmp_path), seed=SEED)
    assert len(rest.added) == len(SEED.items) - 7 and len(rest.present) == 7
    again = seed_import.import_seed(Ledger.open(tmp_path), seed=SEED)
    assert again.added == [] and len(again.present) == len(SEED.items)
    assert verify(Ledger.open(tmp_path)).entries == len(SEED.items)


def test_redaction_leaves_the_seed_text_untouched(imported):
    for item, entry in zip(SEED.items, _by_item(imported).values(), strict=False):
        for key, value in item.payload.items():
            if isinstance(value, str):
                assert entry["payload"][key] == value, key


def test_the_repository_ledger_holds_the_seed_and_verifies(repo_root):
    ledger = Ledger.open(repo_root)
    assert verify(ledger).ok
    items = _by_item(ledger)
    assert set(items) >= {item.key for item in SEED.items}
