"""The ledger (study.ledger): sessions, bands, history and rejected variants; checked before use, never a failed
capture as a session, the gb_per_s rename."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from nsys_tools.errors import CaptureError
from nsys_tools.study import folder as sweep
from nsys_tools.study import ledger

from .cli import CliRunner
from .conftest import LOADED, MATMUL_BF16, QUIET, SWEEPS

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _app():
    from nsys_tools.cli import app

    return app


def _bad_ledgers(tmp_path) -> dict[str, tuple[Path, str]]:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes((SWEEPS / "20261129-183449-quiet" / "manifest.json").read_bytes())
    foreign = tmp_path / "foreign.sqlite"
    shutil.copyfile(QUIET / "4096x768.sqlite", foreign)  # an export, not a ledger
    odd = tmp_path / "odd.sqlite"
    with sqlite3.connect(odd) as con:
        con.execute("CREATE TABLE sessions (id TEXT)")  # a ledger's table name, not its columns
    con.close()
    damaged = tmp_path / "damaged.sqlite"
    data = bytearray((ROOT / "reports" / "ledger.sqlite").read_bytes())
    data[100:4096] = bytes(3996)
    damaged.write_bytes(bytes(data))
    return {
        "empty": (empty, "is an empty file, not a ledger"),
        "garbage": (garbage, "is not a ledger (not an SQLite file)"),
        "foreign": (foreign, "is not a ledger (no sessions, stats or rejected table)"),
        "odd": (odd, "is not a ledger this version reads (sessions lacks created_utc, gpu, quiet)"),
        "damaged": (damaged, "damaged.sqlite: "),
        "folder": (tmp_path, "is a folder, not a ledger"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["empty", "garbage", "foreign", "odd", "damaged", "folder"])
def test_every_ledger_command_refuses_a_bad_ledger(tmp_path, kind):
    path, message = _bad_ledgers(tmp_path)[kind]
    before = path.read_bytes() if path.is_file() else None
    commands = [
        ["ledger", "list", "--ledger", str(path)],
        ["ledger", "add", str(QUIET), "--ledger", str(path)],
        ["ledger", "reject", "v", "--metric", "m", "--why", "w", "--ledger", str(path)],
        ["history", "--shape", "4096x768", "--impl", "ours", "--ledger", str(path)],
        ["report", str(QUIET), "--issue", "--ledger", str(path), "--charts", str(tmp_path / "charts")],
    ]
    for args in commands:
        res = runner.invoke(_app(), args)
        assert res.exit_code == 1, (args, res.stderr)
        errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and message in errors[0] and "Traceback" not in res.stderr, (args, res.stderr)
    if before is not None:
        assert path.read_bytes() == before


@pytest.mark.slow
def test_a_failed_capture_is_not_a_session(tmp_path):
    folder = tmp_path / "failed"
    folder.mkdir()
    manifest = json.loads((QUIET / "manifest.json").read_text())
    manifest["shapes"] = {s: {"status": "failed", "error": "CaptureError: profiling failed"} for s in manifest["shapes"]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    book = tmp_path / "ledger.sqlite"
    with pytest.raises(CaptureError, match="no shape of this sweep completed"):
        ledger.add(sweep.load(folder), book)
    assert not book.exists()
    res = runner.invoke(_app(), ["ledger", "add", str(folder), "--ledger", str(book)])
    assert res.exit_code == 1 and "not added to the ledger" in res.stderr
    ledger.add(sweep.load(QUIET), book)
    assert runner.invoke(_app(), ["ledger", "add", str(folder), "--ledger", str(book)]).exit_code == 1
    assert ledger.sessions(book)["id"].to_list() == [QUIET.name]
    # A ledger that holds a session without statistics (as older versions wrote): history and
    # the issue comment still work.
    with sqlite3.connect(book) as con:
        con.execute("INSERT INTO sessions (id, created_utc, gpu, quiet) VALUES ('empty', '2026-01-01', 'NVIDIA H200', 1)")
    con.close()
    assert runner.invoke(_app(), ["history", "--shape", "4096x768", "--impl", "ours", "--ledger", str(book)]).exit_code == 0
    res = runner.invoke(_app(), ["report", str(QUIET), "--issue", "--ledger", str(book), "--charts", str(tmp_path / "c")])
    assert res.exit_code == 0, res.stderr


def test_history_of_an_implementation_against_itself_is_a_usage_error():
    res = runner.invoke(_app(), ["history", "--shape", "4096x768", "--impl", "triton", "--vs", "triton"])
    assert res.exit_code == 2 and "compare two implementations" in res.stderr


@pytest.mark.slow
def test_old_ledgers_are_read_and_migrated(tmp_path):
    """A ledger whose bandwidth column is still gbps reads as gb_per_s, and is renamed on write."""
    book = tmp_path / "old.sqlite"
    ledger.add(sweep.load(QUIET), book)
    with sqlite3.connect(book) as con:
        con.execute('ALTER TABLE stats RENAME COLUMN "gb_per_s" TO "gbps"')
    con.close()
    assert "gb_per_s" in ledger.stats(book).columns and "gbps" not in ledger.stats(book).columns
    ledger.reject(book, "v", "m", "w")  # a write that does not touch stats leaves it
    ledger.add(sweep.load(SWEEPS / "20261129-183620-quiet"), book)
    with sqlite3.connect(book) as con:
        cols = [r[1] for r in con.execute("PRAGMA table_info(stats)")]
    con.close()
    assert "gb_per_s" in cols and "gbps" not in cols
    assert ledger.stats(book)["gb_per_s"].null_count() == 0
    assert ledger.stats(ROOT / "reports" / "ledger.sqlite")["gb_per_s"].min() > 0  # the committed ledger, migrated


def test_ledger_location(tmp_path, monkeypatch):
    assert ledger.default_path(QUIET) == ROOT / "reports" / "ledger.sqlite"
    assert ledger.default_path(tmp_path / "run1") == ledger.DEFAULT_PATH
    monkeypatch.setenv("NSYS_TOOLS_LEDGER", str(tmp_path / "mine.sqlite"))
    assert ledger.default_path(QUIET) == tmp_path / "mine.sqlite"


@pytest.mark.slow
def test_issue_from_elsewhere_writes_only_where_told(tmp_path, monkeypatch):
    """Run from another folder: the ledger beside the sweeps is read, the charts go to
    charts/<id> here (or --charts), and nothing else appears; stderr says where things went."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NSYS_TOOLS_LEDGER", raising=False)
    res = runner.invoke(_app(), ["report", str(QUIET), "--issue", "--chart-base-url", "https://example.org/c/"])
    assert res.exit_code == 0, res.stderr
    assert f"Ledger: {ROOT / 'reports' / 'ledger.sqlite'}" in res.stderr
    assert f"Charts written to charts/{QUIET.name}" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["charts"]
    assert "(https://example.org/c/kernel-time.png)" in res.stdout
    html = (tmp_path / "charts" / QUIET.name / "ratio.html").read_text()
    assert "cdn.jsdelivr" not in html and "<script" in html and len(html) > 100_000  # Vega inlined: works offline
    assert not list(QUIET.glob("charts"))


@pytest.mark.slow
def test_ledger_sessions_and_bands(book):
    s = ledger.sessions(book)
    assert s.height == 4 and s.filter(pl.col("quiet") == 0)["id"].to_list() == [LOADED.name]
    b = ledger.bands(book, "NVIDIA H200", "triton", "cold")
    row = b.filter(pl.col("shape") == "4096x768").row(0, named=True)
    assert row["sessions"] == 3  # the loaded session does not count
    medians = ledger.stats(book).filter((pl.col("impl") == "triton") & (pl.col("shape") == "4096x768") & (pl.col("quiet") == 1))
    assert row["band_lo_ns"] == pytest.approx(medians["kernel_median_ns"].min() * (1 - ledger.BAND_MARGIN))
    assert row["band_hi_ns"] == pytest.approx(medians["kernel_median_ns"].max() * (1 + ledger.BAND_MARGIN))


@pytest.mark.slow
def test_history_command(book):
    res = runner.invoke(_app(), ["history", "--shape", "4096x768", "--impl", "ours", "--vs", "triton", "--ledger", str(book)])
    assert res.exit_code == 0
    first = res.stdout.splitlines()[0]
    assert first.startswith("ours/triton at 4096x768, kernel median µs per session: 7.90/9.15, 7.94/9.17, 7.84/9.09, 7.90/9.12")
    hist = ledger.history(book, "4096x768", "ours", "triton")
    assert (hist["ratio"] < 0.9).all()


def test_history_keeps_the_control_to_one_output_policy():
    book = SWEEPS.parent / "ledger.sqlite"
    both = ledger.history(book, "4096x768", "ours", "triton")
    reuse = ledger.history(book, "4096x768", "ours", "triton", outputs="reuse")
    rotate = ledger.history(book, "4096x768", "ours", "triton", outputs="rotate")
    assert "20261129-231949-ln-reuse" in reuse["session_id"].to_list()
    assert "20261129-231949-ln-reuse" not in rotate["session_id"].to_list()
    assert "20261129-231949-ln-rotate" in rotate["session_id"].to_list()
    assert reuse.height + rotate.height == both.height


@pytest.mark.slow
def test_rejected_variants_keep_to_their_op(tmp_path):
    """A comment lists its own op's rejected variants: by --op, else by the sweep's op."""
    book = tmp_path / "ledger.sqlite"
    res = runner.invoke(_app(), ["ledger", "add", str(QUIET), str(MATMUL_BF16), "--ledger", str(book)])
    assert res.exit_code == 0, res.stderr
    ledger.reject(book, "by_sweep", "m", "w", session=MATMUL_BF16.name)
    ledger.reject(book, "by_op", "m", "w", op="layernorm")
    ledger.reject(book, "unknown", "m", "w")
    ledger.reject(book, "named_mm", "m", "w", op="matmul_bf16")
    assert ledger.rejected(book, "layernorm")["variant"].to_list() == ["by_op", "unknown"]
    assert ledger.rejected(book, "matmul_bf16")["variant"].to_list() == ["by_sweep", "unknown", "named_mm"]
    assert ledger.rejected(book).height == 4
    md = runner.invoke(_app(), ["report", str(MATMUL_BF16), "--issue", "--ledger", str(book)]).stdout
    assert "| by\\_sweep |" in md and "| named\\_mm |" in md and "by\\_op" not in md
