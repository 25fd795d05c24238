"""Bad rows planted into a copy of a real export: each kind is named in one note, counted as the
read module says (left out, or kept as nsys stats keeps it), and every figure stays in range."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import sqlite3

import pytest
from typer.testing import CliRunner

from nsys_tools.cli import app

from .conftest import FIXTURES

K, M = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"
FIRST = f"(SELECT min(rowid) FROM {K})"
# case: (SQL that plants it, the note, kernels left out of the figures)
CASES = {
    "backwards": (
        [f'UPDATE {K} SET "end" = start - 50000000000 WHERE rowid = {FIRST}'],
        "1 kernel ends before it starts and is left out of every figure",
        1,
    ),
    "backwards-memcpy-and-kernels": (
        [f'UPDATE {K} SET "end" = start - 7 WHERE rowid IN (SELECT rowid FROM {K} LIMIT 2)', f'UPDATE {M} SET "end" = start - 1'],
        "2 kernels and 3 memcpys end before they start and are left out of every figure",
        2,
    ),
    "zero-length": (
        [f'UPDATE {K} SET "end" = start WHERE rowid IN (SELECT rowid FROM {K} ORDER BY rowid LIMIT 3)'],
        "3 kernels take no time (their end is their start); they are counted, as nsys stats counts them",
        0,
    ),
    "shared-correlation-ids": (
        [f"UPDATE {K} SET correlationId = (SELECT correlationId FROM {K} WHERE rowid = {FIRST}) WHERE rowid = {FIRST} + 5"],
        "2 kernels share their correlation id with another operation of their process; "
        "they are counted, as nsys stats counts them",
        0,
    ),
    "outside-the-capture": (
        [f'UPDATE {K} SET start = start + 20000000000, "end" = "end" + 20000000000 WHERE rowid = (SELECT max(rowid) FROM {K})'],
        "1 kernel lies outside the capture's start and stop; it is counted, as nsys stats counts it",
        0,
    ),
}


def _planted(tmp_path, statements):
    path = tmp_path / "run.sqlite"
    shutil.copyfile(FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite", path)
    with sqlite3.connect(path) as con:
        for statement in statements:
            con.execute(statement)
        kernels = con.execute(f"SELECT count(*) FROM {K}").fetchone()[0]
    con.close()
    return path, kernels


def _csv(res) -> list[dict]:
    assert res.exit_code == 0, res.output
    return list(csv.DictReader(io.StringIO(res.stdout)))


@pytest.mark.parametrize("case", CASES)
def test_each_bad_row_is_named_once_and_every_figure_stays_in_range(case, tmp_path):
    statements, note, left_out = CASES[case]
    path, kernels = _planted(tmp_path, statements)
    res = CliRunner().invoke(app, ["report", str(path), "-f", "csv"])
    rows = _csv(res)
    notes = [line for line in res.stderr.splitlines() if line.startswith("Note:")]
    assert notes == [f"Note: {path}: {note}"]
    assert sum(int(r["instances"]) for r in rows) == kernels - left_out
    shares = [float(r["time_pct"]) for r in rows]
    assert all(0 <= s <= 100 for s in shares) and sum(shares) == pytest.approx(100)
    assert all(int(r["min_ns"]) >= 0 for r in rows)
    for r in _csv(CliRunner().invoke(app, ["report", str(path), "--view", "utilization", "-f", "csv"])):
        assert 0 <= int(r["idle_ns"]) <= int(r["span_ns"]) and 0 <= float(r["idle_pct"]) <= 100
        assert int(r["busy_ns"]) <= int(r["span_ns"])
    res = CliRunner().invoke(app, ["summary", str(path)])
    assert res.exit_code == 0 and f"Note: {path}: {note}" in res.stderr, res.output
    out = res.stdout
    span = max(_ms(v) for v in re.findall(r"^\| \d+ [^|]*\| ([\d,.]+) ms \|", out, re.M))
    idle = re.findall(r"sat idle .*?([\d,.]+) ms in all", out) + re.findall(r"^\| \w+ \| \d+ \| ([\d,.]+) ms \|", out, re.M)
    assert idle and all(_ms(v) <= span for v in idle), (span, idle)
    assert all(0 <= float(v) <= 100 for v in re.findall(r"(-?[\d.]+)%", out))  # no share out of range anywhere


def _ms(text: str) -> float:
    return float(text.replace(",", ""))


def test_a_memcpy_table_without_bytes_leaves_the_kernels_note_and_the_kernels_view(tmp_path):
    """The note is counted in the kernels view's own pass: a memcpy column that view does not read
    (bytes) stops neither the view nor the note on its kernels, which says the copies' sizes are
    unknown."""
    statements, note, left_out = CASES["backwards"]
    path, kernels = _planted(tmp_path, [*statements, f'ALTER TABLE {M} DROP COLUMN "bytes"'])
    res = CliRunner().invoke(app, ["report", str(path), "-f", "csv"])
    assert sum(int(r["instances"]) for r in _csv(res)) == kernels - left_out
    unsized = "3 of 3 memcpys record no byte count: their sizes and bandwidths are unknown, their times counted"
    notes = [line for line in res.stderr.splitlines() if line.startswith(("Note:", "Error:"))]
    assert notes == [f"Note: {path}: {unsized}; {note}"]


def test_a_clean_export_has_no_note(tmp_path):
    path, _ = _planted(tmp_path, [])
    res = CliRunner().invoke(app, ["report", str(path), "-f", "csv"])
    assert res.exit_code == 0 and "Note:" not in res.stderr


@pytest.mark.parametrize(
    "change",
    [
        f'UPDATE {K} SET "end" = start - 1.5 WHERE rowid = {FIRST}',  # REAL, and before its start
        f"UPDATE {K} SET start = 'x' || start WHERE rowid = {FIRST}",  # text: SQLite orders it after every number
        f"UPDATE {K} SET \"end\" = 'later' WHERE rowid = {FIRST}",  # text, after its start
    ],
)
@pytest.mark.parametrize("command", [["report"], ["summary"], ["report", "--view", "utilization"]])
def test_times_of_other_types_are_refused_not_left_out(change, command, tmp_path):
    path, _ = _planted(tmp_path, [change])
    res = CliRunner().invoke(app, [*command, str(path)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith(f"Error: {path}: holds values of unexpected types"), res.stderr


def _without_bytes(tmp_path, how: str):
    """The two-GPU export with no byte count on its copies: the column dropped ("absent"), or,
    its NOT NULL constraint dropped (SQLite's documented schema edit), NULL on every other
    copy ("null")."""
    path = tmp_path / f"{how}.sqlite"
    shutil.copyfile(FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite", path)
    con = sqlite3.connect(path, isolation_level=None)
    if how == "absent":
        con.execute(f'ALTER TABLE {M} DROP COLUMN "bytes"')
    else:
        version = con.execute("PRAGMA schema_version").fetchone()[0]
        con.execute("PRAGMA writable_schema = ON")
        con.execute(
            "UPDATE sqlite_master SET sql = replace(sql, 'bytes                       INTEGER   NOT NULL', 'bytes INTEGER') "
            f"WHERE name = '{M}'"
        )
        con.execute(f"PRAGMA schema_version = {version + 1}")
        con.execute("PRAGMA writable_schema = OFF")
        con.close()
        con = sqlite3.connect(path, isolation_level=None)
        con.execute(f"UPDATE {M} SET bytes = NULL WHERE rowid % 2 = 0")
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    return path


@pytest.mark.parametrize(("how", "unsized", "said"), [("absent", 32, "of unknown size"), ("null", 16, "with no byte count")])
def test_copies_without_a_byte_count_are_reported_and_named(how, unsized, said, tmp_path):
    """summary reports what it can where copies record no byte count, and one note says how many
    (it exited 1 on both: a TypeError on NULL bytes, a missing column where bytes is absent);
    the copies rule still finds the copies that dominate, saying what it does not know."""
    path = _without_bytes(tmp_path, how)
    res = CliRunner().invoke(app, ["summary", str(path)])
    assert res.exit_code == 0, res.output
    assert "Run summary" in res.stdout and "| 0 NVIDIA H200 |" in res.stdout
    notes = [line for line in res.stderr.splitlines() if line.startswith(("Note:", "Error:"))]
    assert notes == [
        f"Note: {path}: {unsized} of 32 memcpys record no byte count: their sizes and bandwidths are unknown, their times counted"
    ]
    found = CliRunner().invoke(app, ["diagnose", str(path), "--rule", "copies", "-f", "json"])
    titles = [f["title"] for f in json.loads(found.stdout)["findings"]]
    assert len(titles) == 2 and all(t.startswith("Host-to-Device copies took 6") and said in t for t in titles), titles
