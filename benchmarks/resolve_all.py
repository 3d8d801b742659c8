"""Wall time to load the recipe corpus and resolve every shared compat case in one process.

Run: .venv/bin/python benchmarks/resolve_all.py [COMPAT_DIR]   (default: ../shared/compat)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from recipe_ledger.recipes.corpus import Corpus, resolve_case

CASE_FILES = ("expected-commands.jsonl", "expected-omni-commands.jsonl")


def main() -> None:
    default = Path(__file__).resolve().parents[2] / "shared" / "compat"
    compat = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    cases = [
        json.loads(line)
        for name in CASE_FILES
        for line in (compat / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    start = time.perf_counter()
    corpus = Corpus(compat / "vllm-recipes")
    for path in sorted({case["recipe"] for case in cases}):
        corpus.recipe(path)
    corpus.strategies, corpus.taxonomy  # noqa: B018 - load them inside the timed section
    loaded = time.perf_counter()
    same = sum(
        resolve_case(corpus, case) == {k: case[k] for k in ("result", "error") if k in case} for case in cases
    )
    done = time.perf_counter()
    print(f"load corpus: {loaded - start:.3f} s")
    print(f"resolve {len(cases)} cases: {done - loaded:.3f} s ({len(cases) / (done - loaded):,.0f} cases/s)")
    print(f"total: {done - start:.3f} s; matching the reference: {same}/{len(cases)}")


if __name__ == "__main__":
    main()
