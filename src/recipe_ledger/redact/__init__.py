"""Keeping secrets out of everything the tool writes (ledger, run folders, MLflow, tables, the site,
the terminal).

The package: ``rules`` (every rule below, pure), ``detectors`` (the only importer of
detect-secrets), ``stream`` (a child's output written to its log redacted as it comes). Three entry
points, all pure:

- ``redact_env(env)``: a copy of an environment mapping where the value of every variable whose
  name looks secret (see *Names* below) is replaced by a marker, and every other value is passed
  through ``redact_text``.
- ``redact_text(text)``: credentials found by their shape or their context are replaced:

  * token shapes: ``hf_...``, ``ghp_...``/``gho_...``, ``github_pat_...``, ``sk-...``, ``AKIA...``/
    ``ASIA...``, ``xox?-...`` (Slack), ``glpat-...``, ``AIza...``, JWTs, PEM private-key blocks;
  * URL userinfo: ``https://alice:S3cr3t@host`` becomes ``https://alice:[REDACTED]@host``;
  * ``Authorization:`` / ``Proxy-Authorization:`` headers (Bearer, Basic, Token, Digest or bare);
  * ``key=value`` and ``key: value`` pairs (``password: X``, ``token=X``, ``"api_key": "X"``,
    ``HF_TOKEN=X``) and ``--flag X`` / ``--flag=X`` (``--password X``, ``--hf-token X``), any case,
    whose key looks secret by the name rule below;
  * the literal values of secret-named variables of the current environment (a password with no
    recognisable shape, an AWS secret access key) wherever they appear.
- ``redact_obj(obj)``: the same over any JSON-like structure; a dict key that looks secret has its
  string value replaced, and in a list (an argv) the item after a secret-looking flag is replaced.
  Keys are text too: a key with a secret's shape is itself redacted (``[REDACTED]``, ``[REDACTED]#2``).

Beyond the shapes above (issue 26): ``sk_live_``, ``sk-proj-``, ``pypi-``, ``nvapi-``, ``ya29.``,
``npm_``, ``hvs.``, ``SG.``; Slack/Discord webhook paths; presigned-URL signatures; a key as a URL's
user; ``user:pw@host`` without a scheme (docker references); "the db password is X" in prose; a
token split across lines (``_mask_joined``: each part hidden, the line count kept); base64 runs that
decode to text holding a secret; and detect-secrets' plugins (``detectors``, the only module that
imports detect-secrets). ``looks_like_credential(name)`` is how names are refused at load instead
of being redacted (``spec.bounds.Slug``). ``stream`` writes a child's output to its log redacted
line by line (``LogPipe``, ``RedactedLog``, ``IdleFlushedLog`` for a blocking source): a killed
run leaves no raw line on disk.

**Names.** A name (an environment variable, a dict key, a flag, the key of a pair) is split into
words (``_``, ``-``, ``.``, camelCase). Secret words are ``TOKEN KEY SECRET PASSWORD PASSWD PASS
PWD PW PASSCODE CREDENTIAL(S) CRED(S) AUTH AUTHORIZATION COOKIE SESSION PRIVATE APIKEY WEBHOOK``
plus the words and names listed, comma-separated, in ``$RECIPE_LEDGER_REDACT_NAMES`` (e.g.
``DSN,LAB_CONN_STRING``).

- A name whose **last** word is secret (``HF_TOKEN``, ``MY_PASS``, ``apiKey``) or whose last word
  qualifies a secret word (``TOKEN_VALUE``, ``API_KEY_B64``) always hides its value.
- A name with a secret word **elsewhere** (``SGLANG_DSV4_ADAPTIVE_PREFILL_TOKEN_PRODUCT``,
  ``TOKENIZERS_PARALLELISM``, ``MAX_TOKEN_COUNT``) hides its value unless the value is a number or
  a boolean: a count or a switch is never a credential, and a real secret is never a bare number
  of that kind (a PIN would be, and it is not what a serving lab puts in an environment).
- ``PWD`` and ``OLDPWD`` themselves are the shell's working directories, not passwords.
- A name listed in ``$RECIPE_LEDGER_REDACT_NAMES`` (the whole name, its tail, or a word) is hidden.
- No value is nothing to hide: ``None``, ``null``, booleans, an opening ``[``/``{`` (the contents of a
  structure are scanned on their own); and under a last word that also counts things in a serving
  log (``TOKEN``, ``KEY``, ``SESSION``: ``#new-token: 5``, ``ms_per_token: 3.3``) a number is a count.
  ``tests/unit/test_redact_corpus.py`` reads the committed evidence logs, ledger and tables through
  the redactor: none of it may change (no false positive on real output).

Redaction errs on the side of hiding: a false positive costs a readable value, a false negative
publishes a credential into an append-only, git-committed record that can never be edited.
This module sits below everything but ``errors`` so every writer can reuse it.
"""

from recipe_ledger.redact.rules import (
    MARK,
    USER_NAMES_ENV,
    is_secret_env_name,
    is_secret_key,
    is_secret_name,
    looks_like_credential,
    redact_env,
    redact_lines,
    redact_obj,
    redact_text,
    secret_values,
    text_redactor,
)
from recipe_ledger.redact.stream import IdleFlushedLog, LogPipe, RedactedLog

__all__ = [
    "MARK",
    "USER_NAMES_ENV",
    "is_secret_env_name",
    "is_secret_key",
    "is_secret_name",
    "looks_like_credential",
    "redact_env",
    "redact_lines",
    "redact_obj",
    "redact_text",
    "secret_values",
    "text_redactor",
    "LogPipe",
    "IdleFlushedLog",
    "RedactedLog",
]
