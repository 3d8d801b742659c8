"""The example study's probe: sort seeded floats one way and print the time as JSON.

The command instrument reads the last JSON object printed: {"sort_ms": ...}. The best of several
sorts is reported: on a shared machine the other processes only ever add time, so the minimum is
the steadiest number one launch can give.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import time

SIZE = 50_000
TRIES = 9


def heap_sort(values: list[float]) -> list[float]:
    heap = list(values)
    heapq.heapify(heap)
    return [heapq.heappop(heap) for _ in range(len(heap))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--method", choices=["heap", "builtin"], required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    values = [rng.random() for _ in range(SIZE)]
    sort = heap_sort if args.method == "heap" else sorted
    best = min(_timed_ms(sort, values) for _ in range(TRIES))
    print(json.dumps({"sort_ms": round(best, 3)}))


def _timed_ms(sort, values: list[float]) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    ordered = sort(values)
    elapsed = (time.perf_counter() - started) * 1000
    assert ordered[0] <= ordered[-1]
    return elapsed


if __name__ == "__main__":
    main()
