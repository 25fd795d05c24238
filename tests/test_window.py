"""Windows of a run (``read/window.py``): times with units, NVTX range instances, warm-up steps
skipped, each checked against the export's own NVTX table read with sqlite3."""

from __future__ import annotations

import sqlite3

import polars as pl
import pytest

import nsys_tools
from nsys_tools.errors import UsageError
from nsys_tools.read.window import NO_END, Window, WindowSpec, parse_time, resolve_window
from nsys_tools.run.report import view_table

from .conftest import FIXTURES

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"


def sql(query: str, *args, path=MULTI):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return con.execute(query, args).fetchall()


def steps(path=MULTI) -> dict[int, list[tuple[int, int]]]:
    """Per OS pid, (start, end) of its ``step=<k>`` push/pop ranges, in order of start."""
    rows = sql(
        "SELECT (globalTid >> 24) % (1 << 24), start, end FROM NVTX_EVENTS LEFT JOIN StringIds s ON s.id = textId "
        "WHERE coalesce(text, s.value) LIKE 'step=%' ORDER BY start, end",
        path=path,
    )
    found: dict[int, list[tuple[int, int]]] = {}
    for pid, start, end in rows:
        found.setdefault(pid, []).append((start, end))
    return found


def per_window(query: str, windows: dict[int, tuple[int, int]], path=MULTI) -> int:
    """``query``'s count (parameters: an OS pid, then its window's start and end) summed over the
    windows, by sqlite3."""
    return sum(sql(query, pid, lo, hi, path=path)[0][0] for pid, (lo, hi) in windows.items())


def launched(table: str, windows: dict[int, tuple[int, int]], path=MULTI) -> int:
    """How many rows of ``table`` (GPU operations) each pid launched inside its window, by sqlite3."""
    return per_window(
        f"SELECT count(*) FROM {table} o JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = o.correlationId "
        "AND r.globalTid >> 24 = o.globalPid >> 24 "
        "WHERE (o.globalPid >> 24) % (1 << 24) = ? AND r.start >= ? AND r.start < ?",
        windows,
        path,
    )


def called(windows: dict[int, tuple[int, int]], path=MULTI) -> int:
    return per_window(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE (globalTid >> 24) % (1 << 24) = ? AND start >= ? AND start < ?",
        windows,
        path,
    )


def per_rank(window: Window) -> dict[int, tuple[int, int]]:
    """A window's ranks by OS pid."""
    return {(g >> 24) % (1 << 24): (lo, hi) for g, lo, hi in window.ranks}


@pytest.mark.parametrize(
    "text, ns", [("1.5s", 1_500_000_000), ("200ms", 200_000_000), ("30us", 30_000), ("30µs", 30_000), ("100ns", 100), ("7", 7)]
)
def test_times_take_units(text, ns):
    assert parse_time(text) == ns


@pytest.mark.parametrize("text", ["1.5x", "ms", "-3ms", ""])
def test_a_time_without_a_unit_we_know_is_refused(text):
    with pytest.raises(ValueError, match="is not a time"):
        parse_time(text)


def test_the_nth_instance_of_a_range_is_each_ranks_own():
    trace = nsys_tools.open(MULTI)
    found = steps()
    assert sorted(map(len, found.values())) == [4, 4]  # 4 steps in each of 2 processes

    def expect(pick) -> dict[int, tuple[int, int]]:
        return {pid: pick(s) for pid, s in found.items()}

    third = resolve_window(trace, within="step=*#3")
    assert per_rank(third) == expect(lambda s: s[2])
    assert (third.start_ns, third.end_ns) == (min(s[2][0] for s in found.values()), max(s[2][1] for s in found.values()))
    assert per_rank(resolve_window(trace, within="step=*")) == expect(lambda s: (s[0][0], max(e for _, e in s)))
    # Skipping each rank's first two instances of the step range: from its third step's start to the end of the run.
    assert per_rank(resolve_window(trace, skip_first=2)) == expect(lambda s: (s[2][0], NO_END))
    assert per_rank(resolve_window(trace, within="step=*#1", skip_first=2)) == expect(lambda s: s[2])
    # Times from the session start intersect each rank's range; a rank whose range they miss has none.
    late = max(found.values())[2][0] + 1000
    assert per_rank(resolve_window(trace, within="step=*#3", start=late)) == {
        pid: (late, s[2][1]) for pid, s in found.items() if s[2][1] > late
    }
    assert len(per_rank(resolve_window(trace, within="step=*#3", start=late))) == 1
    # --from/--to alone is a time on the timeline, the same for every rank.
    assert resolve_window(trace, start="1s", end="2s") == Window(10**9, 2 * 10**9)


def test_a_range_that_is_not_there_names_the_file():
    trace = nsys_tools.open(MULTI)
    with pytest.raises(
        UsageError, match=r"multi-gpu-nsys2025\.3\.sqlite: no process has instance 9 of an NVTX range matching 'step=\*'"
    ):
        resolve_window(trace, within="step=*#9")
    with pytest.raises(UsageError, match="is empty"):
        resolve_window(trace, start="2s", end="1s")


def test_the_window_names_the_options_that_gave_it():
    assert str(WindowSpec(within="step*#3")) == "--within 'step*#3'"
    assert str(WindowSpec(start="100ms", end="200ms")) == "--from 100ms --to 200ms"
    assert str(WindowSpec(skip_first=2)) == "--skip-first 2"


@pytest.mark.parametrize("view", ["kernels", "memops", "api"])
def test_every_view_counts_what_each_rank_launched_in_its_window(view):
    """Kernels and copies whose launch call each rank made inside its own third step, and its API
    calls that start there, counted by sqlite3; ``--from/--to`` counts what starts between them."""
    windows = {pid: s[2] for pid, s in steps().items()}
    if view == "memops":
        expected = sum(launched(t, windows) for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"))
    elif view == "kernels":
        expected = launched("CUPTI_ACTIVITY_KIND_KERNEL", windows)
    else:
        expected = called(windows)
    ours = view_table([MULTI], view, window=WindowSpec(within="step=*#3"))
    whole = view_table([MULTI], view)
    assert 0 < expected < whole["instances"].sum()
    assert ours["instances"].sum() == expected
    start, end = max(windows.values())
    table = {"kernels": "CUPTI_ACTIVITY_KIND_KERNEL", "api": "CUPTI_ACTIVITY_KIND_RUNTIME"}
    tables = ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET") if view == "memops" else (table[view],)
    by_time = view_table([MULTI], view, window=WindowSpec(start=f"{start}ns", end=f"{end}ns"))
    assert by_time["instances"].sum() == sum(
        sql(f"SELECT count(*) FROM {t} WHERE start >= ? AND start < ?", start, end)[0][0] for t in tables
    )


def test_ranks_that_drift_apart_each_keep_their_own_step(tmp_path):
    """On a two-rank export whose ranks drift apart (``tests/drifted_ranks.py``), the third step is
    each rank's own: both GPUs have their rank's work, launch by launch, and every view agrees."""
    from .drifted_ranks import export

    path = export(tmp_path)
    found = steps(path)
    moved, lead = found[1426], found[1427]
    assert moved[0][0] < lead[0][0] and moved[2][0] > lead[2][1]  # the ranks' step 2 do not even overlap
    every = sorted(s for steps_ in found.values() for s in steps_)
    assert every[2] == lead[1]  # the export's third step range is rank 1427's second step
    windows = {pid: s[2] for pid, s in found.items()}
    spec = WindowSpec(within="step=*#3")
    util = view_table([path], "utilization", by=["device"], window=spec)
    assert util.height == 2  # both GPUs, each with its own rank's step
    kernels = view_table([path], "kernels", by=["process"], window=spec)
    for pid, window in windows.items():
        mine = kernels.filter(pl.col("pid") == pid)["instances"].sum()
        assert mine == launched("CUPTI_ACTIVITY_KIND_KERNEL", {pid: window}, path) > 0
    overlap = view_table([path], "overlap", by=["device"], window=spec)
    assert set(overlap["step"]) == {"step=2"}  # the step each GPU's work was launched in
    # The timeline keeps the same operations, each with its launch arrow.
    import json

    from nsys_tools.cli import app

    from .cli import CliRunner

    out = tmp_path / "step3.json"
    res = CliRunner().invoke(app, ["timeline", str(path), "-o", str(out), "--within", "step=*#3"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    events = doc["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "nccl", "memcpy", "memset")]
    copies = sum(launched(t, windows, path) for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"))
    assert len(ops) == kernels["instances"].sum() + copies
    assert sum(e.get("ph") == "s" for e in events) == len(ops)


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


K = "CUPTI_ACTIVITY_KIND_KERNEL"
LOST = (  # every third kernel's launch call is lost, as in a trace that dropped records
    f"DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId IN (SELECT correlationId FROM {K} WHERE rowid % 3 = 0) "
    "AND nameId IN (SELECT id FROM StringIds WHERE value LIKE '%Launch%')"
)
NO_PID = [f"ALTER TABLE CUPTI_ACTIVITY_KIND_{t} DROP COLUMN globalPid" for t in ("KERNEL", "MEMCPY", "MEMSET")]


def _edited(tmp_path, name: str, statements: list[str]):
    path = tmp_path / f"{name}.sqlite"
    path.write_bytes(MULTI.read_bytes())
    with sqlite3.connect(path) as con:
        for statement in statements:
            con.execute(statement)
    con.close()
    return path


def _unlaunched(windows: dict[int, tuple[int, int]], path) -> int:
    """Kernels of each pid with no launch row, that start inside its window, by sqlite3."""
    return per_window(
        f"SELECT count(*) FROM {K} o WHERE (o.globalPid >> 24) % (1 << 24) = ? AND o.start >= ? AND o.start < ? "
        "AND NOT EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = o.correlationId "
        "AND r.globalTid >> 24 = o.globalPid >> 24)",
        windows,
        path,
    )


def test_work_that_records_no_process_keeps_its_ranks_window(tmp_path):
    """An export whose GPU operations record no process (nsys before 2021), with some launch
    calls lost: each operation is in its rank's window by its call's process, or with no call, by
    its device's (one process per GPU here). Per-rank windows had dropped all of them; every view
    and the timeline now give what the same export with its processes gives."""
    kept = _edited(tmp_path, "with-pids", [LOST])
    old = _edited(tmp_path, "without-pids", [LOST, *NO_PID])
    windows = {pid: s[1] for pid, s in steps(kept).items()}
    spec = WindowSpec(within="step=*#2")
    expected = launched(K, windows, path=kept) + _unlaunched(windows, kept)
    assert 0 < _unlaunched(windows, kept) < expected
    assert view_table([old], "kernels", window=spec)["instances"].sum() == expected
    for view in ("kernels", "memops", "overlap", "steps", "utilization"):
        assert view_table([old], view, window=spec).equals(view_table([kept], view, window=spec)), view
    from typer.testing import CliRunner

    from nsys_tools.cli import app

    for path in (kept, old):
        res = CliRunner().invoke(app, ["timeline", str(path), "--within", "step=*#2", "-o", str(tmp_path / "t.json")])
        assert res.exit_code == 0 and f", {expected} kernel, " in res.stderr, res.output


def test_work_of_no_known_process_on_a_shared_device_is_kept_by_the_ranks_span(tmp_path):
    """Both processes on one device, and operations with neither a process nor a launch call: no
    rank can claim them, so they stay in the window where they start inside the ranks' span,
    never dropped."""
    kept = _edited(tmp_path, "with-pids", [LOST, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 0"])
    old = _edited(tmp_path, "without-pids", [LOST, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 0", *NO_PID])
    windows = {pid: s[1] for pid, s in steps(kept).items()}
    lo, hi = min(w[0] for w in windows.values()), max(w[1] for w in windows.values())
    unknown = sql(
        f"SELECT count(*) FROM {K} o WHERE o.start >= ? AND o.start < ? AND NOT EXISTS (SELECT 1 FROM "
        "CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = o.correlationId AND r.globalTid >> 24 = o.globalPid >> 24)",
        lo,
        hi,
        path=kept,
    )[0][0]
    expected = launched(K, windows, path=kept) + unknown
    assert unknown > _unlaunched(windows, kept)
    assert view_table([old], "kernels", window=WindowSpec(within="step=*#2"))["instances"].sum() == expected


def test_instances_are_counted_as_steps_are_so_a_nested_method_step_is_not_one(tmp_path):
    """PyTorch's 'Optimizer.step#AdamW.step' sits inside each 'step <i>' of the training run and
    matches '*step*' too: the third instance is 'step 2', and skipping two steps starts at 'step 2',
    as the steps view numbers them (before, the nested ranges counted and both landed on 'step 1')."""
    from .torch_train import exports as torch_exports

    export = torch_exports(tmp_path)["a"]
    named = sql(
        "SELECT coalesce(n.text, s.value), n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE coalesce(n.text, s.value) LIKE '%step%' ORDER BY n.start",
        path=export,
    )
    assert [r[0].split(",")[0] for r in named[:4]] == [
        "step 0",
        "Optimizer.step#AdamW.step",
        "step 1",
        "Optimizer.step#AdamW.step",
    ]
    step = {name: (lo, hi) for name, lo, hi in named if name.startswith("step ")}
    trace = nsys_tools.open(export)
    for window in (resolve_window(trace, within="*step*#3"), resolve_window(trace, within="*step*", skip_first=2)):
        assert [(lo, hi) for _, lo, hi in window.ranks] == [(step["step 2"][0], window.ranks[0][2])]
    assert resolve_window(trace, within="*step*#3").ranks[0][2] == step["step 2"][1]
    assert resolve_window(trace, skip_first=2).ranks[0][1] == step["step 2"][0]
    steps = view_table([export], "steps", window=WindowSpec(skip_first=2))
    assert steps["name"].to_list()[0] == "step 2"
