"""The page of a run (``study/page.py``, ``render/run_page.py``): what it holds, checked against
the step table and the utilization view; it draws offline in tests/test_browser.py."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
from typer.testing import CliRunner

from nsys_tools.cli import app
from nsys_tools.render import run_page
from nsys_tools.run.report import view_table
from nsys_tools.study.page import bin_ns

from .conftest import FIXTURES

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"


def test_windows_are_round_lengths_about_a_hundredth_of_the_span():
    assert bin_ns(1_360_000_000) == 20_000_000
    assert bin_ns(225_048_968) == 5_000_000
    assert bin_ns(50) == 1


def charts(page: str) -> list[dict]:
    found = re.findall(r'<script type="application/json" data-chart="[^"]+">(.*?)</script>', page, re.S)
    return [json.loads(text) for text in found]


def rows(spec: dict) -> list[dict]:
    data = spec.get("datasets") or {}
    return [r for values in data.values() for r in values] if data else spec["data"]["values"]


@pytest.mark.slow
def test_the_page_holds_every_step_split_whole_and_the_run_over_time(tmp_path):
    page = tmp_path / "run.html"
    res = CliRunner().invoke(app, ["summary", str(MULTI), "--html", str(page)])
    assert res.exit_code == 0, res.output
    text = page.read_text()
    assert "Content-Security-Policy" in text and "<script src" not in text
    steps_spec, util_spec = charts(text)
    steps = view_table([MULTI], "steps")
    drawn = pl.DataFrame(rows(steps_spec)).group_by("device", "step").agg(pl.col("ms").sum())
    want = steps.select(device=pl.format("rank {} · GPU {}", "pid", "gpu_id"), step="step", want=pl.col("duration_ns") / 1e6)
    both = want.join(drawn, on=["device", "step"])
    assert both.height == steps.height and ((both["ms"] - both["want"]).abs() < 1e-6).all()  # the parts add up to each step
    assert set(pl.DataFrame(rows(steps_spec))["what"]) == set(run_page.PARTS.values())
    util = view_table([MULTI], "utilization", by=["device"], bin_ns=bin_ns(1_360_808_520))
    drawn = pl.DataFrame(rows(util_spec))
    assert drawn.height == 3 * util.height and set(drawn["device"]) == {"GPU 0", "GPU 1"}
    table = text.split("<th>skew (ms)</th>", 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == steps.height  # one row per rank, device and step


def test_summary_with_its_page_diagnoses_the_run_once(tmp_path, monkeypatch):
    """The page takes the summary's run and findings: the rules run once, and the page is the
    same as one written on its own."""
    import nsys_tools.rules as rules
    from nsys_tools.study.page import write

    calls = []
    diagnose = rules.diagnose
    monkeypatch.setattr(rules, "diagnose", lambda *a, **k: calls.append(1) or diagnose(*a, **k))
    page = tmp_path / "run.html"
    res = CliRunner().invoke(app, ["summary", str(MULTI), "--html", str(page)])
    assert res.exit_code == 0, res.output
    assert len(calls) == 1
    alone = write([MULTI], tmp_path / "alone.html")
    assert len(calls) == 2 and alone.read_bytes() == page.read_bytes()
