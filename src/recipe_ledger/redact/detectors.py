"""detect-secrets (Yelp) beside the project's own rules: the only module importing ``detect_secrets``.

The project's rules (``rules``) know the shapes a serving lab meets and its names; detect-secrets'
plugins are a well-kept second opinion for the vendors the rules do not name (Artifactory, Azure
storage, Cloudant, Discord, IBM, Mailchimp, npm, SendGrid, Square, Stripe, Telegram, Twilio...) and
for random-looking base64 strings. ``found(text)`` returns the secret values the plugins see in
``text``; the caller replaces them.

**Which plugins, and how they are tuned** (measured on the project's own record: ledger/*.jsonl,
evidence/, tables/, recipes/, experiments/, site/; 102,222 lines):

- every regex plugin but three: ``KeywordDetector`` (``password = "X"`` in code) duplicates the
  pair rule, which judges the key by the project's name rule, and cost 6.6 s per 100k lines, four
  times the whole rule set; ``IPPublicDetector`` (an address is not a credential; the record holds
  ``0.0.0.0`` and documentation addresses); ``PrivateKeyDetector`` reports only the ``BEGIN ...``
  line, and the PEM rule hides the whole block.
- ``HexHighEntropyString`` is left out: every one of its 1,915 hits on the record was a sha256
  digest or a git id, which must stay readable (they are how an entry pins its files).
- ``Base64HighEntropyString`` at its default limit (4.5 bits per character), quoted and unquoted
  (the adhoc scan's eager mode), and a candidate must also look random (``_looks_random``): its 76
  hits on the record were all run-folder paths, temp-dir names and CamelCase class names.

The plugins' network verification is never called (``analyze_string`` only: nothing leaves the box).
detect-secrets is imported on first use (about 0.2 s, most of it ``requests``): ``ledger log`` and
``--help`` never scan a string that could hold a secret, so they never pay it. A string is handed
to the plugins only when it holds a run of 16 or more token characters with a letter and a digit
(``might_hold_secret``): no plugin's secret is shorter or lacks one, and most shown strings (names,
numbers, statuses, log prose) do.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

# Token characters of every plugin's secrets (base64, base64url, hex, the separators of JWTs and
# vendor prefixes); a string without a run of 16 is never handed to the plugins.
_CANDIDATE = re.compile(r"[A-Za-z0-9+/=_\-]{16,}")
_DIGIT, _LETTER = re.compile(r"[0-9]"), re.compile(r"[A-Za-z]")
_PART = re.compile(r"[A-Za-z0-9+]{16,}")
_HEX = re.compile(r"[0-9a-fA-F]+")
BASE64_LIMIT = 4.5  # detect-secrets' default; the record's hits were all paths (see the docstring)
_ENTROPY_MIN_LEN = 23
_MIN_SECRET = 8  # a plugin's value shorter than this is not hunted verbatim: replacing "abc" is noise

# (module, class, gate): a plugin whose pattern needs a word or a prefix is handed only the strings
# that hold it (the gate, a cheap search); the four assignment plugins (Cloudant, IBM, SoftLayer) took
# 2.1 s of the 3.5 s the plugins spent on the record's 33,054 candidate lines before they had one.
_KEY_WORDS = (
    r"[Kk][Ee][Yy]|[Pp][Ww]|[Pp][Aa][Ss][Ss]|[Tt][Oo][Kk][Ee][Nn]|[Ss][Ee][Cc][Rr][Ee][Tt]|[Cc]loudant"
)
_REGEX_PLUGINS: tuple[tuple[str, str, str | None], ...] = (
    ("artifactory", "ArtifactoryDetector", r"AKC|AP[\dA-F]"),
    ("aws", "AWSKeyDetector", None),
    ("azure_storage_key", "AzureStorageKeyDetector", r"AccountKey="),
    ("basic_auth", "BasicAuthDetector", r"://"),
    ("cloudant", "CloudantDetector", _KEY_WORDS),
    ("discord", "DiscordBotTokenDetector", None),
    ("github_token", "GitHubTokenDetector", None),
    ("gitlab_token", "GitLabTokenDetector", None),
    ("ibm_cloud_iam", "IbmCloudIamDetector", _KEY_WORDS),
    ("ibm_cos_hmac", "IbmCosHmacDetector", _KEY_WORDS),
    ("jwt", "JwtTokenDetector", r"eyJ"),
    ("mailchimp", "MailchimpDetector", r"-us\d"),
    ("npm", "NpmDetector", None),
    ("openai", "OpenAIDetector", None),
    ("pypi_token", "PypiTokenDetector", r"pypi-"),
    ("sendgrid", "SendGridDetector", None),
    ("slack", "SlackDetector", None),
    ("softlayer", "SoftlayerDetector", _KEY_WORDS),
    ("square_oauth", "SquareOAuthDetector", r"sq0"),
    ("stripe", "StripeDetector", r"_live_"),
    ("telegram_token", "TelegramBotTokenDetector", None),
    ("twilio", "TwilioKeyDetector", r"AC|SK"),
)


class _Plugins:
    """The plugin instances, made once (detect-secrets imported here, on first use)."""

    def __init__(self) -> None:
        import importlib

        from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

        self.regex: list[tuple[Any, re.Pattern[str] | None]] = [
            (
                getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)(),
                re.compile(gate) if gate else None,
            )
            for module, name, gate in _REGEX_PLUGINS
        ]
        self.base64 = Base64HighEntropyString(limit=BASE64_LIMIT)
        # The eager (unquoted) form of the plugin's own pattern, as its adhoc scan builds it; kept
        # apart so the plugin's regex is never swapped under another thread (a log pipe reader).
        self.unquoted = re.compile(rf"([{re.escape(self.base64.charset)}]+)")


@lru_cache(maxsize=1)
def _plugins() -> _Plugins:
    return _Plugins()


def might_hold_secret(text: str) -> bool:
    """Whether ``text`` is worth handing to the plugins: a run of 16 token characters holding both
    a letter and a digit (every plugin's secret has one; words, paths of words, dates do not)."""
    for match in _CANDIDATE.finditer(text):
        run = match.group(0)
        if _DIGIT.search(run) and _LETTER.search(run):
            return True
    return False


def found(text: str) -> set[str]:
    """The secret values detect-secrets' plugins find in ``text`` (see the module's tuning)."""
    if not might_hold_secret(text):
        return set()
    plugins = _plugins()
    values: set[str] = set()
    opened: dict[re.Pattern[str] | None, bool] = {None: True}  # each gate searched once per text
    for plugin, gate in plugins.regex:
        if gate not in opened:
            opened[gate] = gate.search(text) is not None  # type: ignore[union-attr]
        if opened[gate]:
            values.update(
                v for v in plugin.analyze_string(text) if isinstance(v, str) and len(v) >= _MIN_SECRET
            )
    candidates = set(plugins.base64.analyze_string(text)) | {
        m.group(1) for m in plugins.unquoted.finditer(text)
    }
    for value in candidates:
        # Below 23 characters no string reaches 4.5 bits per character (log2(23) = 4.52): the
        # plugin's entropy (a count per charset character) is computed only where it can pass.
        if len(value) >= _ENTROPY_MIN_LEN and _looks_random(value):
            if plugins.base64.calculate_shannon_entropy(value) > BASE64_LIMIT:
                values.add(value)
    return values


def _looks_random(value: str) -> bool:
    """A high-entropy base64 run that is a key, not a path, an id or a class name: one of its parts
    (split at ``/ _ - . =``) is 16+ characters, not hex (digests and uuids stay readable), and
    switches between lower case, upper case and digits often (CamelCase and dates do not)."""
    return any(_random_part(m.group(0)) for m in _PART.finditer(value))


def _random_part(part: str) -> bool:
    if _HEX.fullmatch(part) or part.isdigit():
        return False
    classes = [_char_class(c) for c in part]
    if len(set(classes)) < 2:
        return False
    switches = sum(1 for a, b in zip(classes, classes[1:], strict=False) if a != b)
    return switches / len(part) >= _SWITCH_RATE and _entropy(part) >= _PART_BITS


_SWITCH_RATE = 0.3  # random base64: about 0.5; "RecordExportJSONLWriter": 0.22; "20261201T074629Z": 0.25
_PART_BITS = 3.5  # a part's own Shannon entropy per character


def _char_class(char: str) -> int:
    return 0 if char.islower() else 1 if char.isupper() else 2


def _entropy(text: str) -> float:
    counts = {c: text.count(c) for c in set(text)}
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())
