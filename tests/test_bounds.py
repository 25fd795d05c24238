"""Bounded by the output, not by the data: ``--window`` refuses more windows than a table holds,
naming how many the span needs and a window that fits; a sweep folder skips a FIFO or a link to
``/dev/zero`` in place of a shape's export or harness record, unread, with a warning, as a plain
folder does; and the nested-ranges export (tests/nested_ranges.py) is read in bounded memory, its
ranges view included."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsys_tools.cli import app
from nsys_tools.views.utilization import MAX_WINDOWS

from .conftest import FIXTURES, QUIET

ROOT = Path(__file__).resolve().parents[1]
MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
runner = CliRunner()


def one_error(res) -> str:
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: "), res.output
    return lines[0]


def test_a_window_too_small_for_the_span_is_refused_with_one_that_fits():
    line = one_error(runner.invoke(app, ["report", str(MULTI), "--view", "utilization", "--window", "1ns"]))
    needed = int(line.split(" needs ")[1].split(" windows")[0].replace(",", ""))
    assert needed > MAX_WINDOWS and f"at most {MAX_WINDOWS:,}" in line
    fit = line.split("use --window ")[1].split()[0]
    res = runner.invoke(app, ["report", str(MULTI), "--view", "utilization", "--window", fit, "-f", "csv"])
    assert res.exit_code == 0, res.output
    assert 1 < len(res.stdout.splitlines()) <= MAX_WINDOWS + 1


def test_a_kernel_at_two_to_the_62_ns_does_not_make_the_table_huge(tmp_path):
    """One kernel moved to 2^62 ns: --window 10ms would need about 4.6e11 windows."""
    path = tmp_path / "far.sqlite"
    shutil.copyfile(MULTI, path)
    con = sqlite3.connect(path)
    with con:
        con.execute(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = ?, end = ? + (end - start)"
            " WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)",
            (2**62, 2**62),
        )
    con.close()
    line = one_error(runner.invoke(app, ["report", str(path), "--view", "utilization", "--window", "10ms"]))
    assert "needs 461,168," in line and "use --window 50000s or longer" in line


def _sweep(tmp_path: Path) -> Path:
    folder = tmp_path / "sweep"
    shutil.copytree(QUIET, folder)
    return folder


@pytest.mark.parametrize("what", ["fifo export", "fifo harness", "zero export", "zero harness"])
def test_a_sweep_skips_special_files_unread(tmp_path, what):
    """In a subprocess with a timeout: before, a FIFO hung the report and /dev/zero filled memory."""
    folder = _sweep(tmp_path)
    shapes = sorted(json.loads((folder / "manifest.json").read_text())["shapes"])
    bad = shapes[0]
    kind, part = what.split()
    target = folder / (f"{bad}.sqlite" if part == "export" else f"{bad}.harness.json")
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    done = subprocess.run(
        [sys.executable, "-m", "nsys_tools", "report", str(folder), "-f", "csv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    warning = next(line for line in done.stderr.splitlines() if line.startswith("Warning:") and f"{bad}: skipped" in line)
    assert ("a FIFO" if kind == "fifo" else "a device") in warning
    reported = {line.split(",")[2] for line in done.stdout.splitlines()[1:]}  # op, impl, shape, ...
    assert bad not in reported and set(shapes[1:]) <= reported


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["report", "{x}", "-f", "csv"],
        ["timeline", "{x}", "-o", "{out}/t.json"],
        ["report", "{x}", "--view", "ranges", "-f", "csv"],
    ],
)
def test_nested_ranges_are_read_in_bounded_memory(tmp_path, command):
    """1,000 nested ranges around 20,193 kernels (20M operation-range pairs), under 400 MB: the
    ranges view too, which every one of those pairs concerns (``views/nested.py``)."""
    from .nested_ranges import build

    export = build(tmp_path, levels=1000)
    argv = [a.format(x=export, out=tmp_path) for a in command]
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "peak_rss.py"), "1500", str(tmp_path / "out"), "--",
         sys.executable, "-m", "nsys_tools", *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    last = done.stdout.strip().splitlines()[-1]
    peak_mb = int(last.split(" KB peak RSS")[0].rsplit(" ", 1)[1]) / 1024
    assert last.endswith("exit 0") and peak_mb < 400, last
