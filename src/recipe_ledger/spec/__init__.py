"""Spec files: YAML loading with the reference builder's YAML semantics, and line numbers."""
