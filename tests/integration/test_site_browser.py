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
import tempfile
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.site import build_site

from helpers.projects import make_project
from helpers.resources import CHROMEDRIVER, CHROMIUM, require

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


@pytest.fixture(scope="module")
def browser():
    require("browser")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1280,1000",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
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


def test_clicking_through_the_builder_gives_the_cli_command(served, browser) -> None:
    base, project = served
    browser.get(base + "recipes/deepseek-ai/deepseek-v4.1-flash.html")
    data = json.loads(browser.find_element("id", "builder-data").get_attribute("textContent"))
    initial = browser.find_element("id", "builder-command").text
    assert initial.startswith("# DeepSeek-V4.1-Flash · gb200 · ")
    cases = [c for c in data["combos"].values() if "command" in c]
    for cell in random.Random(6).sample(cases, 12):
        hardware, strategy, variant = cell["cli"].split()[5:11:2]
        features = {w for i, w in enumerate(cell["cli"].split()) if cell["cli"].split()[i - 1] == "-f"}
        _select(browser, "b-hardware", hardware)
        _select(browser, "b-strategy", strategy)
        _select(browser, "b-variant", variant)
        _set_features(browser, features)
        shown = browser.find_element("id", "builder-command").get_attribute("textContent")
        assert browser.find_element("id", "builder-cli").get_attribute("textContent") == cell["cli"]
        assert shown == _cli_text(project, cell["cli"]), cell["cli"]
    assert _errors(browser) == []


def test_a_combination_not_precomputed_names_the_cli_command(served, browser) -> None:
    base, _ = served
    browser.get(base + "recipes/deepseek-ai/deepseek-v4.1-flash.html")
    _select(browser, "b-hardware", "h200")
    _set_features(browser, {"tool_calling", "spec_decoding", "text_only"})
    shown = browser.find_element("id", "builder-command").text
    assert shown.startswith("This combination is not precomputed; run: ledger recipe command")


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
