"""recipe_ledger.redact: secrets never reach anything the tool writes."""

from __future__ import annotations

import json

import pytest

from recipe_ledger.ledger.store import Ledger
from recipe_ledger.redact import MARK, is_secret_env_name, is_secret_key, redact_env, redact_obj, redact_text

TOKENS = [
    "hf_" + "a1B2c3D4e5" * 4,
    "ghp_" + "Z" * 36,
    "gho_" + "q" * 36,
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "sk-" + "x" * 40,
    "sk-proj-" + "AbC123" * 6,
    "sk-ant-api03-" + "k" * 40,
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-123456789012-abcdefghijkl",
    "xoxp-123456789012-abcdefghijkl",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


@pytest.mark.parametrize("token", TOKENS)
def test_token_shapes_are_redacted_in_text(token):
    text = f"launch failed: auth with {token}, retrying"
    out = redact_text(text, environ={})
    assert token not in out
    assert out == f"launch failed: auth with {MARK}, retrying"


def test_environment_names_follow_the_glob_of_the_issue():
    for name in ["HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "MY_token_x"]:
        assert is_secret_env_name(name)
    for name in ["PATH", "HOME", "CUDA_VISIBLE_DEVICES", "VLLM_CACHE_ROOT"]:
        assert not is_secret_env_name(name)


def test_redact_env_hides_secret_names_and_scrubs_other_values():
    env = {"HF_TOKEN": "short", "PATH": "/usr/bin", "NOTE": "use " + TOKENS[0]}
    assert redact_env(env, environ={}) == {"HF_TOKEN": MARK, "PATH": "/usr/bin", "NOTE": f"use {MARK}"}


def test_values_of_secret_variables_in_the_environment_are_hunted_verbatim():
    environ = {"INTERNAL_SERVICE_TOKEN": "plainlooking-value-42", "PATH": "/bin"}
    text = "curl -H 'X-Auth: plainlooking-value-42' http://box"
    assert redact_text(text, environ=environ) == f"curl -H 'X-Auth: {MARK}' http://box"


def test_assignments_and_flags_in_commands():
    cmd = "docker run -e HF_TOKEN=abc123def -e MODE=fast vllm serve --hf-token tok123456 --api-key=k9k9k9k9"
    out = redact_text(cmd, environ={})
    assert out == (
        f"docker run -e HF_TOKEN={MARK} -e MODE=fast vllm serve --hf-token {MARK} --api-key={MARK}"
    )


def test_ordinary_serving_flags_and_hashes_stay_readable():
    cmd = (
        "--tokenizer /model --max-num-batched-tokens 8192 --long-prefill-token-threshold 6144 "
        "--num-speculative-tokens 5 --engram-config '{\"cpu_offload\": true}' "
        "sha256:"
        + "ab" * 32
        + " df42c109f1defefcbfcedbe7d905718a12266e40 disk-based-offload-of-expert-weights"
    )
    assert redact_text(cmd, environ={}) == cmd


def test_object_keys_by_last_word():
    for key in ["hf_token", "apiKey", "password", "client_secret", "token", "AWS_SECRET_ACCESS_KEY"]:
        assert is_secret_key(key)
    for key in ["tokenizer", "num_speculative_tokens"]:
        assert not is_secret_key(key)
    # A secret word inside the name: a number (a count) stays, anything else is hidden.
    for key in ["key_count_total", "token_bucket_total"]:
        assert not is_secret_key(key, 6144)
        assert is_secret_key(key, "s3cr3t-value")
    # ... unless the last word makes the name a measure: its value is never a credential.
    for key in ["long_prefill_token_threshold", "use_server_token_count", "max_session_len"]:
        assert not is_secret_key(key, "6144") and not is_secret_key(key, "(disables")


def test_redact_obj_walks_nested_structures_and_keeps_non_strings():
    obj = {
        "env": {"HF_TOKEN": "whatever", "OMP_NUM_THREADS": "8"},
        "hf_token": "abc",
        "num_speculative_tokens": 5,
        "tokenizer": "/model",
        "argv": ["--hf-token", TOKENS[1], ("x", TOKENS[4])],
    }
    out = redact_obj(obj, environ={})
    assert out == {
        "env": {"HF_TOKEN": MARK, "OMP_NUM_THREADS": "8"},
        "hf_token": MARK,
        "num_speculative_tokens": 5,
        "tokenizer": "/model",
        "argv": ["--hf-token", MARK, ("x", MARK)],
    }


def test_the_append_path_redacts_before_anything_is_hashed_or_written(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_SERVICE_PASSWORD", "correct-horse-battery")
    ledger = Ledger.init(tmp_path)
    entry = ledger.append(
        "failure",
        {
            "subject": "x",
            "cause_class": "crash",
            "cause": f"login with {TOKENS[0]} failed",
            "log_tail": "password=correct-horse-battery\nHF_TOKEN=hf_abc",
        },
        writer="box",
        git=None,
    )
    stored = (tmp_path / "ledger" / "box.jsonl").read_text()
    for secret in (TOKENS[0], "correct-horse-battery", "hf_abc"):
        assert secret not in stored
    assert json.loads(stored)["id"] == entry["id"]
    assert MARK in entry["payload"]["cause"]
