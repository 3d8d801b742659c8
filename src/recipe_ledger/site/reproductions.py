"""Reproductions in words, wherever a page shows one: on the timeline, and under the release or the
experiment it re-measured (now vs published, n, the effect and its CI, the tolerance)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from recipe_ledger import metrics as metric_table
from recipe_ledger.site.entries import LedgerIndex, entry_ref
from recipe_ledger.site.shown import redact_all


def reproduction_lines(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """A reproduction's ``<number>.<field>`` metrics as one record per number: published and now,
    with units, the effect and its CI as signed percentages, the tolerance, in words."""
    fields: dict[str, dict[str, float]] = defaultdict(dict)
    for key, value in (payload.get("metrics") or {}).items():
        number, _, field = str(key).rpartition(".")
        if number and isinstance(value, (int, float)):
            fields[number][field] = float(value)
    out = []
    for number, f in sorted(fields.items()):
        fmt = metric_table.lookup(number)  # `output_tps_c4`: described by its name (tok/s)
        effect = metric_table.format_effect(f.get("effect"))
        words = (
            f"{number}: {fmt.format(f.get('reproduced'))} now (n={int(f.get('n_reproduced', 0))}) vs "
            f"{fmt.format(f.get('published'))} published (n={int(f.get('n_published', 0))}): "
            f"{effect or 'no effect computed'}{_ci_text(f)}{_tolerance_text(f)}"
        )
        out.append({"number": number, "words": words})
    return out


def _ci_text(f: dict[str, float]) -> str:
    if "ci_low" not in f or "ci_high" not in f:
        return ""
    low, high = metric_table.format_effect(f["ci_low"]), metric_table.format_effect(f["ci_high"])
    return f", 95% CI [{low}, {high}]"


def _tolerance_text(f: dict[str, float]) -> str:
    return f", tolerance ±{f['tolerance'] * 100:.0f}%" if "tolerance" in f else ""


def reproductions_of(index: LedgerIndex, entry_id: str, root: str) -> list[dict[str, Any]]:
    """The reproduction entries that name ``entry_id`` (as their target or as `see`), in words."""
    out = []
    for _, other in index.referred_by.get(entry_id, []):
        found = index.by_id.get(other) or {}
        if found.get("kind") != "reproduction":
            continue
        payload = redact_all(found.get("payload") or {})
        out.append(
            {
                **entry_ref(index, other, root),
                "ts": found.get("ts", ""),
                "outcome": payload.get("outcome"),
                "lines": [r["words"] for r in reproduction_lines(payload)],
            }
        )
    return list({r["id"]: r for r in out}.values())
