"""How fast `ledger mlflow sync` indexes a ledger, and what several boxes syncing at once leave behind.

    .venv/bin/python benchmarks/mlflow_sync.py [--entries 300] [--folders 0.5] [--uri URI]
    .venv/bin/python benchmarks/mlflow_sync.py --writers 4 --entries 1000 --uri http://127.0.0.1:PORT

A synthetic ledger (results, calibrations and failures in the shapes `ledger run` writes, spread
over ``--writers`` chains) is written into a temporary repository; a share of the results
(``--folders``) get a run folder (2 arms x 2 repeats x 2 points of measurements, a plan, a summary
and two small logs), as on the box that ran them. Then, against a fresh store (a new SQLite file
unless ``--uri`` names a server, where a new experiment is used):

- one process syncs everything: entries/s of the first sync (store creation excluded and said
  separately), then of a second sync that must change nothing;
- with ``--writers N`` > 1, N processes sync the whole ledger at once into one new experiment (as N
  boxes that pulled the same ledger would): entries/s over the slowest, then a count of the runs
  per entry (duplicates and losses must both be zero) and of the runs created and removed on the way.

Prints the conditions (load average, CPU count, MLflow version) with the figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from synthetic_ledger import write_chains

from recipe_ledger import tracking
from recipe_ledger.tracking.mlflowstore import MlflowTrackingClient

ARMS = ("control", "fast")
POINTS = (1, 4)
REPEATS = (1, 2)


def _result(n: int, run_id: str) -> dict:
    metrics = {f"{arm}.c{p}.output_tps_total": 100.0 * p + n % 7 for arm in ARMS for p in POINTS}
    metrics |= {f"{arm}.c{p}.ttft_ms_p50": 40.0 + p for arm in ARMS for p in POINTS}
    arms = {
        arm: {
            "source": "raw command",
            "fingerprint": "sha256:" + f"{i}" * 64,
            "argv": ["vllm", "serve", "/model", "--max-num-seqs", str(64 * (i + 1))],
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
            "image": "127.0.0.1:5000/vllm-cpu@sha256:" + "d" * 64,
        }
        for i, arm in enumerate(ARMS)
    }
    bar = {
        "candidate": "fast",
        "metric": "output_tps_total",
        "point": 4,
        "direction": "higher",
        "min_effect": 0.05,
        "outcome": "win",
        "effect": 0.1,
        "ci_low": 0.08,
        "ci_high": 0.12,
        "mde": 0.01,
        "control": 400.0,
        "value": 440.0,
    }
    experiment = {
        "name": "synthetic",
        "spec": "experiments/synthetic.yaml",
        "spec_sha256": "sha256:" + "c" * 64,
        "box": "cpu-only",
        "run_id": run_id,
        "points": list(POINTS),
        "repeats": len(REPEATS),
        "schedule": ["control#1", "fast#1", "fast#2", "control#2"],
        "instruments": {"bench": "vllm 0.32.0+cpu"},
        "method": "rl-verdict/2",
        "duration_s": 60.0,
        "host": {"cpu": "Xeon"},
        "bars": [bar],
        "arms": arms,
    }
    return {
        "schema_version": 2,
        "subject": "synthetic",
        "text": f"synthetic result {n}",
        "metrics": metrics,
        "verdict": "win",
        "conditions": {"box": "cpu-only", "run_id": run_id},
        "experiment": experiment,
        "origin": {"how": "measured", "source": run_id},
    }


def _failure(n: int) -> dict:
    return {
        "schema_version": 1,
        "subject": "synthetic",
        "cause_class": "oom",
        "cause": f"measurement: the server ran out of memory ({n})",
        "log_tail": "CUDA out of memory",
        "minutes_lost": 1.5,
        "conditions": {"box": "cpu-only", "stage": "measurement"},
        "origin": {"how": "measured", "source": f"synthetic-failure-{n}"},
    }


def _run_folder(runs_dir: Path, run_id: str) -> None:
    folder = runs_dir / run_id
    (folder / "raw").mkdir(parents=True)
    records = [
        {
            "arm": arm,
            "repeat": r,
            "point": p,
            "instrument": "bench",
            "instrument_version": "vllm 0.32.0+cpu",
            "seed": 1000 * r + p,
            "metrics": {"output_tps_total": 100.0 * p, "ttft_ms_p50": 40.0 + p, "itl_ms_p50": 6.1},
            "server": {"prefix_cache_hit_rate": 0.1},
            "raw_file": f"raw/{arm}-p{p}-r{r}.json",
            "raw_sha256": "sha256:" + "f" * 64,
            "wall_s": 24.0,
        }
        for arm in ARMS
        for r in REPEATS
        for p in POINTS
    ]
    (folder / "measurements.jsonl").write_text("".join(json.dumps(x) + "\n" for x in records))
    (folder / "plan.json").write_text(json.dumps({"arms": {}}))
    (folder / "summary.json").write_text("{}")
    for arm in ARMS:
        (folder / f"server-{arm}-r1.log").write_text("INFO started\nINFO ready\n")


def _stamp(n: int) -> str:
    return f"2026-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"


def make_ledger(root: Path, count: int, writers: int, folder_share: float) -> int:
    """A repository with ``count`` indexed entries (results, some with run folders; 1 in 10 a failure)."""
    folders = []

    def make_entry(n: int, _ids: list[str]):
        if n % 10 == 9:
            return "failure", _failure(n), []
        run_id = f"synthetic-{_stamp(n).replace(':', '').replace('-', '')}-{n:04x}"
        if (n * folder_share) % 1 + folder_share >= 1:
            folders.append(run_id)
        return "result", _result(n, run_id), []

    names = tuple(f"box-{chr(97 + i)}" for i in range(writers))
    root.mkdir(parents=True)
    write_chains(root, names, count, make_entry, _stamp)
    for run_id in folders:
        _run_folder(root / "runs", run_id)
    return len(folders)


def _sync(repo: Path, uri: str, experiment: str, queue) -> None:
    started = time.perf_counter()
    report = tracking.sync_ledger(repo, uri, experiment_name=experiment)
    queue.put((time.perf_counter() - started, report.created, report.raced, str(report)))


def conditions() -> str:
    import mlflow

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    python = sys.version.split()[0]
    return f"load average {load}; {os.cpu_count()} CPUs; MLflow {mlflow.__version__}; Python {python}"


def single(repo: Path, uri: str, experiment: str, count: int) -> None:
    if uri.startswith("sqlite:"):
        started = time.perf_counter()
        MlflowTrackingClient.open(uri, "store-creation")
        print(f"store creation (schema migrations): {time.perf_counter() - started:.1f} s")
    for label in ("first sync", "second sync"):
        started, cpu = time.perf_counter(), time.process_time()
        report = tracking.sync_ledger(repo, uri, experiment_name=experiment)
        took, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(
            f"{label}: {count} entries in {took:.1f} s = {count / took:.1f} entries/s "
            f"({cpu:.1f} s CPU = {count / cpu:.1f} entries per CPU-second) ({str(report).splitlines()[0]})"
        )


def concurrent(repo: Path, uri: str, experiment: str, count: int, writers: int) -> None:
    MlflowTrackingClient.open(uri, experiment)  # the experiment exists before the writers start
    queue = multiprocessing.Queue()
    procs = [
        multiprocessing.Process(target=_sync, args=(repo, uri, experiment, queue)) for _ in range(writers)
    ]
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    results = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    took = time.perf_counter() - started
    created, raced = sum(r[1] for r in results), sum(r[2] for r in results)
    print(f"{writers} writers at once: {count} entries in {took:.1f} s = {count / took:.1f} entries/s")
    for seconds, _created, _repaired, text in results:
        print(f"  one writer: {seconds:.1f} s: {text.splitlines()[0]}")
    client = MlflowTrackingClient.open(uri, experiment)
    per_entry = Counter(run.entry_id for run in client.indexed_runs() if run.finished)
    duplicates = sum(n - 1 for n in per_entry.values() if n > 1)
    print(
        f"  runs per entry: {len(per_entry)} entries indexed of {count} (losses {count - len(per_entry)}), "
        f"duplicates {duplicates}; runs kept {created}, made by two syncs at once and removed by the "
        f"post-checks {raced}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=300, help="indexed entries in the ledger")
    parser.add_argument("--folders", type=float, default=0.5, help="share of results with a run folder here")
    parser.add_argument("--writers", type=int, default=1, help="chains, and processes syncing at once")
    parser.add_argument("--uri", help="tracking URI (default: a new SQLite file)")
    args = parser.parse_args()
    print(conditions())
    with tempfile.TemporaryDirectory(prefix="mlflow-sync-bench-") as tmp:
        repo = Path(tmp) / "repo"
        folders = make_ledger(repo, args.entries, args.writers, args.folders)
        print(f"ledger: {args.entries} entries over {args.writers} chains, {folders} run folders here")
        uri = args.uri or f"sqlite:///{tmp}/mlflow.db"
        experiment = f"bench-{os.getpid()}-{int(time.time())}"
        if args.writers == 1:
            single(repo, uri, experiment, args.entries)
        else:
            concurrent(repo, uri, experiment, args.entries, args.writers)


if __name__ == "__main__":
    main()
