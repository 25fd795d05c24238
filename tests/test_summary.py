"""``nsys-tools summary``: one screen for a whole run, its figures those of the views."""

from __future__ import annotations

import polars as pl
import pytest

from nsys_tools.cli import app
from nsys_tools.read.window import WindowSpec
from nsys_tools.render.tables import escape
from nsys_tools.rules import diagnose
from nsys_tools.rules.context import Run
from nsys_tools.run.report import view_table
from nsys_tools.study.summary import findings, summary, tables

from . import nccl_derived
from .cli import CliRunner
from .conftest import FIXTURES

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"


def test_the_summary_fits_an_issue_comment_and_names_its_figures():
    text = summary([MULTI])
    util = view_table([MULTI], "utilization", by=["device"])
    idle = view_table([MULTI], "idle", by=["device"])
    idle_ns = util["idle_ns"].sum()
    host = idle.filter(pl.col("cause") == "host")["total_ns"].sum()
    assert len(text) < 6000 and len(text.splitlines()) < 60
    first = text.split("**Look at first:**")[1].split("**Steps**")[0]
    # the three largest findings of diagnose, in its order
    top = diagnose(Run([MULTI]))[:3]
    assert first.strip().splitlines() == [f"{i}. {escape(f.title)} (`{f.rule}`)" for i, f in enumerate(top, 1)]
    assert any(f.rule == "setup" for f in top)  # the 12.8 ms setup and the 251 ms first step, not lumped into idle
    assert f"| host | 124 | {host / 1e6:,.2f} ms | {100 * host / idle_ns:.1f}% |" in text
    assert "| 0 NVIDIA H200 | 274.03 ms |" in text and "**NCCL exposed time:** none" in text
    for row in util.iter_rows(named=True):
        assert f"{row['busy_pct']:.1f}% | {row['compute_pct']:.1f}%" in text


def test_findings_are_ranked_by_the_time_they_account_for():
    found = findings(tables([MULTI]))
    assert len(found) >= 3 and [f.ns for f in found] == sorted((f.ns for f in found), reverse=True)


@pytest.mark.slow
def test_cli_summary_in_a_window_and_bad_input():
    runner = CliRunner()
    result = runner.invoke(app, ["summary", str(MULTI), "--within", "step=*#2"])
    assert result.exit_code == 0, result.output
    assert "(--within 'step=*#2')" in result.stdout and "None" not in result.stdout
    assert summary([MULTI], window=WindowSpec(within="step=*#2")) in result.stdout
    bad = runner.invoke(app, ["summary", str(MULTI), "--within", "nosuch"])
    assert bad.exit_code == 1 and bad.stderr.startswith("Error: ")
    assert "no process has an NVTX range matching 'nosuch'" in bad.stderr


def test_the_summary_of_the_nccl_run_names_exposed_communication_and_the_top_idle_cause(tmp_path):
    """On the derived two-GPU NCCL export: under an issue comment's 65,536 characters and about a
    screen, it gives the exposed communication time (the utilization view's), the NCCL time and
    the share of it beside compute (the overlap view's), per device and the worst step, and the
    top idle cause with its time."""
    path = nccl_derived.export(tmp_path)
    text = summary([path])
    assert len(text) < 65_536 and len(text.splitlines()) < 60
    util = view_table([path], "utilization", by=["device"])
    overlap = view_table([path], "overlap", by=["device"])
    idle = view_table([path], "idle", by=["device"]).group_by("cause").agg(pl.col("total_ns").sum())
    exposed, nccl = util["communication_ns"].sum(), overlap["nccl_ns"].sum()
    assert exposed > 0 and nccl == overlap["exposed_ns"].sum() == exposed  # that stream never ran beside compute
    g0, g1 = (util.filter(pl.col("gpu_id") == g)["communication_ns"].item() for g in (0, 1))
    worst = overlap.sort("exposed_ns", descending=True).row(0, named=True)
    line = next(x for x in text.splitlines() if x.startswith("**NCCL exposed time:**"))
    assert line == (
        f"**NCCL exposed time:** {exposed / 1e6:,.2f} ms (NCCL kernels ran {nccl / 1e6:,.2f} ms, 0.0% of it beside compute); "
        f"per device: GPU 0 {g0 / 1e6:,.2f} ms, GPU 1 {g1 / 1e6:,.2f} ms; "
        f"most in one step: {worst['step']} on GPU {worst['gpu_id']}, {worst['exposed_ns'] / 1e6:,.2f} ms"
    )
    top = idle.sort("total_ns", descending=True).row(0, named=True)
    assert f"| {top['cause']} | " in text.split("**Idle time by cause**")[1].splitlines()[4]
    # A share that rounds to 0.0% but is not nothing says so in the devices table.
    assert f"| <0.1% | {util['memory_pct'][0]:.1f}% |" in text
    assert "**NCCL exposed time:** none (no NCCL kernel in the run)" in summary([MULTI])


def test_the_steps_section_gives_setup_warmup_and_mfu():
    text = summary([MULTI], steps={"flops_per_step": 1e12})
    steps = view_table([MULTI], "steps", flops_per_step=1e12)
    for pid in (1426, 1427):
        own = steps.filter((pl.col("pid") == pid) & (pl.col("phase") == "steady"))
        setup = steps.filter((pl.col("pid") == pid) & (pl.col("step") == 0))["duration_ns"].item()
        mfu = own["mfu_pct"].median()
        busy = 100 * own["busy_ns"].sum() / own["duration_ns"].sum()  # steady steps only: not the warm-up's 0.2%
        assert (
            f"| {pid} | 4 | {setup / 1e6:,.2f} ms | 1 | {own['duration_ns'].median() / 1e6:,.2f} ms | 1 | {busy:.1f}% | "
            f"{own['tflops'].median():,.1f} TFLOP/s, {mfu:.1f}% MFU |"
        ) in text
