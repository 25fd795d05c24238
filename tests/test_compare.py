"""compare BASE NEW on real captures: two quiet sweeps of one build, a sweep of a later build,
a loaded one, and the two bundled exports of one workload made with two nsys versions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from nsys_tools import compare, ledger
from nsys_tools.cli import app

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


def test_two_quiet_sessions_of_one_build_are_not_distinguishable():
    table = _compare(QUIET, QUIET_2)
    assert table.height == 16 and (table["verdict"] == "not distinguishable").all()
    assert ((table["ci_lo"] <= table["ratio"]) & (table["ratio"] <= table["ci_hi"])).all()
    assert (table["clusters"] == "3/3").all()


def test_between_session_variance_matters():
    """Without the ledger's estimate of how much sessions move, rounds alone call a 0.6% shift
    of Triton's median at 4096x4096 between the two quiet sessions a difference."""
    table = _compare(QUIET, QUIET_2, noise=0.0)
    moved = table.filter(pl.col("verdict") != "not distinguishable")
    assert moved.select("impl", "shape").rows() == [("triton", "4096x4096")]


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
    rows = json.loads(res.stdout)
    assert {r["range"] for r in rows} == {""} and len(rows) == 5
    assert {r["kernel"] for r in rows} >= {"reduce_kernel", "[CUDA memset]"}
    assert {r["verdict"] for r in rows} == {"not distinguishable"}
    res = runner.invoke(app, ["compare", str(no_nvtx), str(no_nvtx), "--session-noise", "0"])
    assert "Rows: 5 not distinguishable." in res.stdout and "| (none) | reduce\\_kernel |" in res.stdout


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
