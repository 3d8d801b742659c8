"""Start-up CPU of `ledger --help`, `ledger log` and `ledger verify` against `python -c "import click,
pydantic"` (issue 18: each at most 3x).

Each command runs as a fresh process, the commands interleaved round by round (a noisy shared box
slows all of them alike within a round) after one warm-up round; a process's CPU is its user +
system time from wait4. The package's bytecode is cached (in a temporary PYTHONPYCACHEPREFIX, as
an installed package has it), even where PYTHONDONTWRITEBYTECODE is set: otherwise every run would
compile the tool's modules and time the compiler.
Prints each command's median CPU and its ratio to the baseline's median, and exits 1 when a ratio
is over --limit. `--imports CMD` prints the slowest imports of one command (python -X importtime).

    python benchmarks/cli_startup.py [--rounds 15] [--root .] [--limit 3.0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BASELINE = "import click, pydantic"
COMMANDS = {
    "ledger --help": ["--help"],
    "ledger log": ["log"],
    "ledger verify": ["verify"],
}


def cached_bytecode_env(pycache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def cpu_seconds(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    """User + system CPU of one run of ``argv`` (output discarded; a failure is an error)."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{' '.join(argv)} exited {process.returncode}: {process.stderr.read().decode()}")
    process.stderr.close()
    return usage.ru_utime + usage.ru_stime


def ledger_argv(args: list[str], root: Path) -> list[str]:
    # The console script's own code path: import recipe_ledger.cli, call main.
    run = "import sys; from recipe_ledger.cli import main; sys.exit(main())"
    extra = [] if args == ["--help"] else ["--root", str(root)]
    return [sys.executable, "-c", run, *args, *extra]


def measure(rounds: int, root: Path, env: dict[str, str]) -> dict[str, list[float]]:
    runs: dict[str, list[float]] = {"baseline": [], **{name: [] for name in COMMANDS}}
    for number in range(rounds + 1):  # round 0 warms the file and bytecode caches, not counted
        base = cpu_seconds([sys.executable, "-c", BASELINE], root, env)
        timed = {name: cpu_seconds(ledger_argv(args, root), root, env) for name, args in COMMANDS.items()}
        if number:
            runs["baseline"].append(base)
            for name, seconds in timed.items():
                runs[name].append(seconds)
    return runs


def slowest_imports(args: list[str], root: Path, top: int = 15) -> list[tuple[int, str]]:
    """``[(cumulative µs, module)]`` of the top-level imports of one command, slowest first."""
    with tempfile.TemporaryDirectory(prefix="ledger-startup-") as pycache:
        env = cached_bytecode_env(Path(pycache))
        argv = [sys.executable, "-X", "importtime", *ledger_argv(args, root)[1:]]
        subprocess.run(argv, cwd=root, env=env, capture_output=True)  # fills the bytecode cache
        done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        if not name.startswith("  "):  # top level only: the cumulative times do not overlap
            rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:top]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--limit", type=float, default=3.0)
    parser.add_argument("--imports", choices=sorted(COMMANDS), help="print this command's slowest imports")
    args = parser.parse_args()
    if args.imports:
        for micros, name in slowest_imports(COMMANDS[args.imports], args.root):
            print(f"{micros / 1000:8.1f} ms  {name}")
        return 0
    with tempfile.TemporaryDirectory(prefix="ledger-startup-") as pycache:
        runs = measure(args.rounds, args.root, cached_bytecode_env(Path(pycache)))
    base = statistics.median(runs["baseline"])
    load = os.getloadavg()[0]
    print(f"{args.rounds} rounds, load average {load:.2f}, cached bytecode; CPU medians (user + sys)")
    print(f"  {'python -c ' + repr(BASELINE):<40} {base * 1000:7.1f} ms  1.00x")
    worst = 0.0
    for name in COMMANDS:
        median = statistics.median(runs[name])
        worst = max(worst, median / base)
        print(f"  {name:<40} {median * 1000:7.1f} ms  {median / base:.2f}x")
    print(f"worst ratio {worst:.2f}x (limit {args.limit:.1f}x)")
    return 0 if worst <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
