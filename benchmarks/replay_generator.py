"""How fast the synthetic agent-session generator writes a trace (issue 13: 10,000 sessions < 10 s).

    PYTHONPATH=src python benchmarks/replay_generator.py [--sessions 10000] [--turns 24]

Prints the sessions, requests, bytes and seconds of one write; the figure, not a timed test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from recipe_ledger.instruments.replay_trace import SessionShape, generate_sessions, write_trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    shape = SessionShape(sessions=args.sessions, turns=args.turns)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        start = time.perf_counter()
        requests = write_trace(path, generate_sessions(shape, args.seed))
        seconds = time.perf_counter() - start
        size = path.stat().st_size
    print(
        f"{args.sessions} sessions x {args.turns} turns: {requests} requests, "
        f"{size / 1e6:.1f} MB in {seconds:.2f} s ({requests / seconds:,.0f} requests/s)"
    )


if __name__ == "__main__":
    main()
