"""How much wall time does `ledger run` add over doing the same launches and benchmark calls by hand?

In a scratch copy of the repository (so the real ledger is untouched) this
  1. records a calibration for the experiment first (`ledger calibrate`, not timed), so that the
     timed run reuses it instead of adding A/A launches;
  2. times `ledger run EXPERIMENT`;
  3. writes and times a shell script that does the same thing by hand: for each (arm, repeat) of
     the same ABBA schedule, start `vllm serve` with the same argv and environment, poll /health,
     run `vllm bench serve` for each point with the same options and seeds, stop the server;
and prints both wall times and their ratio (goal: at most 1.05; 1.03 in issue 18, and a tail test
within 5% of its client run by hand in issue 13: `--experiment experiments/examples/tiny-tail.yaml`).

    .venv/bin/python benchmarks/run_overhead.py [--experiment experiments/examples/tiny-batching.yaml]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.instruments import tail, vllm_bench
from recipe_ledger.instruments.base import MeasureContext
from recipe_ledger.pipeline.plan import plan_run
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


def by_hand_script(plan, out_dir: Path) -> str:
    """The same launches and client calls as `ledger run`, written as a plain shell script."""
    server = plan.experiment.server
    lines = ["set -e"]
    for arm_name, repeat in plan.schedule:
        arm = plan.arms[arm_name]
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in arm.env.items())
        lines.append(f"env {env} {shlex.join(arm.argv)} > {out_dir}/{arm_name}-{repeat}.log 2>&1 & pid=$!")
        lines.append(f"until curl -sf http://{server.host}:{server.port}/health >/dev/null; do sleep 1; done")
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
        lines.append("kill $pid; wait $pid || true")
        lines.append(
            f"while curl -sf http://{server.host}:{server.port}/health >/dev/null; do sleep 0.2; done"
        )
    return "\n".join(lines) + "\n"


def timed(argv: list[str], cwd: Path) -> float:
    start = time.monotonic()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--experiment", default="experiments/examples/tiny-batching.yaml")
    args = parser.parse_args()
    ledger = [str(REPO / ".venv" / "bin" / "ledger")]
    with tempfile.TemporaryDirectory() as tmp:
        root = scratch_repo(Path(tmp))
        spec = root / args.experiment
        print("calibrating first (not timed)...", flush=True)
        subprocess.run(
            [*ledger, "calibrate", str(spec), "--root", str(root)], check=True, stdout=subprocess.DEVNULL
        )
        tool_s = timed([*ledger, "run", str(spec), "--root", str(root), "--no-mlflow"], root)
        plan = plan_run(spec, load_experiment(spec), RecipeRoot(root / "recipes"), root)
        out_dir = Path(tmp) / "by-hand"
        out_dir.mkdir()
        script = Path(tmp) / "by_hand.sh"
        script.write_text(by_hand_script(plan, out_dir))
        hand_s = timed(["bash", str(script)], root)
    print(f"ledger run:  {tool_s:7.1f} s")
    print(f"by hand:     {hand_s:7.1f} s")
    print(f"ratio:       {tool_s / hand_s:7.3f}  (goal: at most 1.05)")


if __name__ == "__main__":
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    main()
