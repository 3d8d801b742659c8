"""The published tables: verified, non-retracted ledger entries -> rows -> csv, json, md.

``dvc repro`` runs ``ledger tables`` (the ``tables`` stage), and the files are committed, so a
reader can regenerate them on a fresh clone and get the same bytes. Everything here is
deterministic for that reason: rows are sorted, numbers have one fixed format (``fmt_number``),
nothing records the time of generation or an absolute path.

Rules for what is published: the rows come from ``ledger.published`` (the view the site reads too),
so the ledger must verify and a retracted entry feeds no table (it stays in the ledger and, struck
through, on the site); superseded releases stay in ``releases`` with their status: they were
published and are history.

Tables (one row each): ``results`` (a subject: how many results, the newest one's verdict and
entry), ``verdicts`` (a bar decided by ``ledger run``), ``releases`` (a release), ``failures`` (a
failure: what did not work is published too), ``calibrations`` (an instrument's measured noise, per
point). ``results-long`` (a metric of a result entry, with its unit) is written only when asked
(``ledger tables --long``): at 100,000 entries it is hundreds of MB, the summary a few hundred kB.

Numbers keep their raw form in csv and json (fractions for effects, the metric's own unit), with a
``unit`` column saying which; the markdown and the site print effects as signed percentages.

For DVC (dvc.yaml's ``metrics`` and ``plots``, read by ``dvc metrics show/diff`` and ``dvc plots
show``), the same rows also give ``metrics.json`` (numbers only: what is published, the verdicts'
outcomes, and per published result the effect and CI of each bar) and two plot series, one csv
each with a label per row: ``effects`` (a bar's effect and CI) and ``noise`` (a calibration's cv
per point). They are not tables: the site does not show them.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipe_ledger import metrics as metric_table
from recipe_ledger.ledger.published import LedgerView, load_verified, text_cleaner
from recipe_ledger.paths import contained

FORMAT_VERSION = 1  # of the json files' envelope; bump it when a column changes meaning
SIGNIFICANT_DIGITS = 6
TABLE_NAMES = ("results", "verdicts", "releases", "failures", "calibrations")
LONG_TABLES = ("results-long",)  # written with --long only
METRICS_FILE = "metrics.json"  # dvc.yaml `metrics`: headline numbers, numbers only
SERIES_NAMES = ("effects", "noise")  # dvc.yaml `plots`: <name>.csv, one labelled row per mark
EFFECT_COLUMNS = frozenset({"effect", "ci_low", "ci_high"})  # signed fractions: +3.1% in md and on the site
SIZE_COLUMNS = frozenset({"mde", "min_effect"})  # unsigned fractions (a size of effect): 1.5%


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


# -- number formatting -------------------------------------------------------------------------


def fmt_number(value: Any) -> str:
    """One text form per number: ints as they are, floats to 6 significant digits, no '-0'."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = f"{value:.{SIGNIFICANT_DIGITS}g}"
        return "0" if text in ("-0", "0") else text
    return str(value)


def json_value(value: Any) -> Any:
    """The JSON form of a cell: floats rounded exactly as ``fmt_number`` prints them."""
    if isinstance(value, float):
        return float(fmt_number(value))
    return value


# -- rows --------------------------------------------------------------------------------------


_text = text_cleaner()  # for callers outside build_tables (tests); build_tables takes a fresh snapshot


def result_rows(view: LedgerView, text: Callable[[Any], str] = _text) -> list[tuple[Any, ...]]:
    """The long results: one row per metric of a result, with the metric's unit."""
    rows = []
    for entry in view.published("result"):
        payload = entry.get("payload", {})
        for metric, value in sorted(payload.get("metrics", {}).items()):
            rows.append(
                (
                    text(payload.get("subject")),
                    metric,
                    value,
                    _unit_of(metric),
                    text(payload.get("verdict")),
                    view.statuses[entry["id"]],
                    entry.get("writer", ""),
                    entry.get("ts", ""),
                    entry["id"],
                )
            )
    return sorted(rows, key=lambda r: (r[0], r[1], r[7], r[8]))


def _unit_of(metric: str) -> str:
    parsed = metric_table.parse_summary_key(metric)
    return metric_table.unit(parsed[2] if parsed else metric)


def result_summary_rows(view: LedgerView, text: Callable[[Any], str] = _text) -> list[tuple[Any, ...]]:
    """One row per subject: how many results, how many numbers, and the newest result's verdict."""
    newest: dict[str, dict[str, Any]] = {}
    counts: dict[str, list[int]] = {}
    for entry in view.published("result"):
        payload = entry.get("payload", {})
        subject = text(payload.get("subject"))
        count = counts.setdefault(subject, [0, 0])
        count[0] += 1
        count[1] += len(payload.get("metrics", {}))
        if subject not in newest or (entry.get("ts", ""), entry["id"]) >= (
            newest[subject].get("ts", ""),
            newest[subject]["id"],
        ):
            newest[subject] = entry
    return [
        (
            subject,
            counts[subject][0],
            counts[subject][1],
            text(entry.get("payload", {}).get("verdict")),
            view.statuses[entry["id"]],
            entry.get("writer", ""),
            entry.get("ts", ""),
            entry["id"],
        )
        for subject, entry in sorted(newest.items())
    ]


def verdict_rows(view: LedgerView) -> list[tuple[Any, ...]]:
    rows = []
    for entry in view.published("result"):
        experiment = entry.get("payload", {}).get("experiment") or {}
        for bar in experiment.get("bars", []):
            rows.append(
                (
                    experiment.get("name", ""),
                    experiment.get("run_id", ""),
                    experiment.get("box", ""),
                    bar.get("candidate"),
                    bar.get("metric"),
                    str(bar.get("point")),
                    bar.get("direction"),
                    bar.get("outcome"),
                    bar.get("effect"),
                    bar.get("ci_low"),
                    bar.get("ci_high"),
                    bar.get("mde"),
                    bar.get("min_effect"),
                    bar.get("control"),
                    bar.get("value"),
                    metric_table.unit(str(bar.get("metric"))),
                    experiment.get("method", ""),
                    view.statuses[entry["id"]],
                    entry["id"],
                )
            )
    return sorted(rows, key=lambda r: (r[0], r[1], r[3] or "", r[4] or "", r[5]))


def release_rows(view: LedgerView) -> list[tuple[Any, ...]]:
    rows = []
    for entry in view.published("release"):
        p = entry.get("payload", {})
        image, model = p.get("image") or {}, p.get("model") or {}
        metrics = "; ".join(f"{k}={fmt_number(v)}" for k, v in sorted(p.get("metrics", {}).items()))
        rows.append(
            (
                p.get("lane", ""),
                p.get("version", ""),
                view.statuses[entry["id"]],
                image.get("ref", ""),
                image.get("digest") or "",
                bool(image.get("pinned", False)),
                model.get("name") or "",
                model.get("revision") or "",
                len(p.get("flags", [])),
                metrics,
                p.get("supersedes") or "",
                entry.get("ts", ""),
                entry["id"],
            )
        )
    return sorted(rows, key=lambda r: (r[0], r[11], r[12]))


def failure_rows(view: LedgerView, text: Callable[[Any], str] = _text) -> list[tuple[Any, ...]]:
    rows = []
    for entry in view.published("failure"):
        p = entry.get("payload", {})
        rows.append(
            (
                text(p.get("subject")),
                p.get("cause_class", ""),
                text(p.get("cause")),
                p.get("minutes_lost"),
                text(p.get("fix")),
                view.statuses[entry["id"]],
                entry.get("ts", ""),
                entry["id"],
            )
        )
    return sorted(rows, key=lambda r: (r[0], r[6], r[7]))


def calibration_rows(view: LedgerView, text: Callable[[Any], str] = _text) -> list[tuple[Any, ...]]:
    rows = []
    for entry in view.published("calibration"):
        p = entry.get("payload", {})
        points = p.get("points") or {}
        if not points:
            rows.append(
                (
                    text(p.get("instrument")),
                    text(p.get("metric")),
                    "",
                    len(p.get("repeats", [])),
                    None,
                    p.get("sigma"),
                    None,
                    p.get("spread"),
                    text(p.get("unit")),
                    entry["id"],
                )
            )
        for point, noise in sorted(points.items()):
            rows.append(
                (
                    text(p.get("instrument")),
                    text(p.get("metric")),
                    point,
                    noise.get("n"),
                    noise.get("mean"),
                    noise.get("sigma"),
                    noise.get("cv"),
                    noise.get("max_spread"),
                    text(p.get("unit")),
                    entry["id"],
                )
            )
    return sorted(rows, key=lambda r: (r[0], r[1], str(r[2]), r[9]))


def build_tables(view: LedgerView, *, long: bool = False) -> list[Table]:
    """Every published table, in ``TABLE_NAMES`` order (then ``LONG_TABLES`` when ``long``)."""
    text = text_cleaner()
    tables = [
        Table(
            "results",
            "Results: one row per subject (the newest result's verdict; results-long has every number)",
            ("subject", "results", "numbers", "newest_verdict", "status", "writer", "ts", "entry"),
            result_summary_rows(view, text),
        ),
        Table(
            "verdicts",
            "Verdicts: one row per bar decided by `ledger run`",
            (
                "experiment",
                "run_id",
                "box",
                "candidate",
                "metric",
                "point",
                "direction",
                "outcome",
                "effect",
                "ci_low",
                "ci_high",
                "mde",
                "min_effect",
                "control",
                "value",
                "unit",
                "method",
                "status",
                "entry",
            ),
            verdict_rows(view),
        ),
        Table(
            "releases",
            "Releases: one row per published release (superseded ones stay, marked)",
            (
                "lane",
                "version",
                "status",
                "image",
                "digest",
                "pinned",
                "model",
                "revision",
                "flags",
                "metrics",
                "supersedes",
                "ts",
                "entry",
            ),
            release_rows(view),
        ),
        Table(
            "failures",
            "Failures: what did not boot, ran out of memory, hung or crashed",
            ("subject", "cause_class", "cause", "minutes_lost", "fix", "status", "ts", "entry"),
            failure_rows(view, text),
        ),
        Table(
            "calibrations",
            "Calibrations: an instrument's measured noise, per sweep point",
            ("instrument", "metric", "point", "n", "mean", "sigma", "cv", "max_spread", "unit", "entry"),
            calibration_rows(view, text),
        ),
    ]
    if long:
        tables.append(
            Table(
                "results-long",
                "Results, long: one row per metric of a non-retracted result",
                ("subject", "metric", "value", "unit", "verdict", "status", "writer", "ts", "entry"),
                result_rows(view, text),
            )
        )
    return tables


# -- DVC: metrics and plot series (from the tables' own rows) ------------------------------------


def _records(table: Table) -> list[dict[str, Any]]:
    return [dict(zip(table.columns, row, strict=True)) for row in table.rows]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _unique_label(label: str, seen: Counter[str]) -> str:
    """``label``, or ``label (2)`` for its second use (two bars an older record named alike)."""
    seen[label] += 1
    return label if seen[label] == 1 else f"{label} ({seen[label]})"


def bar_label(row: dict[str, Any]) -> str:
    """A verdict row in the ledger's words: ``fast output_tps_total@4``."""
    return f"{row['candidate']} {row['metric']}@{row['point']}"


def metrics_document(tables: Sequence[Table]) -> dict[str, Any]:
    """What ``dvc metrics show`` prints: how much is published, the verdicts' outcomes, and per
    published result (by run id) the effect and CI of each bar, as fractions. Numbers only."""
    by_name = {table.name: _records(table) for table in tables}
    verdicts = by_name["verdicts"]
    results: dict[str, dict[str, dict[str, Any]]] = {}
    seen: dict[str, Counter[str]] = {}
    for row in verdicts:
        numbers = {c: json_value(row[c]) for c in ("effect", "ci_low", "ci_high") if _is_number(row[c])}
        if numbers:
            label = _unique_label(bar_label(row), seen.setdefault(row["run_id"], Counter()))
            results.setdefault(row["run_id"], {})[label] = numbers
    return {
        "published": {
            "results": sum(row["results"] for row in by_name["results"]),
            "verdicts": len(verdicts),
            "calibrations": len({row["entry"] for row in by_name["calibrations"]}),
            "failures": len(by_name["failures"]),
            "releases": len(by_name["releases"]),
        },
        "outcomes": dict(sorted(Counter(str(row["outcome"]) for row in verdicts).items())),
        "results": results,
    }


def to_metrics_json(tables: Sequence[Table]) -> str:
    return json.dumps(metrics_document(tables), indent=1, ensure_ascii=False) + "\n"


def plot_series(tables: Sequence[Table]) -> list[Table]:
    """The plots' data, in ``SERIES_NAMES`` order: ``effects`` (a row per bar of a published result
    that has an effect: ``<run id> <candidate> <metric>@<point>``) and ``noise`` (a row per point of
    a published calibration that has a cv: ``<instrument> <metric> c<point> <entry>``)."""
    by_name = {table.name: _records(table) for table in tables}
    seen: Counter[str] = Counter()
    effects = [
        (
            _unique_label(f"{row['run_id']} {bar_label(row)}", seen),
            row["effect"],
            row["ci_low"],
            row["ci_high"],
            row["outcome"],
            row["entry"],
        )
        for row in by_name["verdicts"]
        if _is_number(row["effect"])
    ]
    noise = [
        (
            f"{row['instrument']} {row['metric']} c{row['point']} {str(row['entry'])[:12]}",
            row["cv"],
            row["n"],
            row["entry"],
        )
        for row in by_name["calibrations"]
        if _is_number(row["cv"])
    ]
    return [
        Table(
            "effects",
            "A bar's effect and CI (fractions), per published result",
            ("bar", "effect", "ci_low", "ci_high", "outcome", "entry"),
            sorted(effects, key=lambda r: r[0]),
        ),
        Table(
            "noise",
            "A calibration's A/A noise (cv) per sweep point",
            ("calibration", "cv", "n", "entry"),
            sorted(noise, key=lambda r: r[0]),
        ),
    ]


# -- writers -----------------------------------------------------------------------------------


def regenerate_command(out: str = "tables") -> str:
    """The command recorded in each file's header (pip-tools style)."""
    return f"ledger tables --root . --out {out}"


def provenance(view: LedgerView, out: str = "tables") -> dict[str, Any]:
    return {
        "generated_by": regenerate_command(out),
        "stage": "dvc repro tables",
        "rule": "entries of a ledger that verifies; retracted entries excluded",
        "ledger_heads": [{"writer": w, "entries": n, "head": h} for w, n, h in view.heads],
    }


def to_csv(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow([fmt_number(cell) for cell in row])
    return buffer.getvalue()


def to_json(table: Table, view: LedgerView, out: str = "tables") -> str:
    data = {
        "format": "recipe-ledger-table",
        "version": FORMAT_VERSION,
        "table": table.name,
        "title": table.title,
        "provenance": provenance(view, out),
        "columns": list(table.columns),
        "rows": [dict(zip(table.columns, (json_value(c) for c in row), strict=False)) for row in table.rows],
    }
    return json.dumps(data, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def percent_text(value: Any, column: str) -> str | None:
    """A fraction column's cell as a percentage (signed for effects), None for other cells."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if column in EFFECT_COLUMNS:
        return metric_table.format_effect(value)
    if column in SIZE_COLUMNS:
        return f"{value * 100:.1f}%"
    return None


def _md_cell(value: Any, column: str = "") -> str:
    percent = percent_text(value, column)
    if percent is not None:
        return percent
    return fmt_number(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def to_markdown(table: Table, view: LedgerView, out: str = "tables") -> str:
    heads = ", ".join(f"{w} ({n} entries, head {h[:12]})" for w, n, h in view.heads) or "empty ledger"
    lines = [
        f"<!-- Generated by `{regenerate_command(out)}` (dvc stage `tables`). Do not edit: -->",
        "<!-- regenerate with `dvc repro` and commit the result. -->",
        "",
        f"# {table.title}",
        "",
        f"From the ledger chains {heads}; retracted entries are excluded.",
        "",
    ]
    if not table.rows:
        return "\n".join(lines + ["(no rows)", ""])
    lines.append("| " + " | ".join(table.columns) + " |")
    lines.append("|" + "---|" * len(table.columns))
    lines.extend(
        "| " + " | ".join(_md_cell(c, name) for c, name in zip(row, table.columns, strict=False)) + " |"
        for row in table.rows
    )
    return "\n".join(lines) + "\n"


def render_files(view: LedgerView, out: str = "tables", *, long: bool = False) -> dict[str, str]:
    """``{file name: text}`` of every table in every format, and DVC's metrics and plot series."""
    files: dict[str, str] = {}
    tables = build_tables(view, long=long)
    for table in tables:
        files[f"{table.name}.csv"] = to_csv(table)
        files[f"{table.name}.json"] = to_json(table, view, out)
        files[f"{table.name}.md"] = to_markdown(table, view, out)
    files[METRICS_FILE] = to_metrics_json(tables)
    for series in plot_series(tables):
        files[f"{series.name}.csv"] = to_csv(series)
    return files


def write_tables(root: Path, out: Path, *, label: str = "tables", long: bool = False) -> list[Path]:
    """Verify the ledger under ``root`` and write every table under ``out``; the written paths.
    Without ``long``, a results-long table left by an earlier ``--long`` run is removed: the
    folder holds exactly what this run published."""
    view = load_verified(root)
    out.mkdir(parents=True, exist_ok=True)
    if not long:
        for name in LONG_TABLES:
            for stale in out.glob(f"{name}.*"):
                stale.unlink()
    written = []
    for name, text in sorted(render_files(view, label, long=long).items()):
        path = contained(out, name)
        _write_if_changed(path, text.encode("utf-8"))
        written.append(path)
    return written


def _write_if_changed(path: Path, data: bytes) -> None:
    """Leave an identical file untouched (its mtime too), so `make`-like tools see no change."""
    if path.is_file() and path.read_bytes() == data:
        return
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(data)
    temp.replace(path)
