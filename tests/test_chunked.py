"""Views read a piece at a time (windows, buckets, spilled to disk): the same tables as read whole."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from nsys_tools import views
from nsys_tools.read import frames as events
from nsys_tools.read import schema as S
from nsys_tools.read.export import open_export
from nsys_tools.read.trace import Trace
from nsys_tools.read.window import WindowSpec
from nsys_tools.run import chunked
from nsys_tools.run.spill import Spill
from nsys_tools.views import idle

from . import nccl_derived
from .conftest import FIXTURES

DEMO = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"
SRC = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
EXPORTS = {
    "fixture-2025.3": SRC,
    "fixture-2024.2": FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite",
    "sweep-4096x768": DEMO / "4096x768.sqlite",
    "multi-gpu": FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite",
    "doubled-launch": FIXTURES / "doubled-launch" / "doubled-launch.sqlite",
}
# Every bundled kind of export with the default kernels view and the two ordered views (whole
# devices, and each stream with every gap); every splittable view and --by on the two that differ
# most (one process and GPU; two of each, launches recorded twice).
ORDERED = [("ranges", (), {}), ("ranges", ("device",), {}), ("gaps", (), {}), ("gaps", ("stream",), {"min_gap_ns": 0})]
CASES = (
    [(name, "kernels", (), {}) for name in EXPORTS]
    + [(name, *case) for name in EXPORTS for case in ORDERED]
    + [
        (name, view, by, options)
        for name in ("fixture-2025.3", "doubled-launch")
        for view, by, options in [
            ("kernels", ("device", "stream"), {"include_memops": True, "names": "short"}),
            ("kernels", ("process",), {"nesting": "all"}),
            ("api", ("device",), {}),
            ("memops", ("process",), {}),
            ("utilization", ("device",), {"bin_ns": 20_000_000}),
            ("utilization", ("stream",), {"bin_ns": 5_000_000}),
            ("launch", ("device",), {"names": "short"}),
            ("sync", ("process",), {}),
            ("idle", ("stream",), {"longest": 3}),
            ("idle", (), {"longest": 5}),
            ("gaps", (), {"min_gap_ns": 0, "window": WindowSpec(within="*", skip_first=1)}),
            ("api", ("device",), {"window": WindowSpec(within="*#2")}),
        ]
    ]
    + [("doubled-launch", "overlap", ("device",), {}), ("multi-gpu", "overlap", ("stream",), {"step": "forward"})]
    + [("nccl-derived", "nccl", by, {}) for by in ((), ("process",), ("device", "process"), ("stream",))]
    + [("nccl-derived", "nccl", ("process",), {"window": WindowSpec(within="step=*#2")})]
    + [(name, "hist", ("device",), {}) for name in ("fixture-2025.3", "doubled-launch", "nccl-derived")]
    + [("multi-gpu", "hist", ("process",), {"names": "short"}), ("multi-gpu", "hist", (), {"of": "ranges"})]
)


@pytest.fixture(scope="module", autouse=True)
def _nccl_derived(tmp_path_factory):
    """The derived NCCL export, built once: its kernels and its payload ranges both in the cases."""
    EXPORTS["nccl-derived"] = nccl_derived.export(tmp_path_factory.mktemp("nccl"))


@pytest.fixture
def tiny(monkeypatch):
    """Windows of 100 rows, groups of 4 kB of rows, slices of 1 kB, everything past 1 kB on disk: a bundled
    export then crosses every boundary of the bounded path many times over."""
    monkeypatch.setattr(chunked, "WINDOW_ROWS", 100)
    monkeypatch.setattr(chunked, "BUCKET_BYTES", 4096)
    monkeypatch.setattr(chunked, "SPILL_BYTES", 1024)
    monkeypatch.setattr(chunked, "SLICE_BYTES", 1024)


def in_pieces(ex, view, by, options):
    keys = views.by_columns(by)
    return views.finalize(view, chunked.view_partial(ex, view, keys, options).lazy(), keys).collect()


def whole(ex, view, by, options):
    return views.table(Trace(ex), view, by, **options)


@pytest.mark.parametrize(
    "name, view, by, options", CASES, ids=[f"{n}-{v}-{'-'.join(b) or 'all'}-{len(o)}" for n, v, b, o in CASES]
)
@pytest.mark.slow
def test_pieces_give_the_table_of_the_whole(tiny, name, view, by, options):
    ex = open_export(EXPORTS[name])
    assert len(ex.windows([S.RUNTIME], chunked.WINDOW_ROWS)) > 3
    expected = whole(ex, view, by, options)
    assert expected.height >= 2
    assert_frame_equal(in_pieces(ex, view, by, options), expected)


def test_pieces_and_spill_files_are_used(tiny, monkeypatch):
    """The fixture really is cut: many groups of buckets, and buckets written to disk."""
    seen = {"groups": 0, "flushes": 0}
    exit_spill = Spill.__exit__

    def count(self, *exc):
        seen["groups"] = len(self.groups(chunked.BUCKET_BYTES))
        seen["flushes"] = self.flushes
        return exit_spill(self, *exc)

    monkeypatch.setattr(Spill, "__exit__", count)
    in_pieces(open_export(SRC), "kernels", (), {})
    assert seen["groups"] > 5 and seen["flushes"] > 5


@pytest.mark.slow
def test_the_cut_does_not_depend_on_the_cores(tiny, monkeypatch):
    """Reads use one rowid partition per thread, but how an export is cut into pieces does not
    depend on the threads: the same partial rows on one thread and on four, so the same table
    to the last bit (a different cut sums the standard deviation's terms in another order)."""
    ex = open_export(EXPORTS["doubled-launch"])
    keys = ["gpu_id", "gpu_name"]
    partials, tables = {}, {}
    for n in (1, 4):
        monkeypatch.setattr(pl, "thread_pool_size", lambda n=n: n)
        partials[n] = chunked.view_partial(ex, "kernels", keys, {"include_memops": True})
        tables[n] = views.finalize("kernels", partials[n].lazy(), keys).collect()
    assert partials[1].height > 10 and partials[4].height == partials[1].height
    assert_frame_equal(tables[4], tables[1], check_exact=True)


@pytest.mark.slow
def test_ordered_views_are_folded_in_slices(tiny, monkeypatch):
    """The ordered views' rows go through many slices of time, each carrying the last."""
    assert set(views.ORDERED) == {"ranges", "gaps", "utilization", "idle", "overlap", "steps"} and not set(views.ORDERED) & set(
        views.SPLITTABLE
    )
    folds = {"ranges": 0, "gaps": 0, "utilization": 0}
    for view in folds:
        module = views.get(view)
        fold = module.window

        def count(rows, keys, state, *, _fold=fold, _view=view, **options):
            folds[_view] += rows.height > 0
            return _fold(rows, keys, state, **options)

        monkeypatch.setattr(module, "window", count)
        in_pieces(open_export(SRC), view, (), {})
    assert folds["ranges"] >= 3 and folds["gaps"] > 5 and folds["utilization"] > 5


STEPS = [
    ("train-loop", {}),
    ("train-loop", {"window": WindowSpec(within="*step*", skip_first=3)}),
    ("multi-gpu", {"window": WindowSpec(within="step=*#2")}),
    ("doubled-launch", {"flops_per_step": 1e12}),
    ("sweep-4096x768", {}),
    ("no-nvtx", {}),
]


@pytest.mark.parametrize("name, options", STEPS, ids=[f"{n}-{len(o)}" for n, o in STEPS])
@pytest.mark.slow
def test_steps_folded_in_slices_are_the_steps_of_the_whole(tiny, monkeypatch, tmp_path, name, options):
    """Steps from NVTX ranges (named like steps, or a repeating range), in a window, and from the
    kernel sequence (every operation kept, then folded as one slice): many slices of time, the
    same table as read whole, to the last nanosecond of every figure."""
    from .torch_train import exports as torch_exports

    if name == "no-nvtx":
        path = torch_exports(tmp_path)["a"]
        with sqlite3.connect(path) as con:
            con.execute("DELETE FROM NVTX_EVENTS")
        con.close()
    else:
        path = FIXTURES / "train-loop" / "train-loop-nsys2025.3.sqlite" if name == "train-loop" else EXPORTS[name]
    ex = open_export(path)
    module, slices = views.get("steps"), []
    fold = module.window

    def count(rows, keys, state, **given):
        slices.append(rows.height)
        return fold(rows, keys, state, **given)

    monkeypatch.setattr(module, "window", count)
    expected = whole(ex, "steps", (), options)
    assert len(slices) == 1 + (name == "no-nvtx")  # read whole: one slice (the kept operations, again)
    slices.clear()
    assert expected.height >= 2 and expected["busy_ns"].sum() > 0
    assert_frame_equal(in_pieces(ex, "steps", (), options), expected)
    assert len(slices) - (name == "no-nvtx") >= 4


def test_a_gap_across_slices_is_the_gap_of_the_whole(monkeypatch):
    """Two slices of one timeline: the first gap of the second is closed by the operation that
    held the timeline busy in the first, even when a later one there ended sooner."""
    gaps = views.get("gaps")
    ops = pl.DataFrame(
        {
            "gpu_id": [0] * 5,
            "gpu_name": ["G"] * 5,
            "start_ns": [0, 10, 20, 1_000, 5_000],
            "end_ns": [500, 30, 40, 1_200, 5_100],
            "name": ["a", "b", "c", "d", "e"],
            "range": ["r"] * 5,
            "stream_id": [1, 2, 3, 1, 1],
        }
    )

    def texts(frame: pl.DataFrame) -> pl.DataFrame:  # names are categories inside the view
        return frame.sort("gap_start_ns").with_columns(pl.col(pl.Categorical).cast(pl.String))

    expected = texts(gaps.partial(ops.lazy(), [], min_gap_ns=100).collect())
    state = gaps.window(ops[:3], [], gaps.start([], []), min_gap_ns=100)
    state = gaps.window(ops[3:], [], state, min_gap_ns=100)
    got = texts(gaps.close(state, [], []).collect())
    assert_frame_equal(got, expected)
    assert got["before_name"].to_list() == ["a", "d"] and got["gap_ns"].to_list() == [500, 3_800]


def test_busy_time_across_slices_is_the_union_of_the_whole():
    """An instance's operations overlap across a slice boundary: its busy time counts the overlap once."""
    ranges = views.get("ranges")
    pairs = pl.DataFrame(
        {
            "range_instance": pl.Series([7] * 4, dtype=pl.UInt32),
            "domain": [""] * 4,
            "range": ["r"] * 4,
            "style": ["pushpop"] * 4,
            "range_start_ns": [0] * 4,
            "range_end_ns": [10_000] * 4,
            "global_pid": [1] * 4,
            "correlation_id": [1, 2, 2, 3],
            "start_ns": [0, 100, 150, 400],
            "end_ns": [300, 200, 350, 500],
        }
    )
    rows, side = ranges.split(pairs.lazy(), [])
    rows = rows.collect()
    state = ranges.window(rows[:2], [], ranges.start([], []))
    state = ranges.window(rows[2:], [], state)
    got = ranges.close(state, [side.collect()], []).collect()
    assert_frame_equal(got, ranges.partial(pairs.lazy(), []).collect(), check_column_order=False)
    assert state.held["busy_ns"].to_list() == [450] and state.held["ops"].to_list() == [3]


def test_a_steps_busy_time_across_slices_is_the_union_of_the_whole():
    """A kernel of the first slice runs on into the second, under its kernels: each step counts
    the overlap once, at each level (compute, NCCL, copies)."""
    steps = views.get("steps")
    n = 5
    ops = pl.DataFrame(
        {
            "gpu_id": [0] * n,
            "gpu_name": ["G"] * n,
            "pid": [1] * n,
            "kind": ["kernel"] * 4 + ["memcpy"],
            "name": ["a", "b", "c", "ncclKernel", "copy"],
            "start_ns": [50, 100, 1_200, 1_600, 1_900],
            "end_ns": [1_500, 200, 1_700, 1_800, 2_100],
            "global_tid": [1] * n,
            "api_name": ["cudaLaunchKernel"] * 4 + ["cudaMemcpyAsync"],
            "api_start_ns": [40, 90, 1_100, 1_500, 1_850],
            "api_end_ns": [45, 95, 1_150, 1_550, 1_860],
        }
    )
    side = pl.DataFrame(
        {
            "side": ["step", "step", "range", "clock"],
            "pid": [1, 1, 1, None],
            "step": [1, 2, None, None],
            "name": ["step", "step", None, None],
            "a": [0, 1_000, 0, 0],
            "b": [1_000, 2_000, None, None],
            "source": ["s", "s", None, None],
        }
    )
    rows = pl.concat([ops, pl.DataFrame(schema=steps.SIDE), side], how="diagonal_relaxed")  # as read gives them
    ops, side = steps.split(rows.lazy(), [])
    ops, sides = ops.collect(), [side.collect()]
    state = steps.window(ops[:2], [], steps.start(sides, []))
    state = steps.window(ops[2:], [], state)
    got = steps.close(state, sides, []).collect()
    assert_frame_equal(got, steps.partial(rows.lazy(), []).collect())
    assert got["busy_ns"].to_list() == [950, 900] and got["compute_ns"].to_list() == [950, 700]
    assert got["nccl_exposed_ns"].to_list() == [0, 100] and got["memory_ns"].to_list() == [0, 100]


@pytest.mark.slow
def test_launches_outside_the_name_filter_are_found(tiny, fixture_copy):
    """An API that launched work but is not named like a launch is still found, read whole or in pieces."""
    from nsys_tools.run.report import kernel_summary

    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    before = in_pieces(open_export(path), "kernels", (), {})
    whole = kernel_summary([path])
    with sqlite3.connect(path) as con:
        con.execute("UPDATE StringIds SET value = 'cuEnqueueWork' WHERE value = 'cuLaunchKernel'")
    con.close()
    # 3 implementations x 100 traced calls, each inside its NVTX range (tests/fixtures/layernorm-3impl/MANIFEST.md)
    assert before.filter(pl.col("range") != "")["instances"].sum() == 300
    assert_frame_equal(in_pieces(open_export(path), "kernels", (), {}), before)
    assert_frame_equal(kernel_summary([path]), whole, rel_tol=1e-12)


def test_windows_read_each_row_once():
    ex = open_export(SRC)
    whole_table = events.kernels(ex, ["correlation_id"]).collect()
    windows = ex.windows([S.KERNEL, S.RUNTIME], 100)
    assert len(windows) == -(-ex.rows(S.RUNTIME) // 100)
    parts = pl.concat([events.kernels(w, ["correlation_id"]).collect() for w in windows])
    assert_frame_equal(parts.sort("correlation_id"), whole_table.sort("correlation_id"))


def test_spill_keeps_every_row_in_its_bucket():
    frames = [pl.DataFrame({"correlation_id": list(range(k, 1000, 7)), "v": [k] * len(range(k, 1000, 7))}) for k in range(7)]
    with Spill(buckets=10, key="correlation_id", budget=2000) as spill:
        for f in frames:
            spill.add("s", f)
        spill.add("keyless", pl.DataFrame({"v": list(range(95))}))
        assert spill.flushes > 0  # past the budget, pieces went to disk
        folder = Path(spill._folder.name)
        assert any(folder.iterdir())
        groups = spill.groups(3000)
        assert sorted(b for g in groups for b in g) == list(range(10)) and len(groups) > 1
        back = [spill.take("s", g) for g in groups]
        spread = [spill.take("keyless", [b]).height for b in range(10)]
    assert not folder.exists()  # the temporary folder goes with the store
    for g, part in zip(groups, back, strict=True):
        assert set((part["correlation_id"] % 10).unique()) <= set(g)
    assert_frame_equal(pl.concat(back).sort("correlation_id", "v"), pl.concat(frames).sort("correlation_id", "v"))
    assert spread == [10] * 5 + [9] * 5  # rows without a key are spread evenly


def _allocator_setting(
    environ: dict, start: str = "from nsys_tools.cli.app import return_freed_pages; return_freed_pages()"
) -> str:
    """``_RJEM_MALLOC_CONF`` as Polars' allocator reads it, in a fresh process that starts as the
    command does (``start``) before it imports Polars."""
    code = f"import nsys_tools, os; {start}; import polars; print(os.environ.get('_RJEM_MALLOC_CONF'))"
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"} | environ
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.slow
def test_freed_pages_are_returned_soon_unless_the_user_says_otherwise():
    # jemalloc takes the last setting of each option: ours follows Polars' defaults.
    assert _allocator_setting({}).endswith("dirty_decay_ms:100,muzzy_decay_ms:0")
    assert _allocator_setting({"_RJEM_MALLOC_CONF": "dirty_decay_ms:2000"}).endswith(",dirty_decay_ms:2000")
    # Importing the library (and the command line's modules) changes no environment: only the command's start does.
    code = "import os; before = dict(os.environ); import nsys_tools, nsys_tools.cli; print(dict(os.environ) == before)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "True"


def test_a_piece_answers_only_the_reads_its_dry_run_recorded():
    """A piece holds the rows of the reads the dry run made; another read of a large table is an
    error (not a silent read of the whole table), and a lookup by key goes to the file."""
    from dataclasses import replace

    ex = open_export(SRC)
    plan = chunked.DryRun()
    events.kernels(replace(ex, planned=plan)).collect()
    assert {table for table, _, _ in plan.reads} == {S.KERNEL}
    with Spill(1, chunked.KEY, 2**20) as spill:
        for stream, rows in chunked._read_ahead(ex, plan.reads):
            spill.add(stream, rows)
        piece = replace(ex, planned=chunked.Piece(spill, plan.reads, (0,)))
        assert events.kernels(piece).collect().height == events.kernels(ex).collect().height
        with pytest.raises(RuntimeError, match="that the dry run did not"):
            events.api_calls(piece, launches_only=True).collect()
        ids = events.kernels(ex).collect()["correlation_id"].head(3)
        assert events.api_calls(piece, correlation_ids=ids).collect().height == 3  # 3 launches, one call each


@pytest.mark.parametrize("name", ["fixture-2025.3", "multi-gpu", "doubled-launch"])
def test_each_idle_slice_finds_the_blocking_calls_that_all_of_them_give(name):
    """``idle.near``: a slice's gaps, matched with only the calls near the slice, find the same
    calls as matched with all of them; slices in order of time, then one earlier again."""
    ops, calls = idle.split(idle.read(Trace(open_export(EXPORTS[name])), []), [])
    ops = ops.select("global_tid", probe_ns=pl.col("start_ns") - 1).collect().sort("probe_ns")
    first = idle.start([calls.collect()], [])
    calls, passed = first.calls, first.passed
    assert calls.height >= 9

    def found(probes, among):
        return probes.join_asof(among, left_on="probe_ns", right_on="call_start_ns", by="global_tid", check_sortedness=False)

    slices = ops.with_columns(s=pl.int_range(pl.len()) * 6 // pl.len()).partition_by("s", include_key=False)
    for probes in [*slices, slices[2]]:
        seen, passed = idle.near(calls, passed, probes["probe_ns"].min(), probes["probe_ns"].max())
        assert seen.height < calls.height
        assert_frame_equal(found(probes, seen), found(probes, calls))


def recorded_reads(monkeypatch) -> list[list]:
    """A list that gets the reads of every window ``chunked`` reads ahead, as it reads them."""
    made: list[list] = []
    real = chunked._read_ahead

    def recorded(ex, reads):
        made.append(list(reads))
        return real(ex, reads)

    monkeypatch.setattr(chunked, "_read_ahead", recorded)
    return made


@pytest.mark.parametrize("view, by", [("kernels", ()), ("gaps", ("stream",)), ("utilization", ("device",))])
def test_the_accounting_is_counted_in_the_pass_that_makes_the_table(tiny, monkeypatch, view, by):
    """The report's accounting comes from the pieces that make the view's table (no second pass
    over the export), and equals the counts of the export read whole; each large table is read
    once per filter, however many frames of a piece ask for its columns."""
    from nsys_tools.read import accounted

    made = recorded_reads(monkeypatch)
    monkeypatch.setattr(chunked, "accounting_counts", lambda ex: pytest.fail("a second pass over the export"))
    ex = open_export(FIXTURES / "doubled-launch" / "doubled-launch.sqlite")
    counted = []
    keys = views.by_columns(by)
    with_counts = chunked.view_partial(ex, view, keys, {}, counted)
    assert_frame_equal(views.finalize(view, with_counts.lazy(), keys).collect(), whole(ex, view, by, {}))
    assert len(made) == 1 and len(counted) == 1
    assert_frame_equal(counted[0], accounted.merge(accounted.counts(Trace(ex)).collect()))
    assert counted[0].filter(pl.col("kind") == "kernel")["ops"].item() == events.kernels(ex).collect().height
    filters = [(table, where) for table, _, where in made[0]]
    assert len(filters) == len(set(filters)) and S.RUNTIME in {t for t, _ in filters}


@pytest.mark.parametrize("view, by", [("kernels", ()), ("gaps", ("stream",)), ("utilization", ("device",))])
def test_an_export_that_fits_in_one_piece_is_read_whole_with_the_same_table_and_counts(monkeypatch, view, by):
    """With the shipped budgets the 2-GPU capture fits in one piece: no dry run, no bucket, no
    read ahead, no second pass for the accounting; its table and counts are those of the same
    export cut into many pieces (budgets of a few kB)."""
    from nsys_tools.read import accounted

    ex = open_export(EXPORTS["multi-gpu"])
    keys = views.by_columns(by)
    assert chunked.fits(ex)
    with monkeypatch.context() as m:
        for step in ("_read_ahead", "_passes", "accounting_counts"):
            m.setattr(chunked, step, lambda *a, step=step: pytest.fail(f"{step} on an export that fits in one piece"))
        counted = []
        read_whole = chunked.view_partial(ex, view, keys, {}, counted)
    table = views.finalize(view, read_whole.lazy(), keys).collect()
    for name, budget in (("WINDOW_ROWS", 100), ("BUCKET_BYTES", 4096), ("SPILL_BYTES", 1024), ("SLICE_BYTES", 1024)):
        monkeypatch.setattr(chunked, name, budget)
    assert not chunked.fits(ex)
    cut = []
    assert_frame_equal(table, views.finalize(view, chunked.view_partial(ex, view, keys, {}, cut).lazy(), keys).collect())
    assert len(counted) == len(cut) == 1 and counted[0]["ops"].sum() > 0
    assert_frame_equal(counted[0], cut[0])
    assert_frame_equal(counted[0], accounted.merge(accounted.counts(Trace(ex)).collect()))


def test_reads_of_one_table_and_filter_merge_unless_a_name_means_another_field():
    start = S.Field("start_ns", ("start",), "int")
    corr = S.Field("correlation_id", ("correlationId",), "int")
    other = S.Field("start_ns", ("end",), "int")
    reads = chunked.merged({}, (S.KERNEL, (start,), ""))
    reads = chunked.merged(reads, (S.KERNEL, (corr, start), ""))
    assert reads == {(S.KERNEL, (start, corr), ""): "read0"}
    reads = chunked.merged(reads, (S.KERNEL, (other,), ""))
    reads = chunked.merged(reads, (S.KERNEL, (start,), "x > 0"))
    assert list(reads.values()) == ["read0", "read1", "read2"]


SUMMARY_VIEWS = [
    ("utilization", ("device",), {}),
    ("idle", ("device",), {}),
    ("kernels", (), {"names": "short"}),
    ("ranges", (), {}),
    ("sync", (), {}),
    ("launch", (), {"names": "short"}),
    ("steps", (), {}),
]


@pytest.mark.parametrize("name", ["multi-gpu", "nccl-derived"])
@pytest.mark.slow
def test_views_that_read_the_same_tables_read_them_once(tiny, monkeypatch, name):
    """summary's views of one export: the five that read its operations and their launch calls
    share one read of the large tables (steps folded in time order, like idle), sync (every API
    call) has its own; each table is the view's own (read alone, in the whole trace), and the accounting comes from
    the first pass."""
    from nsys_tools.read import accounted

    made = recorded_reads(monkeypatch)
    ex = open_export(EXPORTS[name])
    counted = []
    asked = [(view, views.by_columns(by), options) for view, by, options in SUMMARY_VIEWS]
    together = chunked.view_partials(ex, asked, counted)
    assert len(made) == 2 and S.RUNTIME in {t for t, _, w in made[1] if not w}
    assert {t for t, _, _ in made[0]} >= {S.KERNEL, S.RUNTIME}
    assert_frame_equal(counted[0], accounted.merge(accounted.counts(Trace(ex)).collect()))
    for (view, by, options), part in zip(SUMMARY_VIEWS, together, strict=True):
        keys = views.by_columns(by)
        table = views.finalize(view, part.lazy(), keys).collect()
        assert_frame_equal(table, whole(ex, view, by, options))
        assert_frame_equal(table, in_pieces(ex, view, by, options))


@pytest.mark.parametrize("name", ["fixture-2025.3", "multi-gpu", "doubled-launch"])
def test_rules_that_read_every_kernel_read_it_in_pieces_with_the_table_of_the_whole(monkeypatch, name):
    """``launch_bound``'s counts per device, ``slow_calls``' calls (exact medians; every call above
    its median here) and the kernel that grew most in two steps (``slow_steps.top_kernel``) from
    pieces split by launch: the same as from the whole export."""
    from nsys_tools.rules import launch_bound, slow_calls, slow_steps
    from nsys_tools.rules.context import Run

    def tables() -> tuple[pl.DataFrame, pl.DataFrame, str | None]:
        run = Run([EXPORTS[name]])
        two = run.steps.filter(pl.col("phase") == "steady").sort("pid", "gpu_id", "step").head(2)
        top = slow_steps.top_kernel(run, two) if two.height else None  # the bundled fixture has no steps
        return launch_bound.short_kernels(run), slow_calls.rows(run, ratio=1.0), top

    expected = tables()
    assert expected[0]["kernels"].sum() > 0 and expected[1].height > 0 and (expected[2] or name == "fixture-2025.3")
    pieces = []
    split = chunked._split

    def counted(*args, **kwargs):
        for piece in split(*args, **kwargs):
            pieces.append(piece)
            yield piece

    monkeypatch.setattr(chunked, "_split", counted)
    for budget, size in (("WINDOW_ROWS", 100), ("BUCKET_BYTES", 4096), ("SPILL_BYTES", 1024)):
        monkeypatch.setattr(chunked, budget, size)
    got = tables()
    assert len(pieces) > 2
    assert_frame_equal(got[0].sort("pid", "gpu_id"), expected[0].sort("pid", "gpu_id"))
    assert_frame_equal(got[1], expected[1])
    assert got[2] == expected[2]
