"""The site in headless Chromium (Debian's chromium + chromedriver, driven by Selenium).

Built from a temporary copy of the project with hostile input planted, served over HTTP on
localhost. Clicking through the command builder must show exactly what `ledger recipe command`
prints; no page logs a console error; a planted <script> never runs.

Needs chromium, chromedriver and selenium: ``require("browser")`` (tests/helpers/resources.py).
"""

from __future__ import annotations

import functools
import http.server
import json
import random
import shutil
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.site import build_site
from recipe_ledger.site.pages.recipes import cli_line

from helpers.projects import REPO, make_project
from helpers.resources import require
from helpers.scripts import load_script

# scripts/screenshots.py owns how Chromium is started and which pages the README shows
SCREENSHOTS = load_script("scripts/screenshots.py")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base URL, project) of a planted project's site served on localhost."""
    require("browser")
    project = make_project(tmp_path_factory.mktemp("browser") / "project", plants=True)
    build_site(project, project / "site")
    handler = functools.partial(_QuietHandler, directory=str(project / "site"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", project
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def _serve(folder: Path):
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def published():
    """The committed site/ (what `dvc repro` publishes), served alone."""
    require("browser")
    server = _serve(REPO / "site")
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    require("browser")
    driver, profile = SCREENSHOTS.start_chromium(console_log=True)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _cli_text(project: Path, cli: str) -> str:
    result = CliRunner().invoke(main, cli.split()[1:] + ["--recipes", str(project / "recipes")])
    assert result.exit_code == 0, result.output
    return result.stdout.rstrip("\n")


def _select(driver, element_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", element_id)).select_by_value(value)


def _set_features(driver, wanted: set[str]) -> None:
    for box in driver.find_elements("css selector", "#b-features input[type=checkbox]"):
        if box.is_selected() != (box.get_attribute("value") in wanted):
            box.click()


def _cases(data: dict) -> list[tuple[str, str, str, set[str], str]]:
    """(hardware, strategy, variant, features, CLI line) of every combination that resolves."""
    out = []
    for key, cell in sorted(data["combos"].items()):
        if "error" in cell:
            continue
        hardware, strategy, variant, features = key.split("|")
        chosen = features.split(",") if features else []
        cli = cli_line(data["recipe"], hardware, strategy, variant, chosen)
        out.append((hardware, strategy, variant, set(chosen), cli))
    return out


def test_clicking_through_the_builder_gives_the_cli_command(served, browser) -> None:
    base, project = served
    browser.get(base + "recipes/deepseek-ai/deepseek-v4.1-flash.html")
    data = json.loads(browser.find_element("id", "builder-data").get_attribute("textContent"))
    initial = browser.find_element("id", "builder-command").text
    assert initial.startswith("# DeepSeek-V4.1-Flash · gb200 · ")
    for hardware, strategy, variant, features, cli in random.Random(6).sample(_cases(data), 12):
        _select(browser, "b-hardware", hardware)
        _select(browser, "b-strategy", strategy)
        _select(browser, "b-variant", variant)
        _set_features(browser, features)
        shown = browser.find_element("id", "builder-command").get_attribute("textContent")
        assert browser.find_element("id", "builder-cli").get_attribute("textContent") == cli
        assert shown == _cli_text(project, cli), cli
    assert _errors(browser) == []


def test_every_feature_combination_resolves_in_the_page(served, browser) -> None:
    """No "not precomputed": a conflicting set says why, inside its box (no text running off it)."""
    base, _ = served
    browser.get(base + "recipes/deepseek-ai/deepseek-v4.1-flash.html")
    _select(browser, "b-hardware", "h200")
    for features in (
        {"tool_calling", "spec_decoding", "text_only"},
        {"encoder_parallel", "text_only"},
        set(),
        {"reasoning", "tool_calling", "spec_decoding", "text_only", "encoder_parallel"},
    ):
        _set_features(browser, features)
        out = browser.find_element("id", "builder-command")
        assert "not precomputed" not in out.text, features
        assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth + 1", out)


def test_a_recipe_page_opens_with_the_command_and_that_cell_s_evidence(served, browser) -> None:
    """The launch command is the first thing under the title, with cURL and bench lines for the
    same server, and the evidence beside it follows the chosen hardware."""
    base, _ = served
    browser.get(base + "recipes/deepseek-ai/deepseek-v4.1-flash.html")
    order = browser.execute_script(
        "return Array.from(document.querySelectorAll('main h1, #command, #about'))"
        ".map(e => e.id || e.tagName)"
    )
    assert order == ["H1", "command", "about"]
    for hardware in ("h200", "dgx_station_gb300"):
        _select(browser, "b-hardware", hardware)
        shown = [
            block.get_attribute("data-hardware")
            for block in browser.find_elements("css selector", "#cell-evidence .cell-evidence-for")
            if block.is_displayed()
        ]
        assert shown == [hardware]
        curl = browser.find_element("id", "builder-curl").get_attribute("textContent")
        bench = browser.find_element("id", "builder-bench").get_attribute("textContent")
        assert curl.startswith("curl http://localhost:") and "/v1/chat/completions" in curl
        assert bench.startswith("vllm bench serve --model ")
    assert _errors(browser) == []


def test_the_builder_selection_is_kept_in_the_url(served, browser) -> None:
    base, _ = served
    browser.get(base + "recipes/deepseek-ai/deepseek-v4.1-flash.html")
    _select(browser, "b-hardware", "h200")
    _select(browser, "b-strategy", "single_node_tep")
    _set_features(browser, {"reasoning"})
    url = browser.current_url
    assert "hardware=h200" in url and "strategy=single_node_tep" in url and "features=reasoning" in url
    command = browser.find_element("id", "builder-command").get_attribute("textContent")
    browser.get(base + "index.html")
    browser.get(url)
    assert browser.find_element("id", "builder-command").get_attribute("textContent") == command
    assert browser.find_element("id", "b-strategy").get_attribute("value") == "single_node_tep"


def test_the_recipe_search_filters_the_index(served, browser) -> None:
    base, _ = served
    browser.get(base + "index.html")
    browser.find_element("id", "recipe-search").send_keys("deepseek")
    visible = [r for r in browser.find_elements("css selector", "#matrix tr.recipe-row") if r.is_displayed()]
    shown = [r.find_element("css selector", "th a").text for r in visible]
    assert shown == ["DeepSeek-V4-Flash", "DeepSeek-V4.1-Flash"]  # not the tiny Qwen2, not GLM
    assert browser.find_element("id", "recipe-count").text.startswith("2 of ")


def test_the_timeline_filter_hides_and_shows_rows(served, browser) -> None:
    base, _ = served
    browser.get(base + "ledger/index.html")
    rows = browser.find_elements("css selector", "#timeline tr.entry")
    _select(browser, "filter-kind", "failure")
    visible = [r for r in rows if r.is_displayed()]
    assert len(visible) == 5 and all(r.get_attribute("data-kind") == "failure" for r in visible)
    _select(browser, "filter-kind", "")
    _select(browser, "filter-status", "retracted")
    visible = [r for r in rows if r.is_displayed()]
    assert len(visible) == 2 and all(r.find_elements("css selector", "del.retracted") for r in visible)
    assert browser.find_element("id", "filter-count").text == "2 shown"
    browser.get(base + "ledger/index.html?kind=retraction")
    assert (
        len([r for r in browser.find_elements("css selector", "#timeline tr.entry") if r.is_displayed()]) == 2
    )


def test_no_page_logs_a_console_error_and_no_plant_runs(served, browser) -> None:
    base, project = served
    pages = sorted(p.relative_to(project / "site").as_posix() for p in (project / "site").rglob("*.html"))
    assert len(pages) >= 12
    for page in pages:
        browser.get(base + page)
        planted = browser.execute_script(
            "return [window.__planted, window.__img, window.__link, window.__huge].filter(function (x) "
            "{ return x !== undefined; }).length"
        )
        assert planted == 0, page
        assert _errors(browser) == [], page
    browser.get(base + next(p for p in pages if "plant" in p and "broken" not in p))
    assert (
        "<script>window.__planted = 1</script>" in browser.find_element("css selector", "p.description").text
    )


def _pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))


@pytest.mark.parametrize("width", [1280, 420])
def test_no_page_scrolls_sideways(served, browser, width: int) -> None:
    """At desktop and phone widths no page is wider than the window: wide tables scroll in their box."""
    base, project = served
    browser.set_window_size(width, 900)
    try:
        inner = browser.execute_script("return window.innerWidth")
        for page in _pages(project / "site"):
            browser.get(base + page)
            wide = browser.execute_script("return document.documentElement.scrollWidth")
            assert wide <= inner, f"{page} is {wide}px wide at {inner}px"
    finally:
        browser.set_window_size(1280, 1000)


def test_svg_plots_carry_units(published, browser) -> None:
    browser.get(published + "experiments/h200-expert-placement-bd60452cc40c.html")
    axes = browser.find_elements("css selector", "figure.plot svg text.x-axis")
    labels = [e.get_attribute("textContent") for e in axes]
    assert labels[:2] == ["moe_step_ms_b1 (ms)", "moe_step_ms_b32 (ms)"]
    assert any("effect" in t for t in labels)
    repeats = browser.find_elements("css selector", "figure.plot svg circle.repeat")
    assert len(repeats) >= 18  # 3 arms x 3 repeats on each bar metric, from evidence/


def test_a_crawl_of_the_published_site_finds_no_404(published, browser) -> None:
    """Every link, script and stylesheet of every page, fetched over HTTP from site/ served alone."""
    import urllib.error
    import urllib.request
    from urllib.parse import urldefrag, urljoin

    seen, missing = set(), []
    for page in _pages(REPO / "site"):
        browser.get(published + page)
        urls = browser.execute_script(
            "return Array.from(document.querySelectorAll('a[href], link[href], script[src], img[src]'))"
            ".map(function (e) { return e.href || e.src; })"
        )
        for url in urls:
            target = urldefrag(urljoin(published + page, url))[0]
            if not target.startswith(published) or target in seen:
                continue
            seen.add(target)
            try:
                urllib.request.urlopen(target, timeout=10).close()
            except urllib.error.HTTPError as error:
                missing.append((page, url, error.code))
    assert len(seen) > 30
    assert missing == []


# The pages the README shows (scripts/screenshots.py owns the list; test_screenshots.py keeps the
# PNGs current): each renders without a console error and without a horizontal scroll.
SHOTS = SCREENSHOTS.SHOT_LIST


@pytest.mark.parametrize("shot", SHOTS, ids=[shot.name for shot in SHOTS])
def test_the_published_pages_render_cleanly(published, browser, shot) -> None:
    browser.set_window_size(shot.width, 1100)
    try:
        browser.get(published + shot.address)
        assert _errors(browser) == []
        wide = browser.execute_script("return document.documentElement.scrollWidth")
        assert wide <= browser.execute_script("return window.innerWidth"), shot.address
    finally:
        browser.set_window_size(1280, 1000)


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (420, 900)])
def test_the_command_is_above_the_fold_and_phone_tables_become_cards(published, browser, width, height):
    """Issue 29: the command for the chosen cell is above the fold, with its copy button, at desktop
    and phone sizes; at phone width every data-table cell lies inside the window (rows become cards,
    no column cut off)."""
    browser.set_window_size(width, height)
    try:
        recipe_pages = [p for p in _pages(REPO / "site") if p.startswith("recipes/") and "/" in p[8:]]
        assert len(recipe_pages) >= 4
        for page in recipe_pages:
            browser.get(published + page)
            top, bottom, fold = browser.execute_script(
                "var r = document.getElementById('builder-command').getBoundingClientRect();"
                "return [r.top, r.bottom, window.innerHeight];"
            )
            assert 0 < top < fold * 0.6, f"{page}: the command starts at {top}px of {fold}px"
            assert browser.find_element("css selector", "#command button").is_displayed(), page
            if width > 640:
                continue
            cut = browser.execute_script(
                "var w = window.innerWidth;"
                "return Array.from(document.querySelectorAll('table.data.reflow td'))"
                ".filter(function (td) { var r = td.getBoundingClientRect();"
                " return r.width > 0 && (r.right > w + 1 || r.left < -1); }).length"
            )
            assert cut == 0, f"{page}: {cut} table cells outside a {width}px window"
    finally:
        browser.set_window_size(1280, 1000)
