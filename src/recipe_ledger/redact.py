"""Keeping secrets out of everything the tool writes (ledger, MLflow, logs, the site).

Placeholder module; see the ledger issue for the full implementation.
"""
