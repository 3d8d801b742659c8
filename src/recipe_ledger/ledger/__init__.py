"""The append-only, tamper-evident ledger."""
