"""How much wall time does `ledger run` add over doing the same launches and client calls by hand,
and in which steps?

In a scratch copy of the repository (so the real ledger is untouched) this
  1. records a calibration for the experiment first (`ledger calibrate`, not timed), so that the
     timed runs reuse it instead of adding A/A launches;
  2. writes a shell script that does the same thing by hand: for each (arm, repeat) of the same
     ABBA schedule, start the server with the same argv and environment, poll /health every second
     (the tool backs off to the same second), run the client for each point with the same options
     and seeds, stop the server; the script stamps each step (boot, client, teardown);
  3. runs `--pairs` pairs of (`ledger run EXPERIMENT`, the script), alternating which goes first,
     and prints each pair's wall times and ratio, the median ratio, and the median seconds per step
     of both: the tool's own steps (planning, warm-up, cache resets, counter scrapes, records,
     verdict; from the run's `timings.json`) next to the steps both take.
Goal: at most 1.03 (issue 18, tiny-batching) and a tail test within 5% of its client by hand
(issue 13: `--experiment experiments/examples/tiny-tail.yaml`).

    .venv/bin/python benchmarks/run_overhead.py [--pairs 3] \\
        [--experiment experiments/examples/tiny-batching.yaml]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.instruments import tail, vllm_bench
from recipe_ledger.instruments.base import MeasureContext
from recipe_ledger.pipeline.plan import RunPlan, plan_run
from recipe_ledger.pipeline.steps import SHARED_STEPS
from recipe_ledger.recipes.catalog import RecipeRoot

REPO = Path(__file__).resolve().parents[1]


def scratch_repo(tmp: Path) -> Path:
    root = tmp / "repo"
    for name in ("recipes", "experiments", "ledger"):
        shutil.copytree(REPO / name, root / name)
    (root / ".cache").symlink_to(REPO / ".cache")
    (root / ".venv-serve").symlink_to(REPO / ".venv-serve")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=b@b", "-c", "user.name=b", "commit", "-qm", "x"],
        check=True,
    )
    return root


STAMP = 'mark() { echo "$1 $(date +%s.%N)" >> "$STAMPS"; }'


def by_hand_script(plan: RunPlan, out_dir: Path) -> str:
    """The same launches and client calls as `ledger run`, written as a plain shell script that
    stamps each step into ``$STAMPS`` (a step lasts until the next stamp)."""
    server = plan.experiment.server
    health = f"http://{server.host}:{server.port}/health"
    lines = ["set -e", STAMP]
    for arm_name, repeat in plan.schedule:
        arm = plan.arms[arm_name]
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in arm.env.items())
        lines.append("mark boot")
        lines.append(f"env {env} {shlex.join(arm.argv)} > {out_dir}/{arm_name}-{repeat}.log 2>&1 & pid=$!")
        lines.append(f"until curl -sf {health} >/dev/null; do sleep 1; done")
        lines.append("mark client")
        for point in plan.experiment.points:
            for instrument in plan.experiment.instruments:
                ctx = MeasureContext(
                    arm=arm_name,
                    point=point,
                    repeat=repeat,
                    seed=plan.seed(point, repeat),
                    out_dir=out_dir,
                    base_url=f"http://{server.host}:{server.port}",
                    model_name=arm.served_model,
                    tokenizer=arm.model_dir,
                )
                if instrument.kind not in ("vllm_bench_serve", "tail"):
                    raise SystemExit(f"run_overhead: no by-hand form for a {instrument.kind} instrument")
                options = instrument.options
                if instrument.kind == "tail":  # the tail test is the bench client, sequential
                    options = tail.bench_options(tail.parse_options(options))
                    ctx = dataclasses.replace(ctx, concurrency=1)
                argv = vllm_bench.build_argv(
                    plan.engine_bin,
                    options,
                    ctx,
                    out_dir / f"{arm_name}-{repeat}-{point}-{instrument.name}.json",
                )
                lines.append(f"VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 {shlex.join(argv)} > /dev/null 2>&1")
        lines.append("mark teardown")
        lines.append("kill $pid; wait $pid || true")
        lines.append(f"while curl -sf {health} >/dev/null; do sleep 0.2; done")
    lines.append("mark end")
    return "\n".join(lines) + "\n"


def stamped_steps(stamps: Path) -> dict[str, float]:
    """Seconds per step from the script's stamps: each step lasts until the next stamp."""
    marks = [line.split() for line in stamps.read_text().splitlines()]
    steps: dict[str, float] = {}
    for (name, start), (_, end) in zip(marks, marks[1:], strict=False):
        steps[name] = steps.get(name, 0.0) + float(end) - float(start)
    return steps


def timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    start = time.monotonic()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.monotonic() - start


def tool_steps(root: Path, before: set[Path]) -> dict[str, float]:
    """Seconds per step of the run `ledger run` just made (its run folder's timings.json)."""
    (run_dir,) = set((root / "runs").iterdir()) - before
    steps = json.loads((run_dir / "timings.json").read_text())["steps"]
    return {name: step["s"] for name, step in steps.items()}


@dataclass
class Pair:
    tool_s: float
    hand_s: float
    tool_steps: dict[str, float]
    hand_steps: dict[str, float]

    @property
    def ratio(self) -> float:
        return self.tool_s / self.hand_s


def measure_pair(
    ledger: list[str], root: Path, spec: Path, script: Path, tmp: Path, tool_first: bool
) -> Pair:
    def tool() -> tuple[float, dict[str, float]]:
        (root / "runs").mkdir(exist_ok=True)
        before = set((root / "runs").iterdir())
        seconds = timed([*ledger, "run", str(spec), "--root", str(root), "--no-mlflow"], root)
        return seconds, tool_steps(root, before)

    def hand() -> tuple[float, dict[str, float]]:
        stamps = tmp / "stamps"
        stamps.unlink(missing_ok=True)
        seconds = timed(["bash", str(script)], root, env={**os.environ, "STAMPS": str(stamps)})
        return seconds, stamped_steps(stamps)

    if tool_first:
        (tool_s, t_steps), (hand_s, h_steps) = tool(), hand()
    else:
        (hand_s, h_steps), (tool_s, t_steps) = hand(), tool()
    return Pair(tool_s, hand_s, t_steps, h_steps)


def step_table(pairs: list[Pair]) -> list[str]:
    """Median seconds per step of both, and what lies outside the steps (start-up, imports, exit)."""
    names = list(dict.fromkeys(n for p in pairs for n in p.tool_steps))
    rows = [
        (n, [p.tool_steps.get(n, 0.0) for p in pairs], [p.hand_steps.get(n, 0.0) for p in pairs])
        for n in names
    ]
    rows.append(
        (
            "outside the steps",
            [p.tool_s - sum(p.tool_steps.values()) for p in pairs],
            [p.hand_s - sum(p.hand_steps.values()) for p in pairs],
        )
    )
    out = [f"{'step (median s)':<22}{'ledger run':>12}{'by hand':>10}{'difference':>12}"]
    for name, tool_values, hand_values in sorted(rows, key=lambda r: r[0] not in SHARED_STEPS):
        tool_m = statistics.median(tool_values)
        hand_m = statistics.median(hand_values)  # 0 for the tool's own steps: the script has none
        out.append(f"{name:<22}{tool_m:>12.2f}{hand_m:>10.2f}{tool_m - hand_m:>+12.2f}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--experiment", default="experiments/examples/tiny-batching.yaml")
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    ledger = [str(REPO / ".venv" / "bin" / "ledger")]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        root = scratch_repo(tmp)
        spec = root / args.experiment
        print("calibrating first (not timed)...", flush=True)
        subprocess.run(
            [*ledger, "calibrate", str(spec), "--root", str(root)], check=True, stdout=subprocess.DEVNULL
        )
        plan = plan_run(spec, load_experiment(spec), RecipeRoot(root / "recipes"), root)
        out_dir = tmp / "by-hand"
        out_dir.mkdir()
        script = tmp / "by_hand.sh"
        script.write_text(by_hand_script(plan, out_dir))
        pairs = []
        for index in range(args.pairs):
            pair = measure_pair(ledger, root, spec, script, tmp, tool_first=index % 2 == 0)
            pairs.append(pair)
            print(
                f"pair {index + 1}: ledger run {pair.tool_s:7.1f} s, by hand {pair.hand_s:7.1f} s, "
                f"ratio {pair.ratio:.3f}",
                flush=True,
            )
    print(f"{args.experiment}: {len(plan.schedule)} launches a run, {args.pairs} pairs, alternating order")
    print(f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print("\n".join(step_table(pairs)))
    ratios = [p.ratio for p in pairs]
    spread = f"pairs {min(ratios):.3f}-{max(ratios):.3f}"
    print(f"median ratio {statistics.median(ratios):.3f} ({spread}; goal: at most 1.03)")


if __name__ == "__main__":
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    main()
