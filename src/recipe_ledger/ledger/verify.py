"""`ledger verify`: is every chain whole, does every entry mean something, and who vouches for it?

Per chain file, line by line (1-based, as an editor shows them):

- bytes: the line starts with its id and ``sha256("{" + rest)`` equals it (else a byte changed);
- envelope: it parses, its format version is one this tool reads, its fields have their types,
  its ``kind`` is known and its ``writer`` is the file's name;
- order: ``seq`` counts 0, 1, 2..., ``prev`` is the id of the line before, and ``ts`` (UTC,
  microseconds) never goes back within a chain nor lies more than a day ahead of this clock;
- meaning: the payload is valid for its kind and schema version (the same models the writers
  use); a status relation (``retracts``, ``reproduces``, ``supersedes``) is only used by the kind
  it belongs to and names the payload's own target;
- box: every entry of a chain carries the same box fingerprint once one appears (two boxes under
  one writer name fork a chain; see fingerprint.py);
- the file ends with a newline: otherwise its last line is torn (an interrupted append), which
  ``repair`` moves to ``ledger/quarantine/<writer>.torn``;
- paths: no symlink under ``ledger/`` or ``runs/`` (``paths.links_under``): writers refuse to write
  through one, and one found is a problem.

Across chains (semantics.py): every ref resolves; a retraction comes from the retracted entry's
writer or a writer listed in ``ledger/maintainers``; every head a witness recorded is still in the
witnessed chain; every writer listed in ``ledger/allowed_signers`` has a valid signature on its
chain's last entry (signing.py). Chains of writers that are not listed are reported as unsigned,
which is a notice, not a failure.

The hot loop is orjson, hashlib and one pydantic validation per entry. ``--history`` adds the git
check that every commit only appended (catches a chain cut back together with its old signed head).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from recipe_ledger import paths
from recipe_ledger.errors import InputError, StateError
from recipe_ledger.ledger import chain, gitinfo, seenheads, semantics, signing, validcache
from recipe_ledger.ledger.kinds import FORMAT_VERSION, STATUS_RELATIONS
from recipe_ledger.ledger.store import Ledger, envelope_problem
from recipe_ledger.ledger.verify_report import ChainState, Finding, Report, Seen

TS_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
FUTURE_SLACK = timedelta(days=1)  # clocks drift; a day ahead is a wrong clock or a forged date


def verify(
    ledger: Ledger, *, now: datetime | None = None, cache: bool = True, remember: bool = True
) -> Report:
    """Check every chain under ``ledger/``, every entry's meaning and every signed head.

    ``cache``: skip the payload validation of lines validated before under the same models (their
    bytes are still hashed and every other check still runs), and remember the ones validated now.
    ``remember``: a ledger that verifies has its chain heads recorded as this box's last seen
    (seenheads.py); a later verify fails a chain that moved back from them either way.
    """
    ledger.check_format()
    report, seen = Report(), Seen()
    known = validcache.known_valid() if cache else set()
    latest = _format_ts((now or datetime.now(UTC)) + FUTURE_SLACK)
    for path in ledger.chain_files():
        state = ChainState(ledger.rel(path), path.stem, known=known)
        data, state.head = chain.read_locked(
            path, functools.partial(signing.read_head, ledger.dir, path.stem)
        )
        with chain.no_gc():
            report.entries += _verify_chain(data, state, seen, latest)
        seen.chains[state.writer] = state
        report.chains += 1
        report.findings.extend(state.findings)
    for link, target in paths.links_under(ledger.root):  # the record is never written through one
        report.findings.append(
            Finding(ledger.rel(link), None, f"a symlink (to {target}) in the record: {paths.LINK_HINT}")
        )
    semantics.check(ledger, seen, report)
    _check_seen_heads(ledger, seen, report, remember=remember)
    if cache:
        validcache.remember_valid(i for state in seen.chains.values() for i in state.validated)
    newer = sum(state.newer for state in seen.chains.values())
    if newer:
        report.notices.append(
            f"{newer} payload(s) of a newer schema than this tool reads were not checked"
            " (pip install -U recipe-ledger)"
        )
    return report


def _check_seen_heads(ledger: Ledger, seen: Seen, report: Report, *, remember: bool) -> None:
    """A chain may not move back from the head this box saw last; a whole ledger's heads are kept."""
    for writer, head in seenheads.remembered(ledger.dir).items():
        state = seen.chains.get(writer)
        problem = seenheads.went_back(head, state.ids if state is not None else [])
        if problem:
            rel = state.rel if state is not None else f"{ledger.rel(ledger.dir)}/{writer}.jsonl"
            report.findings.append(Finding(rel, None, f"{problem} (seen heads: {seenheads.state_file()})"))
    if remember and report.ok:
        seenheads.remember(
            ledger.dir, {w: (len(s.ids) - 1, s.ids[-1]) for w, s in seen.chains.items() if s.ids}
        )


def whole(ledger: Ledger) -> tuple[Report, list[Finding], str | None]:
    """``ledger verify`` and ``ledger verify --history`` at once: the report, every finding of
    both, and what the history could not check (a shallow clone's missing commits), or None.

    Outside a git working tree there is no history to check (a copy of the tree on a lent box).
    """
    report = verify(ledger)
    if not gitinfo.is_work_tree(ledger.root):
        return report, list(report.findings), None
    past = verify_history(ledger)
    return report, report.findings + past.findings, past.unchecked


def require_whole(ledger: Ledger, doing: str) -> Report:
    """What ``tables``, ``site``, ``sync`` and ``release publish`` ask first: ``whole``, or a
    StateError naming the first problem. A shallow clone whose history is missing is refused too:
    what it could not check may hide a rewrite."""
    report, findings, unchecked = whole(ledger)
    if findings:
        more = f" and {len(findings) - 1} more" if len(findings) > 1 else ""
        raise StateError(
            f"the ledger does not verify, so nothing is {doing}: {findings[0]}{more}",
            where=ledger.rel(ledger.dir),
            hint="ledger verify --history",
        )
    if unchecked:
        raise StateError(
            f"could not check {unchecked}, so nothing is {doing}",
            where=str(ledger.root),
            hint="ledger verify --history --fetch",
        )
    return report


def _format_ts(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _verify_chain(data: bytes, state: ChainState, seen: Seen, latest: str) -> int:
    lines, torn = chain.split_lines(data)
    for number, line in enumerate(lines, 1):
        entry = _check_line(line, number, state, latest)
        if entry is not None:
            _collect(entry, number, state, seen)
    if torn:
        state.add(
            len(lines) + 1,
            f"torn last line ({len(torn)} bytes, no newline): an append was "
            "interrupted; `ledger verify --repair` moves it to quarantine",
            torn=True,
        )
    return len(lines)


def _check_line(line: bytes, number: int, state: ChainState, latest: str) -> dict | None:
    try:
        entry = chain.parse_line(line)
    except ValueError:
        state.add(number, "not valid JSON (the line was edited or is garbage)")
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        state.add(number, "not an entry (no id)")
        return None
    if entry.get("v") != FORMAT_VERSION:
        _newer_format(entry, number, state)
        return None
    hash_problem = chain.line_hash_problem(line)
    if hash_problem:
        state.add(number, hash_problem)
    problem = envelope_problem(entry)
    if problem:
        state.add(number, problem)
        if isinstance(entry.get("seq"), int):
            state.expected_seq, state.prev = entry["seq"] + 1, entry["id"]
        return None
    if entry["writer"] != state.writer:
        state.add(number, f"entry of writer {entry['writer']!r} in the chain of {state.writer!r}")
    _check_link(entry, number, state)
    _check_ts(entry["ts"], number, state, latest)
    _check_box(entry.get("box"), number, state)
    _check_payload(entry, number, state, cacheable=hash_problem is None)
    return entry


def _check_link(entry: dict, number: int, state: ChainState) -> None:
    seq, prev = entry["seq"], entry.get("prev")
    if seq > state.expected_seq:
        state.add(
            number,
            f"line(s) removed or moved before this one (seq jumps from {state.expected_seq - 1} to {seq})",
        )
    elif seq < state.expected_seq:
        state.add(number, f"line out of order or inserted (seq {seq} after seq {state.expected_seq - 1})")
    elif prev != state.prev:
        state.add(
            number, f"broken link: prev is {str(prev)[:12]}, the line before has id {str(state.prev)[:12]}"
        )
    state.expected_seq, state.prev = seq + 1, entry["id"]


def _check_ts(ts: str, number: int, state: ChainState, latest: str) -> None:
    if not TS_RE.fullmatch(ts):
        state.add(number, f"ts {ts[:40]!r} is not UTC with microseconds (YYYY-MM-DDTHH:MM:SS.ffffffZ)")
        return
    if ts < state.ts:
        state.add(
            number, f"ts {ts} is earlier than the line before ({state.ts}): a chain's time only advances"
        )
    elif ts > latest:
        state.add(number, f"ts {ts} lies more than a day after this machine's clock")
    state.ts = max(ts, state.ts)


def _check_box(box: Any, number: int, state: ChainState) -> None:
    if state.box is None:
        state.box = box if isinstance(box, str) else None
    elif box != state.box:
        other = f"box {box}" if box else "no box fingerprint"
        state.add(
            number,
            f"entry from {other} in a chain bound to box {state.box}: two boxes write as"
            f" {state.writer!r}; set RECIPE_LEDGER_WRITER on one of them",
        )


def _check_payload(entry: dict, number: int, state: ChainState, *, cacheable: bool) -> None:
    kind = entry["kind"]
    if entry["id"] not in state.known and not _payload_valid(entry, number, state, cacheable):
        return
    for ref in entry["refs"]:
        owner = STATUS_RELATIONS.get(ref["rel"])
        if owner is not None and owner != kind:
            state.add(number, f"a {kind} entry cannot use relation {ref['rel']!r} (only a {owner} can)")
    target = entry["payload"].get("target")
    if kind in ("retraction", "reproduction") and not _names(entry["refs"], kind, target):
        state.add(number, f"{kind} payload target {str(target)[:12]} is not in its refs")


def _payload_valid(entry: dict, number: int, state: ChainState, cacheable: bool) -> bool:
    models = _models()
    kind = entry["kind"]
    version = entry["payload"].get("schema_version")
    if isinstance(version, int) and version > models.current_version(kind):
        state.newer += 1  # written by a newer tool: every reader leaves it out; said, not failed
        return False
    try:
        models.load_payload(kind, entry["payload"], where="payload")
    except (InputError, StateError) as error:
        state.add(number, f"invalid {kind} payload: {error.message}")
        return False
    if cacheable:  # a line whose bytes do not match its id is never remembered as valid
        state.validated.append(entry["id"])
    return True


@functools.cache
def _models() -> Any:
    """The payload models, imported on the first payload to validate (none, when all are cached)."""
    from recipe_ledger.ledger import models

    return models


def _names(refs: list[dict], kind: str, target: Any) -> bool:
    rel = "retracts" if kind == "retraction" else "reproduces"
    return any(ref["rel"] == rel and ref["id"] == target for ref in refs)


def _collect(entry: dict, number: int, state: ChainState, seen: Seen) -> None:
    entry_id = entry["id"]
    if entry["seq"] == len(state.ids):
        state.ids.append(entry_id)
    seen.writer_of[entry_id] = entry["writer"]
    for ref in entry["refs"]:
        seen.refs.append((state.rel, number, ref["id"]))
    kind = entry["kind"]
    if kind == "retraction":
        seen.retractions.append((state.rel, number, entry["writer"], str(entry["payload"].get("target"))))
    elif kind == "key":
        state.keys.append((number, entry["payload"]))
    elif kind == "witness" and isinstance(entry["payload"].get("heads"), dict):
        seen.witnesses.append((state.rel, number, entry["writer"], entry["payload"]["heads"]))


def _newer_format(entry: dict, number: int, state: ChainState) -> None:
    version = entry.get("v")
    if isinstance(version, int) and version > FORMAT_VERSION:
        state.add(
            number,
            f"written in ledger format {version}, newer than this tool reads ({FORMAT_VERSION}); "
            "nothing was changed: upgrade recipe-ledger (pip install -U recipe-ledger)",
        )
    else:
        state.add(number, f"unknown ledger format version {version!r}")
    if isinstance(entry.get("seq"), int):
        state.expected_seq, state.prev = entry["seq"] + 1, entry["id"]


def repair(ledger: Ledger) -> list[tuple[str, int, str]]:
    """Move every torn tail to quarantine: ``[(chain, bytes moved, quarantine file)]``.

    Only torn tails are repaired: an edited, removed or reordered line is history to restore from
    git, not something a tool should guess at.
    """
    moved = []
    for path in ledger.chain_files():
        quarantine = ledger.quarantine_path(path)
        count = chain.repair_tail(path, quarantine)
        if count:
            moved.append((ledger.rel(path), count, ledger.rel(quarantine)))
    return moved


@dataclass
class HistoryReport:
    findings: list[Finding] = field(default_factory=list)
    unchecked: str | None = None  # what could not be checked (a shallow clone's missing history)


def verify_history(ledger: Ledger, *, fetch: bool = False) -> HistoryReport:
    """Every commit (and the index and working tree against HEAD) may only append to the chains.

    Signed head files may be replaced, but their ``seq`` may never go back. On a shallow clone the
    history is fetched first when ``fetch`` (``git fetch --unshallow``); otherwise the commits at
    hand are checked and ``unchecked`` says from where on nothing could be.
    """
    history = HistoryReport()
    if fetch:
        gitinfo.unshallow(ledger.root)
    history.unchecked = gitinfo.shallow_boundary(ledger.root)
    for change in gitinfo.ledger_changes(ledger.root):
        _judge_change(change, history)
    staged = {}
    for change in gitinfo.staged_changes(ledger.root):
        staged[change.path] = change.new
        _judge_change(change, history)
    for change in gitinfo.working_tree_changes(ledger.root):
        if change.path not in staged or staged[change.path] != change.new:  # said once, for the index
            _judge_change(change, history)
    return history


def _judge_change(change: gitinfo.LedgerChange, history: HistoryReport) -> None:
    problem = semantics.history_problem(change.path, change.old, change.new)
    if problem:
        where = (
            change.commit if change.commit in ("working tree", "index") else f"commit {change.commit[:12]}"
        )
        history.findings.append(
            Finding(change.path, None, f"{where} (parent {change.parent[:12]}) {problem}")
        )
