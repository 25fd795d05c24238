"""Opening exports: read-only, version differences, and every kind of bad input."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest
from polars.testing import assert_frame_equal

from nsys_tools.errors import BadExport, MissingTable, NsysNotFound, NsysToolsError
from nsys_tools.read import frames as events
from nsys_tools.read.export import export_report, find_nsys, open_export
from nsys_tools.run.report import kernel_summary

from .conftest import FIXTURES

NEW = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
OLD = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite"
BAD = FIXTURES / "bad-input"


def test_opens_read_only(fixture_copy):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    before = path.read_bytes()
    ex = open_export(path)
    with ex.connect() as con, pytest.raises(sqlite3.OperationalError, match="readonly"):
        con.execute("DELETE FROM StringIds")
    assert path.read_bytes() == before


@pytest.mark.parametrize("path, table", [(NEW, "META_DATA_EXPORT"), (OLD, "META_DATA_EXPORT")])
def test_detects_tables(path, table):
    ex = open_export(path)
    assert ex.first(("META_DATA_EXPORT", "EXPORT_META_DATA")) == table
    assert ex.has("CUPTI_ACTIVITY_KIND_KERNEL") and ex.has("NVTX_EVENTS")
    assert "textId" in ex.tables["NVTX_EVENTS"]


def test_missing_columns_read_as_nulls(fixture_copy):
    """An export whose kernel table lacks columns (as older nsys wrote it) still reads."""
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2024.2.sqlite")
    with sqlite3.connect(path) as con:
        con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN localMemoryPerThread")
        con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN globalPid")
        con.execute("DROP TABLE TARGET_INFO_SESSION_START_TIME")
    con.close()
    ex = open_export(path)
    k = events.kernels(ex).collect()
    assert k.height == 381 and k["local_bytes_per_thread"].null_count() == 381
    assert "start_utc_ns" not in events.session(ex)
    # Without the process on each kernel, launches match on the correlation id alone.
    assert_frame_equal(kernel_summary([path]), kernel_summary([OLD]), rel_tol=1e-12)


def test_gpu_table_keyed_by_device_id(fixture_copy):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    with sqlite3.connect(path) as con:
        con.execute("ALTER TABLE TARGET_INFO_GPU RENAME COLUMN id TO deviceId")
    con.close()
    assert events.gpus(open_export(path))["gpu_id"].to_list() == [0]


def test_missing_gpu_table_is_not_an_error(fixture_copy):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    with sqlite3.connect(path) as con:
        con.execute("DROP TABLE TARGET_INFO_GPU")
    con.close()
    assert events.gpus(open_export(path)).is_empty()


def test_missing_path():
    with pytest.raises(BadExport, match="nope.sqlite: no such file"):
        open_export(FIXTURES / "nope.sqlite")


def test_not_sqlite(tmp_path):
    path = tmp_path / "report.sqlite"
    path.write_bytes((FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.nsys-stats-kern-nvtx.csv").read_bytes())
    with pytest.raises(BadExport, match="report.sqlite: not an SQLite file"):
        open_export(path)


def test_truncated(tmp_path):
    path = tmp_path / "cut.sqlite"
    size = NEW.stat().st_size
    path.write_bytes(NEW.read_bytes()[: size // 2])
    with pytest.raises(BadExport, match=rf"cut.sqlite: truncated SQLite file \({size // 2} of {size} bytes\)"):
        open_export(path)


def test_zero_bytes(tmp_path):
    path = tmp_path / "zero.sqlite"
    path.touch()
    with pytest.raises(BadExport, match="empty file"):
        open_export(path)


def test_sqlite_but_not_nsys(tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (x)")
    con.close()
    with pytest.raises(BadExport, match="not an Nsight Systems export"):
        open_export(path)


def test_without_cuda_trace():
    ex = open_export(BAD / "no-cuda-trace.sqlite")
    with pytest.raises(MissingTable, match="no CUPTI_ACTIVITY_KIND_KERNEL table; was it captured with --trace=cuda"):
        events.kernels(ex)


def test_empty_export():
    ex = open_export(BAD / "empty.sqlite")
    with pytest.raises(MissingTable, match="CUDA was traced but no kernel ran"):
        events.kernels(ex)


def test_nsys_rep_needs_nsys(tmp_path, monkeypatch):
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"not exported yet")
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NsysNotFound, match=r"run.nsys-rep: nsys .* not found; pass --nsys PATH, set \$NSYS"):
        open_export(rep)


def test_bad_nsys_option_is_named(tmp_path):
    with pytest.raises(NsysNotFound, match=r"is not an executable nsys \(from --nsys\)"):
        find_nsys(tmp_path / "nsys")


def test_nsys_rep_export_is_reused_while_newer(tmp_path, monkeypatch):
    """A sibling .sqlite newer than the report is used as is; nsys is not even looked up."""
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"report")
    sibling = tmp_path / "run.sqlite"
    sibling.write_bytes(NEW.read_bytes())
    os.utime(rep, (1, 1))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NSYS", raising=False)
    assert export_report(rep) == sibling
    assert open_export(rep).path == sibling


def test_nsys_rep_exported_through_nsys(tmp_path, monkeypatch):
    """With no sibling export, nsys export runs (here a script standing in for nsys that copies
    a real export to the --output path), into a temporary name renamed into place."""
    fake = tmp_path / "nsys"
    fake.write_text(f'#!/bin/sh\nwhile [ "$1" != "--output" ]; do shift; done\ncp "{NEW}" "$2"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"report")
    monkeypatch.setenv("NSYS", str(fake))
    ex = open_export(rep)
    assert ex.path == tmp_path / "run.sqlite" and events.kernels(ex).collect().height == 381
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nsys", "run.nsys-rep", "run.sqlite"]


def _script(path, body: str):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.mark.slow
def test_nsys_that_hangs_times_out(tmp_path, monkeypatch):
    monkeypatch.setenv("NSYS", str(_script(tmp_path / "nsys", "exec sleep 30\n")))
    monkeypatch.setenv("NSYS_TOOLS_NSYS_TIMEOUT", "1")
    (tmp_path / "run.nsys-rep").write_bytes(b"report")
    with pytest.raises(NsysToolsError, match=r"nsys export did not finish within 1 s; set NSYS_TOOLS_NSYS_TIMEOUT"):
        open_export(tmp_path / "run.nsys-rep")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nsys", "run.nsys-rep"]


def test_nsys_version_mismatch_is_passed_through(tmp_path, monkeypatch):
    line = "The report was created by a newer version of Nsight Systems (2025.3.1) than this one (2024.2.3)."
    monkeypatch.setenv(
        "NSYS", str(_script(tmp_path / "nsys", f'echo "Importing..."\necho "{line}" >&2\necho "Failed" >&2\nexit 1\n'))
    )
    (tmp_path / "run.nsys-rep").write_bytes(b"report")
    with pytest.raises(BadExport) as err:
        open_export(tmp_path / "run.nsys-rep")
    assert line in str(err.value) and "the Nsight Systems version that wrote it" in err.value.hint
    assert "complete .nsys-rep" not in str(err.value)


def test_relative_nsys_option(tmp_path, monkeypatch):
    from nsys_tools.cli import app

    from .cli import CliRunner

    _script(tmp_path / "nsys", f'while [ "$1" != "--output" ]; do shift; done\ncp "{NEW}" "$2"\n')
    (tmp_path / "run.nsys-rep").write_bytes(b"report")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nsys there: only ./nsys can be the one
    res = CliRunner().invoke(app, ["report", "run.nsys-rep", "--nsys", "./nsys", "-f", "csv"])
    assert res.exit_code == 0, res.stderr
    assert find_nsys("./nsys") == tmp_path / "nsys"


def test_report_in_a_read_only_folder(tmp_path, monkeypatch):
    """Where the export cannot be written beside the report, the error says so and what to do.
    (Tests run as root, which writes anywhere: the folder's refusal is simulated.)"""
    monkeypatch.setenv("NSYS", str(_script(tmp_path / "nsys", "exit 0\n")))
    (tmp_path / "run.nsys-rep").write_bytes(b"report")
    real_open = os.open

    def read_only_folder(path, flags, *args):
        if str(path).startswith(str(tmp_path)) and flags & os.O_CREAT:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", read_only_folder)
    with pytest.raises(
        BadExport, match=r"its export cannot be written beside it \(Permission denied\); copy it to a writable folder"
    ):
        open_export(tmp_path / "run.nsys-rep")


@pytest.mark.slow
def test_locked_export_is_named_as_locked(fixture_copy):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    holder = sqlite3.connect(path)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(BadExport, match="is locked by another program") as err:
            kernel_summary([path])
        assert "truncated" not in str(err.value)
    finally:
        holder.close()
