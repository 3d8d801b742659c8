"""The ledger's vocabulary as plain constants, importable without building any pydantic model.

``ledger log`` filters by kind and ``ledger verify`` checks envelopes against these names; the
models (models.py, ~0.1 s of class building) are imported only by what reads or writes payloads.
models.py asserts that its ``MODELS`` name exactly these kinds.
"""

from __future__ import annotations

FORMAT_VERSION = 1  # the envelope / line layout; see chain.py

KINDS = (
    "result",
    "failure",
    "calibration",
    "release",
    "retraction",
    "reproduction",
    "note",
    "witness",
    "key",
)

# The relations that change another entry's folded status, and the one kind allowed to use each:
# a note carrying `retracts` would otherwise retract through the back door.
STATUS_RELATIONS = {"retracts": "retraction", "reproduces": "reproduction", "supersedes": "release"}
