"""The rules of ``recipe_ledger.redact`` (its docstring says what they are)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from functools import lru_cache, partial
from typing import Any

from recipe_ledger.redact import detectors

MARK = "[REDACTED]"
USER_NAMES_ENV = "RECIPE_LEDGER_REDACT_NAMES"

_SECRET_WORDS = frozenset(
    {
        "token",
        "key",
        "secret",
        "password",
        "passwd",
        "pass",
        "pwd",
        "apikey",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "cookie",
        "session",
        "private",
        "privatekey",
        "accesskey",
        "passphrase",
        # Names with no word above (issue 26): DB_CREDS, VAULT_PASSCODE, pw=, SLACK_WEBHOOK.
        "creds",
        "cred",
        "passcode",
        "pw",
        "webhook",
    }
)
# Words that are also ordinary English: "token: the algorithm" is prose, "token: hf_x..." is not.
_PROSE_WORDS = frozenset({"token", "key", "pass", "auth", "session", "private", "cookie"})
_PROSE_VALUE = re.compile(r"[a-z]{1,12}")
# A last word that only qualifies the secret before it: HF_TOKEN_VALUE, API_KEY_B64.
_QUALIFIERS = frozenset({"value", "b64", "base64", "str", "string", "data", "raw", "hash"})
_SHELL_PATHS = frozenset({"pwd", "oldpwd"})
# A last word that makes the name a measure or an identifier, whatever comes before it:
# --use-server-token-count, max_token_len, eos_token_id, session_id (a conversation in AIPerf's traces
# and SGLang, not a login). Its value is a number, a switch or a name, never a credential; a login's
# session still hides under SESSION, SESSION_TOKEN, SESSION_KEY, SESSION_COOKIE.
# An exception's class (KeyError, TokenizerError, AuthError) names a message, not a credential:
# "KeyError: 'tail'" once printed as "KeyError: '[REDACTED]'", hiding the one word that said what
# broke. The message is still scanned for token shapes and for its own secret-named pairs.
_PLAIN_LAST_WORDS = frozenset(
    {"count", "counts", "len", "length", "size", "limit", "threshold", "budget", "id", "ids"}
    | {"error", "exception", "warning"}
)
# Long compound words that hold a secret word without a separator (HFTOKEN, MYAPIKEY, DBPASSWORD).
_GLUED = re.compile(r"(?:token|secret|passw(?:or)?d|passcode|apikey|credentials?|creds)$", re.IGNORECASE)
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
# A number, a boolean, or the start of a structure (`[`, `{`: its contents are scanned on their own).
_HARMLESS_VALUE = re.compile(
    r"[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|yes|no|on|off|none|null|[\[\]{}(),\d.\s]*", re.I
)
# Last words that also count things in a serving log (`#new-token: 5`, `kv_cache_key: 3`): under
# them a plain integer is a count, never a credential. PASSWORD, SECRET... keep hiding digits (a PIN).
_COUNT_WORDS = frozenset({"token", "key", "session"})
# ... and a reference to a variable (`-e HF_TOKEN=$HF_TOKEN` in a recipe's command: what a person
# copies; the value is the shell's, not the text's).
# Upper case only: "$ecret99" is a password that starts with a dollar, not a reference.
_UNSET = re.compile(
    r"none|null|nil|true|false|<redacted>|\*+|[\[{].*|(?-i:\$\{?[A-Z_][A-Z0-9_]*\}?)", re.I | re.S
)
_COUNT = re.compile(r"[+-]?\d{1,12}(?:\.\d+)?(?:[eE][+-]?\d+)?")

# Credential shapes of the services a serving lab touches. Each is anchored on a vendor prefix so
# ordinary hex digests (git, sha256) are never mistaken for a token.
_TOKEN_SHAPES = [
    r"hf_[A-Za-z0-9]{20,}",
    r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe
    r"sk-(?:proj|ant|svcacct|admin|or)-[A-Za-z0-9_\-]{8,}",  # OpenAI project keys, Anthropic, OpenRouter
    r"pypi-AgE[A-Za-z0-9_\-]{8,}",  # a PyPI macaroon (base64 of its version byte and "pypi.org")
    r"pypi-(?=[A-Za-z0-9_\-]*[0-9])(?=[A-Za-z0-9_\-]*[A-Z])[A-Za-z0-9_\-]{16,}",
    r"nvapi-[A-Za-z0-9_\-]{16,}",  # NVIDIA NGC / build.nvidia.com
    r"ya29\.[0-9A-Za-z_\-]{16,}",  # a Google OAuth access token
    r"npm_[A-Za-z0-9]{30,}",
    r"hvs\.[A-Za-z0-9_\-]{20,}",  # a Vault service token
    r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",  # SendGrid
    r"dop_v1_[a-f0-9]{40,}",  # DigitalOcean
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_\-]{20,}",
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    r"xox[abposre]-[A-Za-z0-9-]{10,}",
    r"glpat-[A-Za-z0-9_\-]{20,}",
    r"AIza[0-9A-Za-z_\-]{35}",
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT: header.payload.sig
]
_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(_TOKEN_SHAPES) + r")")
# A PEM private key, whole; in JSON text its newlines are the two characters "\n", which .*? spans.
_PEM_RE = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
# scheme://user:password@host: the password goes, the user stays (it says whose access it was).
_URL_USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^/\s:@\"'<>]*):([^/\s@\"'<>]+)@")
# scheme://TOKEN@host (git's https://<token>@github.com): a user name that looks like a key goes.
_URL_USER_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^/\s:@\"'<>\[\]]+)@")
# user:password@registry.example.com/image (a docker reference, a DSN without its scheme): no
# scheme, so the host must look like one (a dot and a top-level name, or localhost) and the user
# must not follow a path or another reference (`org/image:tag@sha256:...` has no host after @).
_BARE_USERINFO_RE = re.compile(
    r"(?<![\w/:@.\-])([A-Za-z0-9_.\-]+):([^\s/@:\"'<>]+)@(?=(?:[A-Za-z0-9\-]+\.)+[A-Za-z]{2,}\b|localhost\b)"
)
# Secrets a URL carries in its query or path: a presigned S3/GCS URL's signature and credential,
# an Azure SAS signature, a Slack or Discord webhook's path (the path is the credential).
_URL_QUERY_SECRET_RE = re.compile(
    r"(?i)([?&](?:x-amz-signature|x-amz-credential|x-goog-signature|x-goog-credential|sig|signature)=)"
    r"([^&\s\"'#<>]+)"
)
_WEBHOOK_RE = re.compile(
    r"(?i)((?:hooks\.slack\.com/(?:services|workflows|triggers)|discord(?:app)?\.com/api/webhooks)/)"
    r"[A-Za-z0-9_/\-]+"
)
# Free text that says what follows is a secret: "the db password is X", "my token was X",
# "api key = X" ("password: X" is a pair, below). The value goes unless it is a word that describes the secret
# instead of being it ("the password is incorrect").
_PROSE_SECRET_RE = re.compile(
    r"(?i)\b(pass(?:word|wd|phrase|code)?|pwd|pw|secret|token|(?:api|access|secret|private)[ _-]?key|"
    r"credentials?|creds)((?:\s+(?:for|of|to)\s+[\w.@/:\-]+)?\s+(?:is|was|=|is set to|set to)\s+)"
    r"([\"'`]?)([^\s\"'`]+)"
)
_DESCRIBING_WORDS = frozenset(
    "the a an not no none null set unset empty missing required invalid incorrect wrong expired "
    "correct valid ok okay fine too still being now stored hidden redacted unknown needed optional "
    "given provided used read sent ignored rejected accepted supported shown printed changed "
    "rotated revoked in on from at by".split()
)
# A line break inside a token (a wrapped log line, a YAML folded string, a shell continuation):
# shapes and base64 runs are also looked for with the breaks taken out (``_mask_joined``).
_BREAK_RE = re.compile(r"\\?\r?\n[ \t]*")
# A run that may be base64 (standard or URL-safe) of text: 16+ characters with both cases.
_B64_RUN_RE = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/_\-]{16,}={0,2}(?![A-Za-z0-9+/=_\-])")
_B64_DEPTH = 2  # base64 inside base64 inside base64 is decoded no further
_AUTH_HEADER_RE = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|token|digest|negotiate)\s+)?"
    r"([^\s\"',;]+)"
)
_BEARER_RE = re.compile(r"(?i)\b(bearer)(\s+)([A-Za-z0-9._~+/=\-]{16,})")
# key=value, key: value, "key": "value", --key=value; then --key value. The key is judged by the
# name rule (is_secret_name) in the callback, not by these patterns.
# A value is taken whole (an atomic group) and is never itself the key of the next pair: in
# "hostile: password: X" the pair is password: X, not hostile: password.
_PAIR_RE = re.compile(
    r"(?<![A-Za-z0-9_.\-])(-{0,2}[\"']?[A-Za-z_][A-Za-z0-9_.\-]*[\"']?)(\s*[:=]\s*)"
    r"((?>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;&<>]+))(?<![:=])(?!\s*[:=])"
)
_FLAG_RE = re.compile(
    r"(?<![A-Za-z0-9_.\-])(--?[A-Za-z][A-Za-z0-9_.\-]*)(\s+)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\-\"',;<>][^\s\"',;<>]*)"
)
# Secret values shorter than this are not hunted for verbatim: replacing every "1" would be noise.
_MIN_LITERAL = 8


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD_SPLIT.split(name) if w]


def _user_names(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The extra words/names of $RECIPE_LEDGER_REDACT_NAMES (lower case)."""
    env = os.environ if environ is None else environ
    raw = env.get(USER_NAMES_ENV, "")
    return frozenset(part.strip().lower() for part in raw.split(",") if part.strip())


def is_secret_name(name: str, value: object = None, *, extra: frozenset[str] = frozenset()) -> bool:
    """Whether the value of ``name`` (an env name, dict key, flag or pair key) must be hidden.

    ``value`` (when known) exempts numbers and booleans under names that only hold a secret word
    in the middle; ``extra`` adds user-listed words or whole names (lower case)."""
    kind = _name_kind(name, extra)
    if kind == _NEVER or _is_unset(value) or (kind == _ALWAYS and _is_count(name, value)):
        return False
    if kind != _INSIDE:
        return kind == _ALWAYS
    return value is None or not (isinstance(value, (str, int, float)) and _harmless(value))


def _is_unset(value: object) -> bool:
    """No value at all (`'api_key': None` in a server's printed config), or the opening of a
    structure whose contents are scanned on their own: nothing to hide here."""
    return isinstance(value, bool) or (isinstance(value, str) and _UNSET.fullmatch(value.strip()) is not None)


def _is_count(name: str, value: object) -> bool:
    """A number under a name whose last word also counts things (`#new-token: 5`, `ms_per_token: 3.3`)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return False
    if not _COUNT.fullmatch(str(value).strip()):
        return False
    words = _words(name)
    return bool(words) and words[-1] in _COUNT_WORDS


_NEVER, _INSIDE, _ALWAYS = 0, 1, 2


@lru_cache(maxsize=1 << 14)
def _name_kind(name: str, extra: frozenset[str]) -> int:
    """How ``name`` reads, cached: the same keys come back in every entry (the cost of a site build)."""
    words = _words(name)
    lowered = name.strip("-").lower()
    if not words or lowered in _SHELL_PATHS:
        return _NEVER
    if extra and _listed(lowered, words, extra):
        return _ALWAYS
    last = words[-1]
    if words[-1] in _PLAIN_LAST_WORDS:
        return _NEVER
    qualified = len(words) > 1 and last in _QUALIFIERS and words[-2] in _SECRET_WORDS
    if last in _SECRET_WORDS or _GLUED.search(last) or qualified:
        return _ALWAYS
    if any(w in _SECRET_WORDS for w in words) or any(_GLUED.search(w) for w in words):
        return _INSIDE
    return _NEVER


def _listed(lowered: str, words: list[str], extra: frozenset[str]) -> bool:
    """A user-listed entry names this variable: the whole name, its tail (``ARM0_LAB_DSN``), or a word."""
    return any(lowered == e or lowered.endswith("_" + e) or e in words for e in extra)


def _harmless(value: str | int | float) -> bool:
    return isinstance(value, (int, float)) or _HARMLESS_VALUE.fullmatch(value.strip()) is not None


def is_secret_env_name(name: str, value: object = None) -> bool:
    """True for environment variable names whose value is hidden (see the module's *Names*)."""
    return is_secret_name(name, value, extra=_user_names())


def is_secret_key(key: str, value: object = None) -> bool:
    """True for a dict key or option name that looks secret (``hf_token``, ``apiKey``, ``password``)."""
    return is_secret_name(key, value, extra=_user_names())


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-named variables in ``environ`` (default: this process), longest first."""
    env = os.environ if environ is None else environ
    extra = _user_names(env)
    found = {v for k, v in env.items() if len(v) >= _MIN_LITERAL and is_secret_name(k, v, extra=extra)}
    return sorted(found, key=len, reverse=True)


class _Rules:
    """What one redaction call needs from the environment, read once: literal values, user names."""

    def __init__(self, environ: Mapping[str, str] | None):
        env = os.environ if environ is None else environ
        self.literals = tuple(secret_values(env))
        self.extra = _user_names(env) | _user_names()

    def text(self, text: str) -> str:
        if len(text) < _SHORTEST:
            return text
        if len(text) > _CACHED_UP_TO:
            return _redact_string(text, self.literals, self.extra)
        return _redact_cached(text, self.literals, self.extra)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in env.items():
            hidden = MARK if is_secret_name(name, value, extra=self.extra) else self.text(str(value))
            out[_unique(self.text(name), out)] = hidden
        return out

    def obj(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            # A key is text like any other (a token pasted as an env name, a param or volume key):
            # it is redacted too, and judged as it was given for what its value may show.
            out: dict[Any, Any] = {}
            for key, value in obj.items():
                shown = _unique(self.text(key), out) if isinstance(key, str) else key
                out[shown] = self._item(str(key), value)
            return out
        if isinstance(obj, (list, tuple)):
            return type(obj)(self._sequence(obj))
        return obj

    def _item(self, key: str, value: Any) -> Any:
        # Only string values of secret-named keys are hidden whole: a number under a `max_tokens`-like
        # key is never a credential, and nested structures are walked instead.
        if isinstance(value, str) and is_secret_name(key, value, extra=self.extra):
            return MARK
        return self.obj(value)

    def _sequence(self, items: list | tuple) -> list[Any]:
        # An argv: ["--password", "X"] hides X, as "--password X" does in text; the flag is judged
        # with its value, so ["--long-prefill-token-threshold", "6144"] stays.
        out: list[Any] = []
        flag: str | None = None
        for item in items:
            value_of_flag = isinstance(item, str) and not item.startswith("-")
            if flag is not None and value_of_flag and is_secret_name(flag, item, extra=self.extra):
                out.append(MARK)
            else:
                out.append(self.obj(item))
            flag = item if isinstance(item, str) and item.startswith("-") and "=" not in item else None
        return out


def _unique(key: str, taken: Mapping[Any, Any]) -> str:
    """``key``, or ``key#2``, ``key#3``... when another redacted key already reads the same: two
    secrets as keys must not collapse into one entry (and lose a value)."""
    if key not in taken:
        return key
    n = 2
    while f"{key}#{n}" in taken:
        n += 1
    return f"{key}#{n}"


_SHORTEST = 5  # nothing shorter holds a credential this module can recognise ("k=v1" is not one)
_CACHED_UP_TO = 4096  # argv items, env values, names, titles: they repeat across entries


def _redact_string(text: str, literals: tuple[str, ...], extra: frozenset[str], depth: int = 0) -> str:
    for value in literals:
        text = text.replace(value, MARK)
    # Each rule runs only where its anchor is (a substring test costs a fraction of a regex scan):
    # most shown strings and log lines hold no "@", no "://", no "PRIVATE KEY".
    if "PRIVATE KEY" in text:
        text = _PEM_RE.sub(_pem, text)
    text = _mask_joined(text, _TOKEN_RE, _whole_shape)
    text = _mask_joined(
        text, _B64_RUN_RE, partial(_b64_hides_secret, literals=literals, extra=extra, depth=depth)
    )
    lowered = text.lower()
    if "webhooks" in lowered or "hooks.slack" in lowered:
        text = _WEBHOOK_RE.sub(lambda m: f"{m.group(1)}{MARK}", text)
    if "=" in text and ("?" in text or "&" in text):
        text = _URL_QUERY_SECRET_RE.sub(lambda m: f"{m.group(1)}{MARK}", text)
    if "@" in text:
        if "://" in text:
            text = _URL_USERINFO_RE.sub(lambda m: f"{m.group(1)}:{MARK}@", text)
            text = _URL_USER_RE.sub(_url_user, text)
        text = _BARE_USERINFO_RE.sub(lambda m: f"{m.group(1)}:{MARK}@", text)
    if "authorization" in lowered:
        text = _AUTH_HEADER_RE.sub(_auth_header, text)
    if "bearer" in lowered:
        text = _BEARER_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MARK}", text)
    if _PROSE_ANCHOR.search(lowered):
        text = _PROSE_SECRET_RE.sub(_prose_secret, text)
    pair = partial(_pair, extra=extra)
    text = _FLAG_RE.sub(pair, _PAIR_RE.sub(pair, text))
    return _mask_detected(text)


_PROSE_ANCHOR = re.compile(r"\s(?:is|was|=|set to)\s")


def _pem(match: re.Match[str]) -> str:
    """A PEM block, one marker per line: the lines around it keep their numbers (a streamed log
    is redacted a line at a time, ``stream``)."""
    return "\n".join(MARK for _ in match.group(0).split("\n"))


def _mask_detected(text: str) -> str:
    """What detect-secrets' plugins find (``detectors``) that the rules above did not."""
    for value in sorted(detectors.found(text), key=len, reverse=True):
        if value != MARK and MARK not in value:
            text = re.sub(r"(?<![A-Za-z0-9])" + re.escape(value) + r"(?![A-Za-z0-9])", MARK, text)
    return text


def _whole_shape(joined: str, start: int, end: int, breaks: list[int]) -> tuple[int, int] | None:
    """A token shape found with the line breaks taken out. A token that ends at a break is whole
    on its line: the match is cut there, so the next line's first word is not taken with it."""
    for cut in breaks:
        if start < cut < end and _TOKEN_RE.fullmatch(joined, start, cut):
            return start, cut
    return start, end


def _b64_hides_secret(
    joined: str,
    start: int,
    end: int,
    breaks: list[int],
    *,
    literals: tuple[str, ...],
    extra: frozenset[str],
    depth: int,
) -> tuple[int, int] | None:
    """A base64 run whose decoded text holds a secret (``HF_TOKEN=hf_...`` base64-wrapped)."""
    run = joined[start:end]
    if depth >= _B64_DEPTH or not (_has_upper_and_lower(run)):
        return None
    decoded = _b64_text(run)
    if decoded is None or _redact_string(decoded, literals, extra, depth + 1) == decoded:
        return None
    return start, end


def _has_upper_and_lower(run: str) -> bool:
    return _UPPER.search(run) is not None and _LOWER.search(run) is not None


_UPPER, _LOWER = re.compile(r"[A-Z]"), re.compile(r"[a-z]")


def _b64_text(run: str) -> str | None:
    """The text a base64 run decodes to, or None when it is not base64 of mostly printable text."""
    import base64
    import binascii

    body = run.rstrip("=").replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(1 for c in text if c.isprintable() or c in "\n\r\t")
    return text if text and printable >= 0.95 * len(text) else None


def _mask_joined(text: str, pattern: re.Pattern[str], keep: Any) -> str:
    """``pattern``'s matches replaced by the marker, also those that a line break splits.

    The text is searched with its breaks (``_BREAK_RE``) taken out; ``keep(joined, start, end,
    breaks)`` says which part of a match to hide (None: none). A hidden span that crosses a break
    becomes one marker on each side of it: the line count stays (``stream`` relies on it)."""
    if "\n" not in text:
        return pattern.sub(lambda m: MARK if keep(text, m.start(), m.end(), []) else m.group(0), text)
    pieces, origins, breaks, last, size = [], [], [], 0, 0
    for found in _BREAK_RE.finditer(text):
        pieces.append(text[last : found.start()])
        origins.append((size, last))
        size += found.start() - last
        breaks.append(size)
        last = found.end()
    pieces.append(text[last:])
    origins.append((size, last))
    joined = "".join(pieces)
    spans = []
    for match in pattern.finditer(joined):
        kept = keep(joined, match.start(), match.end(), breaks)
        if kept:
            spans += _original_spans(kept[0], kept[1], origins, [len(p) for p in pieces])
    for begin, end in sorted(spans, reverse=True):
        text = text[:begin] + MARK + text[end:]
    return text


def _original_spans(
    start: int, end: int, origins: list[tuple[int, int]], sizes: list[int]
) -> list[tuple[int, int]]:
    """The spans of the original text that the joined span [start, end) came from (one per line)."""
    out = []
    for (joined_at, original_at), size in zip(origins, sizes, strict=True):
        lo, hi = max(start, joined_at), min(end, joined_at + size)
        if lo < hi:
            out.append((original_at + lo - joined_at, original_at + hi - joined_at))
    return out


def _url_user(match: re.Match[str]) -> str:
    """``scheme://user@``: a user name that looks like a key (16+ characters with letters and
    digits, or a token shape) is hidden; ``git@``, ``alice@``, ``postgres@`` stay."""
    user = match.group(2)
    if user == MARK or not _key_like(user):
        return match.group(0)
    return f"{match.group(1)}{MARK}@"


def _key_like(user: str) -> bool:
    letters, digits = any(c.isalpha() for c in user), any(c.isdigit() for c in user)
    return bool(_TOKEN_RE.fullmatch(user)) or (len(user) >= 16 and letters and digits) or len(user) >= 32


def _prose_secret(match: re.Match[str]) -> str:
    word, between, quote, value = match.groups()
    bare = value.rstrip(".,;:!?)]}")
    if not bare or bare == MARK or MARK in bare or bare.lower() in _DESCRIBING_WORDS:
        return match.group(0)
    words = _words(word)
    if words and words[-1] in _PROSE_WORDS and (_PROSE_VALUE.fullmatch(bare) or _COUNT.fullmatch(bare)):
        return match.group(0)  # "the token is generated", "the key is 5": a word or a count
    return f"{word}{between}{quote}{MARK}{value[len(bare) :]}"


_redact_cached = lru_cache(maxsize=1 << 16)(_redact_string)


def _pair(match: re.Match[str], *, extra: frozenset[str]) -> str:
    key, sep, value = match.group(1), match.group(2), match.group(3)
    bare_key = key.strip("\"'")
    inner = value.strip("\"'`").rstrip(")]}`")  # `'ms_per_token': 3.3}` is judged by its 3.3
    if inner == MARK or inner.lower() in ("bearer", "basic", "token", "digest", "negotiate"):
        return match.group(0)
    if sep.strip() == ":" and bare_key.lower() in _PROSE_WORDS and _PROSE_VALUE.fullmatch(value):
        return match.group(0)  # "key: the" is a sentence; a credential is not a plain word
    if not is_secret_name(bare_key, inner, extra=extra):
        if "=" in value or ":" in value:
            # The value may hold a pair of its own ("failed: HF_TOKEN=hf_..."): the match consumed
            # it, so the scan would never reach it.
            return key + sep + _PAIR_RE.sub(partial(_pair, extra=extra), value)
        return match.group(0)
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] and len(value) > 1 else ""
    return f"{key}{sep}{quote}{MARK}{quote}"


def _auth_header(match: re.Match[str]) -> str:
    scheme = f"{match.group(2)} " if match.group(2) else ""
    return f"{match.group(1)}{scheme}{MARK}"


def redact_text(text: str, *, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with credential-shaped strings and known secret values replaced by ``[REDACTED]``."""
    return _Rules(environ).text(text)


def looks_like_credential(name: str) -> bool:
    """Whether a name (an experiment, arm, lane, instrument, box) has a credential's shape: the
    rules and detect-secrets' plugins would hide it. Names are refused for it, not redacted."""
    return _redact_string(name, (), frozenset()) != name


def redact_lines(text: str, *, environ: Mapping[str, str] | None = None) -> str:
    """``redact_text`` a line at a time through the cache, plus the rules that span lines (PEM
    blocks, split tokens, wrapped base64) over the whole: for texts whose lines repeat across many
    texts (the site's ~70 commands per recipe share most of theirs). A pair split by a line break
    (``password:`` then the value on the next line) is the one thing it does not see."""
    if "\n" not in text:
        return redact_text(text, environ=environ)
    rules = _Rules(environ)
    if "PRIVATE KEY" in text:
        text = _PEM_RE.sub(_pem, text)
    text = _mask_joined(text, _TOKEN_RE, _crossing(_whole_shape))
    b64 = partial(_b64_hides_secret, literals=rules.literals, extra=rules.extra, depth=0)
    text = _mask_joined(text, _B64_RUN_RE, _crossing(b64))
    return "\n".join(rules.text(line) for line in text.split("\n"))


def _crossing(keep: Any) -> Any:
    """``keep`` for matches that cross a line break only (the rest is each line's own business)."""

    def crossing(joined: str, start: int, end: int, breaks: list[int]) -> tuple[int, int] | None:
        if not any(start < cut < end for cut in breaks):
            return None
        return keep(joined, start, end, breaks)

    return crossing


def text_redactor(environ: Mapping[str, str] | None = None) -> Callable[[str], str]:
    """``redact_text`` bound to one reading of ``environ``, without the cache: a streamed log's
    lines never repeat, and caching them would only hold them in memory."""
    rules = _Rules(environ)
    return partial(_redact_string, literals=rules.literals, extra=rules.extra)


def redact_env(env: Mapping[str, str], *, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` with secret-named values hidden and every other value text-redacted."""
    return _Rules(environ).env(env)


def redact_obj(obj: Any, *, environ: Mapping[str, str] | None = None) -> Any:
    """A redacted copy of a JSON-like value (dicts, lists, tuples, strings; other scalars as they are)."""
    return _Rules(environ).obj(obj)
