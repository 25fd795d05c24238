"""Every HTML chart the tool writes, opened in a real browser (Chromium, headless, through
Selenium) with the network cut off: each page draws its SVG or canvas, logs no console error and
makes no request that leaves the machine. Skipped, with the reason, where Chromium or its driver
is not installed (CI installs both: .ci/run)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsys_tools.cli import app

from .conftest import FIXTURES

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
LOCAL = ("file:", "data:", "blob:", "about:")
runner = CliRunner()

# slow: the module's browser takes seconds to start, and each page seconds to load; the charts
# themselves are checked in the normal run by tests/test_view_charts.py.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (os.access(CHROMIUM, os.X_OK) and os.access(DRIVER, os.X_OK)),
        reason="needs Chromium and chromedriver (apt-get install chromium chromium-driver; .ci/run installs them)",
    ),
]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
        # The network cut off: every host resolves nowhere and every proxied request fails.
        "--proxy-server=127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def open_page(driver, page: Path) -> dict:
    """Load ``page``; what it drew, logged and requested."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser"), driver.get_log("performance")  # start clean
    driver.get(page.resolve().as_uri())
    drawn = "return [...document.querySelectorAll('svg, canvas')].filter(e => e.clientWidth > 0 && e.clientHeight > 0).length"
    try:
        WebDriverWait(driver, 10).until(lambda d: d.execute_script(drawn) > 0)
    except TimeoutException:
        pass
    marks = driver.execute_script(
        "const c = document.querySelector('canvas');"
        " if (c) { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }"
        " return document.querySelectorAll('svg path, svg rect, svg line').length;"
    )
    requests = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
    urls = [m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"]
    urls += driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    return {
        "drawn": driver.execute_script(drawn),
        "marks": marks,
        "errors": errors,
        "remote": [u for u in urls if not u.startswith(LOCAL)],
    }


def assert_offline_page(driver, page: Path) -> None:
    seen = open_page(driver, page)
    assert seen["drawn"] > 0 and seen["marks"] > 0, f"{page.name} drew nothing"
    assert not seen["errors"], f"{page.name}: console errors {seen['errors']}"
    assert not seen["remote"], f"{page.name}: requests leaving the machine {seen['remote']}"


def test_the_check_fails_on_a_page_that_needs_the_network(browser, tmp_path):
    page = tmp_path / "cdn.html"
    page.write_text('<html><body><div id="vis"></div><script src="https://cdn.jsdelivr.net/npm/vega@5"></script></body></html>')
    seen = open_page(browser, page)
    assert seen["remote"] and seen["errors"] and not seen["drawn"]


REPORT_CHARTS = ["kernels", "ranges", "api", "memops", "gaps", "hist", "pace", "utilization", "idle"]
REPORT_CHARTS += ["sync", "launch", "overlap", "stragglers"]
REPORT_CHARTS += ["utilization --window 20ms", "idle --longest 5"]


@pytest.mark.parametrize("view", REPORT_CHARTS)
def test_report_charts_render_offline(browser, tmp_path, view):
    page = tmp_path / f"{view.replace(' ', '_')}.html"
    res = runner.invoke(app, ["report", str(MULTI), "--view", *view.split(), "--chart", str(page)])
    assert res.exit_code == 0, res.output
    assert_offline_page(browser, page)


def test_range_histogram_chart_renders_offline(browser, tmp_path):
    page = tmp_path / "ranges-hist.html"
    assert runner.invoke(app, ["report", str(MULTI), "--view", "hist", "--of", "ranges", "--chart", str(page)]).exit_code == 0
    assert_offline_page(browser, page)


def test_timeline_chart_renders_offline(browser, tmp_path):
    page = tmp_path / "timeline.html"
    res = runner.invoke(app, ["timeline", str(MULTI), "-o", str(tmp_path / "t.json"), "--chart", str(page)])
    assert res.exit_code == 0, res.output
    assert_offline_page(browser, page)


def test_sweep_issue_charts_render_offline(browser, tmp_path):
    charts = tmp_path / "charts"
    res = runner.invoke(app, ["report", "--demo", "--issue", "--charts", str(charts), "-o", str(tmp_path / "comment.md")])
    assert res.exit_code == 0, res.output
    pages = sorted(charts.glob("*.html"))
    assert pages
    for page in pages:
        assert_offline_page(browser, page)
