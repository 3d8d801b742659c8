"""The append-only, tamper-evident ledger.

Modules, each owning one thing:
  chain      the byte layout of a line, atomic appends under flock, torn-tail repair
  kinds      the kind names and format version as constants (no pydantic)
  models     entry kinds and their versioned, strict payload models (+ upgrade path)
  store      the ledger/ folder: one chain per writer, append with redaction and git stamp, lookup
  fold       an entry's status folded from later entries (retracted, superseded, reproduced)
  verify     whole-ledger checks (bytes, order, meaning), repair, and the git-history check
  semantics  verify's cross-chain checks: refs, retraction authority, witnesses, signed heads
  verify_report  what a verify pass saw (ChainState, Seen) and reports (Finding, Report): verify and
             semantics share it, so neither imports the other
  validcache  ids of payloads validated before (verify validates each line once)
  signing    Ed25519 keys, key entries' signatures, ledger/allowed_signers, root_of_trust and
             maintainers, signed chain heads
  keyhistory  each writer's key replayed from its chain's key entries (first, rotations)
  seenheads  the last head of each chain this box saw (outside the repo): heads never move back
  fingerprint  the box a writer's chain is bound to
  gitinfo    every git question (GitPython; the only module importing ``git``)
  gitremote  what ``ledger sync`` asks of git: commit the ledger folder, fetch, merge, push
  sync       ``ledger sync``: commit, fetch, merge, verify, push this box's chain
  actions    note / retract
  views      log filtering and summaries
  published  the ledger as tables and site publish it: verified (or refused), statuses folded,
             chain heads, retracted entries kept out of numbers, text redacted
  seed_campaigns  the seeds' campaigns (seeds/<name>.yaml, package data: every number with its
             seed line) read through spec.yamlfile into the items an import appends
  seed_import  a seed campaign appended to its own chain, idempotently (`ledger import-seed`)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recipe_ledger.ledger.store import Ledger, default_writer

__all__ = ["Ledger", "default_writer"]


def __getattr__(name: str) -> Any:
    # Lazy (PEP 562): `from recipe_ledger.ledger import chain` must not load the store and models.
    if name in __all__:
        from recipe_ledger.ledger import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
