"""Fuzz the spec readers: mutated recipes and experiments through the CLI, each in a child process
with CPU, memory and wall-clock limits; prints how many ended ok, with a clean error, with a
traceback, or ran away.

    .venv/bin/python benchmarks/fuzz_inputs.py [--recipes 3000] [--experiments 1000] [--seed 1]

A case is one seed file (a real recipe under recipes/ or ../shared/compat/vllm-recipes/, a real
experiment under experiments/) with one to three mutations (duplicate keys, alias bombs,
recursive anchors, huge integers, impossible dates, unknown tags, deleted or doubled lines,
swapped types, unicode, square-bracket text, long strings, bogus numbers, truncation, deep
nesting, bytes that are not UTF-8; and issue 26's shapes: format-spec bombs in command
templates, a giant hypothesis, a mapping inside an arg list, terminal escapes and line separators,
50,000-item lists). Each recipe runs ``recipe show``, ``recipe command`` and ``recipe lint``; each
experiment runs ``run --plan``, and one in four also ``calibrate`` (which must write no entry for a
bad spec: the scratch ledger is counted at the end).

Children are forked from this process after the package is imported, so a case costs its own
work, not the interpreter's start-up; each sets RLIMIT_AS (memory) and RLIMIT_CPU before it
runs. Outcomes: ok (exit 0), clean (exit 2 or 3, one line on stderr, no traceback), traceback
(anything else that exited), runaway (killed by a limit or the wall-clock deadline).

The mutator (``mutate``) and the child runner (``run_limited``) are also what
tests/unit/test_fuzz_inputs.py uses for its few hundred cases.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_RECIPES = REPO.parent / "shared" / "compat" / "vllm-recipes"

# -- the mutator ---------------------------------------------------------------------------------

BILLION_LAUGHS = 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + "".join(
    f"l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]\n" for n in range(1, 10)
)
ODD_SCALARS = [
    "9" * 5000,
    "-" + "7" * 4400,
    "2024-02-30",
    "2024-13-01",
    "2024-02-29T25:61:61Z",
    "0x_",
    "0b",
    "1_",
    "!!int abc",
    "!!float x",
    "!!bool maybe",
    "!!timestamp soon",
    "!!binary '%%%'",
    "!!set [a]",
    "!!omap x",
    "!!str [a]",
    "!nope x",
    "!!python/object:os.system x",
    ".nan",
    "-.inf",
    "1e999",
    "-1",
    "0",
    "99999999999999999999",
    "100000000",
    "0x7fffffff",
    "-0.0",
    "1e-400",
]
ODD_VALUES = [
    "[1]",
    "{a: 1}",
    "null",
    "true",
    "'text'",
    "1.5",
    "[]",
    "{}",
    '"[/THINK] [link=https://evil.example]click[/link] [bold red]x"',
    "'[/]'",
    '"\\u202e\\u200b\\U0001F600 ünï\\x00"',
    '"\\x1b[31mred\\x1b[0m"',
    '"../../../../X"',
    '"/abs"',
    "*undefined_alias",
    "&anchor_only",
    "&r [*r]",
    "[" * 80 + "]" * 80,
    "{",
    "'unterminated",
    "|\n  block\n   text",
]


def _long_string(rng: random.Random) -> str:
    return '"' + rng.choice("xy[]/é") * rng.choice([300, 5_000, 100_000]) + '"'


def _value_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if ":" in line and not line.lstrip().startswith("#")]


def _replace_value(lines: list[str], rng: random.Random, value: str) -> None:
    candidates = _value_lines(lines)
    if not candidates:
        lines.append(f"extra: {value}")
        return
    i = rng.choice(candidates)
    key = lines[i].split(":", 1)[0]
    lines[i] = f"{key}: {value}"


def _duplicate_key(lines: list[str], rng: random.Random) -> None:
    candidates = [i for i in _value_lines(lines) if not lines[i].lstrip().startswith("-")]
    if candidates:
        i = rng.choice(candidates)
        key = lines[i].split(":", 1)[0]
        lines.insert(i + 1, f"{key}: {rng.choice(['50', 'x', '[1]', '{}'])}")


def _delete_line(lines: list[str], rng: random.Random) -> None:
    if lines:
        del lines[rng.randrange(len(lines))]


def _double_line(lines: list[str], rng: random.Random) -> None:
    if lines:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])


def _reindent(lines: list[str], rng: random.Random) -> None:
    if lines:
        i = rng.randrange(len(lines))
        lines[i] = " " * rng.choice([0, 1, 3, 7, 40]) + lines[i].lstrip()


def _truncate(lines: list[str], rng: random.Random) -> None:
    text = "\n".join(lines)
    cut = rng.randrange(len(text) + 1)
    lines[:] = text[:cut].split("\n")


def _insert_unicode(lines: list[str], rng: random.Random) -> None:
    if lines:
        i = rng.randrange(len(lines))
        at = rng.randrange(len(lines[i]) + 1)
        junk = rng.choice(["\u202e", "\u200b", "\U0001f600", "\ufeff", "\x07", "\t", "\x85", "\u2028", "é"])
        lines[i] = lines[i][:at] + junk + lines[i][at:]


# Issue 26's shapes: what passed the readers and then broke a run, a record or a terminal.
FORMAT_BOMBS = [
    "{arm:>1500000000}",
    "{seed:0>999999999}",
    "{point:.999999999f}",
    "{arm!r:^2000000000}",
    "{arm.__class__}",
]
CONTROL_TEXT = [
    "\x1b[31m",
    "\x1b]8;;https://evil.example\x07",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\x85",
    "\x9b2J",
    "\x07",
]


def _format_bomb(lines: list[str], rng: random.Random) -> None:
    """A command template's field with a width or precision bomb (else a value that holds one)."""
    bomb = rng.choice(FORMAT_BOMBS)
    fields = [
        i for i, line in enumerate(lines) if re.search(r"\{(arm|seed|point|out|base_url|[a-z_]+)\}", line)
    ]
    if fields:
        i = rng.choice(fields)
        lines[i] = re.sub(r"\{[a-z_]+\}", bomb.replace("\\", "\\\\"), lines[i], count=1)
    else:
        _replace_value(lines, rng, f'"{bomb}"')


def _giant_text(lines: list[str], rng: random.Random) -> None:
    """A hypothesis (or description) far past what an entry holds, ASCII or escaped on storage."""
    text = rng.choice(["x", "é", "\U0001f600"]) * rng.choice([17_000, 20_000])
    keys = [i for i, line in enumerate(lines) if re.match(r"\s*(hypothesis|description|title):", line)]
    if keys:
        i = rng.choice(keys)
        key = lines[i].split(":", 1)[0]
        # A folded block (hypothesis: >) keeps its indented lines after it: they would be a syntax
        # error, not the size this case is about, so the value goes on the key's own line quoted.
        while i + 1 < len(lines) and lines[i + 1].startswith(key.replace(key.lstrip(), "") + "  "):
            del lines[i + 1]
        lines[i] = f'{key}: "{text}"'
    else:
        _replace_value(lines, rng, f'"{text}"')


def _mapping_in_args(lines: list[str], rng: random.Random) -> None:
    """A mapping (or list, or null) as an item of an arg list, where one is; else a new one."""
    item = rng.choice(["{a: 1}", "{--max-num-seqs: 8}", "[--x, 1]", "null", "{}"])
    starts = [
        i
        for i, line in enumerate(lines)
        if re.match(r"\s*(extra_args|args|base_args|vllm_args|argv|command):\s*$", line)
    ]
    if starts:
        i = rng.choice(starts)
        indent = len(lines[i + 1]) - len(lines[i + 1].lstrip()) if i + 1 < len(lines) else 2
        lines.insert(i + 1, " " * max(indent, 2) + f"- {item}")
    else:
        top = [i for i, line in enumerate(lines) if re.match(r"(model|control|variants):\s*$", line)]
        at = rng.choice(top) + 1 if top else len(lines)
        lines[at:at] = ["  extra_args:", f"    - {item}"]


def _control_chars(lines: list[str], rng: random.Random) -> None:
    """Terminal escapes, line separators and a BOM inside a value (quoted, so YAML keeps them)."""
    junk = "".join(rng.choice(CONTROL_TEXT) for _ in range(rng.randint(1, 4)))
    escaped = junk.encode("unicode_escape").decode("ascii").replace('"', '\\"')
    _replace_value(lines, rng, f'"bad{escaped}name"')


def _huge_list(lines: list[str], rng: random.Random) -> None:
    """A 50,000-item list where a list goes (args, points, features) or any value."""
    item = rng.choice(["--x", "1", "a", "{a: 1}", "--max-num-seqs=8"])
    flow = "[" + ", ".join([item] * 50_000) + "]"
    lists = [i for i, line in enumerate(lines) if re.match(r"\s*[a-z_]+:\s*\[", line)]
    if lists and rng.random() < 0.7:
        i = rng.choice(lists)
        lines[i] = lines[i].split(":", 1)[0] + ": " + flow
    else:
        _replace_value(lines, rng, flow)


MUTATIONS: dict[str, Callable[[list[str], random.Random], None]] = {
    "duplicate key": _duplicate_key,
    "alias bomb": lambda lines, rng: lines.insert(0, BILLION_LAUGHS.rstrip("\n")),
    "recursive anchor": lambda lines, rng: _replace_value(lines, rng, "&rec [*rec]"),
    "odd scalar": lambda lines, rng: _replace_value(lines, rng, rng.choice(ODD_SCALARS)),
    "swapped type": lambda lines, rng: _replace_value(lines, rng, rng.choice(ODD_VALUES)),
    "long string": lambda lines, rng: _replace_value(lines, rng, _long_string(rng)),
    "deleted line": _delete_line,
    "doubled line": _double_line,
    "reindented line": _reindent,
    "truncated": _truncate,
    "unicode": _insert_unicode,
    "format-spec bomb": _format_bomb,
    "giant text": _giant_text,
    "mapping in args": _mapping_in_args,
    "control chars": _control_chars,
    "50,000-item list": _huge_list,
}


def mutate(text: str, rng: random.Random) -> tuple[str, list[str]]:
    """``text`` with one to three random mutations, and their names."""
    lines = text.split("\n")
    names = [rng.choice(list(MUTATIONS)) for _ in range(rng.choice([1, 1, 2, 3]))]
    for name in names:
        MUTATIONS[name](lines, rng)
    return "\n".join(lines), names


def mutated_bytes(text: str, rng: random.Random) -> tuple[bytes, list[str]]:
    """Like ``mutate``; one case in 40 also gets bytes that are not UTF-8."""
    out, names = mutate(text, rng)
    data = out.encode("utf-8", errors="surrogatepass")
    if rng.random() < 1 / 40:
        at = rng.randrange(len(data) + 1)
        data = data[:at] + b"\xff\xfe\xc3" + data[at:]
        names.append("not utf-8")
    return data, names


# -- running one case in a limited child ---------------------------------------------------------


@dataclass
class Outcome:
    kind: str  # ok | clean | traceback | runaway
    code: int | None
    output: str


def _vm_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _child(args: list[str], out_fd: int, cwd: Path, cpu_s: int, extra_mem: int) -> None:
    """Runs in the forked child: limits, then the CLI in-process; never returns."""
    code = 1
    try:
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        # New streams on the redirected descriptors: a parent such as pytest may have replaced
        # sys.stdout and sys.stderr with objects that do not write to fds 1 and 2.
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)
        os.chdir(cwd)
        resource.setrlimit(resource.RLIMIT_AS, (_vm_bytes() + extra_mem,) * 2)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        from recipe_ledger.cli import main
        from recipe_ledger.recipes.corpus import load_corpus

        # A fork inherits the parent's per-process recipe cache (a test that loaded this root
        # in-process): a fresh `ledger` reads the files as they are now, and so must the case.
        load_corpus.cache_clear()
        try:
            main.main(args, prog_name="ledger", standalone_mode=True)
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except MemoryError:
        os.write(2, b"MemoryError\n")
        code = 137
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def preload() -> None:
    """Import every command module once, here: each forked child then inherits them, and a case
    costs 0.01-0.1 s of CPU instead of 0.2-0.4 s of imports."""
    from recipe_ledger import cli

    for command in cli.COMMANDS.values():
        cli.load_command(command.target)


def run_limited(
    args: list[str], cwd: Path = REPO, cpu_s: int = 20, extra_mem: int = 1 << 30, wall_s: float = 90
) -> Outcome:
    """``ledger ARGS`` in a forked child with CPU, memory and wall-clock limits."""
    with tempfile.TemporaryFile() as out:
        pid = os.fork()
        if pid == 0:
            _child(args, out.fileno(), cwd, cpu_s, extra_mem)
        status = _wait(pid, wall_s)
        out.seek(0)
        text = out.read().decode("utf-8", errors="replace")
    return classify(status, text)


def _wait(pid: int, wall_s: float) -> int | None:
    """The child's wait status, or None when it outlived ``wall_s`` (then it is killed)."""
    deadline = time.monotonic() + wall_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def classify(status: int | None, output: str) -> Outcome:
    if status is None or os.WIFSIGNALED(status):
        return Outcome("runaway", None, output)
    code = os.WEXITSTATUS(status)
    if code == 137 or "MemoryError" in output or "RecursionError" in output:
        return Outcome("runaway", code, output)
    if "Traceback" in output:
        return Outcome("traceback", code, output)
    if code == 0:
        return Outcome("ok", code, output)
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    if code in (2, 3) and len(errors) == 1:
        return Outcome("clean", code, output)
    return Outcome("traceback", code, output)  # an unexplained exit: count it against us


# -- the corpus ----------------------------------------------------------------------------------


def make_root(scratch: Path, with_shared: bool) -> Path:
    """A scratch project: this repository's recipes/ and experiments/ (and the upstream models)."""
    root = scratch / "project"
    shutil.copytree(REPO / "recipes", root / "recipes")
    shutil.copytree(REPO / "experiments", root / "experiments")
    if with_shared and SHARED_RECIPES.is_dir():
        shutil.copytree(SHARED_RECIPES / "models", root / "recipes" / "models", dirs_exist_ok=True)
    (root / "ledger").mkdir()
    return root


def recipe_seeds(root: Path) -> list[Path]:
    return sorted((root / "recipes" / "models").rglob("*.yaml"))


def experiment_seeds(root: Path) -> list[Path]:
    return sorted((root / "experiments").rglob("*.yaml"))


def recipe_commands(root: Path, ref: str, hardware: str) -> list[list[str]]:
    recipes = str(root / "recipes")
    path = str(root / "recipes" / ref)
    return [
        ["recipe", "show", path, "--recipes", recipes],
        ["recipe", "command", path, "--hardware", hardware, "--recipes", recipes],
        ["recipe", "lint", path, "--recipes", recipes],
    ]


def hardware_of(text: str) -> str:
    """A hardware id the unmutated recipe names, so ``recipe command`` gets past the taxonomy."""
    for hardware in ("cpu_x86", "h200", "b200", "h100", "mi300x", "gb300", "b300"):
        if f"{hardware}:" in text or f"- {hardware}" in text:
            return hardware
    return "h200"


# -- the benchmark -------------------------------------------------------------------------------


def _fuzz(
    seeds: list[Path],
    count: int,
    rng: random.Random,
    commands: Callable[[Path, str], list[list[str]]],
    cwd: Path,
    after_refusal: Callable[[Path], list[str]] | None = None,
) -> tuple[collections.Counter[str], list[tuple[str, list[str], Outcome]]]:
    """``count`` mutated seeds through ``commands``; ``after_refusal(seed)``: a command run as
    well when the last one refused the case cleanly (``calibrate`` after ``run --plan``: a refusal
    before any launch, so it launches nothing and must write nothing)."""
    tally: collections.Counter[str] = collections.Counter()
    bad: list[tuple[str, list[str], Outcome]] = []
    for n in range(count):
        seed = seeds[n % len(seeds)]
        original = seed.read_text(encoding="utf-8")
        data, names = mutated_bytes(original, rng)
        seed.write_bytes(data)
        try:
            outcome = None
            for args in commands(seed, original):
                outcome = run_limited(args, cwd=cwd)
                tally[outcome.kind] += 1
                if outcome.kind in ("traceback", "runaway"):
                    bad.append((str(seed), names, outcome))
            if after_refusal is not None and outcome is not None and outcome.kind == "clean":
                followed = run_limited(after_refusal(seed), cwd=cwd)
                tally[f"then {followed.kind}"] += 1
                if followed.kind in ("traceback", "runaway", "ok"):
                    bad.append((str(seed), [*names, "then calibrate"], followed))
        finally:
            seed.write_text(original, encoding="utf-8")
    return tally, bad


def ledger_lines(root: Path) -> int:
    """Entries in the scratch project's ledger: the cases must have written none."""
    return sum(len(path.read_bytes().splitlines()) for path in (root / "ledger").glob("*.jsonl"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", type=int, default=3000, help="mutated recipes (x3 commands)")
    parser.add_argument("--experiments", type=int, default=1000, help="mutated experiments (run --plan)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-shared", action="store_true", help="only this repository's recipes as seeds")
    parser.add_argument("--show", type=int, default=5, help="print the first N bad cases")
    options = parser.parse_args()
    preload()
    rng = random.Random(options.seed)
    with tempfile.TemporaryDirectory(prefix="ledger-fuzz-") as scratch:
        root = make_root(Path(scratch), with_shared=not options.no_shared)
        os.chdir(root)
        from recipe_ledger.ledger.store import Ledger

        Ledger.init(root)  # calibrate needs a ledger: the cases it refuses must leave it empty
        results = {}
        started = time.perf_counter()
        results["recipes"] = _fuzz(
            recipe_seeds(root),
            options.recipes,
            rng,
            lambda seed, text: recipe_commands(
                root, str(seed.relative_to(root / "recipes")), hardware_of(text)
            ),
            root,
        )
        results["experiments"] = _fuzz(
            experiment_seeds(root),
            options.experiments,
            rng,
            lambda seed, text: [["run", "--plan", str(seed), "--root", str(root)]],
            root,
            after_refusal=lambda seed: ["calibrate", str(seed), "--root", str(root)],
        )
        elapsed = time.perf_counter() - started
        written = ledger_lines(root)
    for what, (tally, bad) in results.items():
        runs = sum(n for kind, n in tally.items() if not kind.startswith("then "))
        # Text in square brackets read as rich markup is issue 14's "Markup" part, not a reader's:
        # counted among the tracebacks, and named apart so that each part's figure is visible.
        markup = sum(1 for _, _, outcome in bad if "rich.errors.MarkupError" in outcome.output)
        print(
            f"{what}: {runs} runs: ok {tally['ok']}, clean errors {tally['clean']}, "
            f"tracebacks {tally['traceback']} ({markup} of them rich markup errors), "
            f"runaways {tally['runaway']}"
        )
        then = {kind[5:]: n for kind, n in tally.items() if kind.startswith("then ")}
        if then:
            print(
                f"  calibrate after each clean refusal: {sum(then.values())} runs: clean errors "
                f"{then.get('clean', 0)}, tracebacks {then.get('traceback', 0)}, runaways "
                f"{then.get('runaway', 0)}, exit 0 {then.get('ok', 0)}"
            )
        for seed, names, outcome in bad[: options.show]:
            tail = " | ".join(outcome.output.strip().splitlines()[-3:])[:400]
            print(f"  {outcome.kind} (exit {outcome.code}) {Path(seed).name} {names}: {tail}")
    print(f"ledger entries the cases wrote: {written}")
    print(f"seed {options.seed}, {elapsed:.0f} s")
    return 0 if all(not bad for _, bad in results.values()) and not written else 1


if __name__ == "__main__":
    sys.exit(main())
