"""The Parquet cache beside an export (read.cache): used, invalidated when the export changes, skipped for
small exports and where it cannot be written, never served for a replaced file."""

from __future__ import annotations

import os
import shutil
import sqlite3

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from nsys_tools.read import cache
from nsys_tools.run.report import kernel_summary

from .conftest import FIXTURES

SRC = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"


@pytest.fixture
def cached(monkeypatch):
    monkeypatch.setenv("NSYS_TOOLS_CACHE_MIN_BYTES", "0")


def test_cache_is_used_and_invalidated(tmp_path, cached, monkeypatch):
    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    first = kernel_summary([path])
    folder = tmp_path / ".run.sqlite.nsys-tools"
    # The report keeps its partial table; the pieces it was read in are not kept (bounded memory).
    assert (folder / "meta.json").exists() and len(list(folder.glob("*.parquet"))) == 1

    def no_sqlite(*a, **k):
        raise AssertionError("the export was read again")

    monkeypatch.setattr(pl, "read_database_uri", no_sqlite)
    assert_frame_equal(kernel_summary([path]), first)
    monkeypatch.undo()
    monkeypatch.setenv("NSYS_TOOLS_CACHE_MIN_BYTES", "0")

    with sqlite3.connect(path) as con:  # the export changes: the cache must not answer for it
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + 1000")
    con.close()
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    again = kernel_summary([path])
    assert (again["median_ns"] == first["median_ns"] + 1000).all()


def test_small_exports_are_not_cached(tmp_path):
    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    kernel_summary([path])
    assert not (tmp_path / ".run.sqlite.nsys-tools").exists()
    assert path.stat().st_size < cache.MIN_BYTES


def test_unwritable_cache_means_no_cache(tmp_path, cached):
    """Where the cache folder cannot be made (here a file already has its name), reports still work."""
    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    (tmp_path / ".run.sqlite.nsys-tools").write_text("in the way")
    assert kernel_summary([path]).height == 14
    assert (tmp_path / ".run.sqlite.nsys-tools").read_text() == "in the way"


def test_same_size_replacement_with_mtime_restored_is_not_served(tmp_path, cached):
    """Replace an export by another of the same size and put its old modification time back:
    the fingerprint (content hash, inode, status-change time) still tells them apart."""
    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    first = kernel_summary([path])
    st = path.stat()
    other = tmp_path / "other.sqlite"
    shutil.copyfile(SRC, other)
    with sqlite3.connect(other) as con:
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + 1000")
    con.close()
    assert other.stat().st_size == st.st_size
    other.replace(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (kernel_summary([path])["median_ns"] == first["median_ns"] + 1000).all()


def test_fingerprint_sees_content(tmp_path):
    """Two files of one size, one byte apart in a sampled page, have different fingerprints."""
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    data = bytearray(SRC.read_bytes())
    a.write_bytes(data)
    data[len(data) // 16] ^= 1
    b.write_bytes(data)
    fa, fb = cache.fingerprint(a), cache.fingerprint(b)
    assert fa["size"] == fb["size"] and fa["sha256"] != fb["sha256"]


def test_entry_computed_while_the_export_changed_is_discarded(tmp_path, cached):
    """A result computed while the export was replaced is returned, but never stored: stamped
    with the new file it would answer for it for good."""
    from nsys_tools.read.export import open_export

    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    ex = open_export(path)

    def compute_while_replaced():
        fresh = tmp_path / "fresh.sqlite"
        shutil.copyfile(SRC, fresh)
        with sqlite3.connect(fresh) as con:
            con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + 1000")
        con.close()
        fresh.replace(path)
        return pl.DataFrame({"old": [1]})

    assert cache.memo(ex, "query", compute_while_replaced)["old"].to_list() == [1]
    assert not list(cache.folder_of(path).glob("*.parquet"))  # discarded, not kept under any stamp
    assert cache.load(ex, "query") is None
    assert cache.memo(ex, "query", lambda: pl.DataFrame({"new": [2]}))["new"].to_list() == [2]
    assert cache.load(ex, "query")["new"].to_list() == [2]


def test_damaged_cache_entry_is_computed_again(tmp_path, cached):
    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    first = kernel_summary([path])
    for entry in (tmp_path / ".run.sqlite.nsys-tools").glob("*.parquet"):
        entry.write_bytes(b"PAR1 garbage")
    assert_frame_equal(kernel_summary([path]), first)


def test_cache_sits_beside_the_real_file(tmp_path, cached):
    real = tmp_path / "data" / "run.sqlite"
    real.parent.mkdir()
    shutil.copyfile(SRC, real)
    link = tmp_path / "link.sqlite"
    link.symlink_to(real)
    kernel_summary([link])
    assert (real.parent / ".run.sqlite.nsys-tools").is_dir() and not (tmp_path / ".link.sqlite.nsys-tools").exists()
    assert cache.clear(link) and not (real.parent / ".run.sqlite.nsys-tools").exists()
