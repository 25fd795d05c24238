"""The rules twin to ``nsys analyze``'s: their csv equals, byte for byte, what nsys analyze
(2024.2, and 2025.3 in the folders named so) wrote on the same exports (``tests/fixtures/*/analyze/``,
each folder's MANIFEST says how), with the default options and with the options named in the file's name."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

import pytest

from nsys_tools.cli import app
from nsys_tools.rules import REGISTRY, analyze, diagnose, parse
from nsys_tools.rules.context import Run

from .cli import CliRunner
from .conftest import FIXTURES
from .torch_train import exports as torch_exports

TWINS = ("cuda_api_sync", "cuda_memcpy_async", "cuda_memcpy_sync", "cuda_memset_sync", "gpu_gaps", "gpu_time_util")
CUT_AND_UNTIMED = ("unlaunched", "untimed")  # other-machines cases with nsys's csvs
runner = CliRunner()


def _maker(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), FIXTURES / name / "make.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _derived(name: str, tmp: Path) -> Path:
    return _maker(name).make(tmp / f"{name}.sqlite")


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> list[tuple[Path, Path]]:
    """(export, folder of nsys analyze's csvs for it)."""
    tmp = tmp_path_factory.mktemp("twins")
    torch = torch_exports(tmp)
    return [
        (FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite", FIXTURES / "layernorm-3impl/analyze/nsys2024.2"),
        (FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite", FIXTURES / "layernorm-3impl/analyze/nsys2025.3"),
        (FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite", FIXTURES / "multi-gpu/analyze"),
        (torch["a"], FIXTURES / "torch-train/analyze/run-a"),
        (torch["slow"], FIXTURES / "torch-train/analyze/run-slow"),
        (_derived("sync-copies", tmp), FIXTURES / "sync-copies/analyze"),
        (torch["b"], FIXTURES / "torch-train/analyze/run-b"),
        (FIXTURES / "doubled-launch" / "doubled-launch.sqlite", FIXTURES / "doubled-launch/analyze"),
        (_derived("nccl-derived", tmp), FIXTURES / "nccl-derived/analyze"),
        (_derived("several-contexts", tmp), FIXTURES / "several-contexts/analyze"),
        (_derived("graphics-derived", tmp), FIXTURES / "graphics-derived/analyze"),
        (FIXTURES / "bad-input" / "no-nvtx.sqlite", FIXTURES / "bad-input/analyze/no-nvtx"),
        (_maker("deep-nesting").deep(tmp / "deep", 100), FIXTURES / "deep-nesting/analyze"),
        *((_maker("other-machines").CASES[c](tmp / c), FIXTURES / "other-machines/analyze" / c) for c in CUT_AND_UNTIMED),
        (FIXTURES / "train-loop" / "train-loop-nsys2025.3.sqlite", FIXTURES / "train-loop/analyze/nsys2025.3"),
        (FIXTURES / "train-loop" / "train-loop-nsys2025.3.sqlite", FIXTURES / "train-loop/analyze/nsys2024.2"),
    ]


def test_every_twin_is_registered_as_one():
    assert {n for n, r in REGISTRY.items() if r.twin} == set(TWINS)


def test_csv_equals_nsys_analyze_byte_for_byte(cases):
    checked = set()
    for export, folder in cases:
        run = Run([export])
        for reference in sorted(folder.glob("*.csv")):
            rule, options = parse(reference.stem.replace(".", ":").replace("#", "/"))
            module = rule.load()
            ours = analyze.csv_text(module.COLUMNS, module.select(run.dbs[0], **options))
            assert ours == reference.read_text(), f"{rule.name} on {export.name} differs from {reference}"
            checked.add((rule.name, bool(ours)))
    # every twin is checked on an export where nsys found rows
    assert {name for name, rows in checked if rows} == set(TWINS)


def test_cli_csv_is_the_twin_and_rows_default_to_all():
    export = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
    res = runner.invoke(app, ["diagnose", str(export), "--rule", "gpu_gaps:gap=1", "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert res.stdout == (FIXTURES / "multi-gpu/analyze/gpu_gaps.gap=1.csv").read_text()
    limited = runner.invoke(app, ["diagnose", str(export), "--rule", "cuda_api_sync:rows=3", "--format", "csv"])
    assert limited.stdout.splitlines() == (FIXTURES / "multi-gpu/analyze/cuda_api_sync.csv").read_text().splitlines()[:4]


def test_cli_refuses_unknown_options_and_says_why_a_twin_is_empty():
    export = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
    bad = runner.invoke(app, ["diagnose", str(export), "--rule", "gpu_gaps:gapp=1", "-f", "csv"])
    assert bad.exit_code == 2 and "no option 'gapp'" in bad.output
    for chunks, code in (("-1", 2), ("1001", 2), ("0", 0)):  # nsys refuses the first two; 0 gives no rows
        res = runner.invoke(app, ["diagnose", str(export), "--rule", f"gpu_time_util:chunks={chunks}", "-f", "csv"])
        assert res.exit_code == code and res.stdout == "", res.output
    empty = runner.invoke(app, ["diagnose", str(export), "--rule", "gpu_gaps", "-f", "csv"])
    assert empty.exit_code == 0 and empty.stdout == "" and "No rows: gpu_gaps found nothing" in empty.stderr
    missing = runner.invoke(app, ["diagnose", str(export.with_name("absent.sqlite"))])
    assert missing.exit_code == 1 and missing.output.count("Error:") == 1 and "absent.sqlite" in missing.output


def test_findings_json_shape_and_order(cases):
    export = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
    res = runner.invoke(app, ["diagnose", str(export), *sum((["--rule", t] for t in TWINS), []), "-f", "json"])
    assert res.exit_code == 0, res.output
    found = json.loads(res.stdout)["findings"]
    assert found and [f["time_ns"] for f in found] == sorted((f["time_ns"] for f in found), reverse=True)
    for f in found:
        assert set(f) == {"rule", "title", "time_ns", "share", "where", "evidence", "advice"}
        assert set(f["where"]) == {"device", "rank", "steps", "range", "kernel", "api", "start_ns", "end_ns"}
        assert isinstance(f["time_ns"], int) and 0 <= f["share"] <= 1
    # the pageable copies: 8 per process (nsys lists each twice, once per process sharing its correlation id)
    copies = [f for f in found if f["rule"] == "cuda_memcpy_async"]
    assert sorted(f["title"].split()[0] for f in copies) == ["8", "8"]


def test_twin_findings_sum_their_rows(cases):
    export, _ = cases[3]  # torch-train run A
    run = Run([export])
    (sync,) = diagnose(run, ["cuda_api_sync"])[:1]
    rows = run.dbs[0].fetch(
        "SELECT sum(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaStreamSynchronize%'",
    )
    assert sync.time_ns == rows[0][0] and sync.api.startswith("cudaStreamSynchronize")


def test_rows_equal_nsys_2025_3_recipes_of_the_same_rules(cases):
    """nsys 2025.3's recipes cuda_api_sync and gpu_time_util run the rules of the same names over
    run A (tests/fixtures/recipes/torch-train/): the same rows, in the same order."""
    import polars as pl

    export, _ = cases[3]
    run = Run([export])
    for name in ("cuda_api_sync", "gpu_time_util"):
        theirs = pl.read_parquet(FIXTURES / "recipes" / "torch-train" / name / "analysis.parquet").drop("Rank")
        module = REGISTRY[name].load()
        ours = [tuple(r) for r in module.select(run.dbs[0])]
        assert ours == [tuple(r) for r in theirs.rows()], name


def test_nvtx_filter_errors_name_the_range():
    export = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
    res = runner.invoke(app, ["diagnose", str(export), "--rule", "cuda_api_sync:nvtx=nosuch", "-f", "csv"])
    assert res.exit_code == 2 and "no NVTX range 'nosuch'" in res.output
    both = runner.invoke(app, ["diagnose", str(export), "--rule", "cuda_api_sync:nvtx=data:process=1426", "-f", "csv"])
    assert both.exit_code == 2 and "nvtx cannot go with process or thread" in both.output
    bare = FIXTURES / "bad-input" / "no-nvtx.sqlite"  # nsys skips the rule: "does not contain ... (NVTX) data"
    none = runner.invoke(app, ["diagnose", str(bare), "--rule", "gpu_gaps:nvtx=step", "-f", "csv"])
    assert none.exit_code == 2 and "holds no NVTX range" in none.output and none.stdout == ""


def test_exports_without_newer_columns_are_read(tmp_path):
    """An export of an nsys older than these columns (greenContextId, srcDeviceId, dstDeviceId
    dropped from the copy and set tables): the rules read the same rows, those cells empty, for
    their findings; the csv, nsys analyze's, is empty, as nsys 2024.2 skips such an export, and
    says which column is missing."""
    import shutil
    import sqlite3

    old = shutil.copyfile(_derived("sync-copies", tmp_path), tmp_path / "old.sqlite")
    con = sqlite3.connect(old)
    for table, columns in (("CUPTI_ACTIVITY_KIND_MEMCPY", ("greenContextId", "srcDeviceId", "dstDeviceId")),
                           ("CUPTI_ACTIVITY_KIND_MEMSET", ("greenContextId",))):  # fmt: skip
        for c in columns:
            con.execute(f"ALTER TABLE {table} DROP COLUMN {c}")
    con.commit()
    con.close()
    run = Run([old])
    for name in ("cuda_memcpy_sync", "cuda_memset_sync"):
        module = REGISTRY[name].load()
        reference = (FIXTURES / "sync-copies" / "analyze" / f"{name}.csv").read_text()
        assert analyze.csv_text(module.COLUMNS, module.select(run.dbs[0])) == reference, name
        res = runner.invoke(app, ["diagnose", str(old), "--rule", name, "-f", "csv"])
        assert res.exit_code == 0 and res.stdout == "", res.output
        lacks = {"cuda_memcpy_sync": "MEMCPY table has no greenContextId, srcDeviceId, dstDeviceId columns"}
        assert lacks.get(name, "MEMSET table has no greenContextId column") in res.stderr


NO_CUDA = {n: "no CUPTI_ACTIVITY_KIND_RUNTIME table" for n in TWINS[:4]} | {
    n: "no CUPTI_ACTIVITY_KIND_KERNEL or CUPTI_ACTIVITY_KIND_MEMCPY or CUPTI_ACTIVITY_KIND_MEMSET or VULKAN_WORKLOAD or "
    "OPENGL_WORKLOAD or DX12_WORKLOAD table (the GPU's work"
    for n in TWINS[4:]
}
NO_PID = [f"ALTER TABLE CUPTI_ACTIVITY_KIND_{t} DROP COLUMN globalPid" for t in ("KERNEL", "MEMCPY", "MEMSET")]


@pytest.mark.parametrize(
    ("export", "edits", "skipped"),
    [
        ("bad-input/empty.sqlite", [], NO_CUDA),
        ("bad-input/no-cuda-trace.sqlite", [], NO_CUDA),
        (
            "multi-gpu/multi-gpu-nsys2025.3.sqlite",
            ["DROP TABLE ENUM_CUDA_MEM_KIND"],
            {n: "no ENUM_CUDA_MEM_KIND table" for n in TWINS[1:4]},
        ),
        (
            "multi-gpu/multi-gpu-nsys2025.3.sqlite",
            NO_PID,
            {n: "KIND_MEMCPY table has no globalPid column" for n in TWINS[1:3]}
            | {"cuda_memset_sync": "KIND_MEMSET table has no globalPid column"}
            | {n: "KIND_KERNEL table has no globalPid column" for n in TWINS[4:]},
        ),
    ],
)
def test_a_twin_says_what_the_export_lacks_where_nsys_skips_the_rule(export, edits, skipped, tmp_path):
    """Where nsys analyze (2024.2) skips a rule for a missing table (or fails on a missing
    column: globalPid), the twin's csv is empty too, and one line names what is missing; the
    other twins still give their rows."""
    import shutil
    import sqlite3

    path = shutil.copyfile(FIXTURES / export, tmp_path / "x.sqlite")
    with closing(sqlite3.connect(path)) as con, con:
        for edit in edits:
            con.execute(edit)
    for name in TWINS:
        res = runner.invoke(app, ["diagnose", str(path), "--rule", name, "-f", "csv"])
        assert res.exit_code == 0, res.output
        if name in skipped:
            assert res.stdout == "" and res.stderr.count("\n") == 1, res.output
            assert res.stderr.startswith(f"No rows: {name} cannot look at {path}: it") and skipped[name] in res.stderr
        else:
            assert "cannot look" not in res.stderr, res.output


def test_findings_leave_out_a_twin_whose_query_the_export_cannot_answer(tmp_path):
    """An export whose GPU operations record no process (nsys before 2021): the twins that read
    it (all but cuda_api_sync) find nothing there, one note says which and why, and diagnose and
    summary report the rest; both exited 1 on the first twin's query."""
    import shutil
    import sqlite3

    path = shutil.copyfile(FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite", tmp_path / "old.sqlite")
    with closing(sqlite3.connect(path)) as con, con:
        for edit in NO_PID:
            con.execute(edit)
    res = runner.invoke(app, ["diagnose", str(path), "-f", "json"])
    assert res.exit_code == 0, res.output
    notes = [line for line in res.stderr.splitlines() if "left out" in line]
    assert len(notes) == 1 and notes[0].startswith(f"Note: {path}: {', '.join(TWINS[1:])} left out: its "), notes
    assert "has no globalPid column" in notes[0]
    rules = {f["rule"] for f in json.loads(res.stdout)["findings"]}
    assert "cuda_api_sync" in rules and not rules & set(TWINS[1:])
    summary = runner.invoke(app, ["summary", str(path)])
    assert summary.exit_code == 0 and "Left out: `cuda_memcpy_async`, `cuda_memcpy_sync`" in summary.stdout, summary.output
