"""The rules beyond nsys analyze's, each against plain SQL over a real export (the two-rank H200
capture, the PyTorch training run, the NCCL-derived export, the three LayerNorm implementations)."""

from __future__ import annotations

import sqlite3
import statistics
from pathlib import Path

import polars as pl
import pytest

from nsys_tools.rules import REGISTRY, diagnose, spec
from nsys_tools.rules.context import Run

from .conftest import FIXTURES
from .nccl_derived import export as nccl_export
from .test_steps import union_ns
from .torch_train import exports as torch_exports

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
LAYERNORM = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"


def sql(export: Path, query: str, *args) -> list[tuple]:
    con = sqlite3.connect(export)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


def ranges(export: Path, like: str) -> dict[int, list[tuple[int, int]]]:
    """(start, end) of the NVTX ranges whose text is LIKE ``like``, per process, in order."""
    out: dict[int, list[tuple[int, int]]] = {}
    rows = sql(
        export,
        "SELECT (n.globalTid >> 24) & 16777215, n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE coalesce(n.text, s.value) LIKE ? ORDER BY 1, 2",
        like,
    )
    for pid, a, b in rows:
        out.setdefault(pid, []).append((a, b))
    return out


def rows_of(run: Run, name: str, **options) -> pl.DataFrame:
    rule = spec(name)
    defaults = {k: d for k, (_, d, _) in rule.options.items()}
    return rule.load().rows(run, **{**defaults, **options})


@pytest.fixture(scope="module")
def torch_a(tmp_path_factory) -> Path:
    return torch_exports(tmp_path_factory.mktemp("torch"))["a"]


def test_every_rule_is_one_file_that_declares_itself():
    assert {p.stem for p in Path(spec("setup").load().__file__).parent.glob("*.py")} >= set(REGISTRY)
    beyond = {n for n, r in REGISTRY.items() if not r.twin}
    assert beyond == {
        "setup", "slow_steps", "copies", "sync_every_step", "launch_bound", "exposed_nccl", "straggler", "step_variance",
        "slow_sibling", "slow_calls",
    }  # fmt: skip


def test_setup_is_the_time_before_the_first_step_and_the_first_steps_excess():
    run = Run([MULTI])
    found = {f.rank: f for f in diagnose(run, ["setup"])}
    for pid, steps in ranges(MULTI, "step=%").items():
        first = sql(
            MULTI,
            "SELECT min(t) FROM ("
            " SELECT start AS t FROM NVTX_EVENTS WHERE (globalTid >> 24) & 16777215 = ?1"
            " UNION ALL SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE (globalPid >> 24) & 16777215 = ?1"
            " UNION ALL SELECT start FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE (globalPid >> 24) & 16777215 = ?1"
            " UNION ALL SELECT start FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE (globalPid >> 24) & 16777215 = ?1"
            " UNION ALL SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN CUPTI_ACTIVITY_KIND_KERNEL k"
            "  ON k.correlationId = r.correlationId AND k.globalPid >> 24 = r.globalTid >> 24"
            "  WHERE (r.globalTid >> 24) & 16777215 = ?1)",
            pid,
        )[0][0]
        durations = [b - a for a, b in steps]
        setup = steps[0][0] - first
        warm = durations[0] - statistics.median(durations[1:])  # the first step, 250 ms against ~1.5 ms
        assert found[pid].time_ns == setup + int(warm)
        assert found[pid].steps == [0, 1]


def test_slow_steps_are_the_sleeping_steps_and_their_cause_is_the_host(torch_a):
    run = Run([torch_a])
    durations = [b - a for a, b in ranges(torch_a, "step %")[669]]
    median = statistics.median(durations)
    slow = [i + 1 for i, d in enumerate(durations) if d > 1.15 * median]
    (found,) = diagnose(run, ["slow_steps"])
    assert found.steps == slow and found.time_ns == sum(int(durations[i - 1] - median) for i in slow)
    # every slow step is one that sleeps 2 ms on the host (steps 1, 4, 7, ... of the loop: 'step <i>', i % 3 == 1)
    assert all((i - 1) % 3 == 1 for i in slow) and "waited for the host" in found.title
    # the title names them as the user knows them, by their ranges ('step 4'), not by their positions (5)
    assert f"({', '.join(f'step {i - 1}' for i in slow)})" in found.title


def test_slow_steps_rows_come_in_rank_device_and_step_order():
    """One row per slow step, sorted: the csv is the same bytes every run (a join's order is not)."""
    table = rows_of(Run([MULTI]), "slow_steps")
    assert table["pid"].n_unique() == 2 and table.equals(table.sort("pid", "gpu_id", "step"))


def test_step_variance_equals_the_spread_of_the_step_ranges(torch_a):
    durations = [b - a for a, b in ranges(torch_a, "step %")[669]]
    (row,) = rows_of(Run([torch_a]), "step_variance").iter_rows(named=True)
    assert row["cv_pct"] == pytest.approx(100 * statistics.stdev(durations) / statistics.mean(durations))
    median = statistics.median(durations)
    # the time at stake leaves the slow steps (over 1.15x the median) to slow_steps
    assert row["above_ns"] == int(sum(max(0, d - median) for d in durations if d <= 1.15 * median))
    assert any(d > 1.15 * median for d in durations)


def test_sync_every_step_counts_the_steps_holding_a_synchronization(torch_a):
    steps = ranges(torch_a, "step %")[669]
    syncs = sql(
        torch_a,
        "SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE '%Synchronize%'",
    )
    holding = sum(any(s < b and e > a for s, e in syncs) for a, b in steps)
    (row,) = rows_of(Run([torch_a]), "sync_every_step").iter_rows(named=True)
    assert (row["steps"], row["blocking_steps"]) == (len(steps), holding) == (24, 24)
    assert [f.rule for f in diagnose(Run([torch_a]), ["sync_every_step"])] == ["sync_every_step"]


def test_exposed_nccl_equals_the_unions_in_sql(tmp_path):
    export = nccl_export(tmp_path)
    run = Run([export])
    table = rows_of(run, "exposed_nccl")
    con = sqlite3.connect(export)
    for row in table.iter_rows(named=True):
        steady = run.steps.filter((pl.col("pid") == row["pid"]) & (pl.col("phase") == "steady"))
        want = 0
        for s in steady.iter_rows(named=True):
            a, b = s["start_ns"], s["start_ns"] + s["duration_ns"]
            want += union_ns(con, row["pid"], row["gpu_id"], a, b, (0, 1)) - union_ns(con, row["pid"], row["gpu_id"], a, b, (0,))
        assert row["exposed_ns"] == want > 0
    con.close()
    assert {f.device for f in diagnose(run, ["exposed_nccl"])} == {0, 1}


def test_straggler_is_the_rank_slowest_in_most_steps():
    steps = ranges(MULTI, "step=%")
    per_step = list(zip(*([b - a for a, b in s] for s in steps.values()), strict=True))[1:]  # step 1 is warm-up
    pids = list(steps)
    behind = [max(d) - statistics.median(d) for d in per_step]
    slowest = [pids[d.index(max(d))] for d in per_step]
    (found,) = diagnose(Run([MULTI]), ["straggler"])
    assert slowest == [found.rank] * 3 and found.time_ns == sum(int(x) for x in behind)


def test_launch_bound_counts_kernels_shorter_than_their_launch_call():
    table = rows_of(Run([MULTI]), "launch_bound")
    for row in table.iter_rows(named=True):
        (short,) = sql(
            MULTI,
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r"
            " ON r.correlationId = k.correlationId AND r.globalTid >> 24 = k.globalPid >> 24"
            " WHERE (k.globalPid >> 24) & 16777215 = ? AND k.end - k.start < r.end - r.start",
            row["pid"],
        )[0]
        assert row["shorter_than_launch"] == short and row["kernels"] == 39
        steps = Run([MULTI]).steps.filter((pl.col("pid") == row["pid"]) & (pl.col("phase") == "steady"))
        # steps idle on the host over a quarter of their time, in waits none of which holds half of it
        waits = pl.col("idle_host_ns")
        bound = (waits * 4 > pl.col("duration_ns")) & (pl.col("idle_host_longest_ns") * 2 < waits)
        assert row["waited_ns"] == steps.filter(bound)["idle_host_ns"].sum() > 0


def test_launch_bound_leaves_kernels_of_one_shared_launch_out_of_the_short_count(tmp_path):
    """A CUDA graph's kernels share the correlation id of one cudaGraphLaunch call: compared with
    that call they would all look short. Derived: five kernels of one rank given one launch's id."""
    import shutil

    path = tmp_path / "graph-like.sqlite"
    shutil.copy(MULTI, path)
    with sqlite3.connect(path) as con:
        (pid, first) = con.execute(
            "SELECT globalPid, min(correlationId) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY globalPid ORDER BY globalPid LIMIT 1"
        ).fetchone()
        con.execute(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = ? WHERE rowid IN (SELECT rowid FROM "
            "CUPTI_ACTIVITY_KIND_KERNEL WHERE globalPid = ? ORDER BY start LIMIT 5)",
            (first, pid),
        )
    table = rows_of(Run([path]), "launch_bound").filter(pl.col("pid") == (pid >> 24) & 0xFFFFFF)
    (row,) = table.iter_rows(named=True)
    (short,) = sql(
        path,
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r"
        " ON r.correlationId = k.correlationId AND r.globalTid >> 24 = k.globalPid >> 24"
        " WHERE k.globalPid = ? AND k.correlationId != ? AND k.end - k.start < r.end - r.start",
        pid,
        first,
    )[0]
    assert (row["kernels"], row["in_shared_launches"], row["shorter_than_launch"]) == (39, 5, short)
    (found,) = [f for f in diagnose(Run([path]), ["launch_bound"]) if f.rank == row["pid"]]
    assert "of its 34 kernels ran shorter than their launch call (5 more ran in launches of several kernels" in found.title


def test_copies_sum_bytes_and_time_per_direction():
    table = rows_of(Run([MULTI]), "copies")
    want = sql(
        MULTI,
        "SELECT (m.globalPid >> 24) & 16777215, m.deviceId, e.label, count(*), sum(m.bytes), sum(m.end - m.start),"
        " sum(m.srcKind = 0 OR m.dstKind = 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEMCPY_OPER e ON e.id = m.copyKind"
        " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    )
    got = table.select("pid", "gpu_id", "copy_kind", "copies", "bytes", "time_ns", "pageable").rows()
    assert [(p, g, k.replace("-", "").lower(), *rest) for p, g, k, *rest in got] == [
        (p, g, k.replace("-", "").replace(" ", "").lower(), *rest) for p, g, k, *rest in want
    ]
    found = diagnose(Run([MULTI]), ["copies"])
    assert [f.kernel for f in found] == ["[CUDA memcpy Host-to-Device]"] * 2
    assert all("PCIe Gen5 x16" in f.title and "4 of the 8 from or to pageable memory" in f.title for f in found)


def test_slow_sibling_against_nsys_stats_kernel_totals():
    """torch's LayerNorm at 4096x768 against triton's: nsys stats' kernel totals in those ranges."""
    reference = pl.read_csv(FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.nsys-stats-kern-nvtx.csv")
    total = {n.split("/")[0]: t for n, t in reference.select("Name", "Total Time (ns)").rows() if "/4096x768/" in n}
    (found,) = diagnose(Run([LAYERNORM]), ["slow_sibling"])
    assert found.range == "torch/4096x768" and found.time_ns == total["torch"] - total["triton"]
    assert "43% of its sibling triton's speed" in found.title  # cupy, at 59%, is not flagged at the default 2x


def test_diagnose_takes_one_run(tmp_path):
    from typer.testing import CliRunner

    from nsys_tools.cli import app

    runs = torch_exports(tmp_path)
    res = CliRunner().invoke(app, ["diagnose", str(runs["a"]), str(runs["b"]), "--rule", "setup"])
    assert res.exit_code == 1 and res.output.count("Error:") == 1 and "2 separate runs" in res.output
    merged = CliRunner().invoke(app, ["diagnose", str(runs["a"]), str(runs["b"]), "--rule", "setup", "--merge", "-f", "json"])
    assert merged.exit_code == 0, merged.output


def test_twins_findings_count_only_steady_steps_time():
    """The low-utilization stretch of each GPU spans the setup and the 191-251 ms first step: its
    finding counts the idle part that falls in the steady steps that are not slow (from SQL: the
    steps after the first, less those over 1.15x their median), not the rest."""
    export = MULTI
    csv = rows_of(Run([export]), "gpu_time_util")
    found = {f.rank: f for f in diagnose(Run([export]), ["gpu_time_util"])}
    for r in csv.iter_rows(named=True):
        a, b = r["Start (ns)"], r["Start (ns)"] + r["Duration (ns)"]
        steady = ranges(export, "step=%")[r["PID"]][1:]
        median = statistics.median(e - s for s, e in steady)
        kept = [(s, e) for s, e in steady if e - s <= 1.15 * median]
        assert 0 < len(kept) < len(steady)  # a slow step is left to slow_steps
        steady = sum(max(0, min(e, b) - max(s, a)) for s, e in kept)
        assert found[r["PID"]].time_ns == int(steady * (100 - r["In-Use (%)"]) / 100)
        assert 0 < found[r["PID"]].time_ns < r["Duration (ns)"] / 20


def stretched(source: Path, into: Path, kernel_start: int, by_ns: int) -> Path:
    """``source`` with the kernel starting at ``kernel_start`` made ``by_ns`` longer and everything
    after its end (GPU work, API calls, NVTX ranges, and the ends of what spans it) ``by_ns`` later:
    the run as it would be had that one call of the kernel been slower."""
    import shutil

    shutil.copyfile(source, into)
    con = sqlite3.connect(into)
    with con:
        (end,) = con.execute("SELECT end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start = ?", (kernel_start,)).fetchone()
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                      "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"):  # fmt: skip
            con.execute(f"UPDATE {table} SET start = start + ?1 WHERE start >= ?2", (by_ns, end))
            con.execute(f"UPDATE {table} SET end = end + ?1 WHERE end >= ?2", (by_ns, end))  # the kernel's own end too
    con.close()
    return into


def test_a_step_slowed_by_one_kernel_call_names_the_kernel(torch_a, tmp_path):
    """One GEMM call of 'step 2' in the training run made 5 ms longer (and the rest of the run 5 ms
    later): that step is slow, its cause is compute, and the kernel named is that GEMM."""
    export = stretched(torch_a, tmp_path / "slow-gemm.sqlite", 36039712, 5_000_000)
    found = [f for f in diagnose(Run([export]), ["slow_steps"]) if 3 in f.steps]
    assert len(found) == 1 and found[0].steps == [3] and "compute time grew" in found[0].title
    gemm = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_"
    assert found[0].kernel == gemm + "execute_kernel__5x_cublas"
    (row,) = rows_of(Run([export]), "slow_steps").filter(pl.col("step") == 3).iter_rows(named=True)
    assert row["more_kernel_ns"] > 4_900_000 and row["cause"] == "kernel"


def test_every_rules_rows_write_as_csv():
    from typer.testing import CliRunner

    from nsys_tools.cli import app

    for name in REGISTRY:
        res = CliRunner().invoke(app, ["diagnose", str(MULTI), "--rule", name, "--format", "csv"])
        assert res.exit_code == 0, (name, res.output)
    launch = CliRunner().invoke(app, ["diagnose", str(MULTI), "--rule", "launch_bound", "--format", "csv"])
    assert launch.stdout.splitlines()[1].startswith("1426,0,2 3 4,")  # the steady steps, one cell


def test_slow_calls_finds_the_one_slowed_call_of_a_kernel(torch_a, tmp_path):
    """The same GEMM call made 5 ms longer: the one call of that kernel and launch shape beyond
    3x its siblings' median (from SQL), and nothing on the capture as it was."""
    assert diagnose(Run([torch_a]), ["slow_calls"]) == []
    export = stretched(torch_a, tmp_path / "slow-gemm.sqlite", 36039712, 5_000_000)
    (found,) = diagnose(Run([export]), ["slow_calls"])
    same = sql(
        export,
        "SELECT k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_KERNEL o"
        " ON o.start = 36039712 AND k.demangledName = o.demangledName AND k.gridX = o.gridX AND k.gridY = o.gridY"
        " AND k.gridZ = o.gridZ AND k.blockX = o.blockX AND k.blockY = o.blockY AND k.blockZ = o.blockZ",
    )
    durations = sorted(d for (d,) in same)
    median = statistics.median(durations)
    assert found.time_ns == int(durations[-1] - median) and found.start_ns == 36039712
    assert found.title.startswith(f"1 call of {found.kernel} (grid ") and len(durations) == 48


@pytest.mark.slow
def test_diagnose_on_the_bad_input_corpus_is_an_answer_or_one_error_line(tmp_path):
    """Every case of tests/fixtures/bad-input/corpus.py through diagnose (all rules, json): exit 0
    with findings, or exit 1 with Error: lines naming the problem; never a traceback or a bug line."""
    import importlib.util
    import json
    import sys

    from typer.testing import CliRunner

    from nsys_tools.cli import BUG, app

    spec = importlib.util.spec_from_file_location("bad_input_corpus", FIXTURES / "bad-input" / "corpus.py")
    corpus = sys.modules.setdefault("bad_input_corpus", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(corpus)
    for name, case in corpus.CASES.items():
        (tmp_path / name).mkdir()
        res = CliRunner().invoke(app, ["diagnose", *case.build(tmp_path / name), "--merge", "-f", "json"])
        assert "Traceback" not in res.stderr and BUG not in res.stderr, (name, res.stderr)
        assert res.exception is None or isinstance(res.exception, SystemExit), (name, repr(res.exception))
        if res.exit_code == 0:
            assert isinstance(json.loads(res.stdout)["findings"], list), name
        else:
            assert res.exit_code in (1, 2) and res.stdout == "" and "Error:" in res.stderr, (name, res.stderr)
