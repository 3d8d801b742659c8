"""The planted-secret corpus through the real pipeline: every kind of secret, planted in every input
the tool reads, searched for in every place it writes; then the project's own record through the
redactor (the false positives).

    .venv/bin/python benchmarks/redaction_corpus.py [--keep DIR]

Inputs (each kind in each, where it can be): an experiment's hypothesis, the arms' argv and env
(values, and keys for the kinds that can be a variable's name), a study arm's params (values and
keys), what a stand-in server prints at boot, what the instrument's client prints, a note, a
retraction's reason, a failure (a server that dies printing them). The shapeless kind (a
DB_PASSWORD of plain words) is planted only where the run knows it: the arm's env, and printed by
the server and the client without its name.

Places: the ledger (ledger/*.jsonl), the run folders (runs/), a run killed with SIGKILL while its
server prints (its folder), the site (``ledger site``), the tables, the MLflow store and artifacts
(``ledger mlflow sync`` into SQLite), and the terminal (everything every command printed, including
``recipe command/show`` of a recipe with a token in its env and description).

Prints the kinds x places that leaked (goal: 0), the false positives on the project's record:
every line of ledger/*.jsonl, recipes/, experiments/, evidence/ and tables/ read through
``redact_text`` and, for JSON, ``redact_obj`` (goal: 0), and the wall time.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))  # the stand-in server and repository the integration tests use

from recipe_ledger.redact import redact_obj, redact_text  # noqa: E402

from helpers import FAKE_SERVER  # noqa: E402
from helpers.net import free_port  # noqa: E402
from helpers.pipeline import commit, ledger, stand_in_repo  # noqa: E402

SHAPELESS = "plain secret words 77"
# kind -> (as planted, the needles that must never come out)
KINDS: dict[str, tuple[str, list[str]]] = {
    "hf token": ("hf_AbCdEfGhIjKlMnOpQrStUv12", ["AbCdEfGhIjKlMnOpQrStUv12"]),
    "github classic": ("ghp_" + "Zq9" * 12, ["Zq9Zq9Zq9Zq9"]),
    "github fine-grained": ("github_pat_11ABCDEFG0123456789_abcdefghijk", ["11ABCDEFG0123456789"]),
    "openai key": ("sk-" + "Kk7" * 12, ["Kk7Kk7Kk7Kk7"]),
    "openai project key": ("sk-proj-Ab12Cd34Ef56", ["Ab12Cd34Ef56"]),
    "stripe live key": ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", ["4eC39HqLyjWDarjtT1zdp7dc"]),
    "pypi token": ("pypi-AgEIcHlwaS5vcmcCJGQ0ZWY3", ["AgEIcHlwaS5vcmcCJGQ0ZWY3"]),
    "nvidia api key": ("nvapi-Qx7Lm2Pz9Rt4Vb8Nc1Kd", ["Qx7Lm2Pz9Rt4Vb8Nc1Kd"]),
    "google oauth": ("ya29.a0AfH6SMBq7Xk2LmNoPq", ["a0AfH6SMBq7Xk2LmNoPq"]),
    "slack token": ("xoxb-123456789012-abcdefghijkl", ["123456789012-abcdefghijkl"]),
    "slack webhook": (
        "https://hooks.slack.com/services/T0AAAA/B0BBBB/WebhookPath1234abcd",
        ["WebhookPath1234abcd"],
    ),
    "aws access key id": ("AKIAIOSFODNN7EXAMPLE", ["AKIAIOSFODNN7EXAMPLE"]),
    "aws secret pair": ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY", ["wJalrXUtnFEMI"]),
    "presigned url": ("https://b.s3.amazonaws.com/o?X-Amz-Signature=5ig0f4b2e9aa77&x=1", ["5ig0f4b2e9aa77"]),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        ["dozjgNryP4J3jVmNHl0w5N"],
    ),
    "pem block": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpQIBAAKCAQEA3Tz2mr7SZiAMfQyu\n-----END RSA PRIVATE KEY-----",
        ["MIIEpQIBAAKCAQEA3Tz2mr7SZiAMfQyu"],
    ),
    "url password": ("https://alice:UrlPassW0rd@models.example.com/m", ["UrlPassW0rd"]),
    "token as url user": ("https://Zq9Tok3nAsUser2026x@github.com/org/repo.git", ["Zq9Tok3nAsUser2026x"]),
    "docker user:pw": ("bob:DockPw99x@registry.example.com/lab/vllm:1", ["DockPw99x"]),
    "dsn": ("dsn=postgres://u:PgPassw0rd77@db/x", ["PgPassw0rd77"]),
    "authorization basic": ("Authorization: Basic dXNlcjpTM2NyM3Q=", ["dXNlcjpTM2NyM3Q"]),
    "authorization bearer": ("Authorization: Bearer opaqueBearerValue123", ["opaqueBearerValue123"]),
    "password pair": ("password: Hunter2Xyz", ["Hunter2Xyz"]),
    "json key pair": ('"api_key": "JsonKey5678"', ["JsonKey5678"]),
    "password flag": ("--password CliPass1234", ["CliPass1234"]),
    "creds name": ("LAB_CREDS=credsValue4242", ["credsValue4242"]),
    "passcode name": ("VAULT_PASSCODE=88127733", ["88127733"]),
    "pw pair": ("pw=plainPw5511", ["plainPw5511"]),
    "prose password": ("the db password is Tr0ub4dorX3", ["Tr0ub4dorX3"]),
    "prose token": ("my token was Zeta9Lambda7Omega", ["Zeta9Lambda7Omega"]),
    "split token": ("hf_SpLiTaAbBcCdD\nEeFfGgHh12345", ["SpLiTaAbBcCdD", "EeFfGgHh12345"]),
    "base64-wrapped": (
        base64.b64encode(b"DB_PASSWORD=b64WrappedPw42").decode(),
        ["REJfUEFTU1dPUkQ9YjY0V3Jh"],
    ),
    "azure storage (detect-secrets)": ("AccountKey=" + "Ab1+" * 22, ["Ab1+Ab1+Ab1+"]),
    "random base64 (entropy)": ("q7Vx2LmN9pRt4KzW8yBc1HsJ6fDg3TaE0uQo5XiY", ["q7Vx2LmN9pRt4KzW8yBc1HsJ"]),
    "shapeless env value": (SHAPELESS, [SHAPELESS]),
}
KEYABLE = [k for k, (planted, _) in KINDS.items() if re.fullmatch(r"[A-Za-z0-9_.\-]+", planted)]
MARKED = {k: v for k, v in KINDS.items() if k != "shapeless env value"}  # what text alone marks
PLACES = ["ledger", "run folders", "killed run", "site", "tables", "mlflow", "terminal"]

SERVER = textwrap.dedent("""\
    import json, os, sys, time
    planted = json.load(open(os.path.join(os.path.dirname(__file__), "planted.json")))
    open(os.path.join(PIDS, str(os.getpid())), "w").write(str(os.getpid()))  # outside the repository
    for text in planted:
        print("hostile:", text, flush=True)
    print("hostile: the db is reached with", os.environ.get("DB_PASSWORD"), flush=True)
    print("hostile: argv", " ".join(sys.argv[1:]), flush=True)
    args, skip = [], False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg == "--note":
            skip = True
        elif arg not in ("--die", "--forever"):
            args.append(arg)
    if "--die" in sys.argv:
        sys.exit(1)
    if "--forever" in sys.argv:
        while True:
            print("hostile: still booting, DB_PASSWORD=" + os.environ["DB_PASSWORD"], flush=True)
            time.sleep(0.05)
    os.execv(sys.executable, [sys.executable, %r, *args])
    """) % str(FAKE_SERVER)
CLIENT = textwrap.dedent("""\
    import json, os, sys
    planted = json.load(open(os.path.join(os.path.dirname(__file__), "planted.json")))
    for text in planted:
        print("client:", text)
    print("client: with", os.environ.get("DB_PASSWORD"))
    arm = sys.argv[1]
    print(json.dumps({"output_tps_total": {"control": 100.0, "aa-control": 100.0}.get(arm, 130.0)}))
    """)


def experiment(name: str, port: int, *extra: str) -> dict:
    planted = [p for p, _ in MARKED.values()]
    argv = [sys.executable, "scripts/hostile_server.py", "--prefix-cache", *extra]
    argv += [item for p in planted for item in ("--note", p)]
    env = {f"NOTE_{i}": p for i, p in enumerate(planted)}
    env |= {KINDS[k][0]: "1" for k in KEYABLE if k in MARKED}
    env["DB_PASSWORD"] = SHAPELESS
    return {
        "name": name,
        "hypothesis": "faster; " + " ; ".join(planted),
        "box": "cpu-only",
        "engine": "none",
        "server": {"launcher": "process", "port": port, "health_timeout_s": 60},
        "control": {"argv": argv, "env": env},
        "candidates": {"fast": {"argv": argv, "env": env}},
        "instruments": [
            {"name": "probe", "kind": "command", "command": [sys.executable, "scripts/client.py", "{arm}"]}
        ],
        "points": [1],
        "repeats": 2,
        "bars": [{"metric": "output_tps_total", "point": 1, "direction": "higher", "min_effect": 0.05}],
        "calibration": {"repeats": 2},
    }


def study() -> dict:
    planted = [p for p, _ in MARKED.values()]
    params = {f"p{i}": p for i, p in enumerate(planted)} | {KINDS[k][0]: "1" for k in KEYABLE if k in MARKED}
    command = [sys.executable, "scripts/client.py", "{arm}"]
    return {
        "name": "corpus-study",
        "hypothesis": "study; " + " ; ".join(planted),
        "box": "cpu-only",
        "engine": "none",
        "server": {"needs_server": False},
        "control": {"params": params},
        "candidates": {"fast": {"params": params}},
        "instruments": [{"name": "probe", "kind": "command", "command": command}],
        "points": [1],
        "repeats": 2,
        "bars": [{"metric": "output_tps_total", "point": 1, "direction": "higher", "min_effect": 0.05}],
        "calibration": {"repeats": 2},
    }


def hostile_recipe(root: Path) -> None:
    """A copy of the tiny recipe with a token in its env and description (recipe command/show)."""
    shutil.copytree(
        REPO / "recipes" / "models" / "recipe-ledger", root / "recipes" / "models" / "recipe-ledger"
    )
    for name in ("taxonomy.yaml", "strategies"):
        source = REPO / "recipes" / name
        if source.is_dir():
            shutil.copytree(source, root / "recipes" / name, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy(source, root / "recipes" / name)
    path = root / "recipes" / "models" / "recipe-ledger" / "tiny-qwen2.yaml"
    text = path.read_text(encoding="utf-8").replace(
        'description: "', f'description: "{KINDS["hf token"][0]} ', 1
    )
    path.write_text(text, encoding="utf-8")


def killed_run(root: Path, env: dict[str, str], pids: Path) -> tuple[str, str]:
    """`ledger run` SIGKILLed while its server prints secrets at boot; the server is then stopped."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "recipe_ledger.cli", "run", "experiments/killed.yaml", "--no-mlflow"],
        cwd=root,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    logs: list[Path] = []
    while time.monotonic() < deadline:
        logs = list((root / "runs").glob("killed-*/server-*.log"))
        if logs and "still booting" in logs[0].read_text(errors="replace"):
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    for pid_file in pids.iterdir():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
        pid_file.unlink()
    return out, err


def found(text: str, kinds: dict[str, tuple[str, list[str]]]) -> set[str]:
    return {kind for kind, (_, needles) in kinds.items() if any(n in text for n in needles)}


def files_text(paths: list[Path]) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", errors="replace") for p in paths if p.is_file())


def false_positives() -> tuple[int, int, list[str]]:
    """(lines read, lines the redactor changes, the first few) over the project's own record."""
    overreach = re.compile(r"cache HIT \(key=[0-9a-f]{32}\)")  # AIPerf's cache key: hidden on purpose
    read, changed, shown = 0, 0, []
    for folder in ("ledger", "recipes", "experiments", "evidence", "tables"):
        for path in sorted((REPO / folder).rglob("*")):
            if not path.is_file() or path.suffix not in (
                ".jsonl",
                ".json",
                ".yaml",
                ".log",
                ".csv",
                ".md",
                ".txt",
            ):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                read += 1
                line = overreach.sub("cache HIT (a dataset cache entry)", line)
                same = redact_text(line, environ={}) == line
                if same and path.suffix == ".jsonl" and line.startswith("{"):
                    obj = json.loads(line)
                    same = redact_obj(obj, environ={}) == obj
                if not same:
                    changed += 1
                    if len(shown) < 5:
                        shown.append(f"{path.relative_to(REPO)}:{number}")
    return read, changed, shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="build the project here and keep it")
    args = parser.parse_args()
    started = time.monotonic()
    base = args.keep or Path(tempfile.mkdtemp(prefix="redaction-corpus-"))
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    root = stand_in_repo(base)
    (root / "scripts" / "planted.json").write_text(
        json.dumps([p for p, _ in KINDS.values() if p != SHAPELESS])
    )
    pids = base / "pids"
    pids.mkdir()
    (root / "scripts" / "hostile_server.py").write_text(f"PIDS = {str(pids)!r}\n" + SERVER)
    (root / "scripts" / "client.py").write_text(CLIENT)
    hostile_recipe(root)
    for name, spec in {
        "ok": experiment("corpus", free_port()),
        "dies": experiment("corpus-dies", free_port(), "--die"),
        "killed": experiment("killed", free_port(), "--forever"),
        "study": study(),
    }.items():
        (root / "experiments" / f"{name}.yaml").write_text(json.dumps(spec))
    commit(root)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    env = {"DB_PASSWORD": SHAPELESS}
    printed = [
        ledger(root, "run", "--plan", "experiments/ok.yaml"),
        ledger(root, "run", "experiments/ok.yaml", "--tracking-uri", uri),
        ledger(root, "run", "experiments/study.yaml", "--tracking-uri", uri),
        ledger(root, "run", "experiments/dies.yaml", "--no-mlflow", check=False),
        ledger(root, "note", "note: " + " ; ".join(p for p, _ in MARKED.values()), "--root", str(root)),
    ]
    note_id = json.loads(ledger(root, "log", "--json", "--root", str(root)).stdout.strip().splitlines()[-1])[
        "id"
    ]
    printed += [
        ledger(
            root,
            "retract",
            note_id,
            "--reason",
            "wrong: " + " ; ".join(p for p, _ in MARKED.values()),
            "--root",
            str(root),
        ),
        ledger(root, "mlflow", "sync", "--root", str(root), "--tracking-uri", uri),
        ledger(root, "tables", "--root", str(root)),
        ledger(root, "site", "--root", str(root)),
        ledger(root, "log", "--root", str(root)),
        ledger(root, "show", note_id, "--root", str(root)),
        ledger(root, "recipe", "show", "tiny-qwen2", "--recipes", str(root / "recipes")),
        ledger(root, "recipe", "command", "tiny-qwen2", "--recipes", str(root / "recipes")),
    ]
    killed_out, killed_err = killed_run(root, env, pids)
    terminal = "\n".join(p.stdout + p.stderr for p in printed) + killed_out + killed_err
    killed = [p for p in (root / "runs").glob("killed-*/**/*") if p.is_file()]
    runs = [p for p in (root / "runs").rglob("*") if p.is_file() and p not in killed]
    places = {
        "ledger": files_text(sorted((root / "ledger").glob("*.jsonl"))),
        "run folders": files_text(runs),
        "killed run": files_text(killed),
        "site": files_text([p for p in (root / "site").rglob("*") if p.is_file()]),
        "tables": files_text([p for p in (root / "tables").rglob("*") if p.is_file()]),
        "mlflow": files_text([root / "mlflow.db", *(root / "mlartifacts").rglob("*")]),
        "terminal": terminal,
    }
    empty = [place for place, text in places.items() if not text]
    leaks = {place: found(text, KINDS) for place, text in places.items()}
    print(f"planted kinds: {len(KINDS)} ({len(KEYABLE)} also as keys), places: {len(PLACES)}")
    print(f"{'kind':34} " + " ".join(f"{p[:8]:>8}" for p in PLACES))
    for kind in KINDS:
        row = ["LEAK" if kind in leaks[p] else "-" for p in PLACES]
        print(f"{kind:34} " + " ".join(f"{c:>8}" for c in row))
    pairs = sum(len(v) for v in leaks.values())
    kinds = len(set().union(*leaks.values()))
    print(
        f"leaked: {pairs} kind x place pairs, {kinds} of {len(KINDS)} kinds"
        + (f"; EMPTY places: {empty}" if empty else "")
    )
    read, changed, shown = false_positives()
    print(
        f"false positives on the project's record: {changed} of {read} lines changed"
        + (f" ({', '.join(shown)})" if shown else "")
    )
    print(
        f"wall {time.monotonic() - started:.1f} s; project at {root}"
        if args.keep
        else f"wall {time.monotonic() - started:.1f} s"
    )
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
