"""The tables page (``tables.html``) and the site's own copies of the table files (``tables/``):
the first ``TABLE_ROWS_SHOWN`` rows of each published table, computed by the tables stage's own
functions from the same verified ledger, effects as signed percentages."""

from __future__ import annotations

from typing import Any

from recipe_ledger import tables as tables_mod
from recipe_ledger.ledger.published import LedgerView
from recipe_ledger.site.writer import SiteWriter

TABLE_ROWS_SHOWN = 500  # rows of each table on tables.html (the files under tables/ have them all)


def read_tables(view: LedgerView) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(tables.html's data, the table files) computed by the same pure functions as the tables
    stage from the same verified ledger (reading back the json files costs more at 100k entries).
    The files are copied under the site's own tables/, so its links work when site/ is served alone."""
    out, files = {}, {}
    for table in tables_mod.build_tables(view):
        rows = [
            dict(zip(table.columns, (tables_mod.json_value(c) for c in row), strict=False))
            for row in table.rows[:TABLE_ROWS_SHOWN]
        ]
        out[table.name] = {
            "table": table.name,
            "title": table.title,
            "columns": list(table.columns),
            "provenance": tables_mod.provenance(view),
            "row_count": len(table.rows),
            "rows": rows,
        }
        files[f"{table.name}.csv"] = tables_mod.to_csv(table)
        files[f"{table.name}.json"] = tables_mod.to_json(table, view)
        files[f"{table.name}.md"] = tables_mod.to_markdown(table, view)
    return out, files


def write_tables_page(writer: SiteWriter, view: LedgerView) -> None:
    """The first rows of each table, and the whole files under the site's tables/ (linked)."""
    published, files = read_tables(view)
    for name, text in sorted(files.items()):
        writer.write_text(f"tables/{name}", text)
    writer.page(
        "tables.html",
        "tables.html",
        {
            "tables": list(published.values()),
            "rows_shown": TABLE_ROWS_SHOWN,
        },
    )
