"""Frames out: ``nsys-tools export --to`` writes Parquet that DuckDB reads back to the views'
numbers, and ``report --format parquet`` writes any view's table."""

from __future__ import annotations

import json

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from nsys_tools.cli import app
from nsys_tools.escape import markdown
from nsys_tools.render import frames as F
from nsys_tools.run.report import view_table

from .cli import CliRunner
from .conftest import FIXTURES

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
LAYERNORM = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite"
runner = CliRunner()


@pytest.fixture(scope="module", params=[MULTI, LAYERNORM], ids=["multi-gpu", "layernorm-2024.2"])
def exported(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("frames") / "frames"
    res = runner.invoke(app, ["export", str(request.param), "--to", str(out)])
    assert res.exit_code == 0, res.output
    return request.param, out


def sql(out, query: str) -> pl.DataFrame:
    con = duckdb.connect()
    for name in F.FRAMES:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{out / (name + '.parquet')}')")
    result = con.execute(query)
    names = [d[0] for d in result.description]
    return pl.DataFrame(result.fetchall(), schema=names, orient="row")


@pytest.mark.slow
def test_every_frame_and_its_schema_note_are_written(exported):
    path, out = exported
    meta = json.loads((out / "frames.json").read_text())
    assert meta["source"] == path.name and set(meta["rows"]) == set(F.FRAMES)
    note = (out / "SCHEMA.md").read_text()
    for name in F.FRAMES:
        columns = pl.read_parquet_schema(out / f"{name}.parquet")
        assert pl.read_parquet(out / f"{name}.parquet").height == meta["rows"][name]
        section = note.split(f"## {name}.parquet")[1].split("\n## ")[0]
        for column in columns:  # every column explained, none left without a meaning
            line = next(x for x in section.splitlines() if x.startswith(f"| {markdown(column)} |"))
            assert line.split("|")[3].strip()


def test_duckdb_sums_equal_the_kernels_view(exported):
    path, out = exported
    ours = sql(
        out,
        "SELECT range, CAST(name AS VARCHAR) AS kernel, count(*) AS instances, sum(duration_ns) AS total_ns, "
        "min(duration_ns) AS min_ns, max(duration_ns) AS max_ns FROM gpu_ops WHERE kind = 'kernel' GROUP BY ALL",
    )
    view = view_table([path], "kernels").select("range", "kernel", "instances", "total_ns", "min_ns", "max_ns")
    assert_frame_equal(ours, view, check_row_order=False, check_dtypes=False)


def test_duckdb_sums_equal_the_api_memops_and_ranges_views(exported):
    path, out = exported
    api = sql(out, "SELECT CAST(name AS VARCHAR) AS api, count(*) AS n, sum(duration_ns) AS total_ns FROM api GROUP BY ALL")
    view = view_table([path], "api")
    assert api["n"].sum() == view["instances"].sum() and api["total_ns"].sum() == view["total_ns"].sum()
    mem = sql(
        out,
        "SELECT name AS operation, count(*) AS instances, sum(bytes) AS total_bytes, sum(duration_ns) AS total_ns "
        "FROM memops GROUP BY ALL",
    )
    assert_frame_equal(
        mem,
        view_table([path], "memops").select("operation", "instances", "total_bytes", "total_ns"),
        check_row_order=False,
        check_dtypes=False,
    )
    # The projection of each range instance: first start to last end of the operations it encloses.
    proj = sql(
        out,
        "SELECT range, sum(p) AS proj_total_ns, count(*) AS instances FROM (SELECT range, range_instance, "
        "max(end_ns) - min(start_ns) AS p FROM gpu_op_ranges WHERE range_instance IS NOT NULL GROUP BY ALL) GROUP BY ALL",
    )
    ranges = view_table([path], "ranges").select("range", "proj_total_ns", "instances")
    assert_frame_equal(proj, ranges.group_by("range").agg(pl.all().sum()), check_row_order=False, check_dtypes=False)


@pytest.mark.slow
def test_report_writes_any_view_as_parquet(tmp_path):
    for view in ("kernels", "ranges", "api", "memops", "gaps"):
        out = tmp_path / f"{view}.parquet"
        res = runner.invoke(app, ["report", str(MULTI), "--view", view, "--format", "parquet", "-o", str(out)])
        assert res.exit_code == 0, res.output
        assert_frame_equal(pl.read_parquet(out), view_table([MULTI], view))
    res = runner.invoke(app, ["report", str(MULTI), "--format", "parquet"])
    assert res.exit_code == 2 and "--output" in res.output


def test_export_refuses_unknown_frames_and_a_file_as_folder(tmp_path):
    assert runner.invoke(app, ["export", str(MULTI), "--to", str(tmp_path), "--frames", "kernels,bogus"]).exit_code == 2
    (tmp_path / "f").write_text("")
    res = runner.invoke(app, ["export", str(MULTI), "--to", str(tmp_path / "f")])
    assert res.exit_code == 1 and res.output.startswith("Error: ")
    res = runner.invoke(app, ["export", str(MULTI), "--to", str(tmp_path / "k"), "--frames", "kernels"])
    assert res.exit_code == 0 and sorted(p.name for p in (tmp_path / "k").iterdir()) == [
        "SCHEMA.md",
        "frames.json",
        "kernels.parquet",
    ]
