"""compare of whole runs (``study/whole.py``, ``study/compare.py``): the run figures per device
equal plain SQL over the exports; step time is the median of the NVTX step ranges; a kernel with
two modes is compared mode by mode; rows of one or two calls say so; ``--names op`` is chosen
when the ranges carry per-call ids."""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsys_tools.cli import app
from nsys_tools.study.compare import modes

from .conftest import FIXTURES

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
LAYERNORM = FIXTURES / "layernorm-3impl"
OPS = {"CUPTI_ACTIVITY_KIND_KERNEL": "kernel", "CUPTI_ACTIVITY_KIND_MEMCPY": "memcpy", "CUPTI_ACTIVITY_KIND_MEMSET": "memset"}
runner = CliRunner()


@pytest.fixture(scope="module")
def torch_runs(tmp_path_factory):
    from .torch_train import exports

    return exports(tmp_path_factory.mktemp("torch"))


def run_json(base: Path, new: Path, *args: str) -> dict:
    res = runner.invoke(app, ["compare", str(base), str(new), "--session-noise", "0", "-f", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def union(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for lo, hi in sorted(intervals):
        if end is None or lo > end:
            total, end = total + hi - lo, hi
        elif hi > end:
            total, end = total + hi - end, hi
    return total


def by_sql(path: Path) -> dict[int, dict[str, int]]:
    """Per GPU id, the run figures from the export's own tables: unions of intervals, by class."""
    ops: dict[int, list[tuple[int, int, str]]] = {}
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        for table, kind in OPS.items():
            rows = con.execute(
                f"SELECT d.gpuId, o.start, o.end, coalesce(s.value, '') FROM {table} o "
                "JOIN TARGET_INFO_CUDA_DEVICE d ON d.cudaId = o.deviceId AND d.pid = (o.globalPid >> 24) % (1 << 24) "
                + ("LEFT JOIN StringIds s ON s.id = o.shortName" if kind == "kernel" else "LEFT JOIN StringIds s ON 0")
            )
            for gpu, lo, hi, name in rows:
                cls = "memory" if kind != "kernel" else "nccl" if name.lower().startswith("nccl") else "compute"
                ops.setdefault(gpu, []).append((lo, hi, cls))
    out = {}
    for gpu, rows in ops.items():
        compute = union([(lo, hi) for lo, hi, c in rows if c == "compute"])
        kernels = union([(lo, hi) for lo, hi, c in rows if c != "memory"])
        busy = union([(lo, hi) for lo, hi, _ in rows])
        span = max(hi for _, hi, _ in rows) - min(lo for lo, _, _ in rows)
        out[gpu] = {
            "span_ns": span,
            "busy_ns": busy,
            "compute_ns": compute,
            "nccl_exposed_ns": kernels - compute,
            "memory_ns": busy - kernels,
            "idle_ns": span - busy,
        }
    return out


def check_against_sql(doc: dict, base: Path, new: Path) -> None:
    for label, path in (("base", base), ("new", new)):
        want = by_sql(path)
        got = {d["gpu_id"]: d[label] for d in doc["run"]["devices"] if d[label]}
        assert set(got) == set(want)
        for gpu, figures in want.items():
            assert {k: got[gpu][k] for k in figures} == figures
            causes = sum(got[gpu][f"idle_{c}_ns"] for c in ("host", "sync", "memory", "other"))
            assert causes == figures["idle_ns"]
        total = doc["run"]["total"][label]
        assert total["busy_ns"] == sum(f["busy_ns"] for f in want.values())


@pytest.mark.slow
def test_run_figures_equal_plain_sql_per_device_on_two_gpus(tmp_path):
    """The two-GPU capture against its NCCL-derived twin: every figure of both devices, and the
    sentence: the same step time, the time moved from compute to NCCL exposed."""
    from .nccl_derived import export

    nccl = export(tmp_path)
    doc = run_json(MULTI, nccl)
    check_against_sql(doc, MULTI, nccl)
    run = doc["run"]
    assert run["unit"] == "step" and [d["device"] for d in run["devices"]] == ["GPU 0", "GPU 1"]
    assert run["sentence"].startswith("NEW takes the same time per step")
    assert "NCCL exposed" in run["sentence"] and "kernel time" in run["sentence"]
    moved = run["total"]["new"]["nccl_exposed_ns"]
    assert moved > 0 and run["total"]["base"]["compute_ns"] - run["total"]["new"]["compute_ns"] == moved


@pytest.mark.slow
def test_training_runs_compare_per_step_with_the_slowed_operator_found(torch_runs):
    base, slow = torch_runs["a"], torch_runs["slow"]
    res = runner.invoke(app, ["compare", str(base), str(slow), "--session-noise", "0", "-f", "json"])
    assert "Note: 100% of the base's kernel time is in ranges named with per-call ids" in res.stderr
    doc = json.loads(res.stdout)
    check_against_sql(doc, base, slow)
    run = doc["run"]
    for label, path in (("base", base), ("new", slow)):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            steps = [
                r[0]
                for r in con.execute(
                    "SELECT n.end - n.start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
                    "WHERE coalesce(n.text, s.value) LIKE 'step %'"
                )
            ]
        assert run["total"][label]["steps"] == len(steps) == 24
        assert run["total"][label]["step_median_ns"] == round(statistics.median(steps))
        assert run["total"][label]["step_lo_ns"] <= run["total"][label]["step_median_ns"] <= run["total"][label]["step_hi_ns"]
    assert run["sentence"].startswith("NEW is 8% faster per step (9.05 → 8.37 ms; the 95% intervals overlap")
    assert run["throughput"]["new"] == pytest.approx(1e9 / run["total"]["new"]["step_median_ns"])
    (mul,) = [r for r in doc["rows"] if r["op"] == "aten::mul_"]
    assert "vectorized_elementwise_kernel" in mul["kernel"] and mul["mode"] is None
    assert mul["verdict"] == "slower" and 10 < mul["ratio"] < 11
    assert mul["new_per_unit_ns"] == pytest.approx(mul["new_calls"] * mul["new_median_ns"] / 24, rel=0.05)
    # the row that moved the step most comes first, and the sentence names it as the kernel time's change
    moved = [abs((r["new_per_unit_ns"] or 0) - (r["base_per_unit_ns"] or 0)) for r in doc["rows"]]
    assert doc["rows"][0] == mul and moved == sorted(moved, reverse=True)
    more = (mul["new_per_unit_ns"] - mul["base_per_unit_ns"]) / 1e3
    named = "most of it aten::mul_ / vectorized_elementwise_kernel<…> "
    named += f"(+{more:.3g} µs a step, {mul['ratio']:.3g}x the base's median call)."
    assert run["sentence"].endswith(f"kernel time, {named}")


def test_two_runs_of_one_build_name_no_kernel(torch_runs):
    """Runs A and B are the same program and build: kernel time is unchanged, and no row is named for it."""
    run = run_json(torch_runs["a"], torch_runs["b"])["run"]
    assert run["sentence"].endswith("kernel time unchanged.") and "most of it" not in run["sentence"]


def bimodal(tmp_path: Path, source: Path, name: str, long_calls: int) -> Path:
    """``source`` with the first ``long_calls`` calls of ``softmax_warp_forward`` 50 times as long:
    a kernel whose calls fall in two modes, the long ones a minority or a majority."""
    path = tmp_path / f"{name}.sqlite"
    shutil.copy(source, path)
    with sqlite3.connect(path) as con:
        con.execute(
            'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + ("end" - start) * 50 WHERE rowid IN ('
            "SELECT k.rowid FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
            "WHERE s.value = 'softmax_warp_forward' ORDER BY k.start LIMIT ?)",
            (long_calls,),
        )
    return path


@pytest.mark.slow
def test_a_kernel_with_two_modes_is_compared_mode_by_mode(torch_runs, tmp_path):
    """10 long calls of 24 in the base, 14 in the new: the medians of all calls fall on different
    modes (a 50x "slowdown" of no call), and mode by mode nothing changed."""
    base = bimodal(tmp_path, torch_runs["a"], "base", 10)
    new = bimodal(tmp_path, torch_runs["a"], "new", 14)
    calls = {}
    for label, path in (("base", base), ("new", new)):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            calls[label] = [
                r[0]
                for r in con.execute(
                    "SELECT k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                    "WHERE s.value = 'softmax_warp_forward'"
                )
            ]
    assert len(modes(calls["new"])) == 1
    assert statistics.median(calls["new"]) > 10 * statistics.median(calls["base"])  # the median of all calls flips
    doc = run_json(base, new)
    rows = sorted((r for r in doc["rows"] if "softmax_warp_forward" in r["kernel"]), key=lambda r: r["mode"])
    assert [(r["mode"], r["base_calls"], r["new_calls"]) for r in rows] == [("1 of 2", 14, 10), ("2 of 2", 10, 14)]
    assert {r["verdict"] for r in rows} == {"not distinguishable"}
    assert all(0.95 < r["ratio"] < 1.05 for r in rows)


def test_rows_of_one_or_two_calls_are_too_few_to_tell():
    doc = run_json(LAYERNORM / "layernorm-3impl-nsys2024.2.sqlite", LAYERNORM / "layernorm-3impl-nsys2025.3.sqlite")
    few = [r for r in doc["rows"] if min(r["base_calls"], r["new_calls"]) < 3]
    assert few and {r["verdict"] for r in few} == {"too few calls to tell"} and all(r["ratio"] is None for r in few)
    one = [r for r in few if r["base_calls"] == 1]
    assert one and all(r["base_p10_ns"] == r["base_median_ns"] == r["base_p90_ns"] for r in one)
    assert all(r["base_p10_ns"] <= r["base_median_ns"] <= r["base_p90_ns"] for r in doc["rows"] if r["base_calls"])
    run = doc["run"]
    assert run["unit"] == "second" and run["sentence"].startswith(
        "The captures hold no steps to compare by and are of different lengths"
    )


@pytest.mark.slow
def test_per_names_the_unit_of_work(torch_runs):
    doc = run_json(torch_runs["a"], torch_runs["slow"], "--per", "forward")
    run = doc["run"]
    with sqlite3.connect(f"file:{torch_runs['a']}?mode=ro", uri=True) as con:
        forward = [
            r[0]
            for r in con.execute(
                "SELECT n.end - n.start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
                "WHERE coalesce(n.text, s.value) = 'forward'"
            )
        ]
    assert run["unit"] == "instance of forward" and run["total"]["base"]["step_median_ns"] == round(statistics.median(forward))
    res = runner.invoke(app, ["compare", str(torch_runs["a"]), str(torch_runs["slow"]), "--per", "nosuch"])
    assert res.exit_code == 1 and "holds no steady instance of an NVTX range matching 'nosuch'" in res.stderr
