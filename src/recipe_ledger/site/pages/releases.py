"""The release pages (``releases/<lane>/<version>.html``, one per release entry) and the lanes'
history (``releases/index.html``): every pin, the numbers with the entry that measured each, why a
release is unverified, its reproductions, and the diff to the previous version of its lane."""

from __future__ import annotations

import difflib
from collections import defaultdict
from typing import Any

from recipe_ledger import metrics as metric_table
from recipe_ledger.ledger.views import dirty_flag, image_text
from recipe_ledger.site import plots
from recipe_ledger.site.entries import LedgerIndex, entry_ref
from recipe_ledger.site.reproductions import reproductions_of
from recipe_ledger.site.shown import keys_filled, redact_all, with_keys
from recipe_ledger.site.writer import SiteWriter, slugify, unique_path


def release_pages(index: LedgerIndex) -> list[tuple[str, dict[str, Any]]]:
    """[(path, data)] per release entry; each with its pins, numbers and diff to the previous one."""
    releases = [redact_all(e) for e in index.entries if e.get("kind") == "release"]
    by_lane: dict[str, list[dict]] = defaultdict(list)
    for entry in releases:
        by_lane[str(entry["payload"].get("lane", "?"))].append(entry)
    used: set[str] = set()
    paths = {
        e["id"]: unique_path(
            f"releases/{slugify(str(e['payload'].get('lane')))}/"
            f"{slugify(str(e['payload'].get('version')))}.html",
            used,
        )
        for e in releases
    }
    out = []
    for lane_entries in by_lane.values():
        for i, entry in enumerate(lane_entries):
            previous = _previous_release(entry, lane_entries[:i], index)
            out.append((paths[entry["id"]], _release_data(entry, previous, index, paths)))
    return sorted(out)


def _previous_release(entry: dict, earlier: list[dict], index: LedgerIndex) -> dict | None:
    target = entry["payload"].get("supersedes")
    if target and target in index.by_id:
        return redact_all(index.by_id[target])
    return earlier[-1] if earlier else None


def _release_data(entry: dict, previous: dict | None, index: LedgerIndex, paths: dict[str, str]) -> dict:
    root = "../" * paths[entry["id"]].count("/")
    p = entry["payload"]
    git = entry.get("git") or {}
    return {
        "entry": entry_ref(index, entry["id"], root),
        "lane": p.get("lane"),
        "lane_title": p.get("lane_title"),
        "version": p.get("version"),
        "ts": entry.get("ts"),
        "writer": entry.get("writer"),
        "changes": p.get("changes", []),
        "command": p.get("command"),
        "flags": p.get("flags", []),
        "image": with_keys(p.get("image"), ("ref", "digest", "pinned")),
        "model": with_keys(p.get("model"), ("name", "path", "revision")),
        "spec_sha256": p.get("spec_sha256"),
        "metrics": [[k, v] for k, v in sorted(p.get("metrics", {}).items())],
        "scripts": sorted((git.get("scripts") or {}).items()),
        "git_commit": git.get("commit"),
        "git_dirty": git.get("dirty"),
        "git_flag": dirty_flag(entry),
        "origin": with_keys(p.get("origin") or {}, ("how", "source", "item", "as_of")),
        "artifacts": sorted(p.get("artifacts", {}).items()),
        "previous": (
            {
                "version": previous["payload"].get("version"),
                "href": root + paths[previous["id"]],
                **_release_diff(previous["payload"], p),
            }
            if previous
            else None
        ),
        "referred_by": [
            {
                "rel": rel,
                **entry_ref(index, other, root),
                "outcome": (index.by_id.get(other) or {}).get("payload", {}).get("outcome"),
            }
            for rel, other in index.referred_by.get(entry["id"], [])
        ],
        "verified": p.get("verified"),
        "unverified": p.get("unverified") or release_doubts(entry, index),
        "reproductions": reproductions_of(index, entry["id"], root),
        "box": sorted((p.get("box") or {}).items()),
        "numbers": [_release_number(n, index, root) for n in p.get("numbers", [])],
    }


def release_doubts(entry: dict[str, Any], index: LedgerIndex) -> list[str]:
    """Why a release that records no verification (an imported or older one) is not verified,
    read from its own pins: the reasons `ledger release publish` would give today."""
    p = entry.get("payload") or {}
    origin, image, model = p.get("origin") or {}, p.get("image") or {}, p.get("model") or {}
    checks = [
        (origin.get("how") == "imported", f"imported from {origin.get('source')}, not measured here"),
        (not image.get("digest"), "the image has no digest (a tag can move)"),
        (not model.get("revision"), "the model revision is not recorded"),
        (not p.get("spec_sha256"), "no release spec hash"),
        (not p.get("numbers"), "no number is tied to a result entry of this ledger"),
        (bool(dirty_flag(entry)), "written from a dirty tree"),
    ]
    return [reason for failed, reason in checks if failed]


def _release_number(number: dict, index: LedgerIndex, root: str) -> dict[str, Any]:
    """A v2 release number with the result entry that measured it (linked when the ledger has it)."""
    result = number.get("result")
    return {
        **keys_filled(number, ("name", "metric", "point", "arm", "value", "unit", "tolerance", "verified")),
        "n": len(number.get("samples") or []),
        "result": entry_ref(index, result, root) if result and result in index.by_id else None,
    }


def _release_diff(old: dict, new: dict) -> dict[str, Any]:
    old_flags, new_flags = list(old.get("flags", [])), list(new.get("flags", []))
    old_metrics, new_metrics = old.get("metrics", {}), new.get("metrics", {})
    command = list(
        difflib.unified_diff(
            (old.get("command") or "").splitlines(),
            (new.get("command") or "").splitlines(),
            "previous",
            "this",
            lineterm="",
        )
    )
    return {
        "flags_added": [f for f in new_flags if f not in old_flags],
        "flags_removed": [f for f in old_flags if f not in new_flags],
        "image": [image_text(old.get("image")), image_text(new.get("image"))],
        "model_revision": [
            (old.get("model") or {}).get("revision"),
            (new.get("model") or {}).get("revision"),
        ],
        "metrics": [
            [k, old_metrics.get(k), new_metrics.get(k)] for k in sorted(set(old_metrics) | set(new_metrics))
        ],
        "command_diff": command,
    }


def lane_history(index: LedgerIndex, pages: list[tuple[str, dict]]) -> list[dict[str, Any]]:
    """Per lane: its versions (oldest first) and the history chart of their numbers."""
    lanes: dict[str, list[dict]] = defaultdict(list)
    for path, data in pages:
        lanes[str(data["lane"])].append({"path": path, **data})
    out = []
    for lane, versions in sorted(lanes.items()):
        versions.sort(key=lambda d: (d["ts"] or "", d["entry"]["id"]))
        names = [str(v["version"]) for v in versions]
        by_unit: dict[str, list[str]] = defaultdict(list)
        for metric in sorted({k for v in versions for k, _ in v["metrics"]}):
            by_unit[value_unit(metric)].append(metric)
        charts = [
            plots.history_chart(
                names,
                {m: [dict(v["metrics"]).get(m) for v in versions] for m in metrics},
                title=f"{lane}: numbers across versions" + (f" ({unit})" if unit else ""),
                y_label=f"value ({unit})" if unit else "value (no unit recorded)",
            )
            for unit, metrics in sorted(by_unit.items())
        ] or [plots.history_chart(names, {}, title=f"{lane}: no numbers recorded")]
        out.append(
            {
                "lane": lane,
                "title": versions[-1]["lane_title"] or lane,
                "charts": charts,
                "versions": [
                    {
                        "version": v["version"],
                        "path": v["path"],
                        "status": v["entry"]["status"],
                        "retracted_by": v["entry"]["retracted_by"],
                        "ts": v["ts"],
                    }
                    for v in versions
                ],
            }
        )
    return out


def value_unit(name: str) -> str:
    """The unit of metric ``name`` or of a summary key ``arm.cN.metric``."""
    parsed = metric_table.parse_summary_key(name)
    return metric_table.unit(parsed[2] if parsed else name)


def write_releases(writer: SiteWriter, releases: list, index: LedgerIndex) -> None:
    """Each release's page, then the lanes' history page with its charts."""
    for path, data in releases:
        writer.page(path, "release.html", data)
    lanes = lane_history(index, releases)
    writer.page(
        "releases/index.html",
        "releases.html",
        {"lanes": [{k: v for k, v in lane.items() if k != "charts"} for lane in lanes]},
        charts={lane["lane"]: lane["charts"] for lane in lanes},
    )
