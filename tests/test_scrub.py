"""Scrubbing exports: the environment, names and paths go; the trace stays."""

from __future__ import annotations

import sqlite3

import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from nsys_tools.cli import app
from nsys_tools.errors import BadExport
from nsys_tools.report import kernel_summary
from nsys_tools.scrub import scrub

SECRET = "planted-secret-4f1d"


def plant(path):
    """Put an environment back where nsys 2025.3 stores it (rows seen in an unscrubbed export):
    META_DATA_CAPTURE PROCESS_0:ENVIRONMENT_VARIABLE rows, the TARGET_INFO_SYSTEM_ENV
    DeviceEnvironment blob, NAME=value strings in StringIds, the working directory, arguments,
    host, user and the nsys install folder."""
    with sqlite3.connect(path) as con:
        con.executemany(
            "INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)",
            [
                ("PROCESS_0:ENVIRONMENT_VARIABLE", f'SECRET_TOKEN="{SECRET}"'),
                ("PROCESS_0:ENVIRONMENT_VARIABLE", 'HOME="/home/alice"'),
                ("PROCESS_0:WORKING_DIR", "/home/alice/project"),
                ("PROCESS_0:ARGUMENT_0", "/home/alice/project/bench.py"),
            ],
        )
        con.execute("UPDATE META_DATA_CAPTURE SET value = 'alice-workstation' WHERE name = 'DEVICE_DISPLAY_NAME'")
        con.executemany(
            "INSERT INTO TARGET_INFO_SYSTEM_ENV (globalVid, devStateName, name, nameEnum, value) VALUES (0, 'x', ?, 0, ?)",
            [
                ("DeviceEnvironment", f"SECRET_TOKEN={SECRET};PATH=/usr/bin;HOME=/home/alice;"),
                ("Hostname", "alice-workstation"),
                ("TargetInstallDir", "/opt/tools/nsys-2025/target-linux-x64"),
            ],
        )
        con.executemany(
            "INSERT INTO StringIds (id, value) VALUES (?, ?)",
            [
                (900001, f"SECRET_TOKEN={SECRET}"),
                (900002, "OLDPWD=/home/alice"),
                (900003, "Loaded CUPTI library: /opt/tools/nsys-2025/target-linux-x64/libcupti.so.13.0"),
                (900004, "/home/alice/project/bench.py"),
            ],
        )
        con.execute("UPDATE META_DATA_EXPORT SET value = 'alice-workstation' WHERE name = 'EXPORT_HOST'")
        con.execute("UPDATE META_DATA_EXPORT SET value = '/home/alice/run.sqlite' WHERE name = 'EXPORT_PARAM_OUTPUT_PATH_ABS'")
    con.close()


def test_planted_secret_is_gone(fixture_copy):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    before = kernel_summary([path])
    plant(path)
    assert SECRET.encode() in path.read_bytes()
    report = scrub(path)
    raw = path.read_bytes()
    for needle in (SECRET, "SECRET_TOKEN", "alice", "/opt/tools/nsys-2025", "PATH=/usr/bin"):
        assert needle.encode() not in raw, needle
    assert report.changed["capture environment rows"] >= 2
    assert report.changed["environment strings"] >= 2
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT value FROM StringIds WHERE id = 900003").fetchone() == (
            "Loaded CUPTI library: <nsys>/target-linux-x64/libcupti.so.13.0",
        )
        assert con.execute("SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PARAM_OUTPUT_PATH_ABS'").fetchone() == (
            "run.sqlite",
        )
    con.close()
    assert_frame_equal(kernel_summary([path]), before, rel_tol=1e-12)  # the trace itself is untouched


def test_scrub_is_idempotent(fixture_copy):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    plant(path)
    scrub(path)
    assert scrub(path).total == 0


def test_cli_scrub_and_bad_input(fixture_copy, tmp_path):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2024.2.sqlite")
    plant(path)
    res = CliRunner().invoke(app, ["scrub", str(path)])
    assert res.exit_code == 0 and "environment" in res.stderr
    assert SECRET.encode() not in path.read_bytes()
    bad = tmp_path / "x.sqlite"
    bad.write_text("no")
    res = CliRunner().invoke(app, ["scrub", str(bad)])
    assert res.exit_code == 1 and "not an SQLite file" in res.stderr
    with pytest.raises(BadExport):
        scrub(bad)
    assert bad.read_text() == "no"


def test_committed_exports_hold_no_environment():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    exports = list(root.glob("reports/sweeps/*/*.sqlite")) + list(root.glob("tests/fixtures/*/*.sqlite"))
    assert len(exports) > 20
    for path in exports:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            n = con.execute("SELECT count(*) FROM StringIds WHERE value LIKE '%PATH=%' OR value LIKE '%HOME=%'").fetchone()[0]
            n += con.execute("SELECT count(*) FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT%'").fetchone()[0]
        con.close()
        assert n == 0, path
