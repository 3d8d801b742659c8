"""The published tables: golden outputs, determinism, retractions excluded, unverified ledgers refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger import tables
from recipe_ledger.cli import main
from recipe_ledger.errors import StateError
from recipe_ledger.ledger import actions
from recipe_ledger.ledger.published import chain_heads, load_verified, secret_environ, text_cleaner, view_of
from recipe_ledger.ledger.store import Ledger

from helpers.projects import REPO, fixed_ledger

GOLDEN = REPO / "tests" / "golden" / "tables"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return fixed_ledger(tmp_path / "project")


def test_tables_match_the_golden_files(project: Path) -> None:
    files = tables.render_files(load_verified(project))
    assert sorted(files) == sorted(p.name for p in GOLDEN.iterdir() if p.is_file())
    for name, text in files.items():
        assert text == (GOLDEN / name).read_text(encoding="utf-8"), f"{name} differs from tests/golden/tables"


def test_writing_twice_gives_the_same_bytes(project: Path, tmp_path: Path) -> None:
    first = tables.write_tables(project, tmp_path / "a")
    second = tables.write_tables(project, tmp_path / "b")
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]
    assert not any(str(tmp_path) in p.read_text() for p in first), "an absolute path leaked into a table"


def test_a_retracted_entry_feeds_no_table(project: Path) -> None:
    ledger = Ledger.open(project)
    target = "bd60452cc40c"
    before = load_verified(project)
    assert any(row[-1].startswith(target) for row in tables.verdict_rows(before))
    (project / "ledger" / "maintainers").write_text("box-t\n")  # box-t retracts h200-lent's entry
    actions.retract(ledger, target, reason="a test retraction", writer="box-t")
    after = load_verified(project)
    assert not any(row[-1].startswith(target) for row in tables.verdict_rows(after))
    assert not any(row[-1].startswith(target) for row in tables.result_rows(after))


def test_the_seed_retraction_is_already_excluded(project: Path) -> None:
    view = load_verified(project)
    retracted = {e["id"] for e in view.entries if view.statuses[e["id"]] == "retracted"}
    assert retracted, "the seed holds one retracted result"
    # It has no metrics, so no table row could show it anyway: the filter itself is what is checked.
    assert not {e["id"] for kind in ("result", "retraction") for e in view.published(kind)} & retracted
    for table in tables.build_tables(view):
        assert not {row[-1] for row in table.rows} & retracted, table.name


def test_the_published_view_counts_each_writers_chain_and_redacts_its_text(monkeypatch) -> None:
    entries = [
        {"id": "a1", "writer": "box-a", "seq": 0},
        {"id": "b1", "writer": "box-b", "seq": 0},
        {"id": "a2", "writer": "box-a", "seq": 1},
    ]
    assert chain_heads(entries) == [("box-a", 2, "a2"), ("box-b", 1, "b1")]
    monkeypatch.setenv("SITE_TEST_API_TOKEN", "s3cr3tvalue1234567")
    assert secret_environ()["SITE_TEST_API_TOKEN"] == "s3cr3tvalue1234567"
    clean = text_cleaner()  # the snapshot taken now: a secret set later is the next build's
    assert clean("ran  with\n s3cr3tvalue1234567") == "ran with [REDACTED]"
    assert clean(None) == "" and clean(3) == "3"


def test_a_ledger_that_does_not_verify_is_refused(project: Path) -> None:
    chain = project / "ledger" / "seed-000.jsonl"
    data = chain.read_bytes()
    chain.write_bytes(data.replace(b"tok/s", b"tok/S", 1))
    with pytest.raises(StateError, match="does not verify"):
        load_verified(project)


def test_the_cli_refuses_an_unverified_ledger_with_exit_code_3(project: Path) -> None:
    chain = project / "ledger" / "seed-000.jsonl"
    chain.write_bytes(chain.read_bytes().replace(b"90, 119", b"99, 119", 1))
    result = CliRunner().invoke(main, ["tables", "--root", str(project), "--out", "tables"])
    assert result.exit_code == 3, result.output
    assert "ledger verify" in result.output
    assert not (project / "tables").exists()


def test_the_cli_writes_every_format(project: Path) -> None:
    result = CliRunner().invoke(main, ["tables", "--root", str(project)])
    assert result.exit_code == 0, result.output
    names = {p.name for p in (project / "tables").iterdir()}
    assert names == {f"{t}.{ext}" for t in tables.TABLE_NAMES for ext in ("csv", "json", "md")} | {
        tables.METRICS_FILE,
        *(f"{s}.csv" for s in tables.SERIES_NAMES),
    }


# -- DVC's metrics and plot series ----------------------------------------------------------------


def _leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    else:
        yield path, value


def test_the_metrics_are_numbers_only_and_name_each_published_result_s_bars(project: Path) -> None:
    import json

    metrics = json.loads(tables.render_files(load_verified(project))[tables.METRICS_FILE])
    leaves = list(_leaves(metrics))
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for _, v in leaves), leaves
    placement = metrics["results"]["h200-expert-placement-20261129T152526Z-71ea"]
    assert placement["uva moe_step_ms_b1@1"] == {
        "effect": -0.982698,
        "ci_low": -0.982881,
        "ci_high": -0.982514,
    }
    assert metrics["published"]["verdicts"] == sum(metrics["outcomes"].values())


def test_a_retracted_result_leaves_the_metrics_and_plots(project: Path) -> None:
    import json

    (project / "ledger" / "maintainers").write_text("box-t\n")
    actions.retract(Ledger.open(project), "bd60452cc40c", reason="a test retraction", writer="box-t")
    files = tables.render_files(load_verified(project))
    assert (
        "h200-expert-placement-20261129T152526Z-71ea" not in json.loads(files[tables.METRICS_FILE])["results"]
    )
    assert "bd60452cc40c" not in files["effects.csv"]


def test_plot_labels_are_unique_even_for_bars_named_alike() -> None:
    verdicts = tables.Table(
        "verdicts",
        "",
        ("run_id", "candidate", "metric", "point", "outcome", "effect", "ci_low", "ci_high", "entry"),
        [
            ("r", "fast", "output_tps_total", "2", "win", 0.1, 0.0, 0.2, "e"),
            ("r", "fast", "output_tps_total", "2", "win", 0.3, 0.2, 0.4, "e"),
        ],
    )
    others = [
        tables.Table("results", "", ("results",), [(1,)]),
        tables.Table("calibrations", "", ("instrument", "metric", "point", "n", "cv", "entry"), []),
        tables.Table("failures", "", (), []),
        tables.Table("releases", "", (), []),
    ]
    effects, noise = tables.plot_series([verdicts, *others])
    assert [row[0] for row in effects.rows] == ["r fast output_tps_total@2", "r fast output_tps_total@2 (2)"]
    assert noise.rows == []
    assert list(tables.metrics_document([verdicts, *others])["results"]["r"]) == [
        "fast output_tps_total@2",
        "fast output_tps_total@2 (2)",
    ]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, ""),
        (True, "true"),
        (3, "3"),
        (0.1 + 0.2, "0.3"),
        (-0.0, "0"),
        (4390.791949, "4390.79"),
        (-0.9826982515943993, "-0.982698"),
        (1e-9, "1e-09"),
        (123456789.0, "1.23457e+08"),
        ("x", "x"),
    ],
)
def test_numbers_have_one_fixed_format(value, text) -> None:
    assert tables.fmt_number(value) == text


def test_markdown_and_csv_escape_cells() -> None:
    table = tables.Table("t", "T", ("a", "b"), [("x|y", 'naïve, "quoted"\nnext')])
    view = view_of([])
    assert "x\\|y" in tables.to_markdown(table, view)
    assert tables.to_csv(table) == 'a,b\nx|y,"naïve, ""quoted""\nnext"\n'


def test_every_file_records_the_command_that_regenerates_it(project: Path) -> None:
    files = tables.render_files(load_verified(project))
    for name, text in files.items():
        if name.endswith(".md"):
            assert text.startswith("<!-- Generated by `ledger tables --root . --out tables`")
        if name.endswith(".json") and name != tables.METRICS_FILE:  # DVC's metrics: numbers only
            assert '"generated_by": "ledger tables --root . --out tables"' in text
