"""What other entries say about an entry, beside its status (pure): the calibrations a result's
verdicts used, the results that used a calibration, the notes that refer to an entry.

They are tags on the entry's run (``link_tags``) that every sync refreshes, as it does the status:
a note written after the run was indexed, or a calibration retracted since, changes the tags of the
runs it touches on the next sync. Everything here is read from the ledger alone:

- a ``result`` refers to each of its calibrations (``refs``: ``evidence``, one per instrument and
  metric a bar decided on, ``experiment.calibration`` being only the first);
- a ``note`` refers to the entries it is about (``ledger note TEXT --ref ID``): a correction, a
  caveat, a finding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recipe_ledger import metrics as metric_table
from recipe_ledger.tracking.runspec import (
    CALIBRATIONS_TAG,
    NOTE_CHARS,
    NOTE_TAG,
    NOTES_TAG,
    USED_BY_TAG,
    as_text,
    bar_key,
    finite_number,
    key,
)


@dataclass(frozen=True)
class Links:
    """The entries linked to one entry, in ledger order, and the folded status of every entry."""

    calibrations: tuple[Mapping[str, Any], ...] = ()  # a result's calibration entries
    used_by: tuple[str, ...] = ()  # a calibration's results (their ids)
    notes: tuple[Mapping[str, Any], ...] = ()  # the note entries that refer to it
    statuses: Mapping[str, str] = field(default_factory=dict)

    def status(self, entry_id: str) -> str:
        return self.statuses.get(entry_id, "active")


NO_LINKS = Links()


def ledger_links(entries: Sequence[Mapping[str, Any]], statuses: Mapping[str, str]) -> dict[str, Links]:
    """``{entry id: Links}`` for every entry something links to (or that links to a calibration)."""
    by_id = {entry["id"]: entry for entry in entries}
    calibrations: dict[str, list[Mapping[str, Any]]] = {}
    used_by: dict[str, list[str]] = {}
    notes: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        if entry["kind"] not in ("result", "note"):
            continue
        for target_id in _unique(ref.get("id") for ref in entry.get("refs", ())):
            target = by_id.get(target_id)
            if target is None:
                continue  # a ref into a chain this box has not fetched yet
            if entry["kind"] == "note":
                notes.setdefault(target_id, []).append(entry)
            elif target["kind"] == "calibration":
                calibrations.setdefault(entry["id"], []).append(target)
                used_by.setdefault(target_id, []).append(entry["id"])
    return {
        entry_id: Links(
            tuple(calibrations.get(entry_id, ())),
            tuple(used_by.get(entry_id, ())),
            tuple(notes.get(entry_id, ())),
            statuses,
        )
        for entry_id in calibrations.keys() | used_by.keys() | notes.keys()
    }


def _unique(ids: Iterable[str | None]) -> list[str]:
    return list(dict.fromkeys(i for i in ids if i))


def short(entry_id: str) -> str:
    return entry_id[:12]


# -- tags


def link_tags(entry: Mapping[str, Any], links: Links) -> dict[str, str]:
    """The tags that link an entry's run to the entries around it (MLflow's runs table shows them):

    - ``ledger.calibrations`` = every calibration a result refers to, ``calibration.<instrument>.
      <metric>`` = one of them with its noise per point, ``verdict.<bar>.calibration`` = the one a
      bar's verdict used, with its cv at the bar's point;
    - ``ledger.used_by`` = the results that refer to a calibration;
    - ``ledger.notes`` = the notes about an entry, ``ledger.note.<id>`` = each one's text.
    """
    tags: dict[str, str] = {}
    if links.calibrations:
        tags[CALIBRATIONS_TAG] = ", ".join(short(c["id"]) for c in links.calibrations)
        for calibration in links.calibrations:
            name = calibration_tag(calibration)
            text = f"{_labelled(calibration, links)}: {noise_text(calibration)}"
            tags[name] = f"{tags[name]}; {text}" if name in tags else text
        tags.update(bar_calibration_tags(entry, links))
    if links.used_by:
        tags[USED_BY_TAG] = ", ".join(short(i) for i in links.used_by)
    if links.notes:
        tags[NOTES_TAG] = ", ".join(short(n["id"]) for n in links.notes)
        for note in links.notes:
            tags[key(NOTE_TAG, short(note["id"]))] = note_text(note, links)
    return tags


def calibration_tag(calibration: Mapping[str, Any]) -> str:
    """``calibration.<instrument>.<metric>``: one column per instrument and metric in the runs table."""
    payload = calibration["payload"]
    return key("calibration", payload.get("instrument", "-"), payload.get("metric", "-"))


def _labelled(entry: Mapping[str, Any], links: Links) -> str:
    """``<id12>``, and its status when it is not active (``<id12> (retracted)``)."""
    status = links.status(entry["id"])
    return short(entry["id"]) + ("" if status == "active" else f" ({status})")


def noise_text(calibration: Mapping[str, Any]) -> str:
    """``c1 cv 6.95%, c8 cv 15.20% (n 3)``: the calibration's noise per point, as its text says it."""
    points = calibration["payload"].get("points") or {}
    if not points:
        return "no noise: every A/A point was refused"
    ordered = sorted(points.items(), key=lambda item: _point_order(item[0]))
    sizes = {noise.get("n") for _, noise in ordered}
    parts = [f"c{point} cv {_percent(noise.get('cv'))}" for point, noise in ordered]
    if len(sizes) == 1:
        return ", ".join(parts) + f" (n {sizes.pop()})"
    return ", ".join(f"{part} (n {noise.get('n')})" for part, (_, noise) in zip(parts, ordered, strict=True))


def _point_order(point: str) -> tuple[int, int, str]:
    return (0, int(point), point) if point.isdigit() else (1, 0, point)


def _percent(value: Any) -> str:
    number = finite_number(value)
    return "-" if number is None else f"{number * 100:.2f}%"


def bar_calibration_tags(entry: Mapping[str, Any], links: Links) -> dict[str, str]:
    """``verdict.<candidate>.<metric>.c<point>.calibration`` = ``<id12> (cv 6.95%)``: the calibration
    behind each bar's verdict and its noise at that point, where the bar names one unambiguously."""
    record = entry["payload"].get("experiment") or {}
    instruments = list(record.get("instruments") or {})
    tags = {}
    for bar in record.get("bars", []):
        calibration = bar_calibration(bar, instruments, links.calibrations)
        if calibration is None:
            continue
        noise = (calibration["payload"].get("points") or {}).get(str(bar["point"])) or {}
        cv = finite_number(noise.get("cv"))
        said = f"cv {cv * 100:.2f}%" if cv is not None else f"no noise at c{bar['point']}"
        tags[bar_key(bar) + ".calibration"] = f"{_labelled(calibration, links)} ({said})"
    return tags


def bar_calibration(
    bar: Mapping[str, Any], instruments: Sequence[str], calibrations: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The calibration of the bar's instrument and metric (``<instrument>/<metric>`` in a record of
    several instruments, the plain metric of the only instrument otherwise); None when not one."""
    instrument, metric = metric_table.split_instrument(str(bar.get("metric", "")))
    if instrument is None and len(instruments) == 1:
        instrument = instruments[0]
    found = [
        c
        for c in calibrations
        if c["payload"].get("metric") == metric and instrument in (None, c["payload"].get("instrument"))
    ]
    return found[0] if len(found) == 1 else None


def note_text(note: Mapping[str, Any], links: Links) -> str:
    """The note's text on one line, cut to NOTE_CHARS; ``[retracted] ...`` once it is retracted."""
    text = " ".join(str(note["payload"].get("text", "")).split())
    status = links.status(note["id"])
    return as_text(text if status == "active" else f"[{status}] {text}", NOTE_CHARS)
