"""Exports as they arrive from other people's machines (tests/fixtures/other-machines/make.py
builds them from a real 2025.3 export): an explicit .sqlite read as given, names resolved the
same way whatever extra columns a table carries, every kernel accounted for."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import nsys_tools
from nsys_tools.cli import app
from nsys_tools.read.accounted import accounting
from nsys_tools.read.export import StaleExport
from nsys_tools.read.inputs import expand_inputs
from nsys_tools.run.report import view_table

from .cli import CliRunner
from .conftest import FIXTURES
from .nsys_reference import assert_equal, assert_time_stats, paired, reference
from .test_inputs import OLD, fake_nsys
from .test_views import EXPORTS, REFERENCE

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("other_machines", FIXTURES / "other-machines" / "make.py")
make = sys.modules["other_machines"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)
TWIN = "layernorm-3impl-nsys2025.3"  # the export every case is made from, and its nsys stats CSVs
runner = CliRunner()


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


# 1. An explicit .sqlite is read as given.


@pytest.mark.slow
def test_report_reads_a_sqlite_beside_a_newer_report_with_nsys_hidden(tmp_path):
    """The user named the .sqlite: with no nsys on PATH it is read, with one note saying how to
    export the newer report instead; the report (not a capture) is never read."""
    export = make.stale_pair(tmp_path / "pair")
    bare = tmp_path / "bin"
    bare.mkdir()  # PATH holds no nsys
    env = {k: v for k, v in os.environ.items() if k != "NSYS"} | {"PATH": str(bare), "PYTHONPATH": str(REPO)}
    before = _hashes(export.parent)
    done = subprocess.run(
        [sys.executable, "-m", "nsys_tools", "report", str(export), "-f", "csv"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == runner.invoke(app, ["report", str(EXPORTS[TWIN]), "-f", "csv"]).stdout
    notes = done.stderr.strip().splitlines()
    assert len(notes) == 1 and notes[0].startswith(f"Note: {export}: read as given, though run.nsys-rep beside it is newer")
    assert "--reexport" in notes[0] and "Error" not in done.stderr
    assert _hashes(export.parent) == before  # nothing exported, nothing written beside it
    # The library says it as a warning; the folder holding both counts one export, the .sqlite.
    with pytest.warns(StaleExport, match="read as given"):
        nsys_tools.open(export)
    assert expand_inputs([export.parent]) == [export]
    assert expand_inputs([export.parent, export, export.with_suffix(".nsys-rep")]) == [export]


def test_reexport_and_a_named_report_go_through_nsys(tmp_path, monkeypatch):
    export = make.stale_pair(tmp_path)
    monkeypatch.setenv("NSYS", str(fake_nsys(tmp_path, source=OLD)))
    assert expand_inputs([export], reexport=True) == [export.with_suffix(".nsys-rep")]
    assert expand_inputs([tmp_path], reexport=True) == [export.with_suffix(".nsys-rep")]
    res = runner.invoke(app, ["report", str(export), "-f", "csv", "--reexport"])
    assert res.exit_code == 0 and "Note:" not in res.stderr, res.stderr
    assert res.stdout == runner.invoke(app, ["report", str(OLD), "-f", "csv"]).stdout  # what the stand-in nsys wrote
    assert len((tmp_path / "nsys.log").read_text().splitlines()) == 1
    runner.invoke(app, ["report", str(export.with_suffix(".nsys-rep")), "-f", "csv"])  # now current: reused
    assert len((tmp_path / "nsys.log").read_text().splitlines()) == 1


def test_compare_reads_the_sqlite_as_given_with_the_note(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NSYS", raising=False)
    export = make.stale_pair(tmp_path / "pair")
    res = runner.invoke(app, ["compare", str(EXPORTS[TWIN]), str(export), "--session-noise", "1", "-f", "csv"])
    assert res.exit_code == 0, res.stderr
    assert f"Note: {export}: read as given" in res.stderr


def test_a_wal_export_is_read_and_left_byte_for_byte(tmp_path):
    """An export in WAL mode with rows still in its -wal: read through read-only connections,
    which never checkpoint the WAL into the file."""
    spec = importlib.util.spec_from_file_location("bad_input_corpus", FIXTURES / "bad-input" / "corpus.py")
    corpus = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bad_input_corpus", corpus)
    spec.loader.exec_module(corpus)
    (path,) = corpus.CASES["wal-pending"].build(tmp_path)
    before = _hashes(tmp_path)
    assert set(before) == {"wal.sqlite", "wal.sqlite-wal"}
    for view in ("kernels", "api"):
        res = runner.invoke(app, ["report", path, "--view", view, "-f", "csv"])
        assert res.exit_code == 0, res.stderr
    with nsys_tools.open(path) as trace:  # the row only the -wal holds is read
        from nsys_tools.read.frames import strings

        assert strings(trace.export, [990001])["value"].to_list() == ["written to the WAL"]
    after = _hashes(tmp_path)
    assert {k: after[k] for k in before} == before  # the db and its -wal unchanged (a -shm may appear)


# 2. Names resolve the same way in every table of every schema.


@pytest.mark.parametrize("name", [*(n for n in EXPORTS if n not in REFERENCE), "null-name"])
def test_api_view_equals_cuda_api_sum_and_leaks_no_suffix(name, tmp_path):
    path = make.null_name(tmp_path) if name == "null-name" else EXPORTS[name]
    twin = TWIN if name == "null-name" else name
    both = paired(view_table([path], "api").rename({"api": "Name"}), reference(twin, "cuda_api_sum"), "Name", "cuda_api_sum")
    assert_time_stats(both, "cuda_api_sum", instances="Num Calls")
    if name == "null-name":  # the kernel table's empty name column: resolved names win there too
        kernels = view_table([path], "kernels").group_by("kernel").agg(pl.col("instances", "total_ns").sum())
        ref = reference(twin, "cuda_gpu_kern_sum")
        pairs = paired(kernels.rename({"kernel": "Name"}), ref, "Name", "cuda_gpu_kern_sum")
        assert_equal(pairs, {"instances": "Instances", "total_ns": "Total Time (ns)"}, "cuda_gpu_kern_sum")
    with nsys_tools.open(path) as trace:
        for frame in (trace.api(), trace.kernels(), trace.ranges(), trace.gpu_ops()):
            columns = frame.collect_schema().names()
            assert not [c for c in columns if c.endswith(("_right", "_any"))], columns
        assert trace.api().select(pl.col("name").is_null().sum()).collect().item() == 0


# 5. Every kernel is accounted for.


def test_kernels_without_a_launch_row_are_counted_and_said(tmp_path):
    export = make.unlaunched(tmp_path)
    lost, total = map(int, (tmp_path / "unlaunched.txt").read_text().split())
    assert 0 < lost < total
    # Every kernel is still in the table: summed over ranges, the kernel view is nsys's
    # cuda_gpu_kern_sum of the export it was made from.
    ours = view_table([export], "kernels").group_by("kernel").agg(pl.col("instances", "total_ns").sum())
    both = paired(ours.rename({"kernel": "Name"}), reference(TWIN, "cuda_gpu_kern_sum"), "Name", "cuda_gpu_kern_sum")
    assert_equal(both, {"instances": "Instances", "total_ns": "Total Time (ns)"}, "cuda_gpu_kern_sum")
    with nsys_tools.open(export) as trace:
        counted = accounting(trace)
    assert counted.filter(pl.col("kind") == "kernel").select("ops", "unlaunched").row(0) == (total, lost)
    res = runner.invoke(app, ["report", str(export), "-f", "csv"])
    notes = [line for line in res.stderr.splitlines() if line.startswith("Note:")]
    assert res.exit_code == 0 and len(notes) == 1, res.stderr
    assert f"{lost} of {total} kernels" in notes[0] and "counted under the empty range" in notes[0]
    assert "the trace looks cut in time: its GPU operations begin" in notes[0]
    # The real export it came from: every kernel has its launch row, and nothing is said.
    assert "Note:" not in runner.invoke(app, ["report", str(EXPORTS[TWIN]), "-f", "csv"]).stderr


def test_operations_without_a_time_are_in_no_figure_and_counted(tmp_path):
    """Kernels, a memcpy and a memset with a NULL start or end, the first rows of their tables
    among them (a reader that types a column by its first value would fail): every view, through the
    frames and a piece at a time, equals the export with those rows deleted, and the report's
    one note says how many there are, per kind, as SQLite counted them."""
    from nsys_tools import views
    from nsys_tools.read import accounted, badrows
    from nsys_tools.read import frames as events
    from nsys_tools.read.export import open_export
    from nsys_tools.read.trace import Trace
    from nsys_tools.run import chunked

    ops = (make.KERNEL, make.MEMCPY, make.MEMSET)

    export = make.untimed(tmp_path)
    timed = tmp_path / "timed.sqlite"
    counts = dict(line.split() for line in (tmp_path / "untimed.txt").read_text().splitlines())
    kernels, copies, sets = (int(counts[f"CUPTI_ACTIVITY_KIND_{k}"]) for k in ("KERNEL", "MEMCPY", "MEMSET"))
    assert (kernels, copies, sets) == (7, 1, 1)
    for name in views.names():
        for by in ((), ("process",)):
            whole = [views.table(Trace(open_export(p)), name, by) for p in (export, timed)]
            assert whole[0].equals(whole[1]), (name, by)
            pieces = [view_table([p], name, by=by) for p in (export, timed)]
            assert pieces[0].equals(pieces[1]), (name, by)
    with nsys_tools.open(export) as trace, nsys_tools.open(timed) as kept:
        order = ["kind", "global_pid", "correlation_id", "start_ns"]
        assert trace.gpu_ops().collect().sort(order).equals(kept.gpu_ops().collect().sort(order))
        counted = accounting(trace)
    assert dict(counted.select("kind", "untimed").iter_rows()) == {"kernel": kernels, "memcpy": copies, "memset": sets}
    # Only where the schema lets a time be NULL is it filtered on: a real export (nsys declares
    # them NOT NULL) is read without, whole and a piece at a time; operations that end before they
    # start are left out and counted in both (read.badrows).
    nullable = {f"{events.TIMED} AND {badrows.KEPT}", events.UNTIMED, badrows.BACKWARDS}
    for path, filters in ((export, nullable), (timed, {badrows.KEPT, badrows.BACKWARDS})):
        for piece in chunked._pieces(open_export(path), accounted.counts):
            assert {where for table, _, where in piece.export.planned.streams if table in ops} == filters
    res = runner.invoke(app, ["report", str(export), "-f", "csv"])
    notes = [line for line in res.stderr.splitlines() if line.startswith("Note:")]
    assert res.exit_code == 0 and len(notes) == 1, res.stderr
    assert f"{kernels} kernels, 1 memcpy and 1 memset have no start or end time and are not counted" in notes[0]
    assert res.stdout == runner.invoke(app, ["report", str(timed), "-f", "csv"]).stdout


def test_api_calls_without_an_end_are_read(tmp_path):
    """Runtime calls whose end is NULL in the table's first rows, so their computed duration
    too: the frames, the timeline and the Parquet export read them; only those calls lack a
    duration."""
    export = make.untimed(tmp_path, ((make.RUNTIME, "end", (1, 2, 3)),))
    with nsys_tools.open(export) as trace:
        calls = trace.api(columns=["start_ns", "end_ns", "duration_ns"]).collect()
    with nsys_tools.open(tmp_path / "timed.sqlite") as trace:
        assert calls.height == trace.api().collect().height + 3
    assert calls.select(pl.col("end_ns", "duration_ns").null_count()).row(0) == (3, 3)
    for args in (["timeline", str(export), "-o", str(tmp_path / "t.json")], ["export", str(export), "--to", str(tmp_path / "p")]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and "Error" not in res.stderr, res.stderr


def test_text_that_is_not_utf8_is_read_with_its_other_bytes(tmp_path):
    """A kernel name holding bytes that are not UTF-8 (as exports written on machines with
    other locales hold): the report reads it, the bad bytes as U+FFFD, every number as in the
    unchanged export (made from the real two-GPU export in the test)."""
    import shutil
    import sqlite3

    src = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
    bad = tmp_path / "latin1.sqlite"
    shutil.copy(src, bad)
    with sqlite3.connect(bad) as con:
        sid, name = con.execute(
            "SELECT s.id, s.value FROM StringIds s JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.demangledName = s.id LIMIT 1"
        ).fetchone()
        latin1 = (name.encode() + "été".encode("latin-1")[:3]).hex()  # é as Latin-1: 0xE9, not UTF-8
        con.execute(f"UPDATE StringIds SET value = CAST(x'{latin1}' AS TEXT) WHERE id = ?", (sid,))
    want = view_table([src], "kernels").with_columns(pl.col("kernel").replace({name: name + "\ufffdt\ufffd"}))
    got = view_table([bad], "kernels")
    assert (got["kernel"] == name + "\ufffdt\ufffd").sum() > 0
    assert got.sort("range", "kernel").equals(want.sort("range", "kernel"))
