"""The report on Dask workers: the same table as in this process, and errors that name what failed."""

from __future__ import annotations

import pickle
import shutil
import time
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from nsys_tools import views
from nsys_tools.errors import BadExport, SchedulerError
from nsys_tools.read.window import WindowSpec
from nsys_tools.run import engine
from nsys_tools.run.report import kernel_summary, view_table

from . import nccl_derived
from .conftest import FIXTURES

pytestmark = pytest.mark.slow  # starts Dask clusters (about 10 s)

distributed = pytest.importorskip("distributed", reason="needs nsys-tools[dask]")

DEMO = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"
EXPORTS = sorted((FIXTURES / "layernorm-3impl").glob("*.sqlite")) + sorted(DEMO.glob("*.sqlite"))


@pytest.fixture(scope="module")
def dask_engine():
    """One cluster of two worker processes for the whole module (it takes seconds to start)."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            yield engine.Dask(client)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"per_file": True},
        {"include_memops": True, "names": "short"},
        {"nesting": "all", "range_glob": "*/4096x768*"},
    ],
    ids=["aggregated", "per-file", "memops-short", "all-ranges"],
)
def test_dask_table_equals_the_local_table(dask_engine, options):
    local = kernel_summary(EXPORTS, **options)
    on_dask = kernel_summary(EXPORTS, engine=dask_engine, **options)
    assert local.height > 10
    assert_frame_equal(on_dask, local)


# Every view on the kernel exports (the whole-run views on exports with NCCL kernels are below).
TABLES = [
    ("ranges", ["device"], {}),
    ("api", [], {}),
    ("memops", ["process"], {}),
    ("gaps", [], {}),
    ("utilization", ["stream"], {"bin_ns": 1_000_000}),
    ("launch", ["device"], {}),
    ("sync", [], {}),
    ("idle", ["device"], {}),
    ("idle", [], {"longest": 3}),
    ("overlap", ["device"], {}),
    ("kernels", [], {"window": WindowSpec(within="*#2")}),
]


@pytest.mark.parametrize("view, by, options", TABLES)
def test_every_view_on_dask_equals_the_local_view(dask_engine, view, by, options):
    local = view_table(EXPORTS, view, by=by, per_file=True, **options)
    assert local.height > 2
    assert_frame_equal(view_table(EXPORTS, view, by=by, per_file=True, engine=dask_engine, **options), local)


# The whole-run views on exports with NCCL kernels, training steps and two ranks: the derived
# two-GPU export (``tests/fixtures/nccl-derived``) and the real two-GPU capture.
WHOLE_RUN = [
    ("utilization", ["device"], {}),
    ("utilization", [], {"bin_ns": 10_000_000}),
    ("idle", ["device", "process"], {}),
    ("idle", ["stream"], {"longest": 5}),
    ("launch", ["process"], {"names": "short"}),
    ("sync", ["process"], {}),
    ("nccl", ["device", "process"], {}),
    ("overlap", ["device"], {}),
    ("overlap", [], {"step": "step=*"}),
    ("stragglers", [], {}),
    ("steps", [], {}),
    ("steps", [], {"step": "forward", "flops_per_step": 1e12}),
    ("hist", ["device"], {}),
    ("hist", [], {"of": "ranges"}),
    ("pace", ["device"], {}),
    ("pace", [], {"of": "ranges"}),
]


@pytest.fixture(scope="module")
def whole_runs(tmp_path_factory):
    return [nccl_derived.export(tmp_path_factory.mktemp("nccl")), FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"]


@pytest.mark.parametrize("view, by, options", WHOLE_RUN)
@pytest.mark.parametrize("per_file", [True, False], ids=["per-file", "merged"])
def test_every_whole_run_view_on_dask_equals_the_local_view(dask_engine, whole_runs, view, by, options, per_file):
    local = view_table(whole_runs, view, by=by, per_file=per_file, **options)
    assert local.height > 0
    assert_frame_equal(view_table(whole_runs, view, by=by, per_file=per_file, engine=dask_engine, **options), local)


def test_every_registered_view_is_checked_on_dask():
    assert {case[0] for case in TABLES + WHOLE_RUN} >= set(views.names())


def test_progress_and_order(dask_engine):
    seen = []
    parts = dask_engine.map(str.upper, ["a", "b", "c"], lambda done, total: seen.append((done, total)))
    assert parts == ["A", "B", "C"]
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert engine.Local(2).map(str.upper, ["a", "b", "c"]) == ["A", "B", "C"]


def test_a_worker_that_cannot_read_names_the_path_and_itself(dask_engine, tmp_path):
    good = tmp_path / "good.sqlite"
    shutil.copyfile(EXPORTS[0], good)
    bad = tmp_path / "cut.sqlite"
    bad.write_bytes(good.read_bytes()[:5000])
    with pytest.raises(BadExport) as err:
        kernel_summary([good, bad], engine=dask_engine)
    message = str(err.value)
    assert message.startswith(f"{bad}: truncated SQLite file")
    assert "(read on worker tcp://127.0.0.1:" in message and message.endswith("copy or export it again")


def test_errors_survive_the_trip_between_processes():
    err = BadExport(Path("x.sqlite"), "not an SQLite file", "pass an export")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is BadExport and str(back) == str(err) and back.hint == "pass an export"


def test_an_unreadable_path_is_an_error_naming_it(tmp_path):
    folder_named_like_an_export = tmp_path / "run.sqlite"
    folder_named_like_an_export.mkdir()
    with pytest.raises(BadExport, match=r"run\.sqlite: cannot be read on worker w1 \(Is a directory\)"):
        engine.run_task(lambda p: p.open("rb"), folder_named_like_an_export, "worker w1")


def test_unreachable_scheduler_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT_S", 1)
    t = time.perf_counter()
    with pytest.raises(SchedulerError, match=r"no Dask scheduler answered at tcp://127\.0\.0\.1:9 within 1 s"):
        with engine.connect("tcp://127.0.0.1:9"):
            pass
    assert time.perf_counter() - t < 15


@pytest.mark.parametrize("spec", ["local:0", "local:x", "127.0.0.1:8786", "tcp://"])
def test_scheduler_specs(spec):
    with pytest.raises(ValueError):
        engine.parse(spec)
    assert engine.parse("local:4") == ("local", 4) and engine.parse("tcp://h:8786") == ("address", "tcp://h:8786")


def test_a_fleet_goes_on_past_an_export_a_worker_cannot_read(dask_engine, tmp_path):
    for k in range(3):
        shutil.copyfile(EXPORTS[0], tmp_path / f"rank{k}.sqlite")
    (tmp_path / "rank1.sqlite").write_bytes(b"SQLite format 3\x00" + bytes(200))
    failures = []
    table = kernel_summary([tmp_path], engine=dask_engine, failures=failures, range_glob="triton*")
    assert table["instances"].to_list() == [200]  # two good exports of 100 calls
    assert len(failures) == 1 and str(failures[0]).startswith(f"{tmp_path / 'rank1.sqlite'}: ")
    assert "(read on worker tcp://" in str(failures[0])
