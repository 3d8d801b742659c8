"""`ledger recipe show` says what the recipe claims for each hardware apart from what this ledger
measured there (a result whose arm the plan resolved from the recipe on that hardware)."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.cli.recipe import hardware_text, measured_hardware
from recipe_ledger.ledger.store import Ledger

REPO = Path(__file__).resolve().parents[2]
TINY = "models/recipe-ledger/tiny-qwen2.yaml"


def _result(*sources: str, how: str = "measured") -> dict:
    arms = {f"a{i}": {"source": source} for i, source in enumerate(sources)}
    return {"kind": "result", "payload": {"origin": {"how": how}, "experiment": {"arms": arms}}}


def test_a_result_counts_once_for_each_hardware_its_recipe_arms_ran_on():
    rows = [
        (
            _result(f"{TINY} · cpu_x86 · single_node_tp · default · features: none", f"{TINY} · cpu_x86 · x"),
            "active",
        ),
        (_result(f"{TINY} · h200 · single_node_tp · default · features: none"), "active"),
        (_result(f"{TINY} · h200 · single_node_tp"), "retracted"),  # a retracted number is no evidence
        (_result(f"{TINY} · b200 · single_node_tp", how="imported"), "active"),  # a document's, not ours
        (_result("models/org/other.yaml · b300 · single_node_tp"), "active"),  # another recipe
        (_result("raw command"), "active"),  # not the recipe's command
        ({"kind": "failure", "payload": {"origin": {"how": "measured"}}}, "active"),
    ]
    assert measured_hardware(rows, TINY) == {"cpu_x86": 1, "h200": 1}


def test_claimed_and_measured_are_said_apart():
    shown = hardware_text({"h100": "verified", "cpu_x86": "verified"}, measured_hardware([], TINY))
    assert shown == "h100 (claimed verified), cpu_x86 (claimed verified)"
    from collections import Counter

    both = hardware_text({"cpu_x86": "verified"}, Counter({"cpu_x86": 2, "h200": 1}))
    assert both == "cpu_x86 (claimed verified; measured: 2 results), h200 (not claimed; measured: 1 result)"


def _project(tmp_path: Path, *chains: str) -> Path:
    Ledger.init(tmp_path)
    for chain in chains:
        shutil.copy(REPO / "ledger" / chain, tmp_path / "ledger" / chain)
    return tmp_path


def _hardware_line(root: Path, name: str) -> str:
    result = CliRunner().invoke(
        main,
        ["recipe", "show", name, "--recipes", str(REPO / "recipes"), "--root", str(root)],
        env={"NO_COLOR": "1"},
    )
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("hardware: ")]
    assert "verified)" not in line.replace("claimed verified", "")  # never a bare "(verified)"
    return line


def test_recipe_show_says_measured_only_where_this_ledger_measured(tmp_path):
    root = _project(tmp_path, "cpu-ci-box.jsonl")
    rows = [(e, "active") for e in Ledger.open(root).entries()]
    assert measured_hardware(rows, TINY)["cpu_x86"] > 0  # the CPU lane ran the tiny recipe
    assert "cpu_x86 (claimed verified; measured: " in _hardware_line(root, "recipe-ledger/tiny-qwen2")
    v41 = _hardware_line(root, "deepseek-ai/DeepSeek-V4.1-Flash")
    assert "claimed verified" in v41 and "measured" not in v41  # the ledger never ran it


def test_recipe_show_without_measurements_says_claimed(tmp_path):
    root = _project(tmp_path)  # an empty ledger
    line = _hardware_line(root, "recipe-ledger/tiny-qwen2")
    assert line == "hardware: cpu_x86 (claimed verified)"
