"""Charts of a sweep (render.charts): kernel time per shape, ratios to the control, as Vega-Lite specs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsys_tools.study import folder as sweep

SWEEPS = Path(__file__).resolve().parents[1] / "reports" / "sweeps"
QUIET = SWEEPS / "20261129-183449-quiet"
QUIET_2 = SWEEPS / "20261129-183620-quiet"
LOADED = SWEEPS / "20261129-183713-loaded"
MATMUL_BF16 = SWEEPS / "20261130-004548-matmul-bf16"  # cuBLAS: a memset, then its kernel, per call
runner = CliRunner()


@pytest.mark.slow
def test_chart_specs(quiet):
    from nsys_tools.render import charts
    from nsys_tools.views.stats import ratios

    spec = charts.kernel_time(sweep.summary(quiet), ["ours", "triton", "torch", "copy"]).to_dict()
    assert spec["facet"]["column"]["field"] == "shape" and spec["resolve"]["scale"]["y"] == "independent"
    layers = spec["spec"]["layer"]
    assert layers[0]["mark"]["type"] == "bar" and layers[1]["encoding"]["y2"]["field"] == "p90"
    rspec = charts.ratio(ratios(quiet.calls, "triton"), "triton", ["ours", "triton", "torch", "copy"]).to_dict()
    assert any(layer.get("encoding", {}).get("y", {}).get("field") == "y" for layer in rspec["layer"])  # the line at 1.0
