"""Recipe Ledger: launch commands, memory fit, measured runs and an append-only ledger.

The package is a typed core with a thin CLI on top (``recipe_ledger.cli``). Imports flow one
way, from the CLI down to ``errors``; ``.importlinter`` in pyproject.toml enforces it.
"""

__version__ = "0.1.0"
