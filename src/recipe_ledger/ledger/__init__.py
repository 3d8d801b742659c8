"""The append-only, tamper-evident ledger.

Modules, each owning one thing:
  chain      the byte layout of a line, atomic appends under flock, torn-tail repair
  models     entry kinds and their versioned, strict payload models (+ upgrade path)
  store      the ledger/ folder: one chain per writer, append with redaction and git stamp, lookup
  fold       an entry's status folded from later entries (retracted, superseded, reproduced)
  verify     whole-ledger checks, repair, and the git-history append-only check
  gitinfo    every git question (GitPython; the only module importing ``git``)
  actions    note / retract
  views      log filtering and summaries
  seed_import  the 000 seed's campaign as data, imported idempotently
"""

from recipe_ledger.ledger.store import Ledger, default_writer

__all__ = ["Ledger", "default_writer"]
