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


@pytest.mark.parametrize("glob", ["*step*", "step=[0-9]*", "step=?", "[!s]tep*", "50%_done*", "it's*", "[x", "Step*"])
def test_a_like_pattern_keeps_all_a_glob_matches(glob):
    """``glob_like`` is a filter as rows are read: every name the glob matches passes it (SQLite's
    LIKE), and it keeps out names far from the glob."""
    import re
    import sqlite3

    from nsys_tools.read.names import glob_like, glob_regex

    names = ["step=1", "step=12", "xtep3", "Step=4", "50%_done now", "it's", "[x", "forward", "stepper", "a step b"]
    con = sqlite3.connect(":memory:")
    passed = {n for n in names if con.execute("SELECT ? LIKE ?", (n, glob_like(glob))).fetchone()[0]}
    matched = {n for n in names if re.match(glob_regex(glob), n)}
    assert matched <= passed and "forward" not in passed
    assert matched or glob in ("Step*",)  # each glob but the one of another case matches a name exactly


def test_ranges_like_are_the_ranges_whose_text_matches():
    from nsys_tools.read.export import open_export
    from nsys_tools.read.trace import Trace

    from .conftest import FIXTURES

    trace = Trace(open_export(FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"))
    columns = ["range", "domain", "start_ns", "end_ns", "global_tid", "style"]
    every = trace.ranges(columns=columns).collect()
    some = trace.ranges(columns=columns, like=["STEP%", "forw_rd"]).collect()
    expected = every.filter(pl.col("range").str.starts_with("step") | (pl.col("range") == "forward"))
    assert some.height == expected.height > 0 and some.height < every.height
    assert some.sort(columns).equals(expected.sort(columns))
