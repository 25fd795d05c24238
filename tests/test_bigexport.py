"""Replicated exports (run.bigexport): a copy N times as large gives the same statistics, N times the counts."""

from __future__ import annotations

from nsys_tools.run.bigexport import replicate
from nsys_tools.run.report import kernel_summary

from .conftest import FIXTURES

SRC = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"


def test_replicated_export_scales_the_statistics(tmp_path):
    big = tmp_path / "big.sqlite"
    counts = replicate(SRC, big, 9)
    assert counts["CUPTI_ACTIVITY_KIND_KERNEL"] == 3810 and counts["NVTX_EVENTS"] == 30
    one, ten = kernel_summary([SRC]), kernel_summary([big])
    both = one.join(ten, on=["range", "kernel"], suffix="_10")
    assert both.height == one.height == ten.height
    assert (both["instances_10"] == 10 * both["instances"]).all()
    assert (both["median_ns_10"] == both["median_ns"]).all() and (both["max_ns_10"] == both["max_ns"]).all()
