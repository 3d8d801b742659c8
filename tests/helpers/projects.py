"""Projects on disk built from this repository, for the site, tables and browser tests.

``fixed_ledger`` copies the fixed prefix of the real chains; ``make_project`` adds this repository's
recipes and, with ``plants=True``, hostile input that must stay text wherever it is shown.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from recipe_ledger.ledger import actions, chain
from recipe_ledger.ledger.store import Ledger

REPO = Path(__file__).resolve().parents[2]
# Chains only ever grow, so their first lines are a fixture that never changes: the seed's
# imported campaign and the H200 expert-placement study (calibrations + the result).
FIXED_PREFIX = {"seed-000.jsonl": 18, "h200-lent.jsonl": 3, "cpu-ci-box.jsonl": 10}


def scratch_recipes_root(root: Path) -> Path:
    """``root`` as a recipes root with this repository's taxonomy and strategies and an empty
    ``models/org/``, for tests that write one recipe of their own."""
    recipes = Path(__file__).resolve().parents[2] / "recipes"
    shutil.copy(recipes / "taxonomy.yaml", root / "taxonomy.yaml")
    shutil.copytree(recipes / "strategies", root / "strategies")
    (root / "models" / "org").mkdir(parents=True)
    return root


def committed_chains_project(root: Path) -> Path:
    """A project whose ledger holds copies of the committed CPU lane's and seed 000's chains: real
    entries of every kind, for what the CLI prints of them."""
    Ledger.init(root)
    for name in ("cpu-ci-box.jsonl", "seed-000.jsonl"):
        shutil.copy(REPO / "ledger" / name, root / "ledger" / name)
    return root


def fixed_ledger(root: Path) -> Path:
    """A project at ``root`` whose ledger holds the fixed prefix of the real chains."""
    (root / "ledger").mkdir(parents=True)
    for name in ("format.json", ".gitattributes"):
        shutil.copyfile(REPO / "ledger" / name, root / "ledger" / name)
    for name, count in FIXED_PREFIX.items():
        lines = (REPO / "ledger" / name).read_bytes().splitlines(keepends=True)[:count]
        (root / "ledger" / name).write_bytes(b"".join(lines))
    return root


PLANT = "<script>window.__planted = 1</script>"
TOKEN = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"  # token-shaped: must never reach the site


def make_project(root: Path, *, plants: bool = False) -> Path:
    """A project with the fixed ledger prefix and this repository's recipes (+ hostile input)."""
    fixed_ledger(root)
    shutil.copytree(REPO / "recipes", root / "recipes")
    if plants:
        plant_bad_input(root)
    return root


def plant_bad_input(root: Path) -> None:
    tiny = (root / "recipes" / "models" / "recipe-ledger" / "tiny-qwen2.yaml").read_text(encoding="utf-8")
    folder = root / "recipes" / "models" / "plänt"
    folder.mkdir()
    hostile = (
        tiny.replace('title: "Tiny random Qwen2 (CPU)"', 'title: "Plänt <b>bold</b> 模型"')
        .replace('slug: "tiny-qwen2"', 'slug: "plant-model"')
        .replace('description: "An 11M', f'description: "{PLANT.replace(chr(34), "")} Ünïcödé 模型 & an 11M')
    )
    hostile = hostile.replace(
        "  ## Overview\n",
        f'  ## Overview ✓\n\n  {PLANT}\n\n  <img src=x onerror="window.__img=1">\n'
        "\n  [click](javascript:window.__link=1)\n",
    )
    (folder / "模型-plant.yaml").write_text(hostile, encoding="utf-8")
    broken = tiny.replace('slug: "tiny-qwen2"', 'slug: "broken-guide"').replace(
        "guide: |", "guide:\n  - 1\n  - 2\nunused: |"
    )
    (folder / "broken-guide.yaml").write_text(broken, encoding="utf-8")
    ledger = Ledger.open(root)
    note = actions.note(ledger, f"{PLANT} a note in Ünïcödé, 模型", writer="box-plant")
    actions.retract(ledger, note["id"], reason=f"retracted {PLANT}", writer="box-plant")
    write_raw_entry(
        root,
        "box-huge",
        {
            "schema_version": 1,
            "kind": "note",
            "title": "huge",
            "text": f"{TOKEN} <script>window.__huge=1</script> " + "x" * 300_000,
        },
    )


def write_raw_entry(root: Path, writer: str, payload: dict) -> str:
    """An entry written by another tool, past `append`'s size cap and redaction (verify accepts it)."""
    payload = {k: v for k, v in payload.items() if k != "kind"}
    body = {
        "v": 1,
        "seq": 0,
        "prev": None,
        "writer": writer,
        "kind": "note",
        "refs": [],
        "ts": "2026-12-01T00:00:00.000000Z",
        "payload": payload,
        "git": None,
    }
    entry_id, line = chain.encode_line(body)
    (root / "ledger" / f"{writer}.jsonl").write_bytes(line)
    return entry_id
