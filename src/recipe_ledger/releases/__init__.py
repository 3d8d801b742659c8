"""Releases: a lane's published configuration with every pin, and its reproduction.

Modules, each owning one thing:
  spec       the release spec file (recipes/releases/<lane>/<version>.yaml), strict and versioned
  pins       pinning image digest, model revision, scripts, box; checking pins against this machine
  publish    spec -> release entry (numbers linked to verified result entries, or reasons why not)
  catalog    the ledger's release entries read as the current payload, found by LANE@VERSION
  diff       two releases side by side: flags, pins, k-schedule, numbers
  reproduce  re-run the arms behind a release's numbers with its pins, decide, record a reproduction

This package sits above ``recipe_ledger.pipeline``: reproducing reuses the pipeline's planning,
preflight, launching, sweeping and failure recording rather than copying them.
"""
