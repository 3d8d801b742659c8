"""What the site's pages say (issue 15): units on every axis, round ticks, the control and what
differs between arms, repeats from evidence/ only when their hash matches, reproductions and
numbers in words, unverified reasons, evidence per recipe x hardware, and no dead links."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner

from recipe_ledger import tables
from recipe_ledger.cli import main
from recipe_ledger.site import build_site, plots, reproductions
from recipe_ledger.site.pages import experiments, timeline
from recipe_ledger.site.pages.recipes import guide_link, markdown_html

from helpers.projects import REPO, fixed_ledger, make_project

H200 = "experiments/h200-expert-placement-bd60452cc40c.html"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site of a project with this repository's experiment files and evidence (run folders)."""
    project = make_project(tmp_path_factory.mktemp("pages") / "project")
    shutil.copytree(REPO / "experiments", project / "experiments")
    shutil.copytree(
        REPO / "evidence" / "h200-expert-placement", project / "evidence" / "h200-expert-placement"
    )
    build_site(project, project / "site")
    return project / "site"


def soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


# -- plots -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("low", "high"), [(0, 463.0), (0.2, 333.6), (-0.9994, 0.2), (115.7, 231.4), (5, 5)])
def test_ticks_are_round_and_cover_the_data(low: float, high: float) -> None:
    ticks = plots.nice_ticks(low, high)
    step = ticks[1] - ticks[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 6) in (1.0, 2.0, 2.5, 5.0)
    assert ticks[0] <= low and ticks[-1] >= high
    texts = [plots.tick_text(t, ticks) for t in ticks]
    assert len(set(texts)) == len(texts), texts  # distinct labels: enough decimals, no more


def test_axes_name_their_units() -> None:
    assert plots.axis_label("ttft_ms_p50").endswith("(ms)")
    assert plots.axis_label("moe_step_ms_b1") == "moe_step_ms_b1 (ms)"
    assert plots.axis_label("output_tps_total").endswith("(tok/s)")


def test_a_long_legend_fits_inside_the_chart() -> None:
    series = {f"arm-{i}-with-a-rather-long-name": [(1.0, float(i)), (4.0, i + 2.0)] for i in range(7)}
    svg = plots.sweep_chart(series, title="t", y_label=plots.axis_label("output_tps_total"))
    root = ET.fromstring(svg)
    height = float(root.get("viewBox").split()[3])
    legend = [t for t in root.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "legend"]
    assert len(legend) == 7 and all(float(t.get("y")) <= height - 4 for t in legend)
    assert all(float(t.get("x")) < 640 for t in legend)


def test_the_effect_plot_has_percentage_ticks() -> None:
    bar = {"candidate": "c", "metric": "m", "point": 1, "outcome": "win", "effect": -0.56, "min_effect": 0.2}
    svg = plots.effects_chart([{**bar, "ci_low": -0.57, "ci_high": -0.55}])
    ticks = [
        t.text
        for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")
        if t.get("class") == "tick"
    ]
    assert "-60%" in ticks and "+0%" in ticks


# -- experiment records ------------------------------------------------------------------------


def _arm(argv: list[str], env: dict[str, str] | None = None, **extra: str) -> dict:
    return {"argv": argv, "env": env or {}, "fingerprint": "sha256:" + str(len(argv)) * 64, **extra}


def test_the_control_is_named_or_the_one_arm_never_a_candidate() -> None:
    assert experiments.control_arm({"arms": {"base": {}, "control": {}}}) == "control"
    record = {"arms": {"base": {}, "k8": {}}, "bars": [{"candidate": "k8"}]}
    assert experiments.control_arm(record) == "base"
    assert experiments.control_arm({"arms": {"a": {}, "b": {}}, "bars": []}) is None


def test_arm_differences_list_flags_env_params_and_engine() -> None:
    arms = {
        "control": _arm(["vllm", "serve", "m", "--max-num-seqs", "64", "--enforce-eager"], engine="vllm"),
        "big": _arm(["vllm", "serve", "m", "--max-num-seqs=128"], {"VLLM_X": "1"}, engine="sglang"),
    }
    (only,) = experiments.arm_differences(arms, "control", {"control": {"k": 1}, "big": {"k": 2}})
    rows = {r["what"]: (r["control"], r["arm"]) for r in only["differences"]}
    assert rows == {
        "param k": ("1", "2"),
        "flag --max-num-seqs": ("64", "128"),
        "flag --enforce-eager": ("(set)", "(absent)"),
        "env VLLM_X": ("(absent)", "1"),
        "engine": ("vllm", "sglang"),
    }


def test_a_reproduction_reads_as_words() -> None:
    payload = {
        "metrics": {
            "output_tps_c4.published": 420.43,
            "output_tps_c4.reproduced": 376.85,
            "output_tps_c4.effect": -0.1037,
            "output_tps_c4.ci_low": -0.194,
            "output_tps_c4.ci_high": -0.003,
            "output_tps_c4.tolerance": 0.25,
            "output_tps_c4.n_published": 4.0,
            "output_tps_c4.n_reproduced": 6.0,
        }
    }
    (line,) = reproductions.reproduction_lines(payload)
    assert line["words"] == (
        "output_tps_c4: 376.850 tok/s now (n=6) vs 420.430 tok/s published (n=4): -10.4%, "
        "95% CI [-19.4%, -0.3%], tolerance ±25%"
    )


def test_repeats_are_read_only_from_a_run_folder_whose_hash_matches(tmp_path: Path) -> None:
    folder = tmp_path / "evidence" / "study" / "run-1"
    folder.mkdir(parents=True)
    lines = [
        {"arm": a, "point": 1, "repeat": r, "metrics": {"m_ms": 10.0 * r}} for a in ("x", "y") for r in (1, 2)
    ]
    path = folder / "measurements.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    digest = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    record = {"run_id": "run-1"}
    found = experiments.repeat_values(tmp_path, record, {"measurements.jsonl": digest})
    assert found == {("m_ms", "1"): {"x": [10.0, 20.0], "y": [10.0, 20.0]}}
    path.write_text(path.read_text().replace("10.0", "11.0", 1))
    assert experiments.repeat_values(tmp_path, record, {"measurements.jsonl": digest}) == {}


def test_instrument_classes_are_read_when_present() -> None:
    assert experiments.instrument_classes({}) == []
    recorded = {"conditions": {"box": "b", "instrument_class.bench.output_tps_total.p4": "loose"}}
    assert experiments.instrument_classes(recorded) == [("bench: output_tps_total at point 4", "loose")]


def test_timeline_numbers_are_words_with_units_not_raw_keys() -> None:
    assert timeline.number_words("control.c4.ttft_ms_p50", 12.5) == "control at 4: TTFT p50 12.50 ms"
    entry = {"kind": "result", "payload": {"metrics": {f"k{i}_ms": float(i) for i in range(9)}}}
    shown, more = timeline.numbers_in_words(entry, str)
    assert len(shown) == timeline.NUMBERS_SHOWN and more == 9 - timeline.NUMBERS_SHOWN


# -- pages -------------------------------------------------------------------------------------


def test_the_h200_study_names_its_control_what_differs_and_plots_its_headline(site: Path) -> None:
    page = soup(site / H200)
    assert "Control: control" in page.select_one("#control-arm").get_text()
    rows = [[td.get_text() for td in tr.select("td")] for tr in page.select("table.differences tbody tr")]
    assert ["hbm", "param placement", "layer_copy", "hbm"] in rows
    assert ["uva", "param placement", "layer_copy", "uva"] in rows
    svgs = [ET.fromstring(str(svg)) for svg in page.select("figure.plot svg")]
    first = svgs[0]
    assert "moe_step_ms_b1" in first.get("aria-label")
    axis = [
        t.text for t in first.iter("{http://www.w3.org/2000/svg}text") if "x-axis" in (t.get("class") or "")
    ]
    assert axis == ["moe_step_ms_b1 (ms)"]
    repeats = [c for c in first.iter("{http://www.w3.org/2000/svg}circle") if c.get("class") == "repeat"]
    assert len(repeats) == 9  # 3 arms x 3 repeats, from the run folder under evidence/
    assert page.select_one("#dirty-flag")


def test_every_plot_names_a_unit_on_an_axis(site: Path) -> None:
    for path in [site / H200, site / "releases" / "index.html"]:
        for svg in soup(path).select("figure.plot svg"):
            labels = [t.get_text() for t in svg.select("text.axis")]
            if "no data" in svg.get_text():
                continue
            assert any("(" in text or "%" in text or "effect" in text for text in labels), (path, labels)


def test_the_timeline_shows_no_raw_reproduction_keys(site: Path) -> None:
    text = (site / "ledger" / "index.html").read_text(encoding="utf-8")
    assert "output_tps_c1.ci_high" not in text
    assert "now (n=" in text and "published (n=" in text


def test_an_imported_release_says_why_it_is_unverified(site: Path) -> None:
    reasons = [
        li.get_text()
        for li in soup(site / "releases" / "sixty-k-agent" / "v14.html").select("ul.unverified li")
    ]
    assert any(r.startswith("imported from") for r in reasons)
    assert "the image has no digest (a tag can move)" in reasons


def test_a_release_lists_its_reproductions_in_words(site: Path) -> None:
    page = soup(site / "releases" / "tiny-cpu" / "v2.html")
    items = page.select("ul.reproductions > li")
    assert items and all("published" in li.get_text() and "tolerance" in li.get_text() for li in items)


def test_each_recipe_hardware_cell_shows_evidence_or_says_there_is_none(site: Path) -> None:
    page = soup(site / "recipes" / "deepseek-ai" / "deepseek-v4.1-flash.html")
    rows = {tr["data-hardware"]: tr for tr in page.select("#evidence-table tr.evidence-row")}
    assert "failure" in rows["dgx_station_gb300"].get_text()
    bare = [hw for hw, tr in rows.items() if "no-evidence" in tr["class"]]
    assert bare and all("no measured evidence" in rows[hw].get_text() for hw in bare)


def test_guide_links_to_recipes_resolve_here_or_upstream() -> None:
    link = guide_link({"org/here": "recipes/org/here.html"}, "../../")
    html = markdown_html("[a](/org/Here) [b](/org/elsewhere) [c](https://x.org/) [d](#top)", link)
    assert 'href="../../recipes/org/here.html"' in html
    assert 'href="https://recipes.vllm.ai/org/elsewhere"' in html
    assert 'href="https://x.org/"' in html and 'href="#top"' in html


def test_no_relative_link_on_the_site_is_dead(site: Path) -> None:
    dead = []
    for page in sorted(site.rglob("*.html")):
        for tag in soup(page).find_all(["a", "link", "script", "img"]):
            url = tag.get("href") or tag.get("src")
            if not url or url.startswith(("#", "data:", "mailto:")) or urlparse(url).scheme:
                continue
            if not (page.parent / unquote(urlparse(url).path)).exists():
                dead.append((page.relative_to(site).as_posix(), url))
    assert dead == []


def test_tables_html_prints_effects_as_percentages(site: Path) -> None:
    page = soup(site / "tables.html")
    header = [th.get_text() for th in page.select("#table-verdicts thead th")]
    effect = header.index("effect")
    cells = [tr.select("td")[effect].get_text() for tr in page.select("#table-verdicts tbody tr")]
    assert cells and all(c.endswith("%") and c[0] in "+-" for c in cells)


def test_no_page_or_json_is_over_two_megabytes(site: Path) -> None:
    assert max(p.stat().st_size for p in site.rglob("*") if p.is_file()) < 2_000_000


# -- tables ------------------------------------------------------------------------------------


def test_the_long_results_table_is_optional_and_removed_when_not_asked(tmp_path: Path) -> None:
    project = fixed_ledger(tmp_path / "project")
    out = tmp_path / "tables"
    tables.write_tables(project, out, long=True)
    long_rows = json.loads((out / "results-long.json").read_text())["rows"]
    summary = json.loads((out / "results.json").read_text())["rows"]
    assert len(summary) < len(long_rows)
    assert {r["unit"] for r in long_rows} >= {"GB/s", "tok/s"}
    assert sum(r["numbers"] for r in summary) == len(long_rows)
    result = CliRunner().invoke(main, ["tables", "--root", str(project), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert not list(out.glob("results-long.*"))


def test_builders_from_worker_processes_equal_the_serial_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from recipe_ledger.site.pages import recipes as site_recipes

    root = site_recipes.CachedRoot(REPO / "recipes")
    loaded = [root.load(str(p)) for p in root.recipe_paths]
    serial = site_recipes.start_builders(root, loaded)()
    monkeypatch.setattr(site_recipes, "POOL_FROM", 1)
    assert site_recipes.start_builders(root, loaded)() == serial
    assert site_recipes._work is None  # the workers' state is dropped once they are done


def test_profiler_traces_of_a_pinned_run_folder_are_linked(tmp_path):
    from recipe_ledger.site.pages import experiments as experiments_mod

    run = tmp_path / "evidence" / "study" / "run-1"
    (run / "raw").mkdir(parents=True)
    (run / "measurements.jsonl").write_text('{"arm": "control"}\n')
    (run / "raw" / "control-p1-r1.trace.json.gz").write_bytes(b"\x1f\x8b" + b"0" * 2000)
    digest = "sha256:" + hashlib.sha256((run / "measurements.jsonl").read_bytes()).hexdigest()
    found = experiments_mod.trace_files(tmp_path, {"run_id": "run-1"}, {"measurements.jsonl": digest})
    assert found == [
        {
            "name": "control-p1-r1.trace.json.gz",
            "src": "evidence/study/run-1/raw/control-p1-r1.trace.json.gz",
            "href": "traces/run-1/control-p1-r1.trace.json.gz",
            "mb": 0.0,
        }
    ]
    # A run folder whose measurements are not the ones the entry pins lends nothing to the page.
    assert (
        experiments_mod.trace_files(tmp_path, {"run_id": "run-1"}, {"measurements.jsonl": "sha256:00"}) == []
    )


def test_a_launch_flag_sweep_is_plotted_against_its_flag_not_against_concurrency():
    from recipe_ledger.site.pages import experiments as experiments_page
    from recipe_ledger.site.pages.experiments import experiment_charts

    sweep = {"launch_sweep": {"args": ["--speculative-config", '{"num_speculative_tokens": {point}}']}}
    axis = experiments_page.point_axis(sweep)
    assert axis.meaning.startswith("the launch value {point} in --speculative-config")
    assert experiments_page.point_axis({"points": [1, 4]}) == experiments_page.CONCURRENCY
    assert experiments_page.point_axis(None).label == "concurrency (streams)"
    chart = experiment_charts([], {"m": {"control": [(1.0, 2.0), (2.0, 3.0)]}}, ["m"], "control", {}, axis)
    (svg,) = chart
    assert "m against the launch value" in svg and "launch value" in svg and "concurrency" not in svg


def test_no_committed_page_prints_a_python_object_for_a_value() -> None:
    # Jinja's `q.items` on a dict is the dict's method, not its "items" key: a page said
    # "<built-in method items of dict object at 0x...>" where the quality table's item count goes.
    pages = sorted((REPO / "site").rglob("*.html"))
    assert pages
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "built-in method" not in text and "bound method" not in text, page.name


def test_the_quality_table_shows_each_bars_item_count() -> None:
    pages = sorted((REPO / "site" / "experiments").glob("tiny-quality-*.html"))
    assert pages, "the tiny-quality results are on the site"
    for page in pages:
        rows = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").select("tr[class^=quality-]")
        assert rows, page.name
        for row in rows:
            cells = [td.get_text(strip=True) for td in row.find_all("td")]
            assert "80" in cells, (page.name, cells)  # the demo's 80 prompts, one item each
