"""Keeping secrets out of everything the tool writes (ledger, MLflow, logs, the site).

Three entry points, all pure and cheap:

- ``redact_env(env)``: a copy of an environment mapping where the value of every variable whose
  name looks secret (``*TOKEN*``, ``*KEY*``, ``*SECRET*``, ``*PASSWORD*``, ...) is replaced by a
  marker, and every other value is passed through ``redact_text``.
- ``redact_text(text)``: token-shaped strings (``hf_...``, ``ghp_...``, ``github_pat_...``, ``sk-...``,
  ``AKIA...``, ``xoxb-...``, JWTs, ``Bearer ...``), ``NAME_TOKEN=value`` assignments, ``--api-key value``
  flags, and the literal values of secret-named variables in the current environment are replaced.
- ``redact_obj(obj)``: the same over any JSON-like structure; a dict key that names a secret
  (``hf_token``, ``apiKey``, ``password``) has its string value replaced.

Redaction errs on the side of hiding: a false positive costs a readable value, a false negative
publishes a credential into an append-only, git-committed record that can never be edited.
This module sits below everything but ``errors`` so every writer can reuse it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

MARK = "[REDACTED]"

# Environment names are matched as the issue states them: a glob on the whole name.
_SECRET_ENV_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)

# Object keys and CLI flags are matched on their last word so that `tokenizer`,
# `num_speculative_tokens` or `long_prefill_token_threshold` stay readable.
_SECRET_WORDS = frozenset(
    {"token", "key", "secret", "password", "passwd", "apikey", "credential", "credentials", "auth"}
)
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")

# Credential shapes of the services a serving lab touches. Each is anchored on a vendor prefix so
# ordinary hex digests (git, sha256) are never mistaken for a token.
_TOKEN_SHAPES = [
    r"hf_[A-Za-z0-9]{20,}",
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_\-]{20,}",
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    r"xox[abposr]-[A-Za-z0-9-]{10,}",
    r"glpat-[A-Za-z0-9_\-]{20,}",
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT: header.payload.sig
]
_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(_TOKEN_SHAPES) + r")")
_BEARER_RE = re.compile(r"(?i)\b(bearer)(\s+)([A-Za-z0-9._~+/=\-]{16,})")
# NAME=value where NAME is an environment-style name that looks secret (HF_TOKEN=..., -e API_KEY=...).
_ENV_ASSIGN_RE = re.compile(
    r"\b([A-Z][A-Z0-9_]*(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL)[A-Z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S+)"
)
# --hf-token X, --api-key=X: a flag whose *last* word names a secret, so that
# --long-prefill-token-threshold or --max-num-batched-tokens stay as they are.
_FLAG_RE = re.compile(
    r"(--(?:[a-z0-9]+-)*(?:token|key|secret|password|passwd|apikey))(=|\s+)"
    r"(\"[^\"]*\"|'[^']*'|[^\s-][^\s]*)"
)
# Secret values shorter than this are not hunted for verbatim: replacing every "1" would be noise.
_MIN_LITERAL = 8


def is_secret_env_name(name: str) -> bool:
    """True for environment variable names the issue calls secret (*TOKEN*, *KEY*, ...)."""
    return bool(_SECRET_ENV_NAME.search(name))


def is_secret_key(key: str) -> bool:
    """True for a dict key or option name whose last word names a secret (``hf_token``, ``apiKey``)."""
    words = [w.lower() for w in _WORD_SPLIT.split(key) if w]
    return bool(words) and words[-1] in _SECRET_WORDS


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-named variables in ``environ`` (default: this process), longest first."""
    env = os.environ if environ is None else environ
    found = {v for k, v in env.items() if is_secret_env_name(k) and len(v) >= _MIN_LITERAL}
    return sorted(found, key=len, reverse=True)


def redact_text(text: str, *, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with credential-shaped strings and known secret values replaced by ``[REDACTED]``."""
    return _redact_text(text, secret_values(environ))


def _redact_text(text: str, literals: list[str]) -> str:
    for value in literals:
        text = text.replace(value, MARK)
    text = _TOKEN_RE.sub(MARK, text)
    text = _ENV_ASSIGN_RE.sub(lambda m: f"{m.group(1)}={MARK}", text)
    text = _FLAG_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MARK}", text)
    return _BEARER_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MARK}", text)


def redact_env(env: Mapping[str, str], *, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` with secret-named values hidden and every other value text-redacted."""
    literals = secret_values(environ)
    return {
        name: MARK if is_secret_env_name(name) else _redact_text(str(value), literals)
        for name, value in env.items()
    }


def redact_obj(obj: Any, *, environ: Mapping[str, str] | None = None) -> Any:
    """A redacted copy of a JSON-like value (dicts, lists, tuples, strings; other scalars as they are)."""
    return _redact_obj(obj, secret_values(environ))


def _redact_obj(obj: Any, literals: list[str]) -> Any:
    if isinstance(obj, str):
        return _redact_text(obj, literals)
    if isinstance(obj, Mapping):
        return {key: _redact_item(str(key), value, literals) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_redact_obj(item, literals) for item in obj)
    return obj


def _redact_item(key: str, value: Any, literals: list[str]) -> Any:
    # Only string values of secret-named keys are hidden whole: a number under `max_tokens`-like
    # keys is never a credential, and nested structures are walked instead. An upper-case key is
    # an environment name and gets the environment rule (HF_TOKEN, MY_API_KEY).
    if isinstance(value, str) and (is_secret_key(key) or (key.isupper() and is_secret_env_name(key))):
        return MARK
    return _redact_obj(value, literals)
