"""`ledger release diff LANE@A LANE@B`: two releases side by side (flags, pins, k-schedule, numbers).

Pure: works on release payloads (any schema version, read as the current one), so v13 against v14
of an imported lane reads as well as two measured CPU releases.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from recipe_ledger import metrics
from recipe_ledger.ledger import views
from recipe_ledger.ledger.models import ReleasePayload
from recipe_ledger.recipes.flags import flag_values
from recipe_ledger.releases.catalog import Release, pins_summary

ABSENT = "-"


@dataclass(frozen=True)
class Row:
    section: str  # status | pins | flags | k-schedule | numbers | box
    name: str
    a: str
    b: str
    change: str = ""  # numbers: B against A as a signed percentage ("+8.2%"), when both exist

    @property
    def same(self) -> bool:
        return self.a == self.b


def flag_map(payload: ReleasePayload) -> dict[str, str]:
    """``{flag: value}`` from the argv (v2) or the "--flag value" strings (v1 imports)."""
    if payload.argv:
        return flag_values(list(payload.argv))
    out = {}
    for text in payload.flags:
        name, _, value = text.partition(" ")
        out[name] = value or "(set)"
    return out


def k_schedule(payload: ReleasePayload) -> str:
    """The speculative decoding schedule: draft tokens per batch-size range, as published."""
    spec = flag_map(payload).get("--speculative-config")
    if spec is None:
        return "none" if payload.argv or payload.flags else ABSENT
    try:
        config = json.loads(spec)
    except ValueError:
        return spec
    per_batch = config.get("num_speculative_tokens_per_batch_size")
    base = f"{config.get('method', '?')} k={config.get('num_speculative_tokens', '?')}"
    if not per_batch:
        return base
    ranges = ", ".join(f"batch {lo}-{hi}: k={k}" for lo, hi, k in per_batch)
    return f"{base}; {ranges}"


def diff(a: Release, b: Release, *, only_changes: bool = False) -> list[Row]:
    rows = (
        _status_rows(a, b)
        + _pin_rows(a, b)
        + _flag_rows(a, b)
        + [Row("k-schedule", "speculation", k_schedule(a.payload), k_schedule(b.payload))]
        + _number_rows(a, b)
    )
    return [r for r in rows if not (only_changes and r.same)]


def _status_rows(a: Release, b: Release) -> list[Row]:
    return [
        Row("status", "id", a.id[:12], b.id[:12]),
        Row("status", "verification", a.verification, b.verification),
        Row("status", "ledger", a.status, b.status),
    ]


def _pin_rows(a: Release, b: Release) -> list[Row]:
    pa, pb = pins_summary(a), pins_summary(b)
    rows = [
        Row("pins", "image", image_text(pa["image"]), image_text(pb["image"])),
        Row("pins", "model", _model(pa["model"]), _model(pb["model"])),
    ]
    for path in sorted(set(pa["scripts"]) | set(pb["scripts"])):
        rows.append(Row("pins", path, pa["scripts"].get(path, ABSENT), pb["scripts"].get(path, ABSENT)))
    for key in sorted(set(pa["box"]) | set(pb["box"])):
        rows.append(Row("box", key, pa["box"].get(key, ABSENT), pb["box"].get(key, ABSENT)))
    return rows


def image_text(image: dict | None) -> str:
    return views.image_text(image, ABSENT)


def _model(model: dict | None) -> str:
    if model is None:
        return ABSENT
    return f"{model['name'] or model['path']} {model['revision'] or '(no revision)'}"


def _flag_rows(a: Release, b: Release) -> list[Row]:
    fa, fb = flag_map(a.payload), flag_map(b.payload)
    names = list(dict.fromkeys([*fa, *fb]))
    return [Row("flags", name, fa.get(name, ABSENT), fb.get(name, ABSENT)) for name in names]


def _number_rows(a: Release, b: Release) -> list[Row]:
    na, nb = _numbers(a.payload), _numbers(b.payload)
    rows = []
    for name in sorted(set(na) | set(nb)):
        (va, unit_a), (vb, unit_b) = na.get(name, (None, "")), nb.get(name, (None, ""))
        rows.append(Row("numbers", name, _num(va, unit_a), _num(vb, unit_b), _change(va, vb)))
    return rows


def _numbers(payload: ReleasePayload) -> dict[str, tuple[float, str]]:
    """``{name: (value, unit)}``: the unit the number was published with, else its metric's (from
    the metric table, by the metric's name or, for a v1 ``metrics`` map, by the number's own)."""
    out = {name: (value, metrics.unit(name)) for name, value in payload.metrics.items()}
    for number in payload.numbers:
        out[number.name] = (number.value, number.unit or metrics.unit(number.metric))
    return out


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return ABSENT
    return f"{value:,.6g} {unit}".rstrip()


def _change(a: float | None, b: float | None) -> str:
    """B against A as a signed percentage; empty when either is missing or A is zero."""
    if a is None or b is None or a == 0:
        return ""
    return metrics.format_effect((b - a) / abs(a))
