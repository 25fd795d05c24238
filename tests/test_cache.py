"""The Parquet cache in the user's cache folder (read.cache): used, invalidated when the export
changes, skipped for small exports and where it cannot be written, never served for a replaced
file; nothing written beside the export, and a folder or entry someone else could have planted
is never used or followed."""

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
def cached(monkeypatch, tmp_path):
    """Every export cached, in a cache folder of this test; the folder's path."""
    monkeypatch.setenv("NSYS_TOOLS_CACHE_MIN_BYTES", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "nsys-tools"


def listing(folder):
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.name != "xdg")


def test_cache_is_used_and_invalidated(tmp_path, cached, monkeypatch):
    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    before = listing(tmp_path)
    first = kernel_summary([path])
    assert listing(tmp_path) == before  # nothing beside the export
    # The report keeps its partial table; the pieces it was read in are not kept (bounded memory).
    assert len(list(cached.glob("*.parquet"))) == 1
    assert cached.stat().st_mode & 0o777 == 0o700 and all(e.stat().st_mode & 0o777 == 0o600 for e in cached.iterdir())

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
    assert len(list(cached.glob("*.parquet"))) == 1  # the earlier content's entry is gone


def test_small_exports_are_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    kernel_summary([path])
    assert not (tmp_path / "xdg").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["run.sqlite"]
    assert path.stat().st_size < cache.MIN_BYTES


def test_unwritable_cache_means_no_cache(tmp_path, cached):
    """Where the cache folder cannot be made (here a file already has its name), reports still work."""
    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    cached.parent.mkdir()
    cached.write_text("in the way")
    assert kernel_summary([path]).height == 14
    assert cached.read_text() == "in the way"


def _forged(cached, path, real):
    """Run once so the entry exists; then replace its content by another export's answer."""
    kernel_summary([path])
    [entry] = cached.glob("*.parquet")
    kernel_summary([real])  # another export's table, to forge with
    forged = next(e for e in cached.glob("*.parquet") if e != entry)
    return entry, forged


@pytest.mark.parametrize("how", ["other mode", "other owner", "a link"])
def test_a_cache_folder_someone_else_could_write_is_not_used(tmp_path, cached, how, monkeypatch):
    """A forged entry (the right name, another export's table) in a folder this user does not
    own alone is never read: the report is computed from the export."""
    path, other = tmp_path / "run.sqlite", tmp_path / "other.sqlite"
    shutil.copyfile(SRC, path)
    shutil.copyfile(FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite", other)
    first = kernel_summary([path])
    entry, forged = _forged(cached, path, other)
    shutil.copyfile(forged, entry)
    assert kernel_summary([path]).height != first.height  # the forged entry would be used as it is...
    if how == "other mode":  # others may write into it
        cached.chmod(0o773)
    elif how == "other owner":  # as another user sees this user's folder (no root needed to change owners)
        monkeypatch.setattr(os, "geteuid", lambda: os.stat(cached).st_uid + 4242)
    else:
        real = tmp_path / "elsewhere"
        cached.rename(real)
        cached.symlink_to(real)
    assert_frame_equal(kernel_summary([path]), first)  # ...but not from such a folder
    assert not any(p.name.endswith(".parquet") for p in tmp_path.iterdir())


def test_a_cache_folder_only_this_user_can_write_is_closed_to_0700(tmp_path, cached):
    """Another tool (Inductor, under ~/.cache/nsys-tools/inductor) may make the folder 0755 first."""
    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    cached.mkdir(parents=True)
    cached.chmod(0o755)
    kernel_summary([path])
    assert cached.stat().st_mode & 0o777 == 0o700 and len(cache.entries(path)) == 1


def test_links_planted_in_the_cache_are_not_followed(tmp_path, cached):
    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    first = kernel_summary([path])
    [entry] = cached.glob("*.parquet")
    entry.unlink()
    entry.symlink_to(tmp_path / "planted" / "made.parquet")  # dangling: a report must not create it
    assert_frame_equal(kernel_summary([path]), first)
    assert not (tmp_path / "planted").exists()
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"keep")
    entry.unlink(missing_ok=True)
    entry.symlink_to(victim)
    assert_frame_equal(kernel_summary([path]), first)
    assert victim.read_bytes() == b"keep" and entry.is_file() and not entry.is_symlink()


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
    assert not list(cached.glob("*.parquet"))  # discarded, not kept under any stamp
    assert cache.load(ex, "query") is None
    assert cache.memo(ex, "query", lambda: pl.DataFrame({"new": [2]}))["new"].to_list() == [2]
    assert cache.load(ex, "query")["new"].to_list() == [2]


def test_damaged_cache_entry_is_computed_again(tmp_path, cached):
    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    first = kernel_summary([path])
    for entry in cached.glob("*.parquet"):
        entry.write_bytes(b"PAR1 garbage")
    assert_frame_equal(kernel_summary([path]), first)


def test_entries_follow_the_real_file_and_are_forgotten(tmp_path, cached):
    real = tmp_path / "data" / "run.sqlite"
    real.parent.mkdir()
    shutil.copyfile(SRC, real)
    link = tmp_path / "link.sqlite"
    link.symlink_to(real)
    first = kernel_summary([link])
    assert len(list(cached.glob("*.parquet"))) == 1
    assert_frame_equal(kernel_summary([real]), first)
    assert len(list(cached.glob("*.parquet"))) == 1  # one file, one entry, by either name
    assert cache.forget(link) == 1 and not list(cached.glob("*.parquet"))


def test_scrub_forgets_the_files_entries(tmp_path, cached):
    from nsys_tools.cli import app

    from .cli import CliRunner

    path = tmp_path / "run.sqlite"
    shutil.copyfile(SRC, path)
    kernel_summary([path])
    assert list(cached.glob("*.parquet"))
    assert CliRunner().invoke(app, ["scrub", str(path)]).exit_code == 0
    assert not cache.entries(path)
