"""Names from the file reach SQL only through ``read.sql.ident``: a column named like SQL reads
as a column, and the export is read whole or refused, never a silent subset."""

from __future__ import annotations

import csv
import io
import shutil
import sqlite3

import polars as pl
import pytest
from typer.testing import CliRunner

from nsys_tools.cli import app
from nsys_tools.read.sql import ident

from .conftest import FIXTURES

K = "CUPTI_ACTIVITY_KIND_KERNEL"
CRAFTED = (
    f'x" FROM {K} WHERE rowid % 2 = 0 --',  # would keep every other row
    'y" AS a, "start',  # would read another column under its name
    "z'); DROP TABLE StringIds; --",
)


def test_ident_quotes_and_doubles_quotes():
    assert ident("start") == '"start"' and ident('a"b') == '"a""b"'
    with sqlite3.connect(":memory:") as con:
        for name in CRAFTED:
            con.execute(f"CREATE TABLE t ({ident(name)} INTEGER)")
            assert [r[1] for r in con.execute("SELECT * FROM pragma_table_info('t')")] == [name]
            con.execute("DROP TABLE t")
    con.close()


@pytest.mark.parametrize("name", CRAFTED)
def test_a_crafted_column_name_exports_every_row(name, tmp_path):
    path = tmp_path / "run.sqlite"
    shutil.copyfile(FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite", path)
    with sqlite3.connect(path) as con:
        con.execute(f"ALTER TABLE {K} ADD COLUMN {ident(name)} INTEGER")
        con.execute(f"UPDATE {K} SET {ident(name)} = rowid")
        kernels = con.execute(f"SELECT count(*) FROM {K}").fetchone()[0]
    con.close()
    res = CliRunner().invoke(app, ["export", str(path), "--to", str(tmp_path / "out"), "--frames", "kernels"])
    assert res.exit_code == 0, res.output
    frame = pl.read_parquet(tmp_path / "out" / "kernels.parquet")
    assert frame.height == kernels and "Traceback" not in res.output
    crafted = [c for c in frame.columns if c.startswith(name[0])]
    assert len(crafted) == 1 and frame[crafted[0]].n_unique() == kernels  # the column, read as a column
    assert frame["start_ns"].null_count() == 0
    res = CliRunner().invoke(app, ["report", str(path), "-f", "csv"])
    assert res.exit_code == 0
    assert sum(int(r["instances"]) for r in csv.DictReader(io.StringIO(res.stdout))) == kernels
