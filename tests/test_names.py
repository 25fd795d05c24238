"""Range names without PyTorch's per-call ids (``read/names.py``)."""

from __future__ import annotations

import polars as pl
import pytest

from nsys_tools.read.names import op_name


@pytest.mark.parametrize(
    "text, op",
    [
        ("aten::mm, seq = 1234, op_id = 56, sizes = [[64, 128], [128, 256]]", "aten::mm"),
        ("aten::addmm, seq = 7, op_id = 8, sizes = [[256], [64, 128], [128, 256]], input_op_ids = [(3, 0)]", "aten::addmm"),
        ("MmBackward0, op_id = 91, seq = 1234", "MmBackward0"),
        ("autograd::engine::evaluate_function: MmBackward0, op_id = 90", "autograd::engine::evaluate_function: MmBackward0"),
        ("aten::copy_, seq = 3, stashed seq = 2", "aten::copy_"),
        ("forward", "forward"),
        ("", ""),
    ],
)
def test_per_call_ids_are_dropped(text, op):
    assert pl.select(op_name(pl.lit(text))).item() == op
