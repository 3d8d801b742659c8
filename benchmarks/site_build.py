"""How long `ledger site` takes: on this repository, and on a synthetic lab of 1,000 recipes and
100,000 ledger entries.

    .venv/bin/python benchmarks/site_build.py [--recipes 1000] [--entries 100000] [--dir DIR] [--no-progress]

Prints the build time (wall, and CPU of this process and of its builder workers: on a shared box
the CPU figures are the comparable ones), pages, files, size and the largest file for each. Goals
(issue 18.4): the synthetic build under 20 s on a 2-core box, no page or JSON over 2 MB. The
synthetic ledger is written in bulk with the real line encoder (it verifies), with results (some
with experiment records and sweeps), failures, notes, releases and 2% retractions; the synthetic
recipes have 2-4 hardware ids, 3 features, 1-2 variants and (one in ten) a memory block.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import tempfile
import time
from pathlib import Path

from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from synthetic_ledger import write_chains

from recipe_ledger.site import build_site

REPO = Path(__file__).resolve().parents[1]
HARDWARE = ("h100", "h200", "b200", "gb200", "mi300x", "mi355x", "cpu_x86", "dgx_station_gb300")
BOXES = ("h200-x1", "h200-x8", "dgx-station-gb300", "cpu-only")
WRITERS = ("box-a", "box-b", "box-c", "box-d")

RECIPE = """meta:
  title: "Synthetic model {n}"
  slug: "synthetic-{n}"
  provider: "Bench Org {org}"
  description: "A synthetic recipe number {n} for the site benchmark."
  tasks: [text]
  default_hardware: {default_hw}
  hardware:
{hardware}
model:
  model_id: "bench-org-{org}/synthetic-{n}"
  architecture: moe
  context_length: 131072
  base_args: ["--max-model-len", "131072"]
  base_env:
    VLLM_NO_USAGE_STATS: "1"
features:
  tool_calling:
    description: "Tool calling."
    args: ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
  reasoning:
    description: "Reasoning parser."
    args: ["--reasoning-parser", "qwen3"]
  spec_decoding:
    description: "MTP drafting."
    args: ["--speculative-config", '{{"method":"mtp","num_speculative_tokens":{k}}}']
opt_in_features: [spec_decoding]
variants:
  default:
    precision: bf16
    vram_minimum_gb: {vram}
{extra_variant}compatible_strategies: [single_node_tp, single_node_tep]
strategy_overrides:
  single_node_tp:
    tp:
      default: {tp}
{memory}guide: |
  ## Overview

  Synthetic guide {n} with a table:

  | a | b |
  |---|---|
  | {n} | {k} |
"""

MEMORY = """memory:
  source: "synthetic"
  headroom_factor: 1.2
  kv_bytes_per_token: 65536
  kv_fixed_gib: 1
  activation_reserve_gib: 4
  components:
    - name: "Experts"
      kind: experts
      params_b: {params}
      stored_gib: {experts}
      offload: uva
      param_names: ["layers.{{i}}.experts.w13_weight"]
    - name: "Dense"
      kind: dense
      params_b: 10
      stored_gib: 20
"""


def write_recipes(root: Path, count: int, rng: random.Random) -> None:
    (root / "recipes").mkdir(parents=True)
    for name in ("taxonomy.yaml", "strategies", "boxes"):
        source, target = REPO / "recipes" / name, root / "recipes" / name
        (shutil.copytree if source.is_dir() else shutil.copyfile)(source, target)
    for n in range(count):
        hardware = rng.sample(HARDWARE, rng.randint(2, 4))
        extra = "  fp8:\n    precision: fp8\n    vram_minimum_gb: 80\n" if n % 2 else ""
        memory = (
            MEMORY.format(params=rng.randint(50, 600), experts=rng.randint(80, 900)) if n % 10 == 0 else ""
        )
        text = RECIPE.format(
            n=n,
            org=n % 37,
            default_hw=hardware[0],
            k=rng.randint(1, 5),
            vram=rng.randint(20, 900),
            tp=rng.choice((1, 2, 4, 8)),
            extra_variant=extra,
            memory=memory,
            hardware="".join(f"    {hw}: {rng.choice(('verified', 'unverified'))}\n" for hw in hardware),
        )
        folder = root / "recipes" / "models" / f"bench-org-{n % 37}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"synthetic-{n}.yaml").write_text(text)


def write_ledger(root: Path, count: int, recipes: int, rng: random.Random) -> None:
    retracted: set[str] = set()
    write_chains(
        root,
        WRITERS,
        count,
        lambda n, ids: synthetic_entry(rng, n, ids, retracted, recipes),
        lambda n: f"2026-{1 + n // 40000:02d}-01T00:00:00.{n:06d}Z",
    )
    # The synthetic lab's writers retract each other's entries: they are its maintainers.
    (root / "ledger" / "maintainers").write_text("".join(f"{writer}\n" for writer in WRITERS))


def synthetic_entry(rng: random.Random, n: int, ids: list[str], retracted: set[str], recipes: int):
    subject = f"synthetic-{rng.randrange(recipes)} on {rng.choice(BOXES)}"
    roll = rng.random()
    if ids and roll < 0.02:
        target = rng.choice(ids)
        if target not in retracted:
            retracted.add(target)
            return (
                "retraction",
                {"schema_version": 1, "target": target, "reason": f"not reproducible ({n})", "evidence": []},
                [{"rel": "retracts", "id": target}],
            )
    if roll < 0.07:
        return (
            "failure",
            {
                "schema_version": 1,
                "subject": subject,
                "cause_class": "oom",
                "cause": f"out of memory at step {n}",
                "fix": "offload more experts",
            },
            [],
        )
    if roll < 0.17:
        return (
            "note",
            {
                "schema_version": 1,
                "title": f"closed door {n}",
                "text": "Ünïcödé note " * 5,
                "numbers": {"x": rng.random()},
            },
            [{"rel": "see", "id": rng.choice(ids)}] if ids else [],
        )
    if n % 1000 == 999:
        return (
            "release",
            {
                "schema_version": 1,
                "lane": f"lane-{n % 7}",
                "version": f"v{n // 1000}",
                "flags": [f"--max-num-seqs {rng.randint(1, 64)}"],
                "metrics": {"tps": rng.uniform(50, 90)},
                "changes": ["synthetic change"],
            },
            [],
        )
    payload = {"schema_version": 2, "subject": subject, "metrics": sweep_metrics(rng), "text": f"result {n}"}
    if n % 500 == 0:
        payload["experiment"] = experiment_record(rng, n)
    return "result", payload, []


def sweep_metrics(rng: random.Random) -> dict[str, float]:
    metrics = {}
    for arm in ("control", "candidate"):
        best = rng.uniform(100, 3000)
        for c in (1, 2, 4, 8, 16, 32):
            metrics[f"{arm}.c{c}.output_tps_total"] = round(best * (1 - 0.9**c), 3)
    return metrics


def experiment_record(rng: random.Random, n: int) -> dict:
    effect = rng.uniform(-0.3, 0.3)
    bar = {
        "candidate": "candidate",
        "metric": "output_tps_total",
        "point": 16,
        "direction": "higher",
        "min_effect": 0.05,
        "outcome": "win" if effect > 0.05 else "no-change",
        "effect": effect,
        "ci_low": effect - 0.02,
        "ci_high": effect + 0.02,
        "mde": 0.02,
        "control": 1000.0,
        "value": 1000 * (1 + effect),
    }
    arm = {
        "source": "synthetic",
        "fingerprint": "sha256:" + "a" * 64,
        "argv": ["vllm", "serve", "m"],
        "env": {},
    }
    return {
        "name": f"experiment-{n}",
        "spec": "experiments/x.yaml",
        "spec_sha256": "sha256:" + "b" * 64,
        "box": rng.choice(BOXES),
        "run_id": f"run-{n}",
        "points": [1, 2, 4, 8, 16, 32],
        "repeats": 3,
        "arms": {"control": arm, "candidate": arm},
        "bars": [bar],
        "method": "rl-verdict/1",
    }


class Bar:
    """A rich progress bar fed by build_site's (stage, done, total) callback."""

    def __init__(self, enabled: bool):
        self.progress = Progress(
            TextColumn("{task.description:>8}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            disable=not enabled,
        )
        self.tasks: dict[str, int] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=total)
        self.progress.update(self.tasks[stage], completed=done)


def cpu_seconds() -> tuple[float, float]:
    """(this process, its finished children): user + system CPU seconds so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def timed_build(label: str, project: Path, out: Path, progress: bool) -> None:
    bar = Bar(progress)
    own0, children0 = cpu_seconds()
    with bar.progress:
        report = build_site(project, out, progress=bar)
    own1, children1 = cpu_seconds()
    largest = max((p for p in out.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    print(
        f"{label}: {report.seconds:.1f} s wall, {own1 - own0:.1f} s CPU + {children1 - children0:.1f} s CPU "
        f"in builder workers, load average {os.getloadavg()[0]:.1f}, for {report.recipes:,} recipes and "
        f"{report.entries:,} entries -> {report.pages:,} pages, {report.files:,} files, "
        f"{report.bytes / 1e6:.1f} MB; largest {largest.relative_to(out)} "
        f"{largest.stat().st_size / 1e6:.2f} MB"
        + (f" ({len(report.broken_recipes)} recipes do not load)" if report.broken_recipes else "")
        + ("" if largest.stat().st_size < 2_000_000 else "  ** over 2 MB **")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None, help="Work in DIR (default: a temporary folder).")
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(f"site_build on {os.cpu_count()} cores, work dir {tmp}")
        timed_build("this repository", REPO, Path(tmp) / "repo-site", args.progress)
        project = Path(tmp) / "synthetic"
        rng = random.Random(11)
        started = time.perf_counter()
        write_recipes(project, args.recipes, rng)
        write_ledger(project, args.entries, args.recipes, rng)
        print(f"(synthetic project written in {time.perf_counter() - started:.1f} s)")
        timed_build("synthetic", project, project / "site", args.progress)


if __name__ == "__main__":
    main()
