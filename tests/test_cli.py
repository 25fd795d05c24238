"""The command line: exit codes 0, 1 and 2, formats, and one real subprocess call."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsys_tools.cli import app

from .cli import CliRunner
from .conftest import FIXTURES

runner = CliRunner()
NEW = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"


def test_report_markdown():
    res = runner.invoke(app, ["report", str(NEW), "--names", "short"])
    assert res.exit_code == 0
    assert "| triton/4096x768 | norm\\_kernel | 100 | 546.02 | 15.83 | 5.46 | 5.42 | 5.38 | 8.26 |" in res.stdout


def test_report_csv_and_json_columns():
    res = runner.invoke(app, ["report", str(NEW), "--format", "csv", "--range", "cupy*"])
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    assert lines[0] == "range,kernel,instances,total_ns,time_pct,mean_ns,median_ns,min_ns,max_ns,stddev_ns,p10_ns,p90_ns"
    assert lines[1].startswith("cupy/4096x768,ln_block,100,925121,26.82")
    res = runner.invoke(app, ["report", str(NEW), "-f", "json", "--kernel", "norm_kernel"])
    rows = json.loads(res.stdout)
    assert [(r["range"], r["instances"]) for r in rows] == [("triton/4096x768", 100), ("", 20)]


@pytest.mark.parametrize(
    "args, message",
    [
        (["report", "missing.sqlite"], "Error: missing.sqlite: no such file"),
        (["report", str(FIXTURES / "bad-input" / "no-cuda-trace.sqlite")], "no CUPTI_ACTIVITY_KIND_KERNEL table"),
        (["report", str(FIXTURES / "bad-input" / "empty.sqlite")], "CUDA was traced but no kernel ran"),
        (["capture", "sweep", "--shapes", "4096"], "Error: unknown layernorm shape '4096'"),
        (["capture", "sweep", "--impls", "ours,cutlass"], "unknown implementation 'cutlass'"),
        (
            ["history", "--shape", "4096x768", "--impl", "ours", "--ledger", "no-ledger.sqlite"],
            "no-ledger.sqlite: no ledger here",
        ),
    ],
)
def test_bad_input_is_one_line_exit_1(args, message):
    res = runner.invoke(app, args)
    assert res.exit_code == 1
    assert message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_nsys_missing_names_the_option_and_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    res = runner.invoke(app, ["capture", "sweep", "--out", str(tmp_path / "s")])
    assert res.exit_code == 1 and "--nsys PATH, set $NSYS" in res.stderr
    assert not (tmp_path / "s").exists()


def test_debug_shows_the_traceback():
    res = runner.invoke(app, ["--debug", "report", "missing.sqlite"])
    assert res.exit_code == 1 and res.exception is not None


def test_usage_errors_exit_2():
    assert runner.invoke(app, ["report"]).exit_code == 2
    assert runner.invoke(app, ["report", str(NEW), "--format", "xml"]).exit_code == 2
    assert runner.invoke(app, ["report", str(NEW), "--issue"]).exit_code == 2


def test_no_nvtx_still_reports_kernels():
    res = runner.invoke(app, ["report", str(FIXTURES / "bad-input" / "no-nvtx.sqlite"), "-f", "json"])
    assert res.exit_code == 0
    rows = json.loads(res.stdout)
    assert rows and {r["range"] for r in rows} == {""}


@pytest.mark.parametrize(
    "name, hint", [("no-cuda-trace", "was it captured with --trace=cuda"), ("empty", "CUDA was traced but no kernel ran")]
)
def test_memops_of_an_export_without_cuda_is_an_error_not_an_empty_table(name, hint):
    """As every other view: no CUDA table at all is named, not reported as "no copies"."""
    res = runner.invoke(app, ["report", str(FIXTURES / "bad-input" / f"{name}.sqlite"), "--view", "memops"])
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.startswith(f"Error: {FIXTURES / 'bad-input' / name}.sqlite: no CUPTI_ACTIVITY_KIND_RUNTIME table; {hint}")


@pytest.mark.parametrize("by", ["", "device", "device,process,stream"])
def test_no_nvtx_ranges_view_is_empty_not_damaged(by):
    """An export without NVTX has no range to project: an empty table, not "is damaged"."""
    args = ["report", str(FIXTURES / "bad-input" / "no-nvtx.sqlite"), "--view", "ranges", "-f", "json"]
    res = runner.invoke(app, args + (["--by", by] if by else []))
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == []


def test_output_file_is_not_clobbered_on_error(tmp_path):
    out = tmp_path / "table.md"
    out.write_text("earlier report\n")
    res = runner.invoke(app, ["report", "missing.sqlite", "-o", str(out)])
    assert res.exit_code == 1 and out.read_text() == "earlier report\n"
    res = runner.invoke(app, ["report", str(NEW), "-o", str(out)])
    assert res.exit_code == 0 and out.read_text().startswith("| range | kernel |")


def test_installed_console_script_runs_the_demo():
    exe = shutil.which("nsys-tools") or str(__import__("pathlib").Path(sys.executable).with_name("nsys-tools"))
    done = subprocess.run([exe, "report", "--demo", "--format", "csv"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.startswith("op,impl,shape,l2,outputs,instances,kernel_median_ns,kernel_p10_ns,kernel_p90_ns")
    assert len(rows) == 16 and all(r.startswith("layernorm,") for r in rows)


def test_bench_sizes_must_be_counts():
    res = runner.invoke(app, ["bench", "--kernels", "3e5"])
    assert res.exit_code == 2 and "positive kernel counts" in res.stderr


MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"


def test_version():
    from nsys_tools import __version__

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout == f"nsys-tools {__version__}\n"


@pytest.mark.parametrize(
    "view, header",
    [
        ("ranges", "| gpu id | gpu name | domain | range | style | instances | proj total (µs) |"),
        ("api", "| gpu id | gpu name | api | instances | total (µs) | time (%) |"),
        ("memops", "| gpu id | gpu name | operation | instances | total (bytes) |"),
        ("gaps", "| gpu id | gpu name | gap (µs) | gap start (µs) | gap end (µs) | before name |"),
        ("kernels", "| gpu id | gpu name | range | kernel | instances | total (µs) | time (%) |"),
    ],
)
@pytest.mark.slow
def test_views_by_device(view, header):
    gap = ["--min-gap", "1000"] if view == "gaps" else []
    res = runner.invoke(app, ["report", str(MULTI), "--view", view, "--by", "device", *gap])
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith(header)


@pytest.mark.parametrize(
    "args, option",
    [
        (["--min-gap", "5"], "--min-gap"),
        (["--view", "ranges", "--min-gap", "5"], "--min-gap"),
        (["--view", "api", "--include-memops"], "--include-memops"),
        (["--view", "memops", "--nesting", "all"], "--nesting"),
        (["--view", "ranges", "--names", "short"], "--names"),
        (["--view", "gaps", "--names", "short"], "--names"),
    ],
)
def test_an_option_of_another_view_is_refused_not_ignored(args, option):
    res = runner.invoke(app, ["report", str(MULTI), *args])
    assert res.exit_code == 2 and f"Invalid value for {option}: applies to --view" in res.stderr


@pytest.mark.parametrize("option", ["--min-gap", "--scheduler"])
def test_export_only_option_on_a_sweep_names_it(option):
    res = runner.invoke(app, ["report", "--demo", option, "5" if option == "--min-gap" else "local:2"])
    assert res.exit_code == 2 and f"{option} applies to exports, not sweep folders" in res.stderr


@pytest.mark.parametrize("args", [["--format", "csv"], ["-f", "json"], ["--top", "3"]])
def test_issue_comment_refuses_format_and_top_rather_than_ignoring_them(args, tmp_path):
    res = runner.invoke(app, ["report", "--demo", "--issue", "--charts", str(tmp_path), *args])
    option = "--format" if args[0] == "-f" else args[0]
    assert res.exit_code == 2 and f"Invalid value for {option}: the issue comment is markdown, written whole" in res.stderr
    assert not any(tmp_path.iterdir())  # refused before any chart is written


def test_memops_one_row_per_device():
    res = runner.invoke(app, ["report", str(MULTI), "--view", "memops", "--by", "device", "-f", "csv"])
    rows = [r.split(",") for r in res.stdout.splitlines()[1:]]
    assert sorted((r[0], r[2]) for r in rows if r[2] == "[CUDA memcpy Host-to-Device]") == [
        ("0", "[CUDA memcpy Host-to-Device]"),
        ("1", "[CUDA memcpy Host-to-Device]"),
    ]


def test_top_keeps_the_largest_and_says_how_many_were_left_out():
    res = runner.invoke(app, ["report", str(MULTI), "--view", "api", "--top", "2"])
    lines = res.stdout.splitlines()
    assert [line.split(" | ")[0] for line in lines[2:4]] == ["| cuLibraryLoadData", "| cudaLaunchKernel"]
    assert lines[-1] == "_27 of 29 rows left out. `--top 0` shows all of them; `--format csv` or `json` writes them whole._"
    assert "left out" not in runner.invoke(app, ["report", str(MULTI), "--view", "api", "--top", "0"]).stdout
    assert len(runner.invoke(app, ["report", str(MULTI), "--view", "api", "--top", "2", "-f", "csv"]).stdout.splitlines()) == 3


@pytest.mark.parametrize(
    "args, message",
    [
        (["--by", "gpu"], "unknown key 'gpu': choose from device, process, stream"),
        (["--view", "api", "--kernel", "x*"], "--view api has no kernel column"),
        (["--view", "nope"], "'nope' is not one of"),
        (["--top", "-1"], "--top"),
    ],
)
def test_view_usage_errors_exit_2(args, message):
    res = runner.invoke(app, ["report", str(MULTI), *args])
    assert res.exit_code == 2 and message in res.stderr


def test_a_sweep_has_no_other_views():
    res = runner.invoke(app, ["report", "--demo", "--view", "ranges", "--by", "device"])
    assert res.exit_code == 2 and "--view, --by apply to exports, not sweep folders" in res.stderr


QUIET = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"


@pytest.mark.parametrize(
    "args, text",
    [
        (["report", str(QUIET), "--range", "x*"], "--range applies to exports, not sweep folders"),
        (["report", str(QUIET), "--kernel", "x*", "--per-file"], "--kernel, --per-file apply to exports, not sweep folders"),
        (["report", "--demo", str(NEW)], "--demo reads the bundled sweep: give no paths with it"),
        (["report", str(NEW), "--charts", "c"], "--charts go with --issue"),
        (["report", str(NEW), "--kernel", "[z-a]"], "is not a usable pattern"),
        (["census", "--impls", ""], "name at least one implementation"),
        (["census", "--impls", " , "], "name at least one implementation"),
    ],
)
def test_options_that_would_be_ignored_are_usage_errors(args, text):
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and text in res.stderr, res.stderr


def test_bench_sizes_are_checked_against_free_space(tmp_path):
    res = runner.invoke(app, ["bench", "--kernels", "99999999999999", "--workdir", str(tmp_path / "b")])
    assert res.exit_code == 1 and "GB are free there" in res.stderr and "pass smaller --kernels" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "b").exists()


def test_damaged_sweep_files_are_named(tmp_path):
    folder = tmp_path / "s"
    shutil.copytree(QUIET, folder)
    (folder / "manifest.json").write_text("[1, 2]")
    res = runner.invoke(app, ["report", str(folder)])
    assert res.exit_code == 1 and "manifest.json: is not a sweep manifest" in res.stderr
    shutil.copyfile(QUIET / "manifest.json", folder / "manifest.json")
    harness = json.loads((folder / "4096x768.harness.json").read_text())
    del harness["spans"]
    (folder / "4096x768.harness.json").write_text(json.dumps(harness))
    res = runner.invoke(app, ["report", str(folder)])
    assert res.exit_code == 1 and "4096x768.harness.json: has no 'spans' entry" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["report", str(NEW), "--scheduler", "local:0"], "local:N takes a number of workers"),
        (["report", str(NEW), "--scheduler", "localhost:8786"], "give a scheduler address (tcp://HOST:PORT)"),
        (["bench", "--workers", "1,x"], "positive worker counts"),
        (["bench", "--workers", "1,2", "--kernels", "1000,2000"], "with --workers, give one export size"),
        (["bench", "--cpus", "0-a"], "give cores as taskset -c takes them"),
    ],
)
def test_scheduler_and_bench_usage_errors_exit_2(args, message):
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and message in res.stderr


@pytest.mark.slow
def test_report_on_a_local_dask_cluster_equals_the_local_report():
    two = [str(NEW), str(FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite")]
    args = ["report", *two, "--merge", "-f", "csv"]  # two captures, read as one on purpose
    local = runner.invoke(app, args)
    on_dask = runner.invoke(app, [*args, "--scheduler", "local:2"])
    assert on_dask.exit_code == 0 and on_dask.stdout == local.stdout and "triton/4096x768" in local.stdout
