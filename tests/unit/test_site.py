"""The static site, built from a temporary project: structure by CSS selectors, the command
builder's data against the CLI, retractions, plants that must stay text, and bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import StateError
from recipe_ledger.site import build_site
from recipe_ledger.site.pages.recipes import cli_line, combo_key, unpacked_cell
from recipe_ledger.site.pages.timeline import MAX_SHOWN_CHARS
from recipe_ledger.site.writer import slugify

from helpers.projects import PLANT, REPO, TOKEN, make_project

GOLDEN_SITE = REPO / "tests" / "golden" / "tables" / "site-json"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    project = make_project(tmp_path_factory.mktemp("site") / "project")
    build_site(project, project / "site")
    return project / "site"


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, object]:
    project = make_project(tmp_path_factory.mktemp("planted") / "project", plants=True)
    report = build_site(project, project / "site")
    return project / "site", report


def soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def dsv41(site: Path) -> Path:
    return site / "recipes" / "deepseek-ai" / "deepseek-v4.1-flash.html"


# -- structure ---------------------------------------------------------------------------------


def test_every_page_has_its_json_beside_it(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 10
    for page in pages:
        data = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
        assert isinstance(data, dict)
        assert soup(page).select_one("a.json-link")["href"] == page.with_suffix(".json").name


def test_index_is_a_models_by_hardware_matrix(site: Path) -> None:
    page = soup(site / "index.html")
    rows = page.select("#matrix tbody tr.recipe-row")
    titles = [r.select_one("th a").get_text() for r in rows]
    assert titles == ["DeepSeek-V4-Flash", "DeepSeek-V4.1-Flash", "Tiny random Qwen2 (CPU)", "GLM-5.2"]
    header = [th.get_text() for th in page.select("#matrix thead th.hw")]
    assert {"h200", "dgx_station_gb300", "cpu_x86"} <= set(header)
    dsv41_row, tiny_row = (
        rows[titles.index("DeepSeek-V4.1-Flash")],
        rows[titles.index("Tiny random Qwen2 (CPU)")],
    )
    station = dsv41_row.select_one('td[data-hardware="dgx_station_gb300"]')
    assert station.select_one(".mark-verified")
    assert station.select_one(".badge-failures").get_text() == "5 f"  # a count says what it counts
    assert "5 failures" in station.select_one(".badge-failures")["title"]
    assert tiny_row.select_one('td[data-hardware="cpu_x86"] .mark-verified')


def _cells(data: dict) -> list[tuple[str, dict]]:
    """(the CLI line, the unpacked cell) of every precomputed combination."""
    out = []
    for key, packed in sorted(data["combos"].items()):
        hardware, strategy, variant, features = key.split("|")
        chosen = features.split(",") if features else []
        cli = cli_line(data["recipe"], hardware, strategy, variant, chosen)
        out.append((cli, unpacked_cell(packed, data["texts"])))
    return out


def test_the_builder_shows_exactly_what_the_cli_prints(site: Path, tmp_path: Path) -> None:
    data = json.loads(soup(dsv41(site)).select_one("#builder-data").string)
    recipes = site.parent / "recipes"
    runner = CliRunner()
    cells = _cells(data)
    assert len(cells) > 100
    checked = 0
    for cli, cell in random.Random(15).sample(cells, 160):  # the CLI costs ~10 ms a call
        result = runner.invoke(main, cli.split()[1:] + ["--recipes", str(recipes)])
        if "error" in cell:
            assert result.exit_code != 0
            continue
        assert result.exit_code == 0, (cli, result.output)
        assert result.stdout == cell["command"] + "\n", cli
        checked += 1
    assert checked > 100


def test_every_feature_combination_is_in_the_page(site: Path) -> None:
    """No "not precomputed": every subset of the recipe's features, on every hardware, strategy
    and variant the builder offers, resolves to a command or to the error the CLI gives."""
    data = json.loads(soup(dsv41(site)).select_one("#builder-data").string)
    names = [f["name"] for f in data["features"]]
    assert len(names) == 5
    for hardware, info in data["per_hardware"].items():
        for strategy in info["strategies"]:
            for variant in data["variants"]:
                for mask in range(2 ** len(names)):
                    subset = [n for i, n in enumerate(names) if mask >> i & 1]
                    assert combo_key(hardware, strategy, variant, subset) in data["combos"]


def test_the_builder_offers_single_node_strategies_per_hardware(site: Path) -> None:
    data = json.loads(soup(dsv41(site)).select_one("#builder-data").string)
    assert data["per_hardware"]["dgx_station_gb300"]["strategies"] == ["single_node_tp"]
    assert set(data["per_hardware"]["h200"]["strategies"]) == {
        "single_node_tp",
        "single_node_tep",
        "single_node_dep",
    }
    assert data["default_hardware"] == "gb200"
    page = soup(dsv41(site))
    assert page.select_one("#b-hardware option[selected]")["value"] == "gb200"
    assert [i["value"] for i in page.select("#b-features input[checked]")] == data["per_hardware"]["gb200"][
        "default_features"
    ]["default"]


def test_the_recipe_page_has_a_fit_table_and_the_guide(site: Path) -> None:
    page = soup(dsv41(site))
    rows = page.select("#fit-table tr.fit-row")
    assert len(rows) == len(list((site.parent / "recipes" / "boxes").glob("*.yaml")))
    station = next(r for r in rows if r.select_one("td").get_text() == "dgx-station-gb300")
    assert "fit-yes" in station["class"]
    assert page.select_one("#guide-body h2")


def test_a_retracted_entry_stays_struck_through_and_links_its_notice(site: Path) -> None:
    page = soup(site / "ledger" / "index.html")
    row = page.select_one("#e-868095de1e2f")
    assert row["data-status"] == "retracted"
    assert row.select_one("del.retracted")
    link = row.select_one("a.retraction-link")
    assert link["href"].endswith("#e-d536ba827325")
    assert page.select_one("#e-d536ba827325")["data-kind"] == "retraction"


def test_the_timeline_shows_failures_and_offers_filters(site: Path) -> None:
    page = soup(site / "ledger" / "index.html")
    assert len(page.select("#timeline tr.entry")) == 31
    assert len(page.select('#timeline tr.entry[data-kind="failure"]')) == 5
    kinds = [o["value"] for o in page.select("#filter-kind option") if o["value"]]
    assert {"failure", "retraction", "release", "result"} <= set(kinds)
    assert "retracted" in [o["value"] for o in page.select("#filter-status option")]


def test_a_release_page_has_its_pins_numbers_and_diff(site: Path) -> None:
    v14 = soup(site / "releases" / "sixty-k-agent" / "v14.html")
    pins = v14.select_one("#pins-table").get_text()
    assert "vllm/vllm-openai:deepseekv41-flash-0909" in pins and "unpinned" in pins
    assert "df42c109f1defefcbfcedbe7d905718a12266e40" in pins
    assert len(v14.select("ul.flags li")) == 18
    assert v14.select_one("#diff-table ins code").get_text() == "--model /model"
    v12 = soup(site / "releases" / "sixty-k-agent" / "v12.html")
    numbers = v12.select("table.numbers tbody tr")
    assert [r.select_one("td").get_text() for r in numbers] == [
        "gain_vs_off70_pct_high",
        "gain_vs_off70_pct_low",
    ]
    assert numbers[0].select_one("a.entry-id")["href"].endswith("#e-9a533b8a43a7")
    lanes = soup(site / "releases" / "index.html")
    assert [a.get_text() for a in lanes.select("#lane-sixty-k-agent ol.versions a")] == ["v12", "v13", "v14"]
    assert lanes.select_one("#lane-sixty-k-agent svg.plot")


def test_a_verified_release_page_links_each_number_to_its_result_and_shows_reproductions(site: Path) -> None:
    v2 = soup(site / "releases" / "tiny-cpu" / "v2.html")
    assert v2.select_one("#verification").get_text().startswith("verified")
    pins = v2.select_one("#pins-table").get_text()
    digest = "sha256:2e0003df800591272f8a5c68b0b1137ad290a7010612daf03092b2a57ecc6d8a"
    assert pins.count(digest) == 1 and "cpus 2" in pins
    rows = v2.select("table.numbers tbody tr")
    assert [r.select_one("td").get_text() for r in rows] == ["output_tps_c4", "output_tps_c1"]
    assert all(r.select_one("a.entry-id")["href"].endswith("#e-4d57a1384602") for r in rows)
    assert [td.get_text() for td in rows[0].select("td.num")] == ["4", "428.441 tok/s", "4", "±25.0%"]
    outcomes = [
        li.select_one("strong").get_text() for li in v2.select("li") if li.get_text().startswith("reproduces")
    ]
    assert outcomes == ["inconclusive", "reproduced"]
    v1 = soup(site / "releases" / "tiny-cpu" / "v1.html")
    assert "unverified" not in v1.select_one("#verification").get_text()


def test_an_experiment_page_has_arms_verdicts_and_plots(site: Path) -> None:
    page = soup(site / "experiments" / "h200-expert-placement-bd60452cc40c.html")
    outcomes = [td.get_text() for td in page.select("#verdict-table td.outcome")]
    assert sorted(outcomes) == ["inconclusive", "win", "win", "win"]
    assert len(page.select("table.arms tbody tr")) == 3
    assert len(page.select("figure.plot svg")) >= 2
    assert "scripts/expert_placement_bench.py" in page.get_text()
    # Written from a dirty tree before the clean-tree rule: the page says so beside the commit.
    assert "diff not recorded" in page.select_one("strong.flag").get_text()


def test_the_json_api_has_the_recipes_site_shape(site: Path) -> None:
    models = json.loads((site / "api" / "models.json").read_text())
    assert [m["hf_id"] for m in models] == [
        "deepseek-ai/DeepSeek-V4-Flash",
        "deepseek-ai/DeepSeek-V4.1-Flash",
        "recipe-ledger/tiny-qwen2",
        "zai-org/GLM-5.2",
    ]
    dsv41_model = next(m for m in models if m["hf_id"] == "deepseek-ai/DeepSeek-V4.1-Flash")
    assert set(dsv41_model) == {"hf_id", "title", "provider", "url", "json"}
    one = json.loads((site / dsv41_model["json"]).read_text())
    assert list(one)[:3] == ["hf_id", "meta", "recommended_command"]
    assert one["recommended_command"]["hardware"] == "gb200"
    assert "compatible_strategies" not in one
    assert (site / "llms.txt").read_text().startswith("# Recipe Ledger\n")


def test_site_json_matches_the_golden_files(site: Path) -> None:
    """Pages that depend only on the fixed ledger prefix (recipe pages change with recipes)."""
    for golden in sorted(GOLDEN_SITE.glob("*.json")):
        rel = golden.name.replace("__", "/")
        assert (site / rel).read_text(encoding="utf-8") == golden.read_text(encoding="utf-8"), rel


def test_two_builds_are_byte_for_byte_identical(site: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    build_site(site.parent, again)
    first = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    second = {p.relative_to(again): p.read_bytes() for p in again.rglob("*") if p.is_file()}
    assert first == second
    assert not any(str(site.parent).encode() in data for data in first.values()), "an absolute path leaked"


def test_a_ledger_that_does_not_verify_builds_no_site(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    chain_file = project / "ledger" / "h200-lent.jsonl"
    chain_file.write_bytes(chain_file.read_bytes().replace(b'"win"', b'"wim"', 1))
    with pytest.raises(StateError):
        build_site(project, project / "site")
    assert not (project / "site").exists()


def test_the_output_folder_must_be_a_site(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "site").mkdir()
    (project / "site" / "precious.txt").write_text("keep me")
    result = CliRunner().invoke(main, ["site", "--root", str(project), "--no-progress"])
    assert result.exit_code == 2
    assert (project / "site" / "precious.txt").read_text() == "keep me"


# -- hostile and broken input --------------------------------------------------------------------


def test_planted_scripts_stay_text(planted) -> None:
    site, _ = planted
    for page in site.rglob("*.html"):
        html = soup(page)
        for script in html.select("script"):
            assert (
                script.get("src", "").endswith("static/site.js") or script.get("type") == "application/json"
            ), page
        assert not html.select("[onerror]"), page
        assert not html.select('a[href^="javascript:"]'), page
    recipe = next(site.glob("recipes/*/*plant*.html"))
    html = soup(recipe)
    assert PLANT in html.select_one("p.description").get_text()
    assert PLANT in html.select_one("#guide-body").get_text()
    assert html.select_one("h1").get_text() == "Plänt <b>bold</b> 模型"
    timeline = soup(site / "ledger" / "index.html")
    assert any(PLANT in row.get_text() for row in timeline.select('#timeline tr[data-status="retracted"]'))


def test_a_broken_recipe_gets_a_page_with_its_error(planted) -> None:
    site, report = planted
    assert any(name.endswith("broken-guide") for name in report.broken_recipes)
    page = soup(next(site.glob("recipes/*/broken-guide.html")))
    assert "guide" in page.select_one("#recipe-error").get_text()
    index = soup(site / "index.html")
    assert index.select("#matrix tr.recipe-row.broken")


def test_a_huge_entry_is_shown_clipped_and_redacted(planted) -> None:
    site, _ = planted
    row = next(
        r
        for r in soup(site / "ledger" / "index.html").select("#timeline tr.entry")
        if "characters in all" in r.get_text()
    )
    assert len(row.get_text()) < MAX_SHOWN_CHARS + 500
    for path in site.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(encoding="utf-8"), path


def test_non_ascii_names_get_safe_paths(planted) -> None:
    site, _ = planted
    assert slugify("模型-plant") == "plant"
    assert slugify("Ünïcödé") == "unicode"
    models = json.loads((site / "api" / "models.json").read_text(encoding="utf-8"))
    assert any("模型" in m["hf_id"] for m in models)
    for m in models:
        assert (site / m["url"]).is_file() and (site / m["json"]).is_file()


def test_the_fit_table_shows_what_each_box_pays_between_gpus(site: Path) -> None:
    page = soup(dsv41(site))
    assert "between GPUs per decode step" in [th.get_text() for th in page.select("#fit-table th")]
    cells = {
        row.select_one("td").get_text(): row.select_one("td.cross-gpu")
        for row in page.select("#fit-table tr.fit-row")
        if row.select_one("td.cross-gpu")
    }
    # One GPU: nothing crosses. Two GH200s at TP2: the all-reduces, what binds them, their share.
    assert cells["dgx-station-gb300"].get_text() == "-"
    dual = cells["dual-gh200"].get_text(" ", strip=True)
    assert dual.startswith("TP2 over 58 GB/s") and "TP2 all-reduce" in dual and "(latency)" in dual
    assert (
        "of the modelled step" in dual
        and "ledger fit deepseek-ai/DeepSeek-V4.1-Flash --box dual-gh200" in dual
    )
    # A box whose profile names no GPU path says why instead of a number.
    assert "names no GPU-to-GPU path" in cells["h200-x1"].get_text()
    data = json.loads(dsv41(site).with_suffix(".json").read_text(encoding="utf-8"))
    row = next(r for r in data["fit"] if r["box"] == "dual-gh200")
    (one, busy) = row["cross_gpu"]["steps"]
    assert (one["batch"], busy["batch"]) == (1, 32)
    assert one["terms"][0]["share"] == pytest.approx(1.0)  # nothing offloaded: the step is TP2's alone
