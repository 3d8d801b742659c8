"""The checks of ``ledger verify`` that span chains: refs, retraction authority, witnesses, signed
heads; and what ``--history`` accepts as a change to a ledger file.

verify.py reads every chain once and hands over what it saw (``verify_report.Seen``); nothing
here reads a chain file again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recipe_ledger.errors import InputError
from recipe_ledger.ledger import chain, keyhistory, signing
from recipe_ledger.ledger.verify_report import Finding, Report, Seen

if TYPE_CHECKING:
    from recipe_ledger.ledger.store import Ledger


def check(ledger: Ledger, seen: Seen, report: Report) -> None:
    """Add every cross-chain finding and notice to ``report``."""
    _refs(seen, report)
    _retractions(ledger, seen, report)
    _witnesses(seen, report)
    _heads(ledger, seen, report)


def _finding(report: Report, path: str, line: int | None, message: str) -> None:
    report.findings.append(Finding(path, line, message))


def _refs(seen: Seen, report: Report) -> None:
    for rel, line_no, ref_id in seen.refs:
        if ref_id not in seen.writer_of:
            _finding(report, rel, line_no, f"broken link: refers to {ref_id[:12]}, which no chain holds")


def _retractions(ledger: Ledger, seen: Seen, report: Report) -> None:
    if not seen.retractions:
        return
    allowed = _trust_file(report, ledger, signing.maintainers)
    for rel, line_no, writer, target in seen.retractions:
        owner = seen.writer_of.get(target)
        if owner is not None and owner != writer and writer not in allowed:
            _finding(
                report,
                rel,
                line_no,
                f"{writer!r} retracts {owner!r}'s entry {target[:12]} but is neither its writer nor"
                f" listed in ledger/{signing.MAINTAINERS_FILE}",
            )


def _witnesses(seen: Seen, report: Report) -> None:
    for rel, line_no, witness, heads in seen.witnesses:
        for writer, head in heads.items():
            state = seen.chains.get(writer)
            seq, entry_id = head.get("seq"), head.get("id")
            if state is None:
                problem = "whose chain file is gone"
            elif not isinstance(seq, int) or seq >= len(state.ids):
                problem = f"whose chain now ends before seq {seq}: it was truncated"
            elif state.ids[seq] != entry_id:
                problem = f"whose entry at seq {seq} is no longer {str(entry_id)[:12]}: it was rewritten"
            else:
                continue
            _finding(report, rel, line_no, f"{witness!r} witnessed the head of {writer!r} here, {problem}")


def _heads(ledger: Ledger, seen: Seen, report: Report) -> None:
    signers = _trust_file(report, ledger, signing.allowed_signers)
    root = _trust_file(report, ledger, signing.root_of_trust)
    maintainer_keys = {key for keys in root.values() for key in keys}
    for writer in sorted(set(seen.chains) | _head_files(ledger) | set(signers)):
        state = seen.chains.get(writer)
        rel = state.rel if state is not None else f"ledger/{writer}.jsonl"
        history = keyhistory.replay(writer, state.keys if state is not None else [], maintainer_keys)
        for line, message in history.problems:
            _finding(report, rel, line, message)
        record = state.head if state is not None else signing.read_head(ledger.dir, writer)
        ids = state.ids if state is not None else []
        problem = _head_problem(record, writer, ids, history, signers.get(writer, set()))
        if problem == "unsigned":
            if state is not None:
                report.warnings.append(_unsigned_warning(rel, writer, len(ids)))
        elif problem:
            _finding(report, rel, None, problem)
        else:
            report.signed.append(writer)


def _unsigned_warning(rel: str, writer: str, entries: int) -> str:
    return (
        f"{rel}: unsigned chain of {writer!r} ({entries} entries): anyone can rewrite it consistently;"
        f" `RECIPE_LEDGER_WRITER={writer} ledger key init --adopt` on its box signs it from now on"
    )


def _head_problem(
    record: dict | None, writer: str, ids: list[str], history: keyhistory.KeyHistory, listed: set[str]
) -> str | None:
    key = history.current
    if key is None:
        return _keyless_problem(record, writer, listed)
    if listed != {key}:
        shown = ", ".join(sorted(signing.fingerprint(k) for k in listed)) or "no key"
        return (
            f"ledger/{signing.SIGNERS_FILE} gives {writer!r} {shown}, but its chain's key entries"
            f" (line {history.line}) give {signing.fingerprint(key)}: a key changes only through a"
            " rotation entry signed by the old key (`ledger key rotate`)"
        )
    if record is None:
        return f"{writer!r} signs its chain (a key entry) but has no signed head (ledger/heads/{writer}.json)"
    problem = signing.signature_problem(record, writer, {key})
    if problem:
        return problem
    return _head_matches(record, writer, ids)


def _keyless_problem(record: dict | None, writer: str, listed: set[str]) -> str | None:
    """A chain without a key entry: unsigned, unless a key or a head claims otherwise."""
    if listed:
        return (
            f"{writer!r} is listed in ledger/{signing.SIGNERS_FILE} but its chain has no key entry:"
            f" the chain's own key entries name a writer's key (`ledger key init --adopt` on its box)"
        )
    if record is not None:
        return f"has a signed head (ledger/heads/{writer}.json) but no key entry in its chain"
    return "unsigned"


def _head_matches(record: dict[str, Any], writer: str, ids: list[str]) -> str | None:
    seq, entry_id = record["seq"], record["id"]
    if seq >= len(ids) or ids[seq] != entry_id:
        return (
            f"the signed head (seq {seq}, {entry_id[:12]}) is not in the chain: it was truncated"
            " or rewritten after it was signed"
        )
    after = len(ids) - 1 - seq
    if after:
        return (
            f"{after} entr{'y' if after == 1 else 'ies'} after the signed head (seq {seq}) carry no"
            f" signature: appended without {writer!r}'s key (if an append was interrupted, run"
            " `ledger key init` on that writer's own box to sign its head again)"
        )
    return None


def _head_files(ledger: Ledger) -> set[str]:
    folder = ledger.dir / signing.HEADS_DIR
    return {path.stem for path in folder.glob("*.json")} if folder.is_dir() else set()


def _trust_file(report: Report, ledger: Ledger, read: Any) -> Any:
    try:
        return read(ledger.dir)
    except InputError as error:  # a malformed line: trust nobody it would have named
        _finding(report, f"ledger/{error.where}", None, error.message)
        return {}


# -- history -------------------------------------------------------------------------------------

_POLICY_FILES = (signing.SIGNERS_FILE, signing.MAINTAINERS_FILE)


def history_problem(path: str, old: bytes, new: bytes | None) -> str | None:
    """Why a commit's change to a ledger file is not allowed, or None.

    Chains and quarantine files may only grow. A signed head file is replaced on every append, but
    its ``seq`` only ever grows. The trust files (allowed_signers, maintainers) are policy, reviewed
    like code: any change is allowed here (verify holds allowed_signers to the chains' key
    entries). The root of trust is committed once: any later change is refused.
    """
    parts = path.split("/")
    if parts[-1] == signing.ROOT_FILE:
        return None if new == old else f"changed ledger/{signing.ROOT_FILE}, which is committed once"
    if parts[-1] in _POLICY_FILES:
        return None
    if len(parts) >= 2 and parts[-2] == signing.HEADS_DIR:
        return _head_went_back(old, new)
    return _non_append(old, new)


def _head_went_back(old: bytes, new: bytes | None) -> str | None:
    if new is None:
        return "removed a signed head"
    before, after = _head_seq(old), _head_seq(new)
    if before is not None and (after is None or after < before):
        return f"moved a signed head back from seq {before} to {after} (the chain was cut back)"
    return None


def _head_seq(data: bytes) -> int | None:
    try:
        record = chain.parse_line(data.strip())
    except ValueError:
        return None
    seq = record.get("seq") if isinstance(record, dict) else None
    return seq if isinstance(seq, int) else None


def _non_append(old: bytes, new: bytes | None) -> str | None:
    if new is None:
        return "removed the file"
    if new.startswith(old):
        return None
    differ = next(
        (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new))
    )
    line = old.count(b"\n", 0, differ) + 1
    if len(new) < len(old) and old.startswith(new):
        return f"removed everything from line {line} on"
    return f"changed line {line} (history may only append)"
