"""Read-side helpers for `ledger log` and `ledger show`: filtering by kind/status, one-line summaries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from recipe_ledger import metrics
from recipe_ledger.errors import InputError
from recipe_ledger.ledger import chain
from recipe_ledger.ledger.fold import STATUSES, changed_statuses, fold_statuses, referrers
from recipe_ledger.ledger.store import Ledger, envelope_problem

# The payload field that best says what an entry is about, per kind (first non-empty wins).
_SUMMARY_FIELDS = {
    "note": ("title", "text"),
    "failure": ("cause",),
    "retraction": ("reason",),
    "result": ("text", "subject"),
    "calibration": ("text", "instrument"),
    "reproduction": ("outcome", "text"),
    "key": ("action",),
}


def image_text(image: dict[str, Any] | None, absent: str = "") -> str:
    """A release's image pin on one line: the reference, with its digest when the reference does not
    already carry it, or "(unpinned)" when no digest was recorded."""
    if not image:
        return absent
    ref, digest = image.get("ref") or "", image.get("digest")
    if not digest:
        return f"{ref} (unpinned)"
    return ref if ref.endswith(digest) else f"{ref} @ {digest}"


def allowed_dirty_text(git: dict[str, Any] | None) -> str | None:
    """The one line for a git stamp of a run allowed from a dirty tree (``--allow-dirty``: the
    files that fed the measurement differed, and the diff's hash was recorded), else None."""
    if not git or not git.get("diff_sha256"):
        return None
    files = git.get("dirty_files") or []
    return (
        f"DIRTY TREE (allowed): {len(files)} file(s) differed from commit {str(git.get('commit'))[:12]}, "
        f"diff {git['diff_sha256']}"
    )


def dirty_flag(entry: dict[str, Any]) -> str | None:
    """Why an entry's numbers may not be exactly what its commit holds, or None when they are.

    A run allowed from a dirty tree records the changed files and the diff's hash. A stamp that only
    says ``dirty`` comes from before the clean-tree rule, or from a tree whose changes lay outside
    what feeds a measurement (checked clean at the time): either way no diff was recorded."""
    git = entry.get("git") or {}
    allowed = allowed_dirty_text(git)
    if allowed or not git.get("dirty"):
        return allowed
    return (
        f"dirty tree: written from uncommitted changes to {str(git.get('commit'))[:12]} (diff not recorded)"
    )


def imported_text(entry: dict[str, Any]) -> str | None:
    """Where an entry imported from a document (``ledger import-seed``) comes from, else None.
    Its git stamp is the tree that ran the import, not a tree any number was measured from: people
    are shown this instead of its tree's state (``provenance``)."""
    origin = (entry.get("payload") or {}).get("origin")
    if not isinstance(origin, dict) or origin.get("how") != "imported":
        return None
    as_of = f" (as of {origin['as_of']})" if origin.get("as_of") else ""
    return f"imported from {origin.get('source') or 'a document'}{as_of}, not measured by this tool"


def provenance(entry: dict[str, Any]) -> tuple[str, str] | None:
    """The ``(label, line)`` `ledger log` and `ledger show` print about where an entry's content
    comes from: ``provenance`` for a document's entry, ``tree`` for a dirty tree, else None."""
    imported = imported_text(entry)
    if imported:
        return ("provenance", imported)
    flag = dirty_flag(entry)
    return ("tree", flag) if flag else None


def query(ledger: Ledger, *, kind: str | None = None, status: str | None = None) -> list[tuple[dict, str]]:
    """``[(entry, status)]`` oldest first, filtered by kind and folded status."""
    if kind is not None:
        from recipe_ledger.ledger.models import KINDS
    if kind is not None and kind not in KINDS:
        raise InputError(f"unknown kind {kind!r}", where="--kind", hint=f"one of: {', '.join(KINDS)}")
    if status is not None and status not in STATUSES:
        raise InputError(
            f"unknown status {status!r}", where="--status", hint=f"one of: {', '.join(STATUSES)}"
        )
    if kind is None and status in (None, "active"):  # (nearly) every entry is shown: read them all
        entries = ledger.envelopes()
        changed = changed_statuses(entries)
    else:
        entries, changed = _selected(ledger, kind)
    rows = [(entry, changed.get(entry["id"], "active")) for entry in entries]
    return rows if status is None else [row for row in rows if row[1] == status]


def _selected(ledger: Ledger, kind: str | None) -> tuple[list[dict], dict[str, str]]:
    """The entries a filter can select, parsing only lines that can matter, and the changed statuses.

    A status other than ``active`` comes only from an entry that refers to others, so the lines
    with refs are parsed first (a few percent); then only the lines of the kind asked for, or whose
    status changed. Both are found in the bytes of a canonical line: the top-level ``refs`` is the
    last ``,"refs":`` of a line (only seq, ts, v and writer follow it), and the kind is the one key
    before ``payload``. A byte match is a candidate only, confirmed on the parsed entry; a line
    that is not canonical is one `ledger verify` fails, whatever `log` shows of it.
    """
    lines = [line for path in ledger.chain_files() for line in chain.split_lines(path.read_bytes())[0]]
    with chain.no_gc():
        referring = _parsed(line for line in lines if _has_refs(line))
        changed = changed_statuses(referring)
        wanted = b'"kind":"%s","payload":' % kind.encode("ascii") if kind else None
        keys = {key.encode("ascii") for key in changed}
        picked = _parsed(
            line
            for line in lines
            if (wanted in line if wanted else line[chain.ID_START : chain.ID_END] in keys)
        )
    found = [entry for entry in picked if kind is None or entry["kind"] == kind]
    found.sort(key=lambda e: (e["ts"], e["writer"], e["seq"]))
    return found, changed


def _has_refs(line: bytes) -> bool:
    at = line.rfind(b',"refs":')
    return at < 0 or line[at + 8 : at + 10] != b"[]"


def _parsed(lines: Iterable[bytes]) -> list[dict]:
    entries = []
    for line in lines:
        try:
            entry = chain.parse_line(line)
        except ValueError:
            continue  # `ledger verify` names it; a listing shows what can be read
        if isinstance(entry, dict) and envelope_problem(entry) is None:
            entries.append(entry)
    return entries


def summarize(entry: dict[str, Any], width: int = 90) -> str:
    """One line saying what an entry is, from its payload (plain dict access, no models)."""
    payload = entry.get("payload", {})
    if entry.get("kind") == "witness":
        heads = payload.get("heads") if isinstance(payload.get("heads"), dict) else {}
        text = "witnessed " + ", ".join(
            f"{name}@{(head or {}).get('seq')}" for name, head in sorted(heads.items())
        )
    elif entry.get("kind") == "release":
        text = f"{payload.get('lane', '?')} {payload.get('version', '?')}: " + "; ".join(
            payload.get("changes", [])
        )
    else:
        fields = _SUMMARY_FIELDS.get(entry.get("kind", ""), ("text",))
        text = next((str(payload[f]) for f in fields if payload.get(f)), "")
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def detail(ledger: Ledger, id_or_prefix: str) -> dict[str, Any]:
    """An entry, its folded status, what it refers to and everything that refers to it (for
    `ledger show`)."""
    entry = ledger.get(id_or_prefix)
    entries = ledger.envelopes()
    statuses = fold_statuses(entries)
    by_id = {e["id"]: e for e in entries}

    def brief(rel: str, other: dict[str, Any]) -> dict[str, Any]:
        return {
            "rel": rel,
            "id": other["id"],
            "kind": other["kind"],
            "status": statuses[other["id"]],
            "summary": summarize(other),
        }

    return {
        "entry": entry,
        "status": statuses[entry["id"]],
        "refers_to": [
            brief(ref["rel"], by_id[ref["id"]]) if ref.get("id") in by_id else _unresolved(ref)
            for ref in entry.get("refs", ())
        ],
        "referred_by": [brief(rel, other) for rel, other in referrers(entries, entry["id"])],
    }


def _unresolved(ref: dict[str, Any]) -> dict[str, Any]:
    return {
        "rel": ref.get("rel", "?"),
        "id": str(ref.get("id", "")),
        "kind": "?",
        "status": "?",
        "summary": "",
    }


# -- `ledger show`'s opening summary ---------------------------------------------------------------


def outline(entry: dict[str, Any]) -> list[tuple[str, str]]:
    """``[(label, text)]``: what an entry is, for a person, from its payload (plain dict access,
    so an entry this version cannot validate still reads). The kind's own fields come after who
    wrote it and when; numbers carry their units."""
    payload = entry.get("payload") or {}
    kind = entry.get("kind", "?")
    when = str(entry.get("ts", ""))[:19].replace("T", " ")
    lines = [("kind", f"{kind}, written by {entry.get('writer', '?')} at {when} UTC"), ("id", entry["id"])]
    lines += [(label, value) for label, value in _KIND_OUTLINES.get(kind, _note_outline)(payload) if value]
    shown = provenance(entry)
    if shown:
        lines.append(shown)
    return lines


def _note_outline(payload: dict[str, Any]) -> list[tuple[str, str]]:
    return [("title", _one(payload.get("title"))), ("text", _one(payload.get("text")))]


def _failure_outline(payload: dict[str, Any]) -> list[tuple[str, str]]:
    lost = payload.get("minutes_lost")
    return [
        ("subject", _one(payload.get("subject"))),
        ("cause", f"{payload.get('cause_class', '?')}: {_one(payload.get('cause'))}"),
        ("fix", _one(payload.get("fix"))),
        ("time lost", f"{lost:g} min" if isinstance(lost, int | float) else ""),
    ]


def _retraction_outline(payload: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("retracts", str(payload.get("target", ""))[:12]),
        ("reason", _one(payload.get("reason"))),
        ("evidence", ", ".join(str(e)[:12] for e in payload.get("evidence") or [])),
    ]


def _result_outline(payload: dict[str, Any]) -> list[tuple[str, str]]:
    experiment = payload.get("experiment") or {}
    ran = ""
    if experiment:
        ran = (
            f"{experiment.get('name', '?')} ({experiment.get('spec', '?')}) on {experiment.get('box', '?')}, "
            f"run {experiment.get('run_id', '?')}, {_launches_per_arm(experiment)}"
        )
    return [
        ("subject", _one(payload.get("subject"))),
        ("verdict", _one(payload.get("verdict"))),
        ("design", design_text(experiment)),
        ("quality", quality_text(experiment)),
        ("what", _one(payload.get("text"))),
        ("experiment", ran),
        ("metrics", f"{len(payload.get('metrics') or {})} medians kept (all of them: --json)"),
    ]


def _launches_per_arm(experiment: dict[str, Any]) -> str:
    """The fixed design's repeats per arm, or the most launches an arm had in a sequential run."""
    design = experiment.get("design")
    if isinstance(design, dict) and design.get("kind") == "sequential":
        return f"up to {experiment.get('repeats', '?')} launches per arm (sequential)"
    return f"{experiment.get('repeats', '?')} repeats per arm"


def design_text(experiment: dict[str, Any]) -> str:
    """How a run spent its launches, in words: "rl-sequential/1: decided after 6 launches: win
    (cap 24 per arm, 3 looks)"; "" for results recorded before the design was (the fixed one)."""
    design = experiment.get("design") if isinstance(experiment, dict) else None
    if not isinstance(design, dict):
        return ""
    said = f"{design.get('method', '?')}: {_one(design.get('summary'))}"
    if design.get("kind") == "sequential":
        looks = design.get("looks")
        said += f" (cap {design.get('cap')} per arm, {looks} look{'' if looks == 1 else 's'}"
        said += f", resumed {design['resumed']}x)" if design.get("resumed") else ")"
    return said


def quality_text(experiment: dict[str, Any]) -> str:
    """The quality bars in words: "fast: answer_match_rate@1 non-inferior (-0.5 pt, 200 items)";
    "" for a result with none (recorded before them, or with no quality instrument)."""
    bars = experiment.get("quality") if isinstance(experiment, dict) else None
    if not isinstance(bars, list) or not bars:
        return ""
    said = []
    for bar in bars:
        if isinstance(bar, dict):
            shown = _points(bar.get("difference"), True)
            detail = f"{shown}, {bar.get('items', 0)} items" if shown else f"{bar.get('items', 0)} items"
            where = f"{bar.get('metric')}@{bar.get('point')}"
            said.append(f"{bar.get('candidate')}: {where} {bar.get('outcome')} ({detail})")
    return "; ".join(said) + " (rl-quality/1)"


def _calibration_outline(payload: dict[str, Any]) -> list[tuple[str, str]]:
    metric = str(payload.get("metric", ""))
    spread = payload.get("spread")
    noise = [
        f"c{point}: cv {metrics.format_effect(p.get('cv'), 2).lstrip('+')} over {p.get('n', '?')} runs"
        for point, p in (payload.get("points") or {}).items()
        if isinstance(p, dict)
    ]
    return [
        ("instrument", _one(payload.get("instrument"))),
        ("metric", metric),
        ("spread", f"±{metrics.format_value(metric, spread)}" if isinstance(spread, int | float) else ""),
        ("noise", "; ".join(noise)),
        ("text", _one(payload.get("text"))),
    ]


def _reproduction_outline(payload: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("reproduces", str(payload.get("target", ""))[:12]),
        ("outcome", _one(payload.get("outcome"))),
        ("text", _one(payload.get("text"))),
    ]


def _release_outline(payload: dict[str, Any]) -> list[tuple[str, str]]:
    model = payload.get("model") or {}
    lines = [
        ("release", f"{payload.get('lane', '?')}@{payload.get('version', '?')}"),
        ("verified", "yes" if payload.get("verified") else "no"),
    ]
    lines += [("unverified", _one(reason)) for reason in payload.get("unverified") or []]
    lines += [
        ("image", image_text(payload.get("image"), "-")),
        (
            "model",
            f"{model.get('name') or model.get('path') or '-'} {model.get('revision') or '(no revision)'}",
        ),
    ]
    lines += [("change", _one(change)) for change in payload.get("changes") or []]
    return lines


_KIND_OUTLINES = {
    "note": _note_outline,
    "failure": _failure_outline,
    "retraction": _retraction_outline,
    "result": _result_outline,
    "calibration": _calibration_outline,
    "reproduction": _reproduction_outline,
    "release": _release_outline,
}


def _one(value: Any) -> str:
    """Free text on one line (newlines and runs of spaces folded)."""
    return " ".join(str(value).split()) if value not in (None, "") else ""


VERDICT_HEADERS = (
    "arm",
    "metric",
    "point",
    "control",
    "arm value",
    "effect",
    "interval",
    "MDE",
    "bar",
    "launches",
    "outcome",
)


def verdict_rows(entry: dict[str, Any]) -> list[list[str]]:
    """One row per bar of a result's verdict: values with their units, effects as signed
    percentages (``VERDICT_HEADERS``); empty for other kinds or results without bars. The interval
    is the verdict's: 95% under the fixed design, the always-valid call interval of the sequence's
    last look under the sequential one (docs/verdicts.md)."""
    experiment = (entry.get("payload") or {}).get("experiment") or {}
    speed = [_bar_row(bar) for bar in experiment.get("bars") or [] if isinstance(bar, dict)]
    # Quality bars beside the speed bars (v4): shares of items in points, the bar is the margin.
    return speed + [_quality_row(bar) for bar in experiment.get("quality") or [] if isinstance(bar, dict)]


def _points(value: Any, signed: bool = False) -> str:
    """A share of items as percentage points: 0.985 -> "98.5%", a difference -0.012 -> "-1.2 pt"."""
    if not isinstance(value, int | float):
        return ""
    return f"{value * 100:+.1f} pt" if signed else f"{value * 100:.1f}%"


def _quality_row(bar: dict[str, Any]) -> list[str]:
    low, high = bar.get("ci_low"), bar.get("ci_high")
    ci = f"[{_points(low, True)}, {_points(high, True)}]" if low is not None else ""
    margin = bar.get("margin")
    launches = (
        f"{bar.get('control_launches', 0)}+{bar.get('candidate_launches', 0)}, {bar.get('items', 0)} items"
    )
    return [
        str(bar.get("candidate", "")),
        f"{bar.get('metric', '')} (quality)",
        str(bar.get("point", "")),
        _points(bar.get("control")),
        _points(bar.get("value")),
        _points(bar.get("difference"), True),
        ci,
        "",
        f">= -{margin * 100:g} pt" if isinstance(margin, int | float) else "",
        launches,
        str(bar.get("outcome", "")),
    ]


def _bar_row(bar: dict[str, Any]) -> list[str]:
    metric = str(bar.get("metric", ""))
    low, high = bar.get("ci_low"), bar.get("ci_high")
    ci = f"[{metrics.format_effect(low)}, {metrics.format_effect(high)}]" if low is not None else ""
    sign = "+" if bar.get("direction") == "higher" else "-"
    min_effect, mde = bar.get("min_effect"), bar.get("mde")
    return [
        str(bar.get("candidate", "")),
        metric,
        str(bar.get("point", "")),
        metrics.format_value(metric, bar.get("control")),
        metrics.format_value(metric, bar.get("value")),
        metrics.format_effect(bar.get("effect")),
        ci,
        f"{mde * 100:.1f}%" if isinstance(mde, int | float) else "",
        f"{sign}{abs(min_effect) * 100:g}%" if isinstance(min_effect, int | float) else "",
        _launches_cell(bar),
        str(bar.get("outcome", "")),
    ]


def _launches_cell(bar: dict[str, Any]) -> str:
    """A sequential bar's launches (both arms) and how it stopped: "6, decided"; "" for fixed runs."""
    launches = bar.get("launches")
    if not isinstance(launches, int):
        return ""
    return f"{launches}, {bar.get('stopped')}" if bar.get("stopped") else str(launches)


def median_table(entry: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A result's headline medians (``metrics.headline``) as ``(headers, rows)``: one row per
    metric and point, one column per arm (the control first), values with their units; empty
    when the result keeps no ``<arm>.c<point>.<metric>`` medians."""
    found: dict[tuple[str, int], dict[str, float]] = {}
    for key, value in ((entry.get("payload") or {}).get("metrics") or {}).items():
        parsed = metrics.parse_summary_key(key)
        if parsed and isinstance(value, int | float):
            arm, point, metric = parsed
            found.setdefault((metric, point), {})[arm] = value
    shown = set(metrics.headline({metric for metric, _ in found}))
    arms = sorted({arm for values in found.values() for arm in values}, key=lambda a: (a != "control", a))
    rows = [
        [metric, str(point), *(metrics.format_value(metric, found[(metric, point)].get(arm)) for arm in arms)]
        for metric, point in sorted(found, key=lambda mp: (mp[0], mp[1]))
        if metric in shown
    ]
    return (["metric", "point", *arms], rows) if rows else ([], [])


def release_number_rows(entry: dict[str, Any]) -> list[list[str]]:
    """``[name, value with unit, point, result]`` for each number a release publishes."""
    if entry.get("kind") != "release":
        return []
    payload = entry.get("payload") or {}
    rows = []
    for number in payload.get("numbers") or []:
        unit = number.get("unit") or metrics.unit(str(number.get("metric", "")))
        value = number.get("value")
        shown = f"{value:,.6g} {unit}".rstrip() if isinstance(value, int | float) else "?"
        rows.append(
            [
                str(number.get("name", "")),
                shown,
                str(number.get("point") or ""),
                str(number.get("result") or "")[:12],
            ]
        )
    named = {row[0] for row in rows}
    for name, value in (payload.get("metrics") or {}).items():
        if name not in named and isinstance(value, int | float):
            rows.append([name, f"{value:,.6g} {metrics.unit(name)}".rstrip(), "", "(no result entry)"])
    return rows
