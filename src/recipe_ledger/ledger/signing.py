"""Signed chain heads: each writer signs the head of its chain on every append (Ed25519).

A hash chain proves that nothing inside it changed, but anyone can rewrite a chain consistently
(every id and prev recomputed), cut its tail off, or append under another writer's name. A
signature over the chain's head ``(writer, seq, id)`` closes that: the id covers every line before
it through ``prev``, so one signature vouches for the whole chain, and without the writer's private
key nobody can produce it for a rewritten, extended or truncated chain.

Files::

    ledger/<writer>.jsonl       the chain; its ``key`` entries name the writer's key (first, rotations)
    ledger/allowed_signers      who may sign: "<writer> ssh-ed25519 <base64> [comment]" per line
                                (OpenSSH's allowed_signers format, as for git's signed commits); a
                                view of the chains' key entries that verify checks against them
    ledger/root_of_trust        maintainer keys that may sign a rotation for a writer whose key is
                                lost: "<maintainer> ssh-ed25519 <base64>"; committed once, never changed
    ledger/maintainers          writers allowed to retract other writers' entries, one per line
    ledger/heads/<writer>.json  the writer's latest signed head (rewritten on each append)
    ~/.config/recipe-ledger/keys/<writer>.key   the private key (OpenSSH format, 0600, never committed)

Where a writer's key comes from (TUF's root rotation is the model): the chain itself. Its first
``key`` entry names the key (signed by that key: trust on first use, the way TUF ships its first
root), and the key changes only through a ``rotate`` entry signed by the key it replaces, or by a
maintainer key of the root of trust. ``verify`` replays those entries, so a key edited into
``allowed_signers`` vouches for nothing: the file must agree with the chain's history or verify
fails, and a head signed with any other key fails too.

Rules (enforced at append and checked by ``ledger verify``):

- a new writer signs from its first entry: the first append (and ``ledger init``) makes its key and
  writes the ``key`` entry first (``$RECIPE_LEDGER_SIGNING=off`` turns that off: the test suite);
- a writer whose chain has a key entry must sign: an append from a box without the matching key is
  refused, and a chain whose last entry is not the signed head fails verify (an entry appended
  without the key, a truncation, a rewrite);
- a chain without a key entry is *unsigned*: every verify names it in a warning (anyone can rewrite
  it consistently), and ``ledger key init --adopt`` on its box signs it forward;
- the head file is rewritten under the chain's lock once the line itself is durable (fsynced), and
  ``verify`` reads a chain and its head under that lock, so a verify during appends sees a
  matching pair. The head file is not fsynced (an append costs one fsync, as before): a crash or
  power loss can leave it stale or empty; verify then says so and ``ledger key init`` on the
  writer's own box signs the current head again. The entries are never at risk.

What a signature cannot show on its own: a chain cut back to an older head *together with* that
head's old signature file (both restored from git). Witnesses (``ledger witness``: other writers
record this chain's head in theirs) and ``ledger verify --history`` catch that.

``cryptography`` is imported only when a key or a signature is actually used.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.ledger import chain

KEY_DIR_ENV = "RECIPE_LEDGER_KEY_DIR"
SIGNERS_FILE = "allowed_signers"
ROOT_FILE = "root_of_trust"
SIGNING_ENV = "RECIPE_LEDGER_SIGNING"  # "off": new writers do not make keys (the test suite)
MAINTAINERS_FILE = "maintainers"
HEADS_DIR = "heads"
KEY_TYPE = "ssh-ed25519"
_CONTEXT = b"recipe-ledger chain head v1\0"
_KEY_CONTEXT = b"recipe-ledger key v1\0"
HEAD_BYTES = 512  # a head record is ~360 bytes (writer names are at most 63 characters)


def key_dir() -> Path:
    """Where private keys live: $RECIPE_LEDGER_KEY_DIR, else ~/.config/recipe-ledger/keys."""
    stated = os.environ.get(KEY_DIR_ENV)
    return Path(stated) if stated else Path.home() / ".config" / "recipe-ledger" / "keys"


def key_path(writer: str) -> Path:
    return key_dir() / f"{writer}.key"


def head_path(ledger_dir: Path, writer: str) -> Path:
    return ledger_dir / HEADS_DIR / f"{writer}.json"


def head_message(writer: str, seq: int, entry_id: str) -> bytes:
    """The bytes a head signature covers (a context prefix, then canonical JSON)."""
    return _CONTEXT + chain.canonical({"id": entry_id, "seq": seq, "writer": writer})


def key_message(writer: str, previous: str | None, public: str) -> bytes:
    """The bytes a key entry's signature covers: who, which key it replaces, which key from now on.

    A key never comes back once replaced (verify refuses that), so an old rotation cannot be
    replayed to bring a retired key back.
    """
    return _KEY_CONTEXT + chain.canonical({"previous_key": previous, "public_key": public, "writer": writer})


def fingerprint(public: Any) -> str:
    """A key as ssh-keygen -l shows it (``SHA256:...``): every Ed25519 key's text starts alike."""
    try:
        blob = base64.b64decode(str(public).split()[1], validate=True)
    except (IndexError, ValueError):
        return repr(str(public)[:40])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")


def signs_new_writers() -> bool:
    """Whether a new writer makes its key on its first append (on unless $RECIPE_LEDGER_SIGNING=off)."""
    return os.environ.get(SIGNING_ENV, "").strip().lower() not in ("off", "0", "no", "false")


# -- the committed trust files ------------------------------------------------------------------


def allowed_signers(ledger_dir: Path) -> dict[str, set[str]]:
    """``{writer: {"ssh-ed25519 <base64>", ...}}`` from ``ledger/allowed_signers`` (absent: empty).

    OpenSSH's format: principals (comma-separated), optional options, key type, base64, comment.
    """
    return _key_file(ledger_dir, SIGNERS_FILE)


def root_of_trust(ledger_dir: Path) -> dict[str, set[str]]:
    """``{maintainer: {key, ...}}`` from ``ledger/root_of_trust`` (absent: nobody), same format."""
    return _key_file(ledger_dir, ROOT_FILE)


def _key_file(ledger_dir: Path, name: str) -> dict[str, set[str]]:
    signers: dict[str, set[str]] = {}
    for number, words in _lines(ledger_dir / name):
        if KEY_TYPE not in words or words.index(KEY_TYPE) + 1 >= len(words):
            raise InputError(
                f"not a '<writer> {KEY_TYPE} <base64>' line",
                where=f"{name}:{number}",
                hint=f"git log -p -- ledger/{name}",
            )
        at = words.index(KEY_TYPE)
        for writer in words[0].split(","):
            signers.setdefault(writer, set()).add(f"{KEY_TYPE} {words[at + 1]}")
    return signers


def list_signer(ledger_dir: Path, writer: str, public: str, *, replace: bool = False) -> bool:
    """Put ``writer public`` in ``allowed_signers``; ``replace``: drop the writer's other keys.

    True when the file changed. Rewritten through a temporary file and a rename, so a reader never
    sees half of it.
    """
    path = ledger_dir / SIGNERS_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    own = [line for line in lines if _names(line, writer)]
    if public in allowed_signers(ledger_dir).get(writer, set()) and (not replace or len(own) == 1):
        return False
    kept = [line for line in lines if not (replace and _names(line, writer))]
    kept.append(f"{writer} {public} recipe-ledger")
    temporary = path.with_name(f".{SIGNERS_FILE}.tmp")
    temporary.write_text("\n".join(kept) + "\n", encoding="utf-8")
    temporary.replace(path)
    return True


def _names(line: str, writer: str) -> bool:
    words = line.split("#", 1)[0].split()
    return bool(words) and writer in words[0].split(",")


def maintainers(ledger_dir: Path) -> set[str]:
    """Writers allowed to retract any writer's entries (``ledger/maintainers``; absent: none)."""
    return {words[0] for _, words in _lines(ledger_dir / MAINTAINERS_FILE)}


def _lines(path: Path) -> list[tuple[int, list[str]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split() if not line.lstrip().startswith("#") else []
        if words:
            out.append((number, words))
    return out


# -- keys ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeySetup:
    key_file: Path
    public: str  # "ssh-ed25519 <base64>"
    created_key: bool
    added_signer: bool


def init_key(ledger_dir: Path, writer: str) -> KeySetup:
    """Make ``writer``'s key on this box (once) and list its public half in ``allowed_signers``."""
    path = key_path(writer)
    created = ensure_key_file(path)
    public = public_text(_load_private(path))
    added = list_signer(ledger_dir, writer, public)
    return KeySetup(path, public, created, added)


def ensure_key_file(path: Path) -> bool:
    """Make a new private key at ``path`` unless one is there; True when it was made.

    Two processes making a writer's first key at once: one creates it (O_EXCL), the other uses it.
    """
    if path.exists():
        return False
    try:
        _write_new_key(path)
    except FileExistsError:
        return False
    return True


def load_private(path: Path) -> Any:
    """The Ed25519 private key in ``path`` (a StateError naming the file otherwise)."""
    return _load_private(path)


def first_key_payload(writer: str, private: Any) -> dict[str, Any]:
    """The payload of a chain's first key entry: the key, signed by itself (proof of possession)."""
    public = public_text(private)
    return _key_payload("first", writer, None, public, private)


def rotation_payload(writer: str, previous: str, new: str, signer: Any) -> dict[str, Any]:
    """A rotation from ``previous`` to ``new``, signed by ``signer`` (the old key, or a maintainer's)."""
    return _key_payload("rotate", writer, previous, new, signer)


def rotation_grant(writer: str, previous: str | None, new: str, signer: Any) -> str:
    """The signature a maintainer gives for a rotation (``ledger key grant``), base64."""
    return base64.b64encode(signer.sign(key_message(writer, previous, new))).decode("ascii")


def _key_payload(action: str, writer: str, previous: str | None, public: str, signer: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "schema_version": 1,
        "action": action,
        "public_key": public,
        "signed_by": public_text(signer),
        "signature": rotation_grant(writer, previous, public, signer),
    }
    if previous is not None:
        payload["previous_key"] = previous
    return payload


def key_entry_problem(writer: str, payload: dict[str, Any]) -> str | None:
    """Why a key entry's signature does not verify under its ``signed_by`` key, or None."""
    message = key_message(writer, payload.get("previous_key"), str(payload.get("public_key")))
    return _signature_problem(str(payload.get("signed_by")), str(payload.get("signature")), message)


def _write_new_key(path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _load_private(path: Path) -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key

    try:
        key = load_ssh_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError) as error:
        raise StateError(f"cannot read the signing key: {error}", where=str(path)) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise StateError("the signing key is not an Ed25519 key", where=str(path))
    return key


def public_text(private: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    raw = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return raw.decode("ascii")


@functools.lru_cache(maxsize=8)
def _cached_private(path: Path, _mtime_ns: int) -> Any:
    return _load_private(path)  # parsing an OpenSSH key file costs more than signing with it


def signing_key(ledger_dir: Path, writer: str) -> Any | None:
    """The key to sign ``writer``'s appends with; None for an unsigned writer (not listed, no head).

    A listed writer without the matching key on this box is refused: that is either a second box
    using this writer's name or a key that was never copied here. The key of the signed head counts
    as listed too (an append is no place to judge allowed_signers: ``ledger verify`` checks the
    file against the chain's key entries).
    """
    listed = set(allowed_signers(ledger_dir).get(writer, set()))
    head = read_head(ledger_dir, writer)
    if head and isinstance(head.get("key"), str):
        listed.add(head["key"])
    if not listed:
        return None
    path = key_path(writer)
    if not path.is_file():
        raise StateError(
            f"writer {writer!r} signs its chain (ledger/{SIGNERS_FILE}) and this box has no key for it",
            where=str(path),
            hint="set RECIPE_LEDGER_WRITER to this box's own name (then `ledger key init`)",
        )
    key = _cached_private(path, path.stat().st_mtime_ns)
    if public_text(key) not in listed:
        raise StateError(
            f"the key in {path} is not one of {writer!r}'s keys in ledger/{SIGNERS_FILE}",
            where=str(path),
            hint="set RECIPE_LEDGER_WRITER to this box's own name, or commit its public key",
        )
    return key


# -- heads --------------------------------------------------------------------------------------


def write_head(ledger_dir: Path, writer: str, head: dict[str, Any], key: Any) -> None:
    """Sign ``head`` (an entry as stored) and replace ``ledger/heads/<writer>.json`` atomically."""
    seq, entry_id = head["seq"], head["id"]
    signature = key.sign(head_message(writer, seq, entry_id))
    record = {
        "id": entry_id,
        "key": public_text(key),
        "seq": seq,
        "sig": base64.b64encode(signature).decode("ascii"),
        "writer": writer,
    }
    path = head_path(ledger_dir, writer)
    path.parent.mkdir(exist_ok=True)
    # Rewritten in place, without fsync: the caller holds the chain's lock, and readers (verify)
    # take it too, so nobody sees a half-written head. What a crash can leave (an empty or stale
    # head) is re-made by `ledger key init`; the entries themselves were fsynced before this.
    # Always HEAD_BYTES long (padded with spaces) and written over the old one at offset 0: no
    # truncation, which on ext4 would flush the file at close and cost an append a millisecond.
    data = chain.canonical(record)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data.ljust(HEAD_BYTES - 1) + b"\n", 0)
    finally:
        os.close(fd)


def read_head(ledger_dir: Path, writer: str) -> dict[str, Any] | None:
    """The writer's signed head record; None without a head file, {} for an unreadable one."""
    path = head_path(ledger_dir, writer)
    try:
        record = chain.parse_line(path.read_bytes().strip())
    except FileNotFoundError:
        return None
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def signature_problem(record: dict[str, Any], writer: str, allowed: set[str]) -> str | None:
    """Why a head record is not a valid signature by one of ``allowed``, or None if it is."""
    seq, entry_id, key, sig = (record.get(k) for k in ("seq", "id", "key", "sig"))
    if record.get("writer") != writer or not isinstance(seq, int) or not isinstance(entry_id, str):
        return "signed head file is malformed"
    if key not in allowed:
        return f"head is signed by a key that is not {writer!r}'s (its chain's key entries name it)"
    problem = _signature_problem(str(key), str(sig), head_message(writer, seq, entry_id))
    if problem:
        return f"head {problem} (the head was changed, or signed without the key)"
    return None


def _signature_problem(key: str, sig: str, message: bytes) -> str | None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_ssh_public_key

    try:
        public = load_ssh_public_key(key.encode("ascii"))
        if not isinstance(public, Ed25519PublicKey):
            return "is signed with a key that is not Ed25519"
        public.verify(base64.b64decode(sig, validate=True), message)
    except (InvalidSignature, ValueError, TypeError, UnicodeEncodeError):
        return "signature does not verify"
    return None
