"""The planted-secret corpus: every kind of secret, through every writer, found nowhere.

Each kind is planted as note text, failure cause and log tail, release title and changes, retraction
reason, arm argv and env, run-folder files (plan.json, records, a server log) and terminal input; then
every file under ledger/, runs/, tables/ and site/, the MLflow specs and the captured output are
searched for the needles. The end-to-end twin (a real `ledger run` against the fake server, a real
MLflow store) is tests/integration/test_redact_corpus_e2e.py.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger import runs
from recipe_ledger.cli import main
from recipe_ledger.ledger import actions
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.redact import MARK, USER_NAMES_ENV, redact_env, redact_obj, redact_text
from recipe_ledger.site import build_site
from recipe_ledger.tables import write_tables
from recipe_ledger.tracking.entries import entry_spec
from recipe_ledger.tracking.tree import stage_redacted

from helpers.keymaterial import is_key_file, without_key_entries
from helpers.projects import REPO, make_project

# kind -> (the text as planted, the needle that must never come out)
KINDS: dict[str, tuple[str, str]] = {
    "url userinfo": ("https://alice:UrlPassW0rd@models.example.com/m", "UrlPassW0rd"),
    "hf token": ("hf_AbCdEfGhIjKlMnOpQrStUv12", "hf_AbCdEfGhIjKlMnOpQrStUv12"),
    "github classic": ("ghp_" + "Zq9" * 12, "ghp_" + "Zq9" * 12),
    "github fine-grained": ("github_pat_11ABCDEFG0123456789_abcdefghijk", "github_pat_11ABCDEFG01234"),
    "openai key": ("sk-proj-" + "AbC123" * 5, "sk-proj-AbC123AbC123"),
    "slack token": ("xoxb-123456789012-abcdefghijkl", "xoxb-123456789012"),
    "aws access key id": ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N",
    ),
    "pem block": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpQIBAAKCAQEA3Tz2mr7SZiAMfQyu\n-----END RSA PRIVATE KEY-----",
        "MIIEpQIBAAKCAQEA3Tz2mr7SZiAMfQyu",
    ),
    "authorization basic": ("Authorization: Basic dXNlcjpTM2NyM3Q=", "dXNlcjpTM2NyM3Q"),
    "authorization bearer": ("Authorization: Bearer opaqueBearerValue123", "opaqueBearerValue123"),
    "password colon": ("password: Hunter2Xyz", "Hunter2Xyz"),
    "lower-case token pair": ("token=lowercasesecret99", "lowercasesecret99"),
    "json key pair": ('"api_key": "JsonKey5678"', "JsonKey5678"),
    "aws secret pair": ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY", "wJalrXUtnFEMI"),
    "password flag": ("--password CliPass1234", "CliPass1234"),
    "env assignment": ("MY_PASS=EnvPass5678", "EnvPass5678"),
    "user-listed name": ("LAB_DSN=dsnSecretValue42", "dsnSecretValue42"),
}
HOSTILE = "planted: " + " ; ".join(planted for planted, _ in KINDS.values())
NEEDLES = [needle for _, needle in KINDS.values()]
ARGV = [
    "serve",
    "--model",
    "https://alice:ArgvUrlPass9@hub.example.com/org/model",
    "--password",
    "ArgvPass4321",
    "--api-key=sk-" + "k" * 32,
    "--hf-token",
    "plainHfValue77",
    "--max-num-batched-tokens",
    "8192",
]
ENV = {
    "MY_PASS": "ArmEnvPass1",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/noShapeAtAll",
    "LAB_DSN": "postgres-dsn-value",
    "DB_PASSWD": "passwdValue31",
    "SESSION_COOKIE": "cookieValue99",
    "SGLANG_DSV4_ADAPTIVE_PREFILL_TOKEN_PRODUCT": "738197504",  # a count: must stay readable
}
ARM_NEEDLES = [
    "ArgvUrlPass9",
    "ArgvPass4321",
    "k" * 32,
    "plainHfValue77",
    "ArmEnvPass1",
    "noShapeAtAll",
    "postgres-dsn-value",
    "passwdValue31",
    "cookieValue99",
]
ALL_NEEDLES = NEEDLES + ARM_NEEDLES


@pytest.fixture(autouse=True)
def _user_listed_names(monkeypatch):
    monkeypatch.setenv(USER_NAMES_ENV, "LAB_DSN")


# -- the rules, kind by kind ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_is_redacted_from_text(kind):
    planted, needle = KINDS[kind]
    out = redact_text(f"before {planted} after", environ={})
    assert needle not in out and MARK in out
    assert out.startswith("before ") and out.endswith(" after")  # only the secret goes


def test_an_argv_flag_is_judged_with_its_value():
    argv = ["--long-prefill-token-threshold", "6144", "--hf-token", "plainvalue", "--session-key", "7"]
    assert redact_obj(argv, environ={}) == ["--long-prefill-token-threshold", "6144", "--hf-token", MARK] + [
        "--session-key",
        "7",
    ]


def test_argv_lists_and_env_mappings_hide_every_value_that_looks_secret():
    redacted = redact_obj({"argv": ARGV, "env": ENV}, environ={})
    text = json.dumps(redacted)
    assert [n for n in ARM_NEEDLES if n in text] == []
    assert redacted["argv"][-2:] == ["--max-num-batched-tokens", "8192"]
    assert redacted["env"]["SGLANG_DSV4_ADAPTIVE_PREFILL_TOKEN_PRODUCT"] == "738197504"
    assert redact_env(ENV, environ={})["MY_PASS"] == MARK


@pytest.mark.parametrize(
    "text",
    [
        "error: HF_TOKEN=hf_not_the_shape",
        "run failed: OPENAI_API_KEY=abc123 while booting",
        "AuthError: password=hunter2",
    ],
)
def test_a_pair_inside_another_pair_s_value_is_still_judged(text):
    """The outer match ("error: ...") consumed the inner pair: once it was never scanned."""
    out = redact_text(text, environ={})
    assert MARK in out and not any(s in out for s in ("hf_not_the_shape", "abc123", "hunter2"))


@pytest.mark.parametrize(
    "text",
    [
        "SGLANG_DSV4_ADAPTIVE_PREFILL_TOKEN_PRODUCT=738197504",
        "TOKENIZERS_PARALLELISM=false",
        "PWD=/home/alice/work",
        "--max-num-batched-tokens 8192 --long-prefill-token-threshold 6144 --tokenizer /m",
        "the draft model proposes one token per step; per token: the algorithm, not a flag",
        "sha256:" + "ab" * 32,
        "https://huggingface.co/org/model and ssh://git@github.com/org/repo",
        "Decode batch, #running-req: 1, #token: 48, #new-token: 5, #pending-token: 0",  # SGLang's log
        "server_args={'api_key': None, 'enable_streaming_session': False, 'ms_per_token': 3.3}",
        "<li><code>--long-prefill-token-threshold 6144</code></li>",
        '["--long-prefill-token-threshold 6144", "--max-num-seqs 16"]',
        '{"session_id":"s1002-000000","input_length":160,"output_length":24,"hash_ids":[1,2]}',  # AIPerf
        '{"bos_token_id": "0", "eos_token_id": 2, "pad_token_id": "<|endoftext|>"}',  # a model config
        "3. Use server token counts: --use-server-token-count (disables client tokenization)",
        "error: KeyError: 'tail' (a run's failure cause: the word that says what broke)",
        "TokenizerError: no tokenizer.json in /m",
    ],
)
def test_what_is_not_a_secret_stays_readable(text):
    assert redact_text(text, environ={}) == text


# Hidden on purpose although not secret: AIPerf logs its dataset cache key as `key=<32 hex>`, the
# shape of many API keys; a `key=` pair with such a value is hidden wherever it appears.
_OVERREACH = re.compile(r"cache HIT \(key=[0-9a-f]{32}\)")


def _without_known_overreach(text: str) -> str:
    return _OVERREACH.sub("cache HIT (a dataset cache entry)", text)


@pytest.mark.parametrize("folder", ["evidence", "ledger", "tables", "site"])
def test_the_committed_record_reads_the_same_through_the_redactor(folder):
    """No false positive on real output: server logs (vLLM's and SGLang's printed configs), every
    ledger line, every table, every page. A change here means a rule now hides what is not a secret.
    JSON is read both ways: as text (logs, MLflow copies) and as objects (the ledger, run files)."""
    changed = []
    for path in sorted((REPO / folder).rglob("*")):
        if not path.is_file() or path.suffix not in (".log", ".json", ".jsonl", ".csv", ".md", ".html"):
            continue
        if is_key_file(path):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        text = _without_known_overreach(without_key_entries(path, text))
        objects = _json_objects(path, text)
        if redact_text(text, environ={}) != text or redact_obj(objects, environ={}) != objects:
            changed.append(str(path.relative_to(REPO)))
    assert changed == []


def _json_objects(path: Path, text: str) -> list:
    if path.suffix == ".json":
        return [json.loads(text)]
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return []


def test_a_name_holding_a_secret_word_in_the_middle_keeps_a_count_and_hides_a_credential():
    env = {"X_TOKEN_PRODUCT": "4096", "X_TOKEN_URL": "https://internal/creds-value"}
    assert redact_env(env, environ={}) == {"X_TOKEN_PRODUCT": "4096", "X_TOKEN_URL": MARK}


def test_the_values_of_secret_variables_in_the_environment_are_hunted_wherever_they_appear():
    environ = {"AWS_SECRET_ACCESS_KEY": "noShape/AtAll+butSecret", "LAB_DSN": "dsn-literal-1"}
    text = "boto said noShape/AtAll+butSecret; connect dsn-literal-1"
    out = redact_text(text, environ={**environ, USER_NAMES_ENV: "LAB_DSN"})
    assert "noShape" not in out and "dsn-literal-1" not in out


# -- every writer ------------------------------------------------------------------------------------


def _plant(root: Path) -> dict[str, dict]:
    """Every kind through every ledger kind and every run-folder file; the entries by role."""
    ledger = Ledger.open(root)
    note = actions.note(ledger, HOSTILE, writer="box-corpus")
    failure = ledger.append(
        "failure",
        {
            "subject": "corpus",
            "cause_class": "crash",
            "cause": HOSTILE,
            "log_tail": HOSTILE + "\n" + " ".join(ARGV),
        },
        writer="box-corpus",
        git=None,
    )
    release = ledger.append(
        "release",
        {
            "schema_version": 2,
            "lane": "corpus-lane",
            "version": "v1",
            "lane_title": HOSTILE,
            "changes": [HOSTILE],
            "argv": ARGV,
            "env": ENV,
        },
        writer="box-corpus",
        git=None,
    )
    retraction = actions.retract(ledger, note["id"], reason=HOSTILE, writer="box-corpus")
    folder = runs.create(runs.runs_dir(root), "corpus-run")
    runs.write_json(folder / runs.PLAN, {"arms": {"control": {"argv": ARGV, "env": ENV}}, "note": HOSTILE})
    runs.write_json(folder / runs.SUMMARY, {"arms": {"control": {"argv": ARGV, "env": ENV}}})
    runs.write_records(folder / runs.MEASUREMENTS, [{"arm": "control", "facts": {"server_info": HOSTILE}}])
    log = folder / "server-control-r1.log"
    log.write_text(HOSTILE + "\n" + " ".join(ARGV) + "\n" + json.dumps(ENV) + "\n", encoding="utf-8")
    runs.redact_logs(folder)
    return {"note": note, "failure": failure, "release": release, "retraction": retraction}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, dict[str, dict], str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(USER_NAMES_ENV, "LAB_DSN")
        root = make_project(tmp_path_factory.mktemp("corpus"))
        planted = _plant(root)
        write_tables(root, root / "tables")
        build_site(root, root / "site")
        output = _terminal(root, planted)
    return root, planted, output


def _terminal(root: Path, planted: dict[str, dict]) -> str:
    """What a person (or a CI log) sees: log, show, errors echoing input, and a run's --plan."""
    experiment = root / "experiments" / "corpus.yaml"
    experiment.parent.mkdir(exist_ok=True)
    server = {"argv": [sys.executable, *ARGV], "env": ENV}
    experiment.write_text(
        json.dumps(
            {
                "name": "corpus",
                "hypothesis": HOSTILE,
                "box": "cpu-only",
                "engine": "none",
                "server": {"launcher": "process", "port": 18999},
                "control": server,
                "candidates": {"other": server},
                "instruments": [{"name": "probe", "kind": "command", "command": ["true"]}],
                "points": [1],
                "repeats": 2,
                "bars": [{"metric": "x", "point": 1, "direction": "higher", "min_effect": 0.05}],
            }
        ),
        encoding="utf-8",
    )
    runner = CliRunner()
    root_args = ["--root", str(root)]
    calls = [
        ["log", *root_args],
        ["log", "--json", *root_args],
        *(["show", entry["id"], *root_args] for entry in planted.values()),
        ["show", KINDS["hf token"][0], *root_args],  # an error that echoes its input
        ["release", "show", f"corpus-lane@{KINDS['url userinfo'][0]}", *root_args],
        ["run", "--plan", str(experiment), *root_args],
        ["calibrate", "--plan", str(experiment), *root_args],
    ]
    out = []
    for args in calls:
        result = runner.invoke(main, args)
        assert "Traceback" not in result.output, (args, result.output)
        out.append(result.output)
    return "\n".join(out)


def _found(text: str) -> list[str]:
    return [needle for needle in ALL_NEEDLES if needle in text]


def test_no_needle_in_any_file_written_under_the_project(project):
    root, _, _ = project
    leaks = {}
    for folder in ("ledger", "runs", "tables", "site"):
        files = [p for p in (root / folder).rglob("*") if p.is_file()]
        assert files, folder  # the writer ran: a folder with nothing in it would pass vacuously
        for path in files:
            found = _found(path.read_text(encoding="utf-8", errors="replace"))
            if found:
                leaks[str(path.relative_to(root))] = found
    assert leaks == {}


def test_the_planted_text_reached_every_output_redacted_not_dropped(project):
    root, planted, output = project
    assert MARK in (root / "ledger" / "box-corpus.jsonl").read_text(encoding="utf-8")
    assert MARK in (root / "runs" / "corpus-run" / runs.PLAN).read_text(encoding="utf-8")
    assert MARK in (root / "runs" / "corpus-run" / "server-control-r1.log").read_text(encoding="utf-8")
    assert "738197504" in (root / "runs" / "corpus-run" / runs.PLAN).read_text(encoding="utf-8")
    assert planted["release"]["payload"]["lane_title"].startswith("planted: ")
    assert MARK in output and "ArgvPass4321" not in output


def test_no_needle_in_the_terminal_output(project):
    _, _, output = project
    assert _found(output) == []


def test_no_needle_in_what_mlflow_would_receive(project, tmp_path):
    root, planted, _ = project
    spec = entry_spec(planted["failure"], runs.runs_dir(root))
    strings = [spec.name, *spec.tags.values(), *spec.status_tags.values(), *spec.params.values()]
    strings += [*spec.metrics, *spec.texts.values()]
    assert _found("\n".join(strings)) == []
    staged = tmp_path / "staged"
    staged.mkdir()
    folder = root / "runs" / "corpus-run"
    (folder / "raw" / "client.log").write_text(HOSTILE, encoding="utf-8")  # written after the run ended
    stage_redacted(folder, ["raw/client.log", runs.PLAN], staged)
    assert _found("".join(p.read_text(encoding="utf-8") for p in staged.rglob("*") if p.is_file())) == []


def test_a_user_listed_name_is_hidden_whole_as_a_word_or_as_a_tail(monkeypatch):
    monkeypatch.setenv(USER_NAMES_ENV, "LAB_DSN, conn")
    env = {"LAB_DSN": "v1", "ARM0_LAB_DSN": "v2", "DB_CONN_URL": "v3", "LAB_DSNX": "v4"}
    assert redact_env(env, environ={}) == {
        "LAB_DSN": MARK,
        "ARM0_LAB_DSN": MARK,
        "DB_CONN_URL": MARK,
        "LAB_DSNX": "v4",
    }


def test_logs_are_redacted_after_the_run_except_a_file_whose_hash_a_record_pins(tmp_path):
    folder = runs.create(tmp_path, "r1")
    server_log, pinned = folder / "server-control-r1.log", folder / "raw" / "control-p1-r1.stdout.log"
    for path in (server_log, pinned):
        path.write_text(f"{HOSTILE}\nthe key is rawValueNoShape99\n", encoding="utf-8")
    runs.write_records(
        folder / runs.MEASUREMENTS, [{"arm": "control", "raw_file": "raw/control-p1-r1.stdout.log"}]
    )
    changed = runs.redact_logs(folder, {"ARM0_AWS_SECRET_ACCESS_KEY": "rawValueNoShape99"})
    assert changed == [server_log]
    assert _found(server_log.read_text()) == [] and "rawValueNoShape99" not in server_log.read_text()
    assert pinned.read_text().startswith(
        HOSTILE
    )  # its sha256 is in the record: rewriting it would break that
