"""CPU of `ledger recipe render --batch` against recipes.vllm.ai's own command builder, side by side.

Both resolve the same case file (every command case of ../shared/compat/expected-commands.jsonl,
its expected results stripped) as whole processes, in turn, N pairs; the order inside a pair
alternates (ABBA) so that drift in the machine's load does not favour either. CPU is user+sys of
each child from os.wait4. Every run's output is parsed and compared line by line with the other
tool's: the figures only count if the outputs are identical.

    .venv/bin/python benchmarks/resolve_vs_reference.py [--pairs 5] [--compat ../shared/compat]

The reference is ../shared/compat/reference-builder (upstream command-synthesis.js plus a small
harness), run with node; the first run copies it to --builder-dir and installs js-yaml 4.1.1 there
with npm. The ledger side runs `python -m recipe_ledger.cli` from this checkout's src/ with a
bytecode cache (as an installed package has), unless --cold-bytecode. Goal: ratio <= 0.8.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
GOAL = 0.8

# --render-only: the render command without `recipe_ledger.cli`'s __init__ (which registers, and so
# imports, every command). An empty package module stands in for it, so the figure shows what the
# command costs once the CLI imports only the command it runs.
RENDER_ONLY = """
import sys, types, importlib.util
package = importlib.util.find_spec("recipe_ledger").submodule_search_locations[0]
cli = types.ModuleType("recipe_ledger.cli")
cli.__path__ = [package + "/cli"]
sys.modules["recipe_ledger.cli"] = cli
from recipe_ledger.cli.recipe import render
render(sys.argv[3:])
"""


@dataclass(frozen=True)
class Run:
    cpu_s: float
    wall_s: float
    output: Path


def run_measured(cmd: list[str], out_path: Path, env: dict[str, str], cwd: Path | None = None) -> Run:
    """Run cmd to completion with stdout to out_path; the CPU (user+sys) of that child alone.

    (No peak memory: on Linux a child's ru_maxrss starts from its parent's RSS at the fork,
    so it would report this script's size rather than the tool's.)"""
    with open(out_path, "wb") as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            sys.exit(f"{cmd[0]} exited {proc.returncode}: {err.read().decode(errors='replace')[-2000:]}")
    return Run(usage.ru_utime + usage.ru_stime, wall, out_path)


def write_cases(compat: Path, path: Path) -> int:
    """The compat command cases without their expected result/error: the input both tools read."""
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        for line in (compat / "expected-commands.jsonl").read_text(encoding="utf-8").splitlines():
            case = {k: v for k, v in json.loads(line).items() if k not in ("result", "error")}
            out.write(json.dumps(case) + "\n")
            count += 1
    return count


def prepare_builder(compat: Path, builder: Path, npm: str) -> None:
    """A writable copy of the reference builder with js-yaml installed (done once)."""
    if (builder / "node_modules" / "js-yaml").is_dir():
        return
    shutil.copytree(compat / "reference-builder", builder, dirs_exist_ok=True)
    for path in [builder, *builder.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)  # the shared copy is read-only
    print(f"installing js-yaml@4.1.1 in {builder} ...", flush=True)
    subprocess.run(
        [npm, "install", "--no-save", "--no-audit", "--no-fund", "js-yaml@4.1.1"], cwd=builder, check=True
    )


def ledger_env(cold_bytecode: bool, pycache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    if not cold_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)  # outside the checkout; reused across runs
    return env


def parsed_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def first_difference(ours: list[dict], theirs: list[dict]) -> str | None:
    if len(ours) != len(theirs):
        return f"{len(ours)} lines against {len(theirs)}"
    for number, (a, b) in enumerate(zip(ours, theirs, strict=True), start=1):
        if a != b:
            return f"case line {number} differs"
    return None


def in_process_seconds(compat: Path, cases_path: Path) -> tuple[float, float, float]:
    """(load, resolve, JSON encode) CPU seconds of the same work inside this process."""
    sys.path.insert(0, str(SRC))
    from recipe_ledger.recipes.corpus import Corpus, resolve_case

    cases = [json.loads(line) for line in cases_path.read_text(encoding="utf-8").splitlines()]
    start = time.process_time()
    corpus = Corpus(compat / "vllm-recipes")
    for path in dict.fromkeys(case["recipe"] for case in cases):
        corpus.recipe(path)
    corpus.strategies, corpus.taxonomy  # noqa: B018 - loaded inside the timed section
    loaded = time.process_time()
    results = [resolve_case(corpus, case) for case in cases]
    resolved = time.process_time()
    for result in results:
        json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    return loaded - start, resolved - loaded, time.process_time() - resolved


def fixed_cost_seconds(cmd: list[str], env: dict[str, str], runs: int = 3) -> float:
    """Median CPU of cmd (the tool's command on an empty case file): startup and imports."""
    samples = []
    for _ in range(runs):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        _, _, usage = os.wait4(proc.pid, 0)
        samples.append(usage.ru_utime + usage.ru_stime)
    return statistics.median(samples)


def tool_version(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compat", type=Path, default=REPO.parent / "shared" / "compat")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--node", default=shutil.which("node") or "/usr/bin/node")
    parser.add_argument("--npm", default=shutil.which("npm") or "npm")
    parser.add_argument(
        "--builder-dir", type=Path, default=Path(tempfile.gettempdir()) / "ledger-reference-builder"
    )
    parser.add_argument("--cold-bytecode", action="store_true", help="compile the package on every run")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="start the render command without the CLI's command registry (see RENDER_ONLY)",
    )
    parser.add_argument(
        "--ledger",
        default=shlex.join([sys.executable, "-m", "recipe_ledger.cli"]),
        help="how to start the tool (a shell-quoted command; default: this python -m recipe_ledger.cli)",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    compat = args.compat.resolve()
    prepare_builder(compat, args.builder_dir, args.npm)
    work = Path(tempfile.mkdtemp(prefix="resolve-vs-reference-"))
    cases = work / "cases.jsonl"
    count = write_cases(compat, cases)
    root = compat / "vllm-recipes"
    env = ledger_env(args.cold_bytecode, work / "pycache")
    ours_cmd = ledger_command(args, cases, root)
    theirs_cmd = [args.node, "scripts/harness.mjs", str(cases), str(root)]

    def ours() -> Run:
        return run_measured(ours_cmd, work / "ours.jsonl", env)

    def theirs() -> Run:
        return run_measured(theirs_cmd, work / "theirs.jsonl", dict(os.environ), cwd=args.builder_dir)

    load_before = os.getloadavg()
    ours(), theirs()  # warm-up, not counted: file cache, bytecode cache
    pairs = measure_pairs(ours, theirs, args.pairs, work)
    load_after = os.getloadavg()
    print(f"cases: {count} (expected-commands.jsonl), {len(pairs)} pairs, ABBA order; outputs identical: yes")
    print(
        f"conditions: {os.cpu_count()} CPUs, load average {load_before[0]:.2f} before / "
        f"{load_after[0]:.2f} after; python {platform.python_version()} "
        f"({'cold' if args.cold_bytecode else 'cached'} bytecode"
        f"{', render command only' if args.render_only else ''}); "
        f"node {tool_version([args.node, '--version'])}"
    )
    report(pairs)
    load, resolve_s, encode = in_process_seconds(compat, cases)
    (work / "empty.jsonl").write_text("")
    fixed = fixed_cost_seconds(ledger_command(args, work / "empty.jsonl", root), env)
    print(
        f"in process: load {load:.3f} s + resolve {resolve_s:.3f} s + JSON {encode:.3f} s; "
        f"the same command on an empty case file (startup + imports): {fixed:.3f} s CPU"
    )
    shutil.rmtree(work, ignore_errors=True)


def ledger_command(args: argparse.Namespace, cases: Path, root: Path) -> list[str]:
    start = [sys.executable, "-c", RENDER_ONLY] if args.render_only else shlex.split(args.ledger)
    return [*start, "recipe", "render", "--batch", str(cases), "--recipes", str(root)]


def measure_pairs(
    ours: Callable[[], Run], theirs: Callable[[], Run], count: int, work: Path
) -> list[tuple[Run, Run]]:
    """(ours, theirs) per pair, alternating which runs first; stops at the first differing output."""
    pairs = []
    for index in range(count):
        if index % 2 == 0:
            a, b = ours(), theirs()
        else:
            b, a = theirs(), ours()
        difference = first_difference(parsed_lines(a.output), parsed_lines(b.output))
        if difference:
            sys.exit(f"outputs differ in pair {index + 1}: {difference} (files under {work})")
        pairs.append((a, b))
    return pairs


def _describe(name: str, runs: list[Run]) -> str:
    cpu, wall = statistics.median(r.cpu_s for r in runs), statistics.median(r.wall_s for r in runs)
    return f"{name:30s} CPU median {cpu:.3f} s (wall {wall:.3f} s)"


def report(pairs: list[tuple[Run, Run]]) -> None:
    ours_runs, theirs_runs = [a for a, _ in pairs], [b for _, b in pairs]
    print(_describe("ledger recipe render --batch:", ours_runs))
    print(_describe("reference builder (node):", theirs_runs))
    print(f"per-pair CPU ratios: {', '.join(f'{a.cpu_s / b.cpu_s:.2f}' for a, b in pairs)}")
    ratio = statistics.median(r.cpu_s for r in ours_runs) / statistics.median(r.cpu_s for r in theirs_runs)
    print(
        f"CPU ratio (median/median): {ratio:.2f}  (goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
