"""The command line behaves as Unix and Python tools do: -h, shell completion, --debug in any
position, a closed stdout ends quietly, human units in --format table, shares per file."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from nsys_tools.cli import app
from nsys_tools.errors import BadExport

from .cli import CliRunner
from .conftest import FIXTURES

REPO = Path(__file__).resolve().parents[1]
NEW = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
runner = CliRunner()


def _cli(*args: str, **kw) -> list[str]:
    return [sys.executable, "-m", "nsys_tools", *args]


ENV = {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.mark.parametrize("args", [["-h"], ["report", "-h"], ["ledger", "list", "-h"], ["capture", "run", "-h"]])
def test_dash_h_is_help(args):
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "Usage:" in res.stdout and "-h, --help" in res.stdout


@pytest.mark.slow
def test_shell_completion(tmp_path):
    # Typer detects the user's shell from the parent processes; with this (its testing switch)
    # the shell is named instead, as the parents of a test run are no interactive shell.
    env = {**ENV, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    shown = subprocess.run(_cli("--show-completion", "bash"), capture_output=True, text=True, env=env)
    assert shown.returncode == 0 and "complete -o default -F _nsys_tools_completion nsys-tools" in shown.stdout
    home = {**env, "HOME": str(tmp_path)}
    done = subprocess.run(_cli("--install-completion", "bash"), capture_output=True, text=True, env=home)
    assert done.returncode == 0, done.stderr
    assert "completion" in (tmp_path / ".bashrc").read_text()


def test_debug_is_accepted_in_any_position(tmp_path):
    missing = str(tmp_path / "missing.sqlite")
    quiet = runner.invoke(app, ["report", missing])
    assert quiet.exit_code == 1 and quiet.stderr.startswith("Error:")
    for args in (["--debug", "report", missing], ["report", "--debug", missing], ["report", missing, "--debug"]):
        res = runner.invoke(app, args)
        assert isinstance(res.exception, BadExport), (args, res.stderr)  # the traceback is shown
    # after "--", --debug belongs to the captured program
    res = runner.invoke(app, ["capture", "run", "-h", "--", "prog", "--debug"])
    assert res.exit_code == 0


@pytest.mark.slow
def test_a_closed_stdout_ends_quietly():
    proc = subprocess.Popen(_cli("report", str(NEW), "-f", "csv"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    proc.stdout.close()  # the reader went away (like `| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err == ""
    head = subprocess.run(
        f"{' '.join(_cli('report', str(MULTI), '-f', 'csv'))} | head -1", shell=True, capture_output=True, text=True, env=ENV
    )
    assert head.returncode == 0 and head.stdout.startswith("range,kernel,") and head.stderr == ""


def test_table_prints_human_units_and_csv_raw_numbers():
    raw = list(csv.DictReader(io.StringIO(runner.invoke(app, ["report", str(MULTI), "--view", "memops", "-f", "csv"]).stdout)))
    table = runner.invoke(app, ["report", str(MULTI), "--view", "memops", "-f", "table"]).stdout
    h2d = next(r for r in raw if r["operation"] == "[CUDA memcpy Host-to-Device]")
    row = next(line for line in table.splitlines() if "Host-to-Device" in line)
    cells = [c.strip() for c in row.strip("│").replace("┆", "│").split("│")]
    header = [
        c.strip()
        for c in next(line for line in table.splitlines() if "operation" in line).strip("│").replace("┆", "│").split("│")
    ]
    shown = dict(zip(header, cells, strict=True))
    assert shown["total"] == f"{int(h2d['total_ns']) / 1e6:.2f} ms"  # 2,063,811 ns in the csv: 2.06 ms here
    assert shown["total_size"] == f"{int(h2d['total_bytes']) / 1e6:.2f} MB"
    assert shown["time_pct"] == f"{float(h2d['time_pct']):.2f}"
    assert int(h2d["total_ns"]) > 1_000_000 and not re.search(r"\de[+-]\d", table)
    d2h = next(line for line in table.splitlines() if "Device-to-Host" in line)
    assert " 4 B " in d2h and " ns " in d2h  # below a KB and a µs: whole bytes and nanoseconds


def test_per_file_shares_are_per_file():
    per = pl.read_csv(io.StringIO(runner.invoke(app, ["report", str(NEW), str(MULTI), "-f", "csv", "--per-file"]).stdout))
    sums = per.group_by("file").agg(pl.col("time_pct").sum())["time_pct"]
    assert sums.len() == 2 and ((sums - 100).abs() < 1e-9).all()
    res = runner.invoke(app, ["report", str(NEW), str(MULTI), "-f", "csv", "--merge"])  # two separate runs, read as one
    assert res.exit_code == 0, res.stderr
    together = pl.read_csv(io.StringIO(res.stdout))
    assert abs(together["time_pct"].sum() - 100) < 1e-9
