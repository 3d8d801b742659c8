"""The example study's probe: sort seeded floats one way; print its time and its comparisons as JSON.

The command instrument reads the last JSON object printed: {"sort_ms": ..., "compares_per_item": ...}.

- ``sort_ms``: the best of several sorts. On a shared machine the other processes only ever add
  time, so the minimum is the steadiest number one launch can give; on a busy one it still spreads.
- ``compares_per_item``: how many comparisons the sort made, per item, counted on a smaller sample
  through a float that counts its ``<``. It depends on the data (the seed) and the algorithm, not on
  the machine's load: a tight instrument beside a loose one.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import time

SIZE = 50_000
COUNTED = 5_000  # comparisons through Python code are slow: a sample is enough for a ratio
TRIES = 9


class CountedFloat(float):
    compares = 0

    def __lt__(self, other: float) -> bool:
        CountedFloat.compares += 1
        return float(self) < float(other)


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
    print(json.dumps({"sort_ms": round(best, 3), "compares_per_item": _compares_per_item(sort, values)}))


def _timed_ms(sort, values: list[float]) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    ordered = sort(values)
    elapsed = (time.perf_counter() - started) * 1000
    assert ordered[0] <= ordered[-1]
    return elapsed


def _compares_per_item(sort, values: list[float]) -> float:  # type: ignore[no-untyped-def]
    CountedFloat.compares = 0
    sort([CountedFloat(v) for v in values[:COUNTED]])
    return round(CountedFloat.compares / COUNTED, 4)


if __name__ == "__main__":
    main()
