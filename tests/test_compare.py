"""compare BASE NEW on real captures: two quiet sweeps of one build, a sweep of a later build,
a loaded one, and the two bundled exports of one workload made with two nsys versions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from nsys_tools.cli import app
from nsys_tools.study import compare, ledger

from .cli import CliRunner
from .conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ROOT / "reports" / "sweeps"
QUIET, QUIET_2 = SWEEPS / "20261129-183449-quiet", SWEEPS / "20261129-183620-quiet"
FINAL = SWEEPS / "20261129-202628-quiet"  # a later build: ours one warp per block from 8192 rows on
LEDGER = ROOT / "reports" / "ledger.sqlite"
EXPORTS = FIXTURES / "layernorm-3impl"
runner = CliRunner()


def _compare(base: Path, new: Path, noise: float | None = None) -> pl.DataFrame:
    a, b = compare.open_capture(base), compare.open_capture(new)
    if noise is None:
        sd, _ = ledger.session_noise(LEDGER, a.meta["gpu"], exclude=[*a.ids, *b.ids])
        noise = math.sqrt(2) * sd
    return compare.compare(a, b, session_sd=noise)


@pytest.mark.slow
def test_two_quiet_sessions_of_one_build_are_not_distinguishable():
    table = _compare(QUIET, QUIET_2)
    assert table.height == 16 and (table["verdict"] == "not distinguishable").all()
    assert ((table["ci_lo"] <= table["ratio"]) & (table["ratio"] <= table["ci_hi"])).all()
    assert (table["clusters"] == "3/3").all()


@pytest.mark.slow
def test_between_session_variance_matters():
    """Without the ledger's estimate of how much sessions move, rounds alone call a 0.6% shift
    of Triton's median at 4096x4096 between the two quiet sessions a difference."""
    table = _compare(QUIET, QUIET_2, noise=0.0)
    moved = table.filter(pl.col("verdict") != "not distinguishable")
    assert moved.select("impl", "shape").rows() == [("triton", "4096x4096")]


@pytest.mark.slow
def test_a_faster_build_is_called_faster():
    table = _compare(QUIET, FINAL)
    row = table.filter((pl.col("impl") == "ours") & (pl.col("shape") == "8192x768")).row(0, named=True)
    assert row["verdict"] == "faster" and row["ci_hi"] < 1 and row["ratio"] == pytest.approx(14.40 / 14.98, abs=0.002)
    assert (table.filter(pl.col("impl") != "ours")["verdict"] == "not distinguishable").all()
    reverse = _compare(FINAL, QUIET).filter((pl.col("impl") == "ours") & (pl.col("shape") == "8192x768"))
    assert reverse["verdict"].to_list() == ["slower"]


def test_session_noise_comes_from_replicated_quiet_sessions():
    sd, dof = ledger.session_noise(LEDGER, "NVIDIA H200")
    assert 0.001 < sd < 0.005 and dof > 30
    assert ledger.session_noise(LEDGER, "another GPU") == (0.0, 0)


def test_exports_of_two_nsys_versions():
    a, b = (
        compare.open_capture(EXPORTS / "layernorm-3impl-nsys2024.2.sqlite"),
        compare.open_capture(EXPORTS / "layernorm-3impl-nsys2025.3.sqlite"),
    )
    assert a.keys == ["range", "kernel"] and a.clusters == ""
    assert compare.differences(a, b) == ["nsys: 2024.2.3.38 (base) against 2025.3.2.0 (new)"]
    table = compare.compare(a, b)
    # The warm-up calls outside every range are compared too, under an empty range, as the report lists them.
    assert set(table["range"]) == {"torch/4096x768", "triton/4096x768", "cupy/4096x768", ""}
    assert table.filter(pl.col("verdict").str.starts_with("only in")).is_empty()


def test_exports_without_nvtx_are_compared_kernel_for_kernel():
    """No NVTX at all: every kernel is outside a range; the comparison still has its rows."""
    no_nvtx = FIXTURES / "bad-input" / "no-nvtx.sqlite"
    res = runner.invoke(app, ["compare", str(no_nvtx), str(no_nvtx), "-f", "json", "--session-noise", "0"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    rows = doc["rows"]
    assert {r["range"] for r in rows} == {""} and len(rows) == 5
    assert {r["kernel"] for r in rows} >= {"reduce_kernel", "[CUDA memset]"}
    assert {r["verdict"] for r in rows} == {"too few calls to tell"} and {r["base_calls"] for r in rows} == {1}
    assert doc["run"]["unit"] == "second" and [d["device"] for d in doc["run"]["devices"]] == ["GPU 0"]
    res = runner.invoke(app, ["compare", str(no_nvtx), str(no_nvtx), "--session-noise", "0"])
    assert "Rows: 5 too few calls to tell." in res.stdout and "| (none) | reduce\\_kernel | 1/1 |" in res.stdout


@pytest.mark.slow
def test_cli_markdown_json_and_regression_gate(tmp_path):
    res = runner.invoke(app, ["compare", str(QUIET), str(QUIET_2), "--ledger", str(LEDGER)])
    assert res.exit_code == 0, res.stderr
    assert "Rows: 16 not distinguishable." in res.stdout
    assert "variance between sessions added" in res.stdout and "| layernorm | ours | 4096x768 | cold |" in res.stdout
    res = runner.invoke(app, ["compare", str(FINAL), str(QUIET), "-f", "json", "--fail-on-regression", "2"])
    assert res.exit_code == 3 and "Regression beyond 2%: layernorm/ours/8192x768/cold 1.040" in res.stderr
    rows = json.loads(res.stdout)
    assert {r["verdict"] for r in rows} == {"slower", "not distinguishable"}
    res = runner.invoke(app, ["compare", str(FINAL), str(QUIET), "--fail-on-regression", "5"])
    assert res.exit_code == 0  # 4% slower does not cross a 5% gate
    res = runner.invoke(
        app, ["compare", str(EXPORTS / "layernorm-3impl-nsys2024.2.sqlite"), str(EXPORTS / "layernorm-3impl-nsys2025.3.sqlite")]
    )
    assert res.exit_code == 0 and "Warning: the captures differ in nsys: 2024.2.3.38 (base) against 2025.3.2.0" in res.stderr
    assert "**The two captures differ:** nsys: 2024.2.3.38 (base) against 2025.3.2.0 (new)." in res.stdout
    res = runner.invoke(app, ["compare", str(QUIET), str(EXPORTS / "layernorm-3impl-nsys2024.2.sqlite")])
    assert res.exit_code == 1 and "holds ranges of another kind than the base" in res.stderr
    res = runner.invoke(app, ["compare", str(QUIET), str(tmp_path / "missing")])
    assert res.exit_code == 1 and "missing: no such file or folder" in res.stderr


@pytest.mark.slow
def test_cli_outputs_are_checked_and_ignored_options_refused(tmp_path):
    export = tmp_path / "a.sqlite"
    export.write_bytes((EXPORTS / "layernorm-3impl-nsys2025.3.sqlite").read_bytes())
    before = export.read_bytes()
    res = runner.invoke(app, ["compare", str(EXPORTS / "layernorm-3impl-nsys2024.2.sqlite"), str(export), "-o", str(export)])
    assert res.exit_code == 1 and "is an input of this command" in res.stderr and export.read_bytes() == before
    res = runner.invoke(app, ["compare", str(QUIET), str(QUIET_2), "-o", str(QUIET / "manifest.json")])
    assert res.exit_code == 1 and "is an input of this command" in res.stderr
    res = runner.invoke(app, ["compare", str(QUIET), str(QUIET_2), "--session-noise", "1", "--ledger", str(LEDGER)])
    assert res.exit_code == 2 and "--ledger is not read when --session-noise is given" in res.stderr
    res = runner.invoke(app, ["compare", str(QUIET), str(QUIET_2), "--session-noise", "1", "-o", str(tmp_path / "c.md")])
    assert res.exit_code == 0 and "Rows: 16 not distinguishable." in (tmp_path / "c.md").read_text()


def emit_nvtx_copy(tmp_path: Path, name: str, seq_step: int, slow: str | None = None) -> Path:
    """The two-GPU capture with its forward and backward ranges named as PyTorch's emit_nvtx
    names ops (``aten::forward, seq = N, op_id = N, sizes = [...]``, ids differing per copy), and
    optionally every ``slow`` kernel half as long again."""
    import shutil
    import sqlite3

    path = tmp_path / f"{name}.sqlite"
    shutil.copy(FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite", path)
    with sqlite3.connect(path) as con:
        con.execute(
            "UPDATE NVTX_EVENTS SET text = 'aten::' || text || ', seq = ' || (rowid * ?) || ', op_id = ' || (rowid + ?)"
            " || ', sizes = [[64, 128], [128, ' || rowid || ']]' WHERE text IN ('forward', 'backward')",
            (seq_step, seq_step),
        )
        if slow:
            con.execute(
                'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + ("end" - start) * 3 / 2'
                " WHERE shortName IN (SELECT id FROM StringIds WHERE value = ?)",
                (slow,),
            )
    return path


@pytest.mark.slow
def test_pytorch_op_names_match_across_runs_by_op_and_kernel(tmp_path):
    """Range names with per-call ids match nothing across runs; by (op, kernel) every row matches,
    a run of the same build is not distinguishable, and a slowed kernel is slower in every op
    it runs in and nowhere else."""
    a, b = emit_nvtx_copy(tmp_path, "a", 3), emit_nvtx_copy(tmp_path, "b", 7)
    by_range = compare.compare(compare.open_capture(a), compare.open_capture(b))
    ops = by_range.filter(pl.col("range").str.starts_with("aten::"))
    assert ops.height > 0 and set(ops["verdict"]) == {"only in base", "only in new"}
    base, new = compare.open_capture(a, names="op"), compare.open_capture(b, names="op")
    table = compare.compare(base, new)
    assert base.keys == ["op", "kernel"] and set(table["op"]) >= {"aten::forward", "aten::backward"}
    few = table["base_calls"] < compare.MIN_CALLS
    assert set(table.filter(~few)["verdict"]) == {"not distinguishable"} and compare.matched_share(base, new) == (1.0, 1.0)
    assert set(table.filter(few)["verdict"]) <= {"too few calls to tell"}
    slowed = emit_nvtx_copy(tmp_path, "slow", 11, slow="vectorized_layer_norm_kernel")
    table = compare.compare(base, compare.open_capture(slowed, names="op"))
    slower = table.filter(pl.col("verdict") == "slower")
    assert slower.height >= 1 and slower["kernel"].str.contains("::vectorized_layer_norm_kernel<").all()
    assert set(table.filter(pl.col("verdict") != "slower")["verdict"]) <= {"not distinguishable", "too few calls to tell"}
    on_devices = compare.compare(
        compare.open_capture(a, names="op", by=("device",)), compare.open_capture(slowed, names="op", by=("device",))
    )
    assert set(on_devices["gpu_id"]) == {"0", "1"}
    assert on_devices.filter(pl.col("verdict") == "slower").group_by("gpu_id").len().height == 2


def test_cli_compare_by_op_says_how_much_time_matched(tmp_path):
    a, b = emit_nvtx_copy(tmp_path, "a", 3), emit_nvtx_copy(tmp_path, "b", 7)
    result = CliRunner().invoke(app, ["compare", str(a), str(b), "--names", "op", "--session-noise", "0"])
    assert result.exit_code == 0, result.output
    assert "Rows on both sides hold 100.0% of the base's kernel time and 100.0% of the new's." in result.stdout
    assert "| op | kernel |" in result.stdout and "aten::forward" in result.stdout and "only in" not in result.stdout
