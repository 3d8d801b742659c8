"""The ledger timeline (``ledger/index.html``, ``ledger/page-N.html``): every entry, newest first,
``TIMELINE_PAGE`` a page, one row each in human words, failures and retractions visible.

At 100,000 entries the timeline is most of the site's build, so its rows are written here with
``html.escape`` and f-strings (jinja's per-row macro and attribute lookups cost ~10x more) and each
shown string is redacted alone (walking every field of every entry was the other half). The markup
is the same as a template would write: ``tr.entry`` with ``data-kind``/``data-status``, retracted
text in ``del.retracted``, linked to its notice.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from html import escape
from typing import Any

from recipe_ledger import metrics as metric_table
from recipe_ledger.ledger.views import summarize
from recipe_ledger.site.entries import TIMELINE_PAGE, LedgerIndex, entry_ref
from recipe_ledger.site.reproductions import reproduction_lines
from recipe_ledger.site.shown import cached_redact
from recipe_ledger.site.writer import Progress, SiteWriter, run_tasks

NUMBERS_SHOWN = 6  # numbers in words per row; the entry's JSON (and `ledger show`) has them all
MAX_SHOWN_CHARS = 2000  # free text longer than this is cut on the timeline


def write_timeline(writer: SiteWriter, index: LedgerIndex, tick: Progress) -> None:
    """Every timeline page, each with the filters' choices and the chain heads."""
    newest_first = list(reversed(index.entries))
    pages = max(1, -(-len(newest_first) // TIMELINE_PAGE))
    kinds = sorted({e.get("kind", "") for e in newest_first})
    statuses = sorted({index.statuses[e["id"]] for e in newest_first})

    def one(i: int, out: SiteWriter) -> None:
        page = i + 1
        chunk = newest_first[i * TIMELINE_PAGE : page * TIMELINE_PAGE]
        name = "index" if page == 1 else f"page-{page}"
        entries = timeline_rows(index, chunk, "../")
        data = {
            "page": page,
            "pages": pages,
            "kinds": kinds,
            "statuses": statuses,
            "heads": [{"writer": w, "entries": n, "head": h} for w, n, h in index.heads],
            "entries": entries,
        }
        rows = rows_html(entries)
        out.page(f"ledger/{name}.html", "ledger.html", data, compact=True, rows_html=rows)

    run_tasks(pages, one, writer, "ledger", tick)


def timeline_rows(index: LedgerIndex, entries: list[dict[str, Any]], root: str) -> list[dict[str, Any]]:
    clean = cached_redact()
    return [
        row_data(entry, entry_ref(index, entry["id"], root), _refs(index, entry, root), clean)
        for entry in entries
    ]


def _refs(index: LedgerIndex, entry: dict[str, Any], root: str) -> list[dict[str, Any]]:
    return [
        {"rel": r.get("rel"), **entry_ref(index, r["id"], root)}
        for r in entry.get("refs", ())
        if r.get("id") in index.by_id
    ]


# -- a row's data ------------------------------------------------------------------------------


def clip(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + f"… ({len(text):,} characters in all)"


def number_words(key: str, value: Any) -> str:
    """``control.c4.output_tps_total`` = 137.3 -> ``control at 4: output throughput 137.30 tok/s``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{key}: {value}"  # a note's text number ("numbers" may hold strings)
    where, label, metric = _described(key)
    return f"{where}{label} {metric.format(value)}"


@lru_cache(maxsize=1 << 14)
def _described(key: str) -> tuple[str, str, metric_table.Metric]:
    """(where, label, metric) of a number's name: the same few names repeat on every row."""
    parsed = metric_table.parse_summary_key(key)
    name = parsed[2] if parsed else key
    metric = metric_table.lookup(name)
    label = metric.label if metric.known else name
    return (f"{parsed[0]} at {parsed[1]}: " if parsed else ""), label, metric


def numbers_in_words(entry: dict[str, Any], clean: Callable[[str], str]) -> tuple[list[str], int]:
    """(the first ``NUMBERS_SHOWN`` numbers of an entry in words, how many more it has); ``clean``
    redacts the names (numbers themselves are never secrets)."""
    payload = entry.get("payload") or {}
    if entry.get("kind") == "reproduction":
        lines = [clean(r["words"]) for r in reproduction_lines(payload)]
        return lines[:NUMBERS_SHOWN], max(0, len(lines) - NUMBERS_SHOWN)
    numbers = payload.get("metrics") or payload.get("numbers") or {}
    if not isinstance(numbers, dict):
        return [], 0
    keys = sorted(numbers)
    shown = [number_words(clean(str(k)), _cleaned(numbers[k], clean)) for k in keys[:NUMBERS_SHOWN]]
    return shown, max(0, len(keys) - NUMBERS_SHOWN)


def _cleaned(value: Any, clean: Callable[[str], str]) -> Any:
    return clean(value) if isinstance(value, str) else value


def row_data(
    entry: dict[str, Any], ref: dict[str, Any], refs: list[dict], clean: Callable[[str], str]
) -> dict:
    """The timeline's record of one entry (what the page's JSON holds); ``clean`` redacts a string."""
    p = entry.get("payload") or {}
    numbers, more = numbers_in_words(entry, clean)
    is_titled_note = entry.get("kind") == "note" and p.get("title")
    return {
        **ref,
        "ts": entry.get("ts", ""),
        "writer": clean(str(entry.get("writer", ""))),
        "kind": entry.get("kind", ""),
        "summary": clean(clip(summarize(entry, MAX_SHOWN_CHARS))),
        "numbers": numbers,
        "more_numbers": more,
        "fix": clean(clip(str(p.get("fix") or ""))),
        "cause_class": clean(str(p.get("cause_class") or "")),
        "detail": clean(clip(str(p.get("text") or ""), 600)) if is_titled_note else "",
        "refs": refs,
    }


# -- a row's markup ----------------------------------------------------------------------------


def _link(ref: dict[str, Any]) -> str:
    """An entry id link; struck through when retracted, with its notice linked."""
    anchor = f'<a href="{escape(ref["href"])}" class="entry-id">{escape(ref["short"])}</a>'
    if ref["status"] != "retracted":
        return anchor
    notice = ref.get("retracted_by")
    tail = ""
    if notice:
        href, short = escape(notice["href"]), escape(notice["short"])
        tail = f' <a href="{href}" class="retraction-link">retracted by {short}</a>'

    return f'<del class="retracted">{anchor}</del>{tail}'


def _struck(text: str, retracted: bool, css: str = "") -> str:
    cls = f' class="{css}"' if css else ""
    if retracted:
        return f'<del class="retracted{" " + css if css else ""}">{escape(text)}</del>'
    return f"<span{cls}>{escape(text)}</span>" if css else escape(text)


def row_html(row: dict[str, Any]) -> str:
    retracted = row["status"] == "retracted"
    kind, status = escape(row["kind"]), escape(row["status"])
    cause = f" <small>({escape(row['cause_class'])})</small>" if row["cause_class"] else ""
    what = [_struck(row["summary"], retracted, "summary")]
    if row["numbers"]:
        shown = " · ".join(_struck(n, retracted) for n in row["numbers"])
        more = f" · … {row['more_numbers']} more" if row["more_numbers"] else ""
        what.append(f'<br><small class="numbers">{shown}{more}</small>')
    if row["detail"]:
        what.append(f'<br><small class="detail">{_struck(row["detail"], retracted)}</small>')
    if row["fix"]:
        what.append(f'<br><small class="fix">fix: {escape(row["fix"])}</small>')
    refs = "".join(f"{escape(str(r['rel']))} {_link(r)}<br>" for r in row["refs"])
    return (
        f'<tr class="entry kind-{kind} status-{status}" id="e-{escape(row["short"])}" data-kind="{kind}" '
        f'data-status="{status}">'
        f'<td>{_link(row)} <span class="status status-{status}">{status}</span></td>'
        f"<td>{escape(row['ts'][:19].replace('T', ' '))}</td><td>{escape(row['writer'])}</td>"
        f'<td class="kind">{kind}{cause}</td><td class="what">{"".join(what)}</td>'
        f'<td class="refs">{refs}</td></tr>\n'
    )


def rows_html(rows: list[dict[str, Any]]) -> str:
    return "".join(row_html(r) for r in rows)
