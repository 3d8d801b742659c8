"""The ledger folder: one chain file per writer, appending, reading, finding entries by id.

Layout under the project root::

    ledger/format.json          {"format":"recipe-ledger","version":1}
    ledger/.gitattributes       no end-of-line conversion: the bytes are what is hashed
    ledger/<writer>.jsonl       one hash chain per writer (a box), see chain.py
    ledger/quarantine/*.torn    torn tails moved aside by `ledger verify --repair`

One file per writer is what lets two clones on two boxes append independently and merge with a
plain ``git merge``: each side only ever appends to its own file, so git never sees both sides
change the same file.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from recipe_ledger import paths
from recipe_ledger.errors import InputError, StateError, UnknownIdError
from recipe_ledger.ledger import chain, gitinfo, signing
from recipe_ledger.ledger.fingerprint import box_fingerprint
from recipe_ledger.ledger.kinds import FORMAT_VERSION, KINDS

if TYPE_CHECKING:  # the models are imported where payloads are read or written, not to list entries
    from recipe_ledger.ledger.models import Payload
from recipe_ledger.redact import redact_obj

LEDGER_DIR = gitinfo.LEDGER_DIR
FORMAT_FILE = "format.json"
QUARANTINE_DIR = "quarantine"
WRITER_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
GITATTRIBUTES = (
    "# The ledger hashes exact bytes: never convert line endings.\n*.jsonl -text\nquarantine/** -text\n"
)
_AUTO = object()  # sentinel: take the git snapshot at append time
_FREEZE_AT = 20_000  # entries loaded at once above which they are hidden from the cyclic GC

RefSpec = str | tuple[str, str]  # an id (relation "see") or (relation, id)


def default_writer() -> str:
    """This box's writer name: $RECIPE_LEDGER_WRITER, else the host name made file-safe."""
    name = os.environ.get("RECIPE_LEDGER_WRITER") or socket.gethostname()
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._") or "box"


def check_writer(writer: str) -> str:
    if not WRITER_RE.match(writer):
        raise InputError(
            f"writer name {writer!r} is not file-safe (lower-case letters, digits, '.', '_', '-')",
            where="--writer",
        )
    return writer


class Ledger:
    """A ledger folder under a project root. Cheap to create; reads are cached until an append."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.dir = self.root / LEDGER_DIR
        self._cache: list[dict[str, Any]] | None = None
        self._valid: list[dict[str, Any]] | None = None
        self._by_id: dict[str, dict[str, Any]] | None = None
        self.rejected: list[Rejected] = []  # what the last read left out, and why

    # -- set-up -----------------------------------------------------------------------------

    @classmethod
    def init(cls, root: Path | str) -> Ledger:
        """Create ``ledger/`` with its format marker; idempotent."""
        ledger = cls(root)
        if not ledger.root.is_dir():
            raise InputError("project root does not exist", where=str(ledger.root))
        paths.no_links(ledger.root, LEDGER_DIR, what="the ledger")
        ledger.dir.mkdir(exist_ok=True)
        _write_once(ledger.dir / FORMAT_FILE, _format_marker())
        _write_once(ledger.dir / ".gitattributes", GITATTRIBUTES.encode())
        ledger.check_format()
        return ledger

    @classmethod
    def open(cls, root: Path | str) -> Ledger:
        """An existing ledger; a clear error if there is none or it is newer than this tool."""
        ledger = cls(root)
        ledger.check_format()
        return ledger

    def check_format(self) -> None:
        marker = self.dir / FORMAT_FILE
        if not marker.is_file():
            raise StateError("no ledger here", where=str(self.dir), hint=f"ledger init --root {self.root}")
        try:
            version = json.loads(marker.read_text())["version"]
        except (ValueError, KeyError, TypeError):
            raise StateError(
                "format marker is unreadable", where=str(marker), hint="git diff ledger/"
            ) from None
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise StateError(
                f"ledger format {version} is newer than this tool reads ({FORMAT_VERSION});"
                " nothing was changed",
                where=str(marker),
                hint="pip install -U recipe-ledger",
            )

    # -- paths ------------------------------------------------------------------------------

    def chain_path(self, writer: str) -> Path:
        return self.dir / f"{check_writer(writer)}.jsonl"

    def writable(self, name: str) -> Path:
        """``ledger/<name>`` to write: refused (InputError) when ``ledger/`` or the file is a symlink
        or resolves outside the project, so nothing is ever appended through a link."""
        return paths.no_links(self.root, LEDGER_DIR, *Path(name).parts, what="the ledger")

    def chain_files(self) -> list[Path]:
        return sorted(self.dir.glob("*.jsonl"))

    def quarantine_path(self, chain_file: Path) -> Path:
        """Where ``verify --repair`` moves ``chain_file``'s torn tail (checked as ``writable``)."""
        self.writable(chain_file.name)
        return self.writable(f"{QUARANTINE_DIR}/{chain_file.stem}.torn")

    def rel(self, path: Path) -> str:
        """A path as the user should see it: relative to the project root."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    # -- reading ----------------------------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        """Every entry whose payload is valid for its kind and version, oldest first.

        This is the view for readers that use payloads (tables, site, MLflow, releases): an entry
        that hashes well but says nothing valid (``kind: "bogus"``, a failure without ``cause``)
        is left out and listed in ``rejected`` (``ledger verify`` fails on it) instead of crashing
        them. Hot paths that read only the envelope (``log`` filters, folding) use ``envelopes``.
        """
        if self._valid is None:
            self._valid = [entry for entry in self.envelopes() if self._payload_ok(entry)]
        return self._valid

    def envelopes(self) -> list[dict[str, Any]]:
        """Every entry with a sound envelope (payload not validated), oldest first (by time, then
        writer and seq). Entries whose envelope is malformed are in ``rejected``."""
        if self._cache is None:
            self.rejected = []
            with chain.no_gc() as pause:
                found = [entry for path in self.chain_files() for entry in self._sound(path)]
                found.sort(key=_order)
                pause.keep = len(found) >= _FREEZE_AT
            self._cache = found
        return self._cache

    def _sound(self, path: Path) -> list[dict[str, Any]]:
        entries = self.read_chain(path)
        sound = [entry for entry in entries if envelope_problem(entry) is None]
        if len(sound) != len(entries):
            for number, entry in enumerate(entries, 1):
                problem = envelope_problem(entry)
                if problem:
                    self.rejected.append(Rejected(f"{self.rel(path)}:{number}", problem))
        return sound

    def _payload_ok(self, entry: dict[str, Any]) -> bool:
        from recipe_ledger.ledger.models import load_payload

        try:
            load_payload(entry["kind"], entry["payload"], where=entry["id"][:12])
        except (InputError, StateError) as error:
            self.rejected.append(Rejected(f"{entry['writer']}#{entry['seq']} {entry['id'][:12]}", str(error)))
            return False
        return True

    def read_chain(self, path: Path) -> list[dict[str, Any]]:
        """The complete lines of one chain as dicts; a torn tail is left for `verify` to report."""
        lines, _torn = chain.split_lines(path.read_bytes())
        try:
            parsed = [chain.parse_line(line) for line in lines]
        except ValueError:
            bad = next(n for n, line in enumerate(lines, 1) if not _parses(line))
            raise StateError(
                "line is not valid JSON", where=f"{self.rel(path)}:{bad}", hint="ledger verify"
            ) from None
        entries = [entry for entry in parsed if isinstance(entry, dict)]
        if len(entries) != len(parsed):  # valid JSON but not an object: a hand-edited line
            bad = next(n for n, entry in enumerate(parsed, 1) if not isinstance(entry, dict))
            raise StateError(
                "line is not an entry (not a JSON object)",
                where=f"{self.rel(path)}:{bad}",
                hint="ledger verify",
            )
        return entries

    def by_id(self) -> dict[str, dict[str, Any]]:
        if self._by_id is None:
            self._by_id = {entry["id"]: entry for entry in self.envelopes()}
        return self._by_id

    def get(self, id_or_prefix: str) -> dict[str, Any]:
        """The entry with this id or unique id prefix (at least 4 hex digits)."""
        prefix = id_or_prefix.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{4,64}", prefix):
            raise InputError(f"{id_or_prefix!r} is not an entry id (4 to 64 hex digits)", hint="ledger log")
        matches = self._matches(prefix)
        if not matches and self._cache is not None:
            self.refresh()  # another process may have appended since this instance last read
            matches = self._matches(prefix)
        if not matches:
            raise UnknownIdError(f"no entry with id {id_or_prefix}", where=str(self.dir), hint="ledger log")
        if len(matches) > 1:
            shown = ", ".join(m[:12] for m in sorted(matches)[:5])
            raise InputError(f"id prefix {id_or_prefix} is ambiguous: {shown}", hint="give more digits")
        return self.by_id()[matches[0]]

    def _matches(self, prefix: str) -> list[str]:
        index = self.by_id()
        if prefix in index:
            return [prefix]
        return [entry_id for entry_id in index if entry_id.startswith(prefix)]

    def refresh(self) -> None:
        """Forget cached reads (the next read sees what other processes appended)."""
        self._cache = self._valid = self._by_id = None

    # -- appending --------------------------------------------------------------------------

    def append(
        self,
        kind: str,
        payload: Payload | dict[str, Any],
        *,
        writer: str,
        refs: Sequence[RefSpec] = (),
        git: Any = _AUTO,
        clock: Callable[[], str] = chain.utc_now,
        durable: bool = True,
    ) -> dict[str, Any]:
        """Validate, redact, stamp and append one entry; return it as stored.

        ``git`` defaults to a snapshot taken now; a runner passes the snapshot it took at launch
        (that is the state the number belongs to), and None records no git state. A new writer's
        first append makes its key and writes the chain's ``key`` entry first (signing.py).
        """
        key = signing.signing_key(self.dir, writer)  # None: an unsigned writer; refused: not this box's
        if key is None and signing.signs_new_writers() and self._is_new_chain(writer):
            key = self.start_signing(writer)
        return self.append_with_key(
            kind, payload, writer=writer, key=key, refs=refs, git=git, clock=clock, durable=durable
        )

    def start_signing(self, writer: str) -> Any:
        """Give a new writer its key (made on this box unless it has one, listed in allowed_signers)
        and start its chain with the ``key`` entry; return the private key."""
        path = signing.key_path(check_writer(writer))
        signing.ensure_key_file(path)
        key = signing.load_private(path)
        signing.list_signer(self.dir, writer, signing.public_text(key))
        try:
            self.append_with_key(
                "key", signing.first_key_payload(writer, key), writer=writer, key=key, git=None, first=True
            )
        except _ChainStarted:
            pass  # another process started this chain meanwhile (with this box's same key file)
        return key

    def _is_new_chain(self, writer: str) -> bool:
        try:
            return self.chain_path(writer).stat().st_size == 0
        except FileNotFoundError:
            return True

    def append_with_key(
        self,
        kind: str,
        payload: Payload | dict[str, Any],
        *,
        writer: str,
        key: Any,
        refs: Sequence[RefSpec] = (),
        git: Any = _AUTO,
        clock: Callable[[], str] = chain.utc_now,
        durable: bool = True,
        first: bool = False,
    ) -> dict[str, Any]:
        """``append`` with the head signed by ``key`` (None: unsigned). A rotation passes the new
        key, which ``signing_key`` does not know yet; ``first``: only onto an empty chain."""
        self.check_format()
        fields = self._body_fields(kind, payload, writer, refs, git)
        fields["box"] = box = box_fingerprint()
        # Refuse an oversized entry before touching the chain file (the real line differs only in
        # seq, prev and ts, which this worst case already counts).
        _check_size(chain.encode_line({**fields, "seq": 10**12, "prev": "0" * 64, "ts": clock()})[1], kind)

        def make_line(head: dict[str, Any] | None) -> bytes:
            # Runs under the chain's lock: seq and prev come from the line that is really last.
            if first and head is not None:
                raise _ChainStarted
            _check_same_box(head, box, writer)
            body = {
                **fields,
                "seq": 0 if head is None else head["seq"] + 1,
                "prev": None if head is None else head["id"],
                "ts": clock(),
            }
            _, line = chain.encode_line(body)
            _check_size(line, kind)
            return line

        def sign(line: bytes) -> None:
            if key is not None:
                signing.write_head(self.dir, writer, json.loads(line), key)

        path = self.writable(self.chain_path(writer).name)
        line = chain.append_line(path, make_line, durable=durable, after_write=sign)
        return self._remember(json.loads(line))

    def _body_fields(
        self, kind: str, payload: Payload | dict[str, Any], writer: str, refs: Sequence[RefSpec], git: Any
    ) -> dict[str, Any]:
        from recipe_ledger.ledger.models import implied_refs

        model = _clean_payload(kind, payload)
        return {
            "v": FORMAT_VERSION,
            "writer": check_writer(writer),
            "kind": kind,
            "refs": self._checked_refs([*refs, *implied_refs(model)]),
            "git": self._git_stamp(model, git),
            "payload": model.model_dump(mode="json", exclude_none=True),
        }

    def _remember(self, entry: dict[str, Any]) -> dict[str, Any]:
        for cached in (self._cache, self._valid):
            if cached is not None:
                cached.append(entry)
        if self._by_id is not None:
            self._by_id[entry["id"]] = entry
        return entry

    def _checked_refs(self, refs: Iterable[RefSpec]) -> list[dict[str, str]]:
        out: list[dict[str, str]] = []
        for spec in refs:
            rel, ref_id = ("see", spec) if isinstance(spec, str) else spec
            entry_id = self.get(ref_id)["id"]  # accepts prefixes; raises on unknown ids
            if {"rel": rel, "id": entry_id} not in out:
                out.append({"rel": rel, "id": entry_id})
        return out

    def _git_stamp(self, model: Payload, git: Any) -> dict[str, Any] | None:
        state = gitinfo.snapshot(self.root) if git is _AUTO else git
        if not model.scripts:
            return None if state is None else {**state, "scripts": {}}
        # Outside git a named script is still pinned by its blob hash; no commit means "dirty".
        base = state if state is not None else {"commit": None, "dirty": True}
        return {**base, "scripts": gitinfo.script_blobs(self.root, model.scripts)}


def _check_same_box(head: dict[str, Any] | None, box: str, writer: str) -> None:
    """Refuse to extend a chain that another box writes: two boxes under one writer name fork it."""
    bound = (head or {}).get("box")
    if bound and bound != box:
        raise StateError(
            f"writer {writer!r} belongs to another box ({bound}; this box is {box}):"
            " two boxes appending under one name would fork its chain",
            where=f"ledger/{writer}.jsonl",
            hint="set RECIPE_LEDGER_WRITER to a name of this box's own (e.g. its host name)",
        )


class _ChainStarted(Exception):
    """A chain's first key entry found the chain already started by another process."""


class Rejected(NamedTuple):
    """An entry a read left out: where it is, and why."""

    where: str
    reason: str


_ENVELOPE_TYPES = (("id", str), ("seq", int), ("ts", str), ("writer", str), ("kind", str), ("payload", dict))
_KNOWN_KINDS = frozenset(KINDS)


def envelope_problem(entry: dict[str, Any]) -> str | None:
    """Why an entry's envelope cannot be read safely (a cheap check, no payload model), or None."""
    get = entry.get
    # The fast path for a sound entry (every line of a healthy ledger): one expression, no loop.
    if (
        type(get("id")) is str
        and type(get("seq")) is int
        and type(get("ts")) is str
        and type(get("writer")) is str
        and type(get("payload")) is dict
        and get("kind") in _KNOWN_KINDS
        and type(refs := get("refs")) is list
        and (not refs or all(_is_ref(ref) for ref in refs))
    ):
        return None
    return _envelope_reason(entry)


def _is_ref(ref: Any) -> bool:
    return type(ref) is dict and type(ref.get("id")) is str and type(ref.get("rel")) is str


def _envelope_reason(entry: dict[str, Any]) -> str:
    for name, kind in _ENVELOPE_TYPES:
        if type(entry.get(name)) is not kind:
            return f"envelope field {name!r} is missing or not a {kind.__name__}"
    if entry["kind"] not in _KNOWN_KINDS:
        return f"unknown entry kind {entry['kind']!r}"
    return "refs is not a list of {rel, id}"


def _order(entry: dict[str, Any]) -> tuple[str, str, int]:
    return entry["ts"], entry["writer"], entry["seq"]


def _clean_payload(kind: str, payload: Payload | dict[str, Any]) -> Payload:
    from recipe_ledger.ledger.models import Payload, validate_payload

    data = payload.model_dump(mode="json", exclude_none=True) if isinstance(payload, Payload) else payload
    # Redact before validation: a secret must never reach the bytes that get hashed and committed.
    # A key entry holds only public keys and signatures this tool computed (nothing typed by a
    # person), whose base64 a secret detector would take for a token and so break the signature.
    cleaned = data if kind == "key" else redact_obj(data)
    return validate_payload(kind, cleaned, where=f"{kind} payload")


def _check_size(line: bytes, kind: str) -> None:
    if len(line) > chain.MAX_LINE_BYTES:
        raise InputError(
            f"{kind} entry would be {len(line):,} bytes;"
            f" the limit is {chain.MAX_LINE_BYTES:,} bytes per entry",
            where=f"{kind} payload",
            hint="keep raw outputs in a file and reference it by content hash (payload.artifacts)",
        )


def _parses(line: bytes) -> bool:
    try:
        chain.parse_line(line)
        return True
    except ValueError:
        return False


def _format_marker() -> bytes:
    return chain.canonical({"format": "recipe-ledger", "version": FORMAT_VERSION}) + b"\n"


def _write_once(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data`` unless it exists (never overwrite anything in the ledger)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    chain.fsync_dir(path.parent)
