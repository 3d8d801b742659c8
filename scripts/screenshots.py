"""Regenerate docs/screenshots/*.png (the README's figures) from a site build, and the manifest
that says what each was made from.

    .venv/bin/python scripts/screenshots.py                 # from the committed site/ (after dvc repro)
    .venv/bin/python scripts/screenshots.py --site /tmp/s   # from another build (ledger site --out /tmp/s)
    .venv/bin/python scripts/screenshots.py --check         # exit 1 when a shot is stale (no browser)

Each shot is one page at one window size in headless Chromium (Debian's chromium + chromedriver,
driven by Selenium), the page served over HTTP on localhost. Pixels differ between machines (fonts,
anti-aliasing), so staleness is not a pixel diff: ``docs/screenshots/manifest.json`` records, per
shot, the sha256 of what it was drawn from (the page's HTML, the site's CSS and JS, and the shot's
address and size). ``tests/unit/test_screenshots.py`` recomputes those from the committed site/
and fails when one differs: then run this script and commit the PNGs with the manifest.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.server
import json
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
SHOTS = REPO / "docs" / "screenshots"
MANIFEST = SHOTS / "manifest.json"
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
RECIPE = "recipes/deepseek-ai/deepseek-v4.1-flash.html"
EXPERIMENT = "experiments/h200-expert-placement-bd60452cc40c.html"
STATIC = ("static/site.css", "static/site.js")  # what every page draws with


@dataclass(frozen=True)
class Shot:
    name: str
    address: str  # relative to the site's root, with its query and fragment
    width: int
    height: int

    @property
    def page(self) -> str:
        return urlsplit(self.address).path


SHOT_LIST = (
    Shot("index-desktop", "index.html", 1280, 900),
    Shot("recipe-desktop", RECIPE + "?hardware=dgx_station_gb300", 1280, 800),
    Shot("experiment-desktop", EXPERIMENT + "#differences", 1280, 1000),
    Shot("experiment-plots", EXPERIMENT + "#plots", 1280, 1000),
    Shot("recipe-phone", RECIPE + "?hardware=dgx_station_gb300", 420, 900),
    Shot("ledger-phone", "ledger/index.html", 420, 900),
)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def inputs_of(site: Path, shot: Shot) -> dict[str, str]:
    """What a shot is drawn from: its page's and the static files' sha256, and where it looks."""
    files = {name: _sha256(site / name) for name in (shot.page, *STATIC)}
    return {"address": shot.address, "window": f"{shot.width}x{shot.height}", **files}


def manifest_for(site: Path) -> dict[str, dict[str, str]]:
    return {shot.name: inputs_of(site, shot) for shot in SHOT_LIST}


def stale(site: Path, manifest: dict) -> list[str]:
    """The shots whose recorded inputs are not those of ``site`` (or that have no PNG)."""
    now = manifest_for(site)
    return [
        name
        for name in now
        if manifest.get(name) != now[name] or not (MANIFEST.parent / f"{name}.png").is_file()
    ]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def start_chromium(*, console_log: bool = False):
    """Headless Chromium under chromedriver, with a profile of its own (removed by the caller):
    ``(driver, profile)``. ``console_log``: keep the page's console for ``driver.get_log("browser")``.
    The site's browser tests start theirs here too, so the pages they check are drawn as these are."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="chromium-shots-")
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--font-render-hinting=none",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    if console_log:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options), profile


def take(site: Path, out: Path) -> None:
    """Every shot of ``SHOT_LIST`` from ``site`` into ``out``, and the manifest beside them."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    driver, profile = start_chromium()
    try:
        out.mkdir(parents=True, exist_ok=True)
        for shot in SHOT_LIST:
            driver.set_window_size(shot.width, shot.height)
            # the viewport, not the window, is what the shot's size means
            inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
            driver.set_window_size(2 * shot.width - inner[0], 2 * shot.height - inner[1])
            driver.get(base + shot.address)
            driver.execute_script("document.activeElement && document.activeElement.blur()")
            driver.save_screenshot(str(out / f"{shot.name}.png"))
    finally:
        driver.quit()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    (out / "manifest.json").write_text(json.dumps(manifest_for(site), indent=2, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=REPO / "site", help="a built site (default: site/)")
    parser.add_argument(
        "--out", type=Path, default=SHOTS, help="where the PNGs go (default: docs/screenshots)"
    )
    parser.add_argument("--check", action="store_true", help="only say which shots are stale (exit 1 if any)")
    args = parser.parse_args(argv)
    if args.check:
        recorded = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {}
        old = stale(args.site, recorded)
        for name in old:
            print(f"stale: docs/screenshots/{name}.png (run: .venv/bin/python scripts/screenshots.py)")
        return 1 if old else 0
    if not CHROMIUM.is_file() or not CHROMEDRIVER.is_file():
        print(
            f"needs {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)", file=sys.stderr
        )
        return 2
    take(args.site, args.out)
    print(f"{len(SHOT_LIST)} screenshots and manifest.json in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
