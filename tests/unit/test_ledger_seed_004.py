"""The 004 seed's campaign (vLLM against SGLang on a dual GH200) imported beside 000's.

The seed document is kept as a fixture (tests/fixtures/seeds/) so that every imported number can be
looked up on the lines its entry cites: an import that invents or mistypes a figure fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from recipe_ledger import metrics
from recipe_ledger.cli import main
from recipe_ledger.ledger import seed_campaigns, seed_import
from recipe_ledger.ledger.fold import fold_statuses
from recipe_ledger.ledger.models import load_payload
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import verify

from helpers.seedtext import numbers_in, seed_lines

SEED = seed_campaigns.load_seed("004")
NO_VERDICT = "none: imported from the seed, not measured against a control by this tool"


def _by_item(ledger: Ledger) -> dict[str, dict[str, Any]]:
    # The chain's key entry (signing adopted) is the writer's, not the seed's: no origin item.
    imported = (e for e in ledger.entries() if e["writer"] == SEED.writer and e["kind"] != "key")
    return {e["payload"]["origin"]["item"]: e for e in imported}


@pytest.fixture
def imported(tmp_path: Path) -> Ledger:
    ledger = Ledger.init(tmp_path)
    seed_import.import_seed(ledger, seed=SEED)
    return Ledger.open(tmp_path)


# -- reading the seed ----------------------------------------------------------------------------


def _cited_lines(entry: dict[str, Any]) -> str:
    p = entry["payload"]
    if entry["kind"] == "release":
        return next(
            n.removeprefix("seed lines ").split(" (")[0] for n in p["notes"] if n.startswith("seed lines")
        )
    holder = p["numbers"] if entry["kind"] == "note" else p["conditions"]
    return holder["seed_lines"]


def _figures(entry: dict[str, Any]) -> dict[str, float]:
    p = entry["payload"]
    if entry["kind"] == "release":
        fields = {**p["metrics"], **{f"numbers.{n['name']}": n["value"] for n in p["numbers"]}}
    else:
        fields = {**p.get("metrics", {}), **p.get("conditions", {}), **p.get("numbers", {})}
    return {k: v for k, v in fields.items() if isinstance(v, int | float) and not isinstance(v, bool)}


# -- the tests -----------------------------------------------------------------------------------


def test_every_item_is_imported_as_imported_from_the_004_document(imported):
    items = _by_item(imported)
    assert list(items) == [item.key for item in SEED.items]
    for key, entry in items.items():
        # The seed gives no date, so the origin says none rather than inventing one.
        assert entry["payload"]["origin"] == {
            "how": "imported",
            "source": "004_f935e39488fe99ec.txt",
            "item": key,
        }
        load_payload(entry["kind"], entry["payload"])
    assert verify(imported).ok


def test_every_imported_number_is_on_the_seed_lines_its_entry_cites(imported):
    checked = 0
    for key, entry in _by_item(imported).items():
        stated = numbers_in(seed_lines(SEED.source, _cited_lines(entry)))
        for name, value in _figures(entry).items():
            assert round(abs(value), 6) in stated, f"{key}: {name}={value} is not on its cited seed lines"
            checked += 1
    assert checked > 100  # the tables really were imported, not just their titles


def test_the_number_check_catches_a_figure_the_seed_does_not_state():
    stated = numbers_in(seed_lines(SEED.source, "102-109"))
    assert 275.9 in stated and 3.62 in stated
    assert 275.8 not in stated and 92.9 * 1000 not in stated


def test_results_carry_no_verdict_and_say_why(imported):
    results = [e for e in _by_item(imported).values() if e["kind"] == "result"]
    assert len(results) == 8
    for entry in results:
        p = entry["payload"]
        assert "verdict" not in p
        assert "not measured against a control by this tool" in p["text"]
        assert p["conditions"]["verdict"] == NO_VERDICT
        assert p["conditions"]["box"] == "dual-gh200" and p["conditions"]["engine"]


def test_metrics_use_the_metrics_modules_names_where_they_mean_the_same(imported):
    names = {
        name.rsplit(".", 1)[-1]
        for e in _by_item(imported).values()
        if e["kind"] == "result"
        for name in e["payload"]["metrics"]
    }
    assert {"decode_tps_per_stream", "tpot_ms_p50", "ttft_ms_p50", "ttft_ms_p99", "e2el_ms_p99"} <= names
    for name in names:
        # A name the table lacks must still say its unit, so the site never shows a bare number
        # (counts and ratios excepted: they have no unit to say).
        described = metrics.lookup(name)
        assert (
            described.known or described.unit or name.endswith(("_tokens", "_ratio", "_pct", "_1m", "_gpu"))
        )
    sweep = _by_item(imported)["result/vllm-dspark-k-sweep"]["payload"]["metrics"]
    assert sweep["k6.code-review.decode_tps_per_stream"] == max(
        v for k, v in sweep.items() if k.endswith("decode_tps_per_stream")
    )


def test_the_k4_boot_is_a_config_failure_and_k6_is_best(imported):
    items = _by_item(imported)
    k4 = items["failure/dspark-k4-rejected"]
    assert k4["payload"]["cause_class"] == "config"
    assert k4["payload"]["conditions"]["num_speculative_tokens"] == 4
    assert {r["id"] for r in k4["refs"]} == {items["result/vllm-dspark-k-sweep"]["id"]}
    sweep = items["result/vllm-dspark-k-sweep"]["payload"]
    assert (
        sweep["conditions"]["best_k"] == 6 and sweep["metrics"]["k6-vs-k0.code-review.decode_ratio"] == 2.97
    )
    assert not any(name.startswith("k4.") for name in sweep["metrics"])


def test_the_tail_test_rows_are_one_result_with_every_runtime(imported):
    tail = _by_item(imported)["result/tail-test"]["payload"]
    arms = {name.split(".")[0] for name in tail["metrics"]}
    assert arms == {"sglang-native-fp8", "sglang-fused", "vllm-tilelang", "vllm-triton-mhc-fallback"}
    assert tail["conditions"]["requests"] == 100 and tail["conditions"]["concurrency"] == 1
    assert (
        tail["metrics"]["vllm-tilelang.tail-100.ttft_ms_p99"]
        > 20 * tail["metrics"]["sglang-native-fp8.tail-100.ttft_ms_p99"]
    )


def test_the_hazard_and_the_loader_bug_are_notes(imported):
    items = _by_item(imported)
    hazard = items["note/prefix-cache-benchmark-hazard"]["payload"]
    assert (
        hazard["numbers"]["reported_prefill_tps_low"],
        hazard["numbers"]["reported_prefill_tps_high"],
    ) == (
        25000,
        80000,
    )
    assert "prefix cache" in hazard["text"] and "nonce" in hazard["text"]
    bug = items["note/sglang-dspark-shared-expert-loader-bug"]["payload"]
    assert (bug["numbers"]["story_decode_tps_before"], bug["numbers"]["story_decode_tps_after"]) == (
        115.7,
        176.0,
    )
    assert "shared_experts" in bug["text"] and "silent" in bug["title"].lower()


def test_both_launches_are_unverified_releases_of_the_dual_gh200_lane(imported):
    items = _by_item(imported)
    statuses = fold_statuses(imported.entries())
    vllm, sglang = items["release/vllm-k6"], items["release/sglang-native-fp8"]
    assert statuses[vllm["id"]] == "superseded" and statuses[sglang["id"]] == "active"
    assert sglang["payload"]["supersedes"] == vllm["id"]
    for release in (vllm, sglang):
        p = release["payload"]
        assert p["lane"] == "dual-gh200" and p["verified"] is False
        reasons = " ".join(p["unverified"])
        assert "no image pinned" in reasons and "no model revision" in reasons and "imported" in reasons
        assert "image" not in p and "revision" not in p["model"]
        # Each published number points at the imported result that states it, and says the same value.
        for number in p["numbers"]:
            result = imported.get(number["result"])
            assert result["writer"] == SEED.writer and number["verified"] is False
            assert number["value"] in result["payload"]["metrics"].values()
    assert (
        "--speculative-config" in vllm["payload"]["command"] and "--tp-size 2" in sglang["payload"]["flags"]
    )


def test_nothing_the_seed_says_is_redacted(imported):
    for item, entry in zip(SEED.items, _by_item(imported).values(), strict=True):
        for key in ("text", "cause", "fix", "title", "flags", "env", "changes", "command", "notes"):
            if key in item.payload:
                assert entry["payload"][key] == item.payload[key], (item.key, key)


def test_the_import_is_idempotent_and_finishes_a_partial_run(tmp_path):
    ledger = Ledger.init(tmp_path)
    first = seed_import.import_seed(ledger, seed=SEED, items=SEED.items[:5])
    assert len(first.added) == 5
    rest = seed_import.import_seed(Ledger.open(tmp_path), seed=SEED)
    assert len(rest.added) == len(SEED.items) - 5 and len(rest.present) == 5
    again = seed_import.import_seed(Ledger.open(tmp_path), seed=SEED)
    assert again.added == [] and len(again.present) == len(SEED.items)
    assert verify(Ledger.open(tmp_path)).entries == len(SEED.items)


def test_import_seed_imports_every_seed_or_the_one_named(tmp_path):
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(main, ["import-seed", *args, "--root", str(tmp_path)])

    assert runner.invoke(main, ["init", "--root", str(tmp_path)]).exit_code == 0
    only = run("004")
    assert only.exit_code == 0, only.output
    assert f"seed 004: {len(SEED.items)} added, 0 already present" in only.output
    assert "seed 000" not in only.output
    both = run()
    assert both.exit_code == 0, both.output
    assert f"seed 000: {len(seed_campaigns.load_seed('000').items)} added" in both.output
    assert f"seed 004: 0 added, {len(SEED.items)} already present" in both.output
    chains = {e["writer"] for e in Ledger.open(tmp_path).entries()}
    assert chains == {"seed-000", "seed-004"}
    unknown = run("005")
    assert unknown.exit_code == 2 and "'005' is not one of" in unknown.output


def test_the_repository_ledger_holds_the_004_import_and_verifies(repo_root):
    ledger = Ledger.open(repo_root)
    assert verify(ledger).ok
    assert set(_by_item(ledger)) == {item.key for item in SEED.items}
