"""Tracking URIs: which ones are accepted, and how one is printed (never with its credentials)."""

from __future__ import annotations

import urllib.parse

from recipe_ledger.errors import InputError
from recipe_ledger.redact import redact_text

TRACKING_SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "file", "databricks")


def check_tracking_uri(uri: str) -> None:
    """An InputError for what is not a tracking URI (``mlflow.lab:5000``, a typo in the scheme)."""
    scheme = urllib.parse.urlsplit(uri).scheme.split("+")[0]
    if scheme not in TRACKING_SCHEMES or (
        scheme in ("http", "https") and not urllib.parse.urlsplit(uri).hostname
    ):
        raise InputError(
            f"{safe_uri(uri)} is not a tracking URI",
            where="--tracking-uri / MLFLOW_TRACKING_URI",
            hint="give http://HOST:PORT (a tracking server) or sqlite:///PATH (a local store)",
        )


def safe_uri(uri: str) -> str:
    """A tracking URI fit to print: no user:password@ part, nothing token-shaped."""
    parts = urllib.parse.urlsplit(uri)
    if parts.password or parts.username:  # (urlunsplit would also turn sqlite://// into sqlite://)
        uri = urllib.parse.urlunsplit(
            parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else ""))
        )
    return redact_text(uri)
