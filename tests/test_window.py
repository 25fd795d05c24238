"""Windows of a run (``read/window.py``): times with units, NVTX range instances, warm-up steps
skipped, each checked against the export's own NVTX table read with sqlite3."""

from __future__ import annotations

import sqlite3

import pytest

import nsys_tools
from nsys_tools.errors import UsageError
from nsys_tools.read.window import NO_END, Window, WindowSpec, parse_time, resolve_window
from nsys_tools.run.report import view_table

from .conftest import FIXTURES

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"


def sql(query: str, *args):
    with sqlite3.connect(f"file:{MULTI}?mode=ro", uri=True) as con:
        return con.execute(query, args).fetchall()


def steps() -> list[tuple[int, int]]:
    """(start, end) of the ``step=<k>`` push/pop ranges of both processes, in order of start."""
    return sql(
        "SELECT start, end FROM NVTX_EVENTS LEFT JOIN StringIds s ON s.id = textId "
        "WHERE coalesce(text, s.value) LIKE 'step=%' ORDER BY start, end"
    )


@pytest.mark.parametrize(
    "text, ns", [("1.5s", 1_500_000_000), ("200ms", 200_000_000), ("30us", 30_000), ("30µs", 30_000), ("100ns", 100), ("7", 7)]
)
def test_times_take_units(text, ns):
    assert parse_time(text) == ns


@pytest.mark.parametrize("text", ["1.5x", "ms", "-3ms", ""])
def test_a_time_without_a_unit_we_know_is_refused(text):
    with pytest.raises(ValueError, match="is not a time"):
        parse_time(text)


def test_the_nth_instance_of_a_range_is_its_span():
    trace = nsys_tools.open(MULTI)
    found = steps()
    assert len(found) == 8  # 4 steps in each of 2 processes
    assert resolve_window(trace, within="step=*#3") == Window(*found[2])
    assert resolve_window(trace, within="step=*") == Window(found[0][0], max(e for _, e in found))
    # Skipping the first two instances of the step range: from the third step's start to the end of the run.
    assert resolve_window(trace, skip_first=2) == Window(found[2][0], NO_END)
    assert resolve_window(trace, within="step=*#1", skip_first=2) == Window(*found[2])
    # Times from the session start intersect the range.
    assert resolve_window(trace, within="step=*#3", start=found[2][0] + 1000) == Window(found[2][0] + 1000, found[2][1])


def test_a_range_that_is_not_there_names_the_file():
    trace = nsys_tools.open(MULTI)
    with pytest.raises(UsageError, match=r"multi-gpu-nsys2025\.3\.sqlite: no instance 9 of NVTX range matching 'step=\*'"):
        resolve_window(trace, within="step=*#9")
    with pytest.raises(UsageError, match="is empty"):
        resolve_window(trace, start="2s", end="1s")


@pytest.mark.parametrize("view", ["kernels", "memops", "api"])
def test_every_view_counts_only_what_starts_in_the_window(view):
    """Kernels, copies and API calls starting inside the third step, counted by sqlite3."""
    start, end = steps()[2]
    table = {"kernels": "CUPTI_ACTIVITY_KIND_KERNEL", "api": "CUPTI_ACTIVITY_KIND_RUNTIME"}
    if view == "memops":
        expected = sum(
            sql(f"SELECT count(*) FROM {t} WHERE start >= ? AND start < ?", start, end)[0][0]
            for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
        )
    else:
        expected = sql(f"SELECT count(*) FROM {table[view]} WHERE start >= ? AND start < ?", start, end)[0][0]
    ours = view_table([MULTI], view, window=WindowSpec(within="step=*#3"))
    whole = view_table([MULTI], view)
    assert 0 < expected < whole["instances"].sum()
    assert ours["instances"].sum() == expected
    by_time = view_table([MULTI], view, window=WindowSpec(start=f"{start}ns", end=f"{end}ns"))
    assert by_time.equals(ours)


def test_ranges_in_a_window_keep_the_range_their_work_was_launched_in():
    """A window inside ``forward`` still attributes its kernels to ``forward``: the ranges stay whole."""
    start, end = sql(
        "SELECT start, end FROM NVTX_EVENTS LEFT JOIN StringIds s ON s.id = textId "
        "WHERE coalesce(text, s.value) = 'forward' ORDER BY start LIMIT 1"
    )[0]
    middle = (start + end) // 2
    kernels = view_table([MULTI], "kernels", window=WindowSpec(start=middle, end=end))
    launched = sql("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start >= ? AND start < ?", middle, end)[0][0]
    assert kernels["instances"].sum() == launched > 0
    assert set(kernels["range"]) <= {"forward", "backward", "step=0", ""} and "forward" in set(kernels["range"])
