"""report --chart: every view of every bundled export draws, as offline HTML or PNG, and markdown
links the chart where it lands (or under --chart-base-url)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsys_tools import views
from nsys_tools.cli import app
from nsys_tools.render import view_charts as V
from nsys_tools.run.report import view_table

from . import nccl_derived
from .cli import CliRunner
from .conftest import FIXTURES

DEMO = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"
EXPORTS = sorted(FIXTURES.glob("*/*.sqlite")) + sorted(DEMO.glob("*.sqlite"))
EXPORTS = [p for p in EXPORTS if p.parent.name != "bad-input"]
VIEWS = [("kernels", {}), ("ranges", {}), ("api", {}), ("memops", {}), ("gaps", {}), ("hist", {}), ("pace", {})]
VIEWS += [("utilization", {}), ("utilization", {"bin_ns": 10_000_000}), ("idle", {}), ("idle", {"longest": 5})]
VIEWS += [("sync", {}), ("launch", {}), ("stragglers", {})]
runner = CliRunner()


@pytest.mark.parametrize("path", EXPORTS, ids=[p.stem for p in EXPORTS])
@pytest.mark.slow
def test_every_view_of_every_bundled_export_charts(path):
    for view, options in VIEWS:
        table = view_table([path], view, **options)
        if table.is_empty():
            continue
        spec = views.get(view).chart(table).to_dict()
        data = [v for v in spec.get("datasets", {}).values()]
        assert data and all(len(rows) for rows in data), view
        # What a bar shows is the table's: the kernels chart's bars sum to the top rows' time.
        if view == "kernels":
            rows = next(iter(spec["datasets"].values()))
            assert sum(r["total_ms"] for r in rows) == pytest.approx(table.head(V.TOP)["total_ns"].sum() / 1e6)


@pytest.mark.slow
def test_report_chart_writes_offline_html_and_links_it(tmp_path):
    mul = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
    out = tmp_path / "md" / "report.md"
    res = runner.invoke(
        app, ["report", str(mul), "--view", "memops", "--chart", str(tmp_path / "c" / "mem.html"), "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    html = (tmp_path / "c" / "mem.html").read_text()
    assert "vegaEmbed" in html and "<script src=" not in html  # inlined; the browser test checks no request leaves
    assert out.read_text().rstrip().endswith("[memops chart (interactive)](../c/mem.html)")
    res = runner.invoke(
        app,
        ["report", str(mul), "--view", "hist", "--chart", str(tmp_path / "h.png"), "--chart-base-url", "https://example.org/x/"],
    )
    assert res.exit_code == 0 and res.stdout.rstrip().endswith("![hist chart](https://example.org/x/h.png)")
    assert (tmp_path / "h.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_chart_refuses_other_suffixes_and_sweeps(tmp_path):
    mul = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
    assert runner.invoke(app, ["report", str(mul), "--chart", str(tmp_path / "c.svg")]).exit_code == 2
    assert runner.invoke(app, ["report", str(DEMO), "--chart", str(tmp_path / "c.png")]).exit_code == 2
    assert runner.invoke(app, ["report", str(mul), "--chart-base-url", "https://x"]).exit_code == 2


def test_every_view_of_the_torch_training_capture_charts(tmp_path):
    from .torch_train import exports

    path = exports(tmp_path)["a"]
    for view, options in VIEWS:
        table = view_table([path], view, **options)
        assert not table.is_empty(), view
        assert views.get(view).chart(table).to_dict()["datasets"], view


def test_utilization_and_idle_charts_draw_their_tables(tmp_path):
    """On the derived two-GPU NCCL capture: the utilization bars of each device add up to its
    span (compute, communication, memory and idle, in percent), window by window the stacked
    busy parts reach each window's busy share; the idle bars are the totals by cause, and the
    longest intervals (N per device) keep their causes."""
    path = nccl_derived.export(tmp_path)
    whole = view_table([path], "utilization")
    rows = next(iter(views.get("utilization").chart(whole).to_dict()["datasets"].values()))
    assert {r["what"] for r in rows} == {*V.BUSY.values(), "idle"}
    for device in ("GPU 0", "GPU 1"):
        assert sum(r["pct"] for r in rows if r["device"] == device) == pytest.approx(100)
    assert sum(r["ms"] for r in rows if r["what"] == V.BUSY["communication"]) == pytest.approx(
        whole["communication_ns"].sum() / 1e6
    )
    windows = view_table([path], "utilization", bin_ns=1_000_000)
    rows = next(iter(views.get("utilization").chart(windows).to_dict()["datasets"].values()))
    tops = {}
    for r in rows:
        key = (r["device"], r["start_ms"])
        tops[key] = max(tops.get(key, 0.0), r["top"])
    busy = {(f"GPU {r['gpu_id']}", r["start_ns"] / 1e6): r["busy_pct"] for r in windows.iter_rows(named=True)}
    assert tops.keys() == busy.keys() and all(tops[k] == pytest.approx(busy[k]) for k in busy)
    totals = view_table([path], "idle")
    rows = next(iter(views.get("idle").chart(totals).to_dict()["datasets"].values()))
    assert sum(r["total_ms"] for r in rows) == pytest.approx(totals["total_ns"].sum() / 1e6)
    longest = view_table([path], "idle", longest=4)
    rows = next(iter(views.get("idle").chart(longest).to_dict()["datasets"].values()))
    assert [r["cause"] for r in rows] == longest["cause"].to_list() and len(rows) == 8  # 4 per device


def test_every_registered_view_charts_from_the_command_line(tmp_path):
    """``--chart`` on every view the registry holds: a page, or one line saying why there is none
    (never a failure); on the derived two-GPU NCCL capture, where every view has rows."""
    path = nccl_derived.export(tmp_path)
    for name in views.names():
        page = tmp_path / f"{name}.html"
        res = runner.invoke(app, ["report", str(path), "--view", name, "--chart", str(page), "-f", "csv"])
        if views.spec(name).no_chart:
            assert res.exit_code == 2 and views.spec(name).no_chart in res.stderr, name
            continue
        assert res.exit_code == 0 and "bug in" not in res.stderr, (name, res.stderr)
        assert "vegaEmbed" in page.read_text(), name


def test_the_communication_charts_show_their_tables(tmp_path):
    """nccl: a bar per collective of its total time; overlap: per step, the hidden and the exposed
    NCCL time; stragglers: per step, how far the slowest rank ran behind the median."""
    path = nccl_derived.export(tmp_path)
    nccl = view_table([path], "nccl")
    rows = next(iter(views.get("nccl").chart(nccl).to_dict()["datasets"].values()))
    assert sorted(r["total_ms"] for r in rows) == sorted(nccl["total_ns"] / 1e6) and len(rows) == 2
    overlap = view_table([path], "overlap", by=["device"])
    rows = next(iter(views.get("overlap").chart(overlap).to_dict()["datasets"].values()))
    hidden = sum(r["ms"] for r in rows if r["what"] == "hidden behind compute")
    exposed = sum(r["ms"] for r in rows if r["what"].startswith("exposed"))
    assert hidden == pytest.approx(overlap["overlapped_ns"].sum() / 1e6)
    assert exposed == pytest.approx(overlap["exposed_ns"].sum() / 1e6) and exposed > 0
    late = view_table([path], "stragglers")
    rows = next(iter(views.get("stragglers").chart(late).to_dict()["datasets"].values()))
    assert [r["behind_ms"] for r in rows] == pytest.approx((late["behind_ns"] / 1e6).to_list())
