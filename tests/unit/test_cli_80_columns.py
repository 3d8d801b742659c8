"""At 80 columns (a plain terminal) every table keeps its headers: `ledger log`'s stacked rows sit
under a header line, `ledger fit --predict`'s ceiling table keeps its batch label and its step with
the cross-GPU terms stays a table, and a vertical layout names its key cells. The ledgers are copies
of the committed chains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.cli.output import Column, Grid, choose_layout, free, text
from recipe_ledger.ledger.store import Ledger

from helpers.projects import committed_chains_project

REPO = Path(__file__).resolve().parents[2]
V41 = "deepseek-ai/DeepSeek-V4.1-Flash"
CEILING_HEADERS = ("batch", "window", "experts touched", "GB/step on link", "step ms", "tok/s ceiling")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = committed_chains_project(tmp_path_factory.mktemp("project"))
    return root


def at_80(*args: str):
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_log_at_80_columns_opens_with_its_header_line(project):
    lines = at_80("log", "--root", str(project))
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].split() == ["id", "time", "(UTC)", "writer", "kind", "status"]
    assert lines[1].strip() == "summary"
    first = Ledger.open(project).entries()[0]
    assert lines[2].startswith(first["id"][:12])
    # Each cell starts under its header: the kind column lines up.
    assert lines[2].index(first["kind"]) == lines[0].index("kind")


def test_fit_predict_at_80_columns_keeps_the_batch_label_on_a_table():
    lines = at_80("fit", V41, "--box", "dgx-station-gb300", "--predict", "--batch", "8", "--batch", "32")
    (header,) = [line for line in lines if line.startswith("batch ")]
    assert [h for h in CEILING_HEADERS if h in header] == list(CEILING_HEADERS)
    rows = lines[lines.index(header) + 1 : lines.index(header) + 3]
    assert [row.split()[0] for row in rows] == ["8", "32"]


def test_fit_component_table_at_80_columns_is_a_table_with_its_headers():
    lines = at_80("fit", V41, "--box", "dgx-station-gb300")
    assert any(line.split()[:3] == ["component", "GiB", "stored"] for line in lines if line.strip())


def test_a_vertical_layout_names_its_key_cells():
    columns = [Column("batch"), Column("a long header for a number"), free("note")]
    cells = [[text("8"), text("1"), text("x")]]
    assert choose_layout(columns, cells, 20) == "vertical"
    lines = Grid(columns, cells, [""], colour=False).vertical(20)
    assert lines[0] == "batch: 8" and "  a long header for a number: 1" in lines


def test_release_list_and_recipe_list_at_80_columns_name_every_value(project):
    releases = at_80("release", "list", "--root", str(project))
    refs = [line for line in releases if line.startswith("release: ")]
    assert refs and all("  id: " in line for line in refs)  # the vertical layout's headings
    recipes = at_80("recipe", "list", "--recipes", str(REPO / "recipes"))
    assert recipes[0].strip() == "recipe"  # the stacked layout's header, then the rows
    assert any(line.strip().startswith("title: ") for line in recipes)


def test_fit_predict_with_tensor_parallelism_at_80_columns_is_a_table_of_shares():
    lines = at_80("fit", V41, "--box", "dual-gh200", "--offload-gb", "100", "--predict", "--batch", "1")
    title = next(i for i, line in enumerate(lines) if line.startswith("decode step with what TP2 pays"))
    header, row = lines[title + 1], lines[title + 2]
    assert header.split()[:5] == ["batch", "window", "link", "ms", "TP2"]
    assert "share of the step" in header and all(len(line) <= 80 for line in (header, row))
    # One row, one line: the shares name the host link and TP2 with what binds it.
    assert row.split()[:2] == ["1", "1"] and "link" in row and "TP2" in row and "(latency)" in row
    assert lines[title + 3].startswith("  TP2 ms:")
    assert any(line.startswith("  - TP2: each of the 40 layers") for line in lines)


def test_fit_predict_json_carries_the_same_steps_as_the_table():
    args = ["fit", V41, "--box", "dual-gh200", "--offload-gb", "100", "--predict", "--batch", "1", "--json"]
    data = json.loads(CliRunner().invoke(main, args).output)
    (step,) = data["steps"]
    (tp,) = step["collectives"]
    assert data["parallel"] == {"tp": 2, "dp": 1, "ep": 1, "layout": "TP2"}
    assert data["gpu_path"]["gbps"] == 58 and "sourced" in data["gpu_path"]["source"]
    assert step["step_ms"] == pytest.approx(step["host_link_ms"] + tp["ms"])
    assert step["shares"]["host link"] + step["shares"]["TP2 all-reduce"] == pytest.approx(1.0)
    table = at_80("fit", V41, "--box", "dual-gh200", "--offload-gb", "100", "--predict", "--batch", "1")
    row = table[next(i for i, line in enumerate(table) if line.startswith("decode step with")) + 2].split()
    assert row[2:5] == [f"{step['host_link_ms']:.2f}", f"{tp['ms']:.2f}", f"{step['step_ms']:.2f}"]
