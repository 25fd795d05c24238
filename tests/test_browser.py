"""Every HTML chart the tool writes, opened in a real browser (Chromium, headless, through
Selenium) with the network cut off: each page draws its SVG or canvas, logs no console error and
makes no request that leaves the machine. The pages are also made from an export whose kernel
and NVTX names carry script (``</script><script>``, ``<img onerror>``, ``<svg onload>``,
``javascript:``): none of it runs, and a listener on 127.0.0.1 hears nothing. Skipped, with the
reason, where Chromium or its driver is not installed (CI installs both: .ci/run)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import threading
from pathlib import Path

import pytest

from nsys_tools.cli import app
from nsys_tools.render import html

from .cli import CliRunner
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
        # The network cut off: every host resolves nowhere and every proxied request fails, but
        # for 127.0.0.1, where the listener of the hostile pages waits (port 9 has no server).
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=127.0.0.1",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
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


# -- script from data ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def listener():
    """A server on 127.0.0.1 that records every connection made to it; its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    heard: list[bytes] = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.settimeout(1)
            try:
                heard.append(conn.recv(4096) or b"(connected)")
            except OSError:
                heard.append(b"(connected)")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], heard
    server.close()


def payloads(port: int) -> list[str]:
    """Texts that run script if a page puts them in as markup or ends its script with them."""
    act = f"document.title='pwned';window.__pwned=1;new Image().src='http://127.0.0.1:{port}/ran'"
    return [
        f"</script><script>{act}</script>",
        f'<img src=x onerror="{act}">',
        f'<svg onload="{act}"></svg>',
        f"javascript:{act}",
        f"\u2028</SCRIPT ><!--<script>{act}</script>",
    ]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, listener):
    """The two-GPU export with a payload after every kernel name and NVTX range text."""
    port, _ = listener
    path = tmp_path_factory.mktemp("hostile") / "run.sqlite"
    shutil.copyfile(MULTI, path)
    texts = payloads(port)
    con = sqlite3.connect(path)
    with con:
        ids = con.execute(
            "SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL"
            " UNION SELECT mangledName FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ).fetchall()
        # Each name keeps its start, so that what goes by names (NCCL kernels, step ranges) still finds them.
        for k, (sid,) in enumerate(ids):
            con.execute("UPDATE StringIds SET value = value || ? WHERE id = ?", (f" {texts[k % len(texts)]} k{k}", sid))
        rows = con.execute("SELECT rowid FROM NVTX_EVENTS WHERE text IS NOT NULL").fetchall()
        for k, (rowid,) in enumerate(rows):
            con.execute("UPDATE NVTX_EVENTS SET text = text || ? WHERE rowid = ?", (f" {texts[k % len(texts)]} r{k}", rowid))
    con.close()
    return path


def assert_inert_page(driver, page: Path, heard: list, title: str | None = None) -> None:
    """The page draws, offline and without errors, and nothing from its data ran or became
    markup: no flag set, the title as written, only the page's own scripts, no handler attribute,
    no image or frame, and the listener hears nothing."""
    assert_offline_page(driver, page)
    assert driver.execute_script("return window.__pwned === undefined")
    assert driver.title == title if title is not None else driver.title != "pwned"
    counts = driver.execute_script(
        "return [document.querySelectorAll('script:not([type])').length,"
        " document.querySelectorAll('script[type=\"application/json\"][data-chart]').length,"
        " document.querySelectorAll('script').length,"
        " [...document.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,"
        " document.querySelectorAll('img, iframe, object, embed, a[href^=\"javascript\"]').length]"
    )
    assert counts[0] == 2 and counts[1] >= 1 and counts[2] == counts[0] + counts[1] and counts[3:] == [0, 0], counts
    assert not wait_for(heard, 0.5), f"{page.name}: the listener heard {heard}"


def wait_for(heard: list, seconds: float) -> bool:
    """Whether the listener hears something within ``seconds`` (a request is sent after load)."""
    import time

    end = time.monotonic() + seconds
    while not heard and time.monotonic() < end:
        time.sleep(0.05)
    return bool(heard)


def test_the_listener_hears_a_page_that_runs_data(browser, tmp_path, listener):
    """The check can fail: a page that pastes the payloads in as markup is caught."""
    port, heard = listener
    page = tmp_path / "raw.html"
    page.write_text("<html><body>" + "".join(payloads(port)) + "</body></html>")
    open_page(browser, page)
    assert browser.execute_script("return window.__pwned") == 1 and browser.title == "pwned"
    assert wait_for(heard, 5)
    heard.clear()


@pytest.mark.parametrize("view", REPORT_CHARTS)
def test_report_charts_of_a_hostile_export_run_nothing(browser, tmp_path, hostile, listener, view):
    page = tmp_path / f"{view.replace(' ', '_')}.html"
    res = runner.invoke(app, ["report", str(hostile), "--view", *view.split(), "--chart", str(page)])
    assert res.exit_code == 0, res.output
    assert_inert_page(browser, page, listener[1])


def test_timeline_chart_of_a_hostile_export_runs_nothing(browser, tmp_path, hostile, listener):
    page = tmp_path / "timeline.html"
    res = runner.invoke(app, ["timeline", str(hostile), "-o", str(tmp_path / "t.json"), "--chart", str(page)])
    assert res.exit_code == 0, res.output
    assert_inert_page(browser, page, listener[1])


def test_a_page_of_text_tables_and_charts_runs_nothing(browser, tmp_path, listener):
    """The page writer itself (what ``summary --html`` uses): payloads as the title, headings,
    paragraphs, cells, chart titles and data."""
    texts = payloads(listener[0])
    spec = {
        "$schema": "https://vega.github.io/schema/vega-lite/v6.4.1.json",
        "title": texts[0],
        "data": {"values": [{"name": t, "ms": k + 1} for k, t in enumerate(texts)]},
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {"y": {"field": "name", "type": "nominal"}, "x": {"field": "ms", "type": "quantitative"}},
    }
    sections = [
        html.Section(None, [texts[1], html.Chart(spec)]),
        html.Section(texts[2], [html.Table([texts[3], "n"], [[t, k] for k, t in enumerate(texts)])]),
    ]
    page = html.write(tmp_path / "page.html", texts[4], sections)
    assert_inert_page(browser, page, listener[1], title=texts[4])
    shown = browser.find_element("tag name", "body").text
    assert texts[1] in shown and texts[3] in shown  # shown as text, whole


def test_the_page_of_a_run_renders_offline(browser, tmp_path):
    """``summary --html``: the findings, the step chart and table, utilization over time and the
    top kernels of the two-GPU capture, drawn offline without a console error."""
    from nsys_tools.rules import diagnose
    from nsys_tools.rules.context import Run

    page = tmp_path / "run.html"
    res = runner.invoke(app, ["summary", str(MULTI), "--html", str(page)])
    assert res.exit_code == 0, res.output
    assert_offline_page(browser, page)
    assert browser.execute_script("return document.querySelectorAll('.vega-embed svg').length") == 2
    shown = browser.find_element("tag name", "body").text
    titles = [f.title for f in diagnose(Run([MULTI]))]
    assert titles and all(t in shown for t in titles)
    assert "Where each step's time went" in shown and "Utilization over time" in shown and "Top kernels" in shown


def test_the_page_of_a_run_of_a_hostile_export_runs_nothing(browser, tmp_path, hostile, listener):
    """``summary --html``: findings, tables and charts of the run, through the same page writer."""
    page = tmp_path / "run.html"
    res = runner.invoke(app, ["summary", str(hostile), "--html", str(page)])
    assert res.exit_code == 0, res.output
    assert_inert_page(browser, page, listener[1], title="Run: run.sqlite")
