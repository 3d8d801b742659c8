"""Releases as the ledger holds them: every release entry read as the current payload version, with
its folded status, found by ``LANE@VERSION``.

Verification (``verified`` / ``unverified`` / ``imported``) is what the entry says about its own
pins and numbers when it was written; the ledger status (``active``, ``superseded``, ``reproduced``,
``not-reproduced``, ``retracted``) is folded from the entries written after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from recipe_ledger.errors import InputError, UnknownIdError
from recipe_ledger.ledger.fold import fold_statuses
from recipe_ledger.ledger.models import ReleasePayload, load_payload
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.pipeline.plan import ReleaseLaunch
from recipe_ledger.releases import pins


@dataclass(frozen=True)
class Release:
    entry: dict[str, Any]
    payload: ReleasePayload
    status: str  # folded ledger status

    @property
    def id(self) -> str:
        return self.entry["id"]

    @property
    def ref(self) -> str:
        return f"{self.payload.lane}@{self.payload.version}"

    @property
    def imported(self) -> bool:
        return self.payload.origin.how == "imported"

    @property
    def verification(self) -> str:
        if self.payload.verified:
            return "verified"
        return "imported" if self.imported else "unverified"


def parse_ref(text: str) -> tuple[str, str]:
    """``("sixty-k-agent", "v14")`` from ``sixty-k-agent@v14`` (a lane title slugifies the same way)."""
    lane, at, version = text.partition("@")
    if not at or not lane.strip() or not version.strip():
        raise InputError(f"{text!r} is not LANE@VERSION", where=text, hint="ledger release list")
    return slug(lane), version.strip()


def slug(title: str) -> str:
    """``Sixty-K Agent`` -> ``sixty-k-agent``: users may type a lane's title or its id."""
    return re.sub(r"[^a-z0-9]+", "-", title.strip().lower()).strip("-")


def releases(ledger: Ledger) -> list[Release]:
    """Every release entry, oldest first."""
    entries = ledger.entries()
    statuses = fold_statuses(entries)
    out = []
    for entry in entries:
        if entry.get("kind") != "release":
            continue
        payload = load_payload("release", entry["payload"], where=f"release {entry['id'][:12]}")
        assert isinstance(payload, ReleasePayload)
        out.append(Release(entry, payload, statuses[entry["id"]]))
    return out


def find(ledger: Ledger, ref: str) -> Release:
    """The release ``LANE@VERSION``: the newest entry of it that is not retracted (or the newest)."""
    lane, version = parse_ref(ref)
    matches = [r for r in releases(ledger) if r.payload.lane == lane and r.payload.version == version]
    if not matches:
        known = sorted({r.payload.lane for r in releases(ledger)})
        raise UnknownIdError(
            f"no release {lane}@{version} in the ledger",
            where=ref,
            hint=f"ledger release list  (lanes: {', '.join(known) or 'none'})",
        )
    live = [r for r in matches if r.status != "retracted"]
    return (live or matches)[-1]


def pins_summary(release: Release) -> dict[str, Any]:
    """The pins of a release, for `ledger release list --json` and tables."""
    p = release.payload
    image = p.image
    return {
        "image": None
        if image is None
        else {
            "ref": image.ref,
            "digest": image.digest,
            "image_id": image.image_id,
            "state": "pinned" if image.pinned else "unpinned",
        },
        "model": None
        if p.model is None
        else {
            "name": p.model.name,
            "path": p.model.path,
            "revision": p.model.revision,
            "source": p.model.revision_source or ("stated" if p.model.revision else None),
        },
        "scripts": dict(p.script_pins),
        "numbers": {
            n.name: {"value": n.value, "result": n.result, "verified": n.verified} for n in p.numbers
        },
        "box": dict(p.box),
    }


def summary(release: Release) -> dict[str, Any]:
    """One release as `ledger release list --json` prints it."""
    p = release.payload
    return {
        "lane": p.lane,
        "lane_title": p.lane_title,
        "version": p.version,
        "id": release.id,
        "status": release.verification,
        "ledger_status": release.status,
        "imported": release.imported,
        "unverified": list(p.unverified),
        "pins": pins_summary(release),
        "writer": release.entry.get("writer"),
        "ts": release.entry.get("ts"),
    }


def launch_of(release: Release) -> ReleaseLaunch:
    """The pins `ledger run` needs to launch a release as an experiment arm."""
    payload = release.payload
    image = pins.run_reference(payload.image) if payload.image and payload.image.pinned else None
    model_dir = payload.model.path if payload.model else None
    return ReleaseLaunch(list(payload.argv), dict(payload.env), image, model_dir)
