"""Scrubbing a real capture made with a planted secret (GPU machine with nsys: ``pytest -m gpu``).

Standard library only, like the capture side: the GPU machine has no Polars.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nsys_tools.read.scrub import scrub

WORKLOAD = Path(__file__).parent / "fixtures" / "bad-input" / "workload.py"
SECRET = "planted-secret-in-a-real-capture"


@pytest.mark.gpu
def test_real_capture_loses_its_environment(tmp_path):
    nsys = os.environ.get("NSYS") or shutil.which("nsys")
    if not nsys:
        pytest.skip("needs Nsight Systems: put nsys on PATH or set $NSYS")
    env = {**os.environ, "SECRET_TOKEN": SECRET}
    rep = tmp_path / "run"
    subprocess.run(
        [nsys, "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw=none", "-o", str(rep), sys.executable, str(WORKLOAD)],
        check=True,
        env=env,
        capture_output=True,
    )
    subprocess.run(
        [nsys, "export", "--type", "sqlite", "-o", str(tmp_path / "run.sqlite"), str(rep) + ".nsys-rep"],
        check=True,
        capture_output=True,
    )
    export = tmp_path / "run.sqlite"
    assert SECRET.encode() in export.read_bytes()  # nsys stored the environment
    report = scrub(export)
    raw = export.read_bytes()
    assert SECRET.encode() not in raw and b"SECRET_TOKEN" not in raw
    assert str(tmp_path).encode() not in raw  # the working directory and arguments went too
    assert report.changed["capture environment rows"] > 10
    with sqlite3.connect(export) as con:
        assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] >= 1
    con.close()
