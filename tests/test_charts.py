"""Charts of a sweep (render.charts): kernel time per shape, ratios to the control, as Vega-Lite specs."""

from __future__ import annotations

import pytest

from nsys_tools.study import folder as sweep


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
