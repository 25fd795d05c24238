"""The step table (``report --view steps``): every figure of every step equals plain SQL over
the export's tables for that step's window, on real captures (the two-rank H200 capture, the
PyTorch training run, and the NCCL-derived export); the step source and phases."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from nsys_tools.errors import UsageError
from nsys_tools.run.report import view_table

from .conftest import FIXTURES
from .nccl_derived import export as nccl_export
from .torch_train import exports as torch_exports

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
OPS = """
    SELECT k.start, k.end, k.deviceId AS dev, (k.globalPid >> 24) & 16777215 AS pid,
           CASE WHEN lower(substr(s.value, 1, 4)) = 'nccl' THEN 1 ELSE 0 END AS cls
    FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
    UNION ALL SELECT start, end, deviceId, (globalPid >> 24) & 16777215, 2 FROM CUPTI_ACTIVITY_KIND_MEMCPY
    UNION ALL SELECT start, end, deviceId, (globalPid >> 24) & 16777215, 2 FROM CUPTI_ACTIVITY_KIND_MEMSET"""


def union_ns(con: sqlite3.Connection, pid: int, dev: int, a: int, b: int, classes: tuple[int, ...]) -> int:
    """The length of the union of the process's operations of ``classes`` on the device, within [a, b)."""
    sql = f"""
        WITH o AS (SELECT max(start, :a) AS s, min(end, :b) AS e FROM ({OPS})
                   WHERE pid = :pid AND dev = :dev AND cls IN ({",".join(map(str, classes))}) AND start < :b AND end > :a),
        r AS (SELECT s, e, max(e) OVER (ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev FROM o)
        SELECT coalesce(sum(max(0, e - max(s, coalesce(prev, s)))), 0) FROM r"""
    return con.execute(sql, {"a": a, "b": b, "pid": pid, "dev": dev}).fetchone()[0]


def blocked_ns(con: sqlite3.Connection, pid: int, a: int, b: int) -> int:
    sql = """
        SELECT coalesce(sum(min(r.end, :b) - max(r.start, :a)), 0)
        FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
        WHERE (r.globalTid >> 24) & 16777215 = :pid AND r.start < :b AND r.end > :a
          AND (s.value GLOB '*Synchronize*' OR ((s.value GLOB 'cuMem[cs][pe][yt]*' OR s.value GLOB 'cudaMem[cs][pe][yt]*')
               AND s.value NOT GLOB '*Async*'))"""
    return con.execute(sql, {"a": a, "b": b, "pid": pid}).fetchone()[0]


def check_against_sql(export: Path, table) -> int:
    con = sqlite3.connect(export)
    for row in table.iter_rows(named=True):
        a, b, pid, dev = row["start_ns"], row["start_ns"] + row["duration_ns"], row["pid"], row["gpu_id"]
        compute = union_ns(con, pid, dev, a, b, (0,))
        with_nccl = union_ns(con, pid, dev, a, b, (0, 1))
        busy = union_ns(con, pid, dev, a, b, (0, 1, 2))
        where = f"pid {pid} GPU {dev} step {row['step']}"
        assert row["compute_ns"] == compute, where
        assert row["nccl_exposed_ns"] == with_nccl - compute, where
        assert row["memory_ns"] == busy - with_nccl, where
        assert row["busy_ns"] == busy, where
        assert row["idle_ns"] == row["duration_ns"] - busy, where
        assert row["host_blocked_ns"] == blocked_ns(con, pid, a, b), where
        causes = row["idle_host_ns"] + row["idle_sync_ns"] + row["idle_memory_ns"] + row["idle_other_ns"]
        assert causes == row["idle_ns"] and min(row[f"idle_{c}_ns"] for c in ("host", "sync", "memory", "other")) >= 0
    con.close()
    return table.height


def step_ranges(export: Path, like: str) -> list[tuple[int, int, int]]:
    con = sqlite3.connect(export)
    rows = con.execute(
        "SELECT (n.globalTid >> 24) & 16777215, n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE coalesce(n.text, s.value) LIKE ? ORDER BY 1, 2",
        (like,),
    ).fetchall()
    con.close()
    return rows


def test_two_ranks_each_step_equals_sql():
    table = view_table([MULTI], "steps")
    assert check_against_sql(MULTI, table) == 10  # 2 ranks x (setup + 4 steps)
    steps = table.filter(table["step"] > 0)
    assert [(r["pid"], r["start_ns"], r["start_ns"] + r["duration_ns"]) for r in steps.iter_rows(named=True)] == step_ranges(
        MULTI, "step=%"
    )
    # a rank's n-th step is its own: step=k of each process, skew from the earliest rank's step start
    for step in range(1, 5):
        both = steps.filter(steps["step"] == step)
        assert sorted(both["name"].to_list()) == [f"step={step - 1}"] * 2
        assert both["skew_ns"].min() == 0 and both["skew_ns"].max() == both["start_ns"].max() - both["start_ns"].min()
    # the first step (250 ms against ~1.5 ms) is warm-up, the setup before it is its own row
    assert table.filter(table["step"] == 1)["phase"].to_list() == ["warmup", "warmup"]
    assert table.filter(table["step"] == 0)["phase"].to_list() == ["setup", "setup"]
    assert set(steps.filter(steps["step"] > 1)["phase"]) == {"steady"}
    assert set(table["source"]) == {"NVTX ranges named like steps ('*step*', 'ProfilerStep#N')"}


def test_nccl_exposed_equals_sql(tmp_path):
    export = nccl_export(tmp_path)
    table = view_table([export], "steps")
    assert check_against_sql(export, table) == 10
    assert table["nccl_exposed_ns"].sum() > 0


@pytest.mark.slow
def test_training_run_steps_equal_sql_and_slow_steps_are_the_sleeping_ones(tmp_path):
    export = torch_exports(tmp_path)["a"]
    table = view_table([export], "steps")
    assert check_against_sql(export, table) == 25
    steps = table.filter(table["step"] > 0)
    # the outermost ranges named like steps: 'step <i>', not the 'Optimizer.step' ranges inside them
    assert steps["name"].to_list() == [f"step {i}" for i in range(24)]
    # steps 1, 4, 7, ... sleep 2 ms before their forward pass: the slow steps are among them
    slow = steps.filter(steps["slow"])["name"].to_list()
    assert slow and all(int(n.split()[1]) % 3 == 1 for n in slow)


@pytest.mark.slow
def test_without_step_ranges_a_step_opens_with_the_first_repeating_range_and_lasts_until_the_next(tmp_path):
    """The training run with its 'step <i>' ranges deleted: 'Optimizer.step#AdamW.step' (a method
    called in a step) is not a step, nor are emit_nvtx's per-operator ranges ('aten::to, seq = ...',
    twice a step); forward, backward and optimizer repeat once a step, forward opens it."""
    export = shutil.copyfile(torch_exports(tmp_path)["a"], tmp_path / "no-steps.sqlite")
    with sqlite3.connect(export) as con:
        con.execute("DELETE FROM NVTX_EVENTS WHERE coalesce(text, (SELECT value FROM StringIds WHERE id = textId)) LIKE 'step %'")
        opens = [
            r[0]
            for r in con.execute(
                "SELECT n.start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
                "WHERE coalesce(n.text, s.value) = 'forward' ORDER BY n.start"
            )
        ]
        (last,) = con.execute("SELECT max(end) FROM NVTX_EVENTS WHERE end IS NOT NULL").fetchone()
    table = view_table([export], "steps")
    assert set(table["source"]) == {"the repeating top-level NVTX range 'forward', each step lasting until it opens again"}
    steps = table.filter(table["step"] > 0)
    assert steps["start_ns"].to_list() == opens and len(opens) == 24
    ends = (steps["start_ns"] + steps["duration_ns"]).to_list()
    assert ends == [*opens[1:], last]
    check_against_sql(export, table)


def test_fallbacks_a_repeating_top_level_range_then_kernels(tmp_path):
    renamed = shutil.copyfile(MULTI, tmp_path / "iter.sqlite")
    con = sqlite3.connect(renamed)
    with con:
        con.execute("UPDATE StringIds SET value = replace(value, 'step=', 'iter=') WHERE value LIKE 'step=%'")
        con.execute("UPDATE NVTX_EVENTS SET text = replace(text, 'step=', 'iter=') WHERE text LIKE 'step=%'")
    con.close()
    table = view_table([renamed], "steps")
    assert set(table["source"]) == {"the repeating top-level NVTX range 'iter=#', each step lasting until it opens again"}
    assert check_against_sql(renamed, table) == 10
    bare = shutil.copyfile(MULTI, tmp_path / "bare.sqlite")
    con = sqlite3.connect(bare)
    with con:
        con.execute("DELETE FROM NVTX_EVENTS")
    con.close()
    table = view_table([bare], "steps")
    assert set(table["source"]) == {"a repeating kernel sequence (no NVTX step ranges)"}
    # the sequence repeats every 9 kernels after the first one: 4 steps per rank, each on its own
    assert table.filter(table["step"] > 0).group_by("pid").len()["len"].to_list() == [4, 4]
    check_against_sql(bare, table)


def test_given_glob_thresholds_and_mfu():
    table = view_table([MULTI], "steps", step="forward", warmup=1000.0, slow=1.1, flops_per_step=1e12)
    assert set(table.filter(table["step"] > 0)["name"]) == {"forward"}
    assert "warmup" not in set(table["phase"])  # nothing takes 1000x the median
    row = table.filter(table["step"] == 2).row(0, named=True)
    assert row["tflops"] == pytest.approx(1e12 / row["duration_ns"] / 1e3)
    assert row["mfu_pct"] == pytest.approx(100 * row["tflops"] / 989.4)  # the H200's dense BF16 peak
    own = view_table([MULTI], "steps", flops_per_step=1e12, peak_tflops=100.0).filter(table["step"] == 2).row(0, named=True)
    assert own["mfu_pct"] == pytest.approx(own["tflops"])


def test_mfu_refuses_an_unknown_gpu(tmp_path):
    other = shutil.copyfile(MULTI, tmp_path / "other.sqlite")
    con = sqlite3.connect(other)
    with con:
        con.execute("UPDATE TARGET_INFO_GPU SET name = 'Mystery GPU'")
    con.close()
    with pytest.raises(UsageError, match="no known peak for 'Mystery GPU'"):
        view_table([other], "steps", flops_per_step=1e12)


def test_no_steps_says_what_it_looked_for():
    from nsys_tools.cli import app

    from .cli import CliRunner

    export = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
    res = CliRunner().invoke(app, ["report", str(export), "--view", "steps"])
    assert res.exit_code == 0, res.output
    assert "No rows: no NVTX range named like a step ('*step*', 'ProfilerStep#N'), no top-level range repeated" in res.stderr
    assert "`torch/4096x768` (1)" in res.stderr and "--step GLOB" in res.stderr


def test_a_window_keeps_each_ranks_own_steps_and_their_figures():
    from nsys_tools.read.window import WindowSpec

    whole = view_table([MULTI], "steps")
    part = view_table([MULTI], "steps", window=WindowSpec(within="step=*#2"))
    assert part["name"].to_list() == ["step=1", "step=1"] and part["step"].to_list() == [2, 2]
    same = ["pid", "gpu_id", "step", "start_ns", "duration_ns", "busy_ns", "compute_ns", "memory_ns", "host_blocked_ns"]
    assert part.select(same).rows() == whole.filter(whole["step"] == 2).select(same).rows()


def idle_by_cause_sql(export: Path, pid: int, dev: int) -> list[tuple[int, int, str]]:
    """Every idle interval of the process's device (after its first operation) as (start, end,
    cause): ``sync`` where a blocking call on the next operation's launching thread, the last to
    start before the interval ends, covers half of it or more; ``host`` where that operation's
    launch call ended after the interval began; ``memory`` where it is a copy or a set; else ``other``."""
    sql = """
        WITH ops AS (
            SELECT o.start, o.end, o.kind, r.end AS api_end, r.globalTid AS tid FROM (
                SELECT start, end, 'kernel' AS kind, correlationId, globalPid
                FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = :dev
                UNION ALL SELECT start, end, 'memcpy', correlationId, globalPid
                FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE deviceId = :dev
                UNION ALL SELECT start, end, 'memset', correlationId, globalPid
                FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE deviceId = :dev
            ) o LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
                ON r.correlationId = o.correlationId AND r.globalTid >> 24 = o.globalPid >> 24
            WHERE (o.globalPid >> 24) & 16777215 = :pid),
        ordered AS (
            SELECT *, max(end) OVER (ORDER BY start, end ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_to FROM ops),
        gaps AS (SELECT busy_to AS a, start AS b, kind, api_end, tid FROM ordered WHERE start > busy_to),
        blocking AS (
            SELECT r.start, r.end, r.globalTid AS tid FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
            WHERE s.value GLOB '*Synchronize*' OR ((s.value GLOB 'cuMem[cs][pe][yt]*' OR s.value GLOB 'cudaMem[cs][pe][yt]*')
                  AND s.value NOT GLOB '*Async*'))
        SELECT a, b, CASE
            WHEN (SELECT 2 * (min(c.end, b) - max(c.start, a)) >= b - a FROM blocking c
                  WHERE c.tid = g.tid AND c.start <= b - 1 ORDER BY c.start DESC LIMIT 1) THEN 'sync'
            WHEN api_end > a THEN 'host' WHEN kind != 'kernel' THEN 'memory' ELSE 'other' END
        FROM gaps g"""
    con = sqlite3.connect(export)
    try:
        return con.execute(sql, {"pid": pid, "dev": dev}).fetchall()
    finally:
        con.close()


def test_idle_by_cause_equals_sql_per_step(tmp_path):
    """An idle interval that crosses a step's edge is split between the steps (one running from
    rank 1427's setup into its first step had lost its 205,556 ns in the setup to ``other``)."""
    for export in (MULTI, nccl_export(tmp_path), torch_exports(tmp_path)["a"]):
        table = view_table([export], "steps")
        for (pid, dev), rows in table.group_by("pid", "gpu_id"):
            gaps = idle_by_cause_sql(export, pid, dev)
            for row in rows.iter_rows(named=True):
                a, b = row["start_ns"], row["start_ns"] + row["duration_ns"]
                for cause in ("host", "sync", "memory"):
                    want = sum(max(0, min(e, b) - max(s, a)) for s, e, c in gaps if c == cause)
                    assert row[f"idle_{cause}_ns"] == want, (pid, row["step"], cause)


def one_rank(source: Path, into: Path, drop_pid: int, shift_ns: int) -> Path:
    """``source`` without process ``drop_pid``'s rows, its times counted from a session that
    started ``shift_ns`` later (every time ``shift_ns`` smaller, the wall-clock start that much later):
    the export one rank of the run would have written on its own."""
    shutil.copyfile(source, into)
    con = sqlite3.connect(into)
    with con:
        tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            columns = {c[1] for c in con.execute(f'PRAGMA table_info("{table}")')}
            for ids in ("globalTid", "globalPid"):
                if ids in columns:
                    con.execute(f'DELETE FROM "{table}" WHERE ({ids} >> 24) & 16777215 = ?', (drop_pid,))
            if {"start", "end"} <= columns:
                con.execute(f'UPDATE "{table}" SET start = start - ?1, end = end - ?1', (shift_ns,))
        con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + ?", (shift_ns,))
    con.close()
    return into


def test_ranks_in_exports_of_their_own_skew_on_the_wall_clock(tmp_path):
    """The two-GPU capture split into one export per rank, the second rank's session started 1 s
    later: the same steps, figures and skew as the one export."""
    whole = view_table([MULTI], "steps")
    split = [one_rank(MULTI, tmp_path / "r0.sqlite", 1427, 0), one_rank(MULTI, tmp_path / "r1.sqlite", 1426, 1_000_000_000)]
    parts = view_table(split, "steps")
    same = ["pid", "gpu_id", "step", "phase", "duration_ns", "busy_ns", "compute_ns", "idle_host_ns", "skew_ns", "slow"]
    assert parts.select(same).rows() == whole.select(same).rows()
    assert parts.filter(parts["pid"] == 1426)["start_ns"].to_list() == whole.filter(whole["pid"] == 1426)["start_ns"].to_list()


def test_the_training_run_without_nvtx_gets_its_24_steps_from_the_kernel_sequence(tmp_path):
    bare = torch_exports(tmp_path)["a"]
    con = sqlite3.connect(bare)
    with con:
        con.execute("DELETE FROM NVTX_EVENTS")
    con.close()
    table = view_table([bare], "steps")
    steps = table.filter(table["step"] > 0)
    assert steps.height == 24 and set(table["source"]) == {"a repeating kernel sequence (no NVTX step ranges)"}
    assert check_against_sql(bare, table) == 25
