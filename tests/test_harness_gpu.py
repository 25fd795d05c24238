"""The harness on the GPU, without Nsight Systems: every phase of a sweep's capture for the
built-in LayerNorm and the example softmax op, under both output policies (``pytest -m gpu``).
Standard library only besides torch, like the capture side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsys_tools.capture.harness import main
from nsys_tools.convention import round_orders

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "softmax_op.py"

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("outputs", ["rotate", "reuse"])
@pytest.mark.parametrize(
    "op, impls, shape",
    [("layernorm", "ours,triton,torch,copy", "1024x2048"), ("softmax", "rowwise,torch,torch_alloc,copy", "1024x4096")],
)
def test_harness_records_every_phase(tmp_path, op, impls, shape, outputs):
    args = ["--op", op, "--plugin", str(EXAMPLE), "--shape", shape, "--impls", impls, "--rounds", "2", "--iters", "5"]
    main([*args, "--warmup", "2", "--outputs", outputs, "--out", str(tmp_path)])
    record = json.loads((tmp_path / f"{shape}.harness.json").read_text())
    names = impls.split(",")
    assert record["outputs"] == outputs and not record["errors"] and list(record["checks"]) == names
    assert all(err < record["implementations"][name]["tolerance"] for name, err in record["checks"].items())
    assert {n: i["outputs"] for n, i in record["implementations"].items()}[names[2]] == "allocates"
    assert len(record["spans"]["span_ns"]) == 2 * 5 * len(names) and min(record["spans"]["span_ns"]) > 0
    assert record["buffer_sets"] >= 2  # cold: the inputs rotate
    # The event-timed rounds ran in the recorded orders (default seed 0), call by call.
    assert record["seed"] == 0 and record["orders"] == round_orders(names, 2, 0)
    assert record["spans"]["impl"] == [name for order in record["orders"] for name in order for _ in range(5)]
