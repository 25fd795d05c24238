"""Sweep folders from the H200: per-implementation statistics, verdicts, ledger, issue comment."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from nsys_tools.cli import app
from nsys_tools.errors import BadExport
from nsys_tools.study import folder as sweep
from nsys_tools.study import ledger, verdict

SWEEPS = Path(__file__).resolve().parents[1] / "reports" / "sweeps"
QUIET = SWEEPS / "20261129-183449-quiet"
QUIET_2 = SWEEPS / "20261129-183620-quiet"
LOADED = SWEEPS / "20261129-183713-loaded"
MATMUL_BF16 = SWEEPS / "20261130-004548-matmul-bf16"  # cuBLAS: a memset, then its kernel, per call
runner = CliRunner()


@pytest.fixture(scope="module")
def quiet():
    return sweep.load(QUIET)


def test_summary_rows(quiet):
    s = sweep.summary(quiet)
    assert s.height == 16
    assert set(s["impl"]) == {"ours", "triton", "torch", "copy"}
    assert (s["instances"] == 300).all()  # 3 rounds x 100 calls, one GPU operation each
    row = s.filter((pl.col("impl") == "triton") & (pl.col("shape") == "4096x768")).row(0, named=True)
    assert row["kernels"] == "layer_norm_fwd" and row["op"] == "layernorm" and row["l2"] == "cold"
    assert row["kernel_p10_ns"] <= row["kernel_median_ns"] <= row["kernel_p90_ns"]
    assert row["span_median_ns"] > row["kernel_median_ns"]  # the span includes the launch the GPU waited for
    assert row["gb_per_s"] == pytest.approx(row["bytes"] / row["kernel_median_ns"])
    copy = s.filter(pl.col("impl") == "copy")["kernels"].unique().to_list()
    assert copy == ["[CUDA memcpy Device-to-Device]"]


def test_calls_parse_the_range_convention(quiet):
    c = quiet.calls
    assert c.columns == ["op", "impl", "shape", "l2", "round", "start_ns", "duration_ns", "kernel", "ops"]
    assert sorted(c["round"].unique()) == [0, 1, 2]
    assert c.group_by("impl", "shape", "round").len()["len"].unique().to_list() == [100]
    assert c["ops"].unique().to_list() == [1]


def _raw_ops(folder: Path) -> pl.DataFrame:
    import nsys_tools

    frames = []
    for export in sorted(folder.glob("*.sqlite")):
        with nsys_tools.open(export) as trace:
            ops = trace.gpu_ops(attributed=True, columns=["name", "short_name", "start_ns", "duration_ns"])
            ops = ops.filter(pl.col("range").str.contains(sweep.RANGE_REGEX)).collect()
        frames.append(ops.select("range", "start_ns", "duration_ns", kernel=pl.coalesce("short_name", "name").cast(pl.String)))
    return pl.concat(frames).pipe(sweep.parse_ranges)


def test_a_call_of_several_gpu_operations_is_one_call():
    """torch.matmul's cuBLAS call sets a 4-byte workspace flag with a memset before its kernel: one
    call, two operations, and its kernel time is their sum, not a median over a mix of both."""
    s = sweep.load(MATMUL_BF16)
    c = s.calls
    torch = c.filter(pl.col("impl") == "torch")
    assert torch.height == 4 * 300 and torch["ops"].unique().to_list() == [2]
    assert torch["kernel"].str.starts_with("[CUDA memset] + nvjet_").all()
    assert c.filter(pl.col("impl") != "torch")["ops"].unique().to_list() == [1]
    raw = _raw_ops(MATMUL_BF16)
    assert raw.height == c["ops"].sum() == 4 * 300 * 4  # every operation in exactly one call
    totals = raw.group_by("impl", "shape").agg(pl.col("duration_ns").sum()).sort("impl", "shape")
    assert totals.equals(c.group_by("impl", "shape").agg(pl.col("duration_ns").sum()).sort("impl", "shape"))
    # The median call is a whole call: far above any memset, near the kernel alone.
    row = sweep.summary(s).filter((pl.col("impl") == "torch") & (pl.col("shape") == "4096x4096x1024")).row(0, named=True)
    kernel_only = raw.filter(
        (pl.col("impl") == "torch") & (pl.col("shape") == "4096x4096x1024") & ~pl.col("kernel").str.contains("memset")
    )
    assert row["instances"] == 300
    assert kernel_only["duration_ns"].median() < row["kernel_median_ns"] < 1.05 * kernel_only["duration_ns"].median()


def test_calls_fall_back_to_one_per_operation_when_the_count_does_not_divide():
    raw = _raw_ops(MATMUL_BF16).filter((pl.col("impl") == "torch") & (pl.col("shape") == "4096x4096x1024"))
    assert sweep.into_calls(raw.with_columns(calls=pl.lit(100, pl.Int64)))["ops"].unique().to_list() == [2]
    odd = raw.filter(pl.col("round") == 0).slice(1)  # 199 operations for 100 calls
    out = sweep.into_calls(odd.with_columns(calls=pl.lit(100, pl.Int64)))
    assert out.height == 199 and out["ops"].unique().to_list() == [1]
    named = sweep.into_calls(raw.with_columns(calls=pl.lit(None, pl.Int64)))  # a program's range without /n<calls>
    assert named.height == raw.height


@pytest.mark.slow
def test_json_markdown_csv_carry_the_same_rows():
    js = json.loads(runner.invoke(app, ["report", str(QUIET), "-f", "json"]).stdout)
    csv = runner.invoke(app, ["report", str(QUIET), "-f", "csv"]).stdout.splitlines()
    md = runner.invoke(app, ["report", str(QUIET)]).stdout.splitlines()
    assert len(js) == len(csv) - 1 == len(md) - 2 == 16
    need = {"op", "impl", "shape", "l2", "instances", "kernel_median_ns", "kernel_p10_ns", "kernel_p90_ns", "span_median_ns"}
    assert need <= set(js[0])
    assert csv[0].split(",")[: len(js[0])] == list(js[0])


def test_two_sweeps_side_by_side():
    res = runner.invoke(app, ["report", str(QUIET), str(QUIET_2), "-f", "json"])
    rows = json.loads(res.stdout)
    assert {r["sweep"] for r in rows} == {QUIET.name, QUIET_2.name} and len(rows) == 32


def test_not_a_sweep(tmp_path):
    with pytest.raises(BadExport, match="not a sweep folder"):
        sweep.load(tmp_path)


def test_failed_shapes_are_left_out(tmp_path):
    folder = tmp_path / "s"
    shutil.copytree(QUIET, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["shapes"]["4096x4096"] = {"status": "failed", "error": "CaptureError: profiling failed"}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert sorted(set(sweep.summary(sweep.load(folder))["shape"])) == ["1024x2048", "4096x768", "8192x768"]


def test_quiet_and_loaded_verdicts(quiet):
    q = verdict.judge(quiet)
    assert q.quiet and not q.reasons and q.clocks["sm_mhz_median"] == 1980
    loaded = verdict.judge(sweep.load(LOADED))
    assert not loaded.quiet
    assert loaded.reasons[0].startswith("another process was on the GPU (pid ")
    assert "took more than twice their median" in loaded.reasons[1]
    assert loaded.tails["outlier_share"].max() > verdict.MAX_OUTLIER_SHARE


def test_verdict_flags_low_clocks(tmp_path):
    folder = tmp_path / "s"
    shutil.copytree(QUIET, folder)
    for h in folder.glob("*.harness.json"):
        data = json.loads(h.read_text())
        data["clocks"]["sm_mhz"] = [345] * len(data["clocks"]["sm_mhz"])
        h.write_text(json.dumps(data))
    v = verdict.judge(sweep.load(folder))
    assert not v.quiet and "345 MHz" in v.reasons[0]


@pytest.mark.parametrize(("bits", "quiet"), [(0x4, True), (0x20, True), (0x0, False), (-1, False)])
@pytest.mark.slow
def test_a_clock_held_by_the_gpus_own_power_cap_is_not_contention(tmp_path, bits, quiet):
    """The bf16 matmul drew the H200 to 704 W and its clock to 1515 MHz. Where NVML says the GPU's own
    power or thermal limit held the clock, the session stays quiet with a note; otherwise it is flagged."""
    folder = tmp_path / "s"
    shutil.copytree(MATMUL_BF16, folder)
    assert not verdict.judge(sweep.load(folder)).quiet  # captured before the reasons were sampled
    for h in folder.glob("*.harness.json"):
        data = json.loads(h.read_text())
        data["clocks"]["reasons"] = [bits] * len(data["clocks"]["sm_mhz"])
        h.write_text(json.dumps(data))
    v = verdict.judge(sweep.load(folder))
    assert v.quiet is quiet
    assert ("1515 MHz" in (v.notes if quiet else v.reasons)[0]) and ("power or thermal limit" in v.notes[0] if quiet else True)


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    path = tmp_path_factory.mktemp("ledger") / "ledger.sqlite"
    res = runner.invoke(
        app,
        [
            "ledger",
            "add",
            str(SWEEPS / "20261129-182219-quiet"),
            str(SWEEPS / "20261129-182342-quiet"),
            str(QUIET_2),
            str(LOADED),
            "--ledger",
            str(path),
        ],
    )
    assert res.exit_code == 0, res.stderr
    return path


@pytest.mark.slow
def test_ledger_sessions_and_bands(book):
    s = ledger.sessions(book)
    assert s.height == 4 and s.filter(pl.col("quiet") == 0)["id"].to_list() == [LOADED.name]
    b = ledger.bands(book, "NVIDIA H200", "triton", "cold")
    row = b.filter(pl.col("shape") == "4096x768").row(0, named=True)
    assert row["sessions"] == 3  # the loaded session does not count
    medians = ledger.stats(book).filter((pl.col("impl") == "triton") & (pl.col("shape") == "4096x768") & (pl.col("quiet") == 1))
    assert row["band_lo_ns"] == pytest.approx(medians["kernel_median_ns"].min() * (1 - ledger.BAND_MARGIN))
    assert row["band_hi_ns"] == pytest.approx(medians["kernel_median_ns"].max() * (1 + ledger.BAND_MARGIN))


@pytest.mark.slow
def test_history_command(book):
    res = runner.invoke(app, ["history", "--shape", "4096x768", "--impl", "ours", "--vs", "triton", "--ledger", str(book)])
    assert res.exit_code == 0
    first = res.stdout.splitlines()[0]
    assert first.startswith("ours/triton at 4096x768, kernel median µs per session: 7.90/9.15, 7.94/9.17, 7.84/9.09, 7.90/9.12")
    hist = ledger.history(book, "4096x768", "ours", "triton")
    assert (hist["ratio"] < 0.9).all()


@pytest.mark.slow
def test_reject_and_issue_comment(book, tmp_path):
    res = runner.invoke(
        app,
        [
            "ledger",
            "reject",
            "ours_regcap",
            "--metric",
            "38.36 µs kernel at 4096x4096 vs 34.47",
            "--why",
            "a 32-register cap spills",
            "--ledger",
            str(book),
        ],
    )
    assert res.exit_code == 0
    out = tmp_path / "comment.md"
    res = runner.invoke(
        app, ["report", str(QUIET), "--issue", "--ledger", str(book), "--charts", str(tmp_path / "charts"), "-o", str(out)]
    )
    assert res.exit_code == 0, res.stderr
    md = out.read_text()
    assert "#### Kernel time, µs: median (p10–p90), from the Nsight Systems trace" in md
    assert "#### Event span, µs: median (p10–p90), from CUDA events with tracing off" in md
    assert md.index("Kernel time, µs") < md.index("Event span, µs")
    assert "triton's kernel came back at 9.12 µs at 4096x768, inside its band" in md
    assert "these numbers are usable" in md
    assert "inputs rotated over 2–9 buffer sets per shape" in md  # 2 at 4096x4096, 9 at 1024x2048
    assert "| ours\\_regcap | 38.36 µs kernel at 4096x4096 vs 34.47 | a 32-register cap spills |" in md
    assert "- 4096x768: 7.90/9.15, 7.94/9.17, 7.84/9.09, 7.90/9.12*" in md
    assert "(charts/kernel-time.png)" in md
    res = runner.invoke(app, ["report", str(QUIET), "--issue", "--ledger", str(book), "--charts", str(tmp_path / "charts")])
    assert f"({os.path.relpath(tmp_path / 'charts' / 'ratio.png')})" in res.stdout  # on stdout: relative to here
    for name in ("kernel-time", "ratio", "history-4096x768"):
        assert (tmp_path / "charts" / f"{name}.png").stat().st_size > 10_000
        assert (tmp_path / "charts" / f"{name}.html").exists()


@pytest.mark.slow
def test_loaded_capture_is_flagged(book, tmp_path):
    res = runner.invoke(app, ["report", str(LOADED), "--issue", "--ledger", str(book), "--charts", str(tmp_path)])
    assert res.exit_code == 0
    md = res.stdout
    assert "But this capture ran under load: another process was on the GPU" in md
    assert "Quote the range across quiet sessions instead (4096x768 9.09–9.17 µs, 8192x768 " in md
    assert "<details><summary>Contention evidence</summary>" in md


@pytest.mark.slow
def test_ratio_intervals(quiet):
    from nsys_tools.views.stats import ratios

    r = ratios(quiet.calls, "triton")
    ours = r.filter((pl.col("impl") == "ours") & (pl.col("shape") == "4096x768")).row(0, named=True)
    assert ours["ci_lo"] <= ours["ratio"] <= ours["ci_hi"] < 1 and ours["distinguishable"]
    same = ratios(
        quiet.calls.filter(pl.col("impl") == "triton")
        .with_columns(impl=pl.lit("twin"))
        .vstack(quiet.calls.filter(pl.col("impl") == "triton")),
        "triton",
    )
    assert not same["distinguishable"].any()  # identical samples: the interval contains 1


@pytest.mark.slow
def test_chart_specs(quiet):
    from nsys_tools.render import charts
    from nsys_tools.views.stats import ratios

    spec = charts.kernel_time(sweep.summary(quiet), ["ours", "triton", "torch", "copy"]).to_dict()
    assert spec["facet"]["column"]["field"] == "shape" and spec["resolve"]["scale"]["y"] == "independent"
    layers = spec["spec"]["layer"]
    assert layers[0]["mark"]["type"] == "bar" and layers[1]["encoding"]["y2"]["field"] == "p90"
    rspec = charts.ratio(ratios(quiet.calls, "triton"), "triton", ["ours", "triton", "torch", "copy"]).to_dict()
    assert any(layer.get("encoding", {}).get("y", {}).get("field") == "y" for layer in rspec["layer"])  # the line at 1.0


@pytest.mark.slow
def test_shapes_not_captured_are_named(tmp_path):
    folder = tmp_path / "cut"
    shutil.copytree(QUIET, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["shapes"]["4096x4096"]["status"] = "running"  # the capture stopped inside this shape
    manifest["spec"]["shapes"].append("2048x768")  # and never reached this one
    (folder / "manifest.json").write_text(json.dumps(manifest))
    args = ["report", str(folder), "--issue", "--ledger", str(tmp_path / "none.sqlite"), "--charts", str(tmp_path)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.stderr
    assert "not captured, see manifest.json: 4096x4096 (running), 2048x768 (not started)" in res.stdout
    assert "| 4096x4096 |" not in res.stdout


def test_history_keeps_the_control_to_one_output_policy():
    book = SWEEPS.parent / "ledger.sqlite"
    both = ledger.history(book, "4096x768", "ours", "triton")
    reuse = ledger.history(book, "4096x768", "ours", "triton", outputs="reuse")
    rotate = ledger.history(book, "4096x768", "ours", "triton", outputs="rotate")
    assert "20261129-231949-ln-reuse" in reuse["session_id"].to_list()
    assert "20261129-231949-ln-reuse" not in rotate["session_id"].to_list()
    assert "20261129-231949-ln-rotate" in rotate["session_id"].to_list()
    assert reuse.height + rotate.height == both.height


def test_throughput_as_a_share_of_the_gpus_peak(monkeypatch):
    """A capture with no copy gets a throughput table; with the op's peak for this GPU, each cell
    carries its share of it and the comment says where the figure comes from."""
    run = sweep.load(SWEEPS / "20261129-225825-cuda-softmax")
    run.plugins = [str(SWEEPS.parents[1] / "examples" / "softmax_op.py")]  # the manifest's is never imported
    from nsys_tools.study.issue import _throughput

    summ = sweep.summary(run)
    impls = list(dict.fromkeys(summ["impl"]))
    plain = "".join(_throughput(run, summ, impls, set()))
    assert "| 8192x4096 |" in plain and "% of peak" not in plain
    monkeypatch.setattr(type(run.op("softmax")), "peaks", {run.gpu: (10.0, "a figure for the test")}, raising=False)
    tflops = summ.filter((pl.col("impl") == "block") & (pl.col("shape") == "8192x4096"))["tflops"][0]
    shared = "".join(_throughput(run, summ, impls, set()))
    assert f"Peak: 10.0 TFLOP/s dense at fp32 on the {run.gpu} (a figure for the test)." in shared
    assert f"{tflops:,.1f} ({100 * tflops / 10:.0f}% of peak)" in shared


def test_matmul_ops_know_the_h200_peak():
    from nsys_tools.kernels.matmul import OPS

    peaks = {op.dtype: op.peaks["NVIDIA H200"][0] for op in OPS}
    assert peaks == {"bf16": 989.5, "tf32": 494.5}


@pytest.mark.slow
def test_rejected_variants_keep_to_their_op(tmp_path):
    """A comment lists its own op's rejected variants: by --op, else by the sweep's op."""
    book = tmp_path / "ledger.sqlite"
    res = runner.invoke(app, ["ledger", "add", str(QUIET), str(MATMUL_BF16), "--ledger", str(book)])
    assert res.exit_code == 0, res.stderr
    ledger.reject(book, "by_sweep", "m", "w", session=MATMUL_BF16.name)
    ledger.reject(book, "by_op", "m", "w", op="layernorm")
    ledger.reject(book, "unknown", "m", "w")
    ledger.reject(book, "named_mm", "m", "w", op="matmul_bf16")
    assert ledger.rejected(book, "layernorm")["variant"].to_list() == ["by_op", "unknown"]
    assert ledger.rejected(book, "matmul_bf16")["variant"].to_list() == ["by_sweep", "unknown", "named_mm"]
    assert ledger.rejected(book).height == 4
    md = runner.invoke(app, ["report", str(MATMUL_BF16), "--issue", "--ledger", str(book)]).stdout
    assert "| by\\_sweep |" in md and "| named\\_mm |" in md and "by\\_op" not in md


def test_sweeps_from_before_the_shuffle_read_as_the_rotation_they_ran(quiet):
    """A sweep recorded before each round's order was: its orders are the rotation, and that is the
    order its trace shows the implementations starting in, round by round, at every shape."""
    assert quiet.order == "rotated"
    first_calls = quiet.calls.group_by("shape", "round", "impl").agg(pl.col("start_ns").min()).sort("start_ns")
    for shape in quiet.units:
        ran = first_calls.filter(pl.col("shape") == shape).group_by("round", maintain_order=True).agg("impl").sort("round")
        assert ran["impl"].to_list() == quiet.round_orders(shape)
    assert quiet.round_orders("4096x768")[1] == ["triton", "torch", "copy", "ours"]
    from nsys_tools.study import issue

    assert "order rotated each round" in issue.compose(quiet, None, None).markdown
