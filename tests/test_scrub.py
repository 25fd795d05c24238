"""Scrubbing exports: identity goes, in every form nsys writes it; the trace stays, byte for byte."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from nsys_tools.cli import app
from nsys_tools.errors import BadExport
from nsys_tools.read import cache
from nsys_tools.read import scrub as scrub_module
from nsys_tools.read.scrub import check, scrub
from nsys_tools.run.report import kernel_summary

from .cli import CliRunner
from .conftest import FIXTURES

SECRET = "planted-secret-4f1d"
AWS = "AKIAIOSFODNN7EXAMPLE"
GH = "ghp_" + "x7" * 18
# What must not survive: the secret, the user and host names, credentials.
NEEDLES = (SECRET, "SECRET_TOKEN", "alice", "gpu-node17", "/opt/tools/nsys-2025", "PATH=/usr/bin", AWS, GH, "SSH_CONNECTION")
# Strings the analysis reads that look like NAME=value: they stay.
DATA = ("step=1", "batch_size=64", "train=main")
BASH_FUNC = "BASH_FUNC_module%%=() {  eval `/usr/bin/modulecmd bash $*`\n}"


def plant(path: Path) -> None:
    """Put identity back where nsys versions store it (places seen in unscrubbed 2024.2 and 2025.3
    exports), in every format: one entry per row, NUL- and newline-separated blocks, a block that
    starts with an exported shell function, ``export X=`` inside a command line, home paths of
    Linux, clusters, macOS and Windows, a command line as a process name, a table no version
    writes yet; and NVTX texts shaped like ``NAME=value``, which are data."""
    env = [BASH_FUNC, f"SECRET_TOKEN={SECRET}", "USER=alice", "HOSTNAME=gpu-node17", "SSH_CONNECTION=10.0.0.1 22 10.0.0.2 22"]
    with sqlite3.connect(path) as con:
        con.executemany(
            "INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)",
            [
                ("PROCESS_0:ENVIRONMENT_VARIABLE", f'SECRET_TOKEN="{SECRET}"'),
                ("PROCESS_0:ENVIRONMENT_VARIABLE", 'HOME="/home/alice"'),
                ("PROCESS_0:WORKING_DIR", "/home/alice/project"),
                ("PROCESS_0:ARGUMENT_0", "/home/alice/project/bench.py"),
                ("PROCESS_1:COMMAND", "/global/homes/a/alice/venv/bin/python"),
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
                (900001, "\x00".join(env)),  # a block that starts with a shell function, NUL-separated
                (900002, "\n".join(reversed(env))),  # newline-separated
                (900003, "Loaded CUPTI library: /opt/tools/nsys-2025/target-linux-x64/libcupti.so.13.0"),
                (900004, "/root/run/bench.py --out /global/u2/a/alice/out"),
                (900005, f"bash -c 'cd /tmp && export AWS_ACCESS_KEY_ID={AWS} && python3 train.py'"),
                (900006, r"C:\Users\alice\proj\train.py"),
                (900007, f'{{"GITHUB_TOKEN": "{GH}"}}'),
                (900008, "/Users/alice/Library/x.so"),
                (910001, "step=1"),
                (910002, "batch_size=64"),
            ],
        )
        con.execute(
            "INSERT INTO DIAGNOSTIC_EVENT (timestamp, timestampType, source, severity, text) "
            "VALUES (1, 1, 1, 1, 'connected to gpu-node17 as alice')"
        )
        # NVTX ranges whose texts look like environment entries: by id, inline, and a domain.
        tid = con.execute("SELECT globalTid FROM NVTX_EVENTS LIMIT 1").fetchone()[0]
        con.execute(  # a process of the trace (it has events), named by its command line
            "INSERT INTO PROCESSES (globalPid, pid, name) VALUES (?, 99999, '/home/alice/venv/bin/python3 train.py --lr 3')",
            (tid - tid % 16777216,),
        )
        con.executemany(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text, textId, domainId) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (1, 2, 59, tid, None, 910001, None),
                (3, 4, 59, tid, None, 910002, None),
                (5, 6, 59, tid, "train=main", None, None),
            ],
        )
        con.execute("CREATE TABLE FUTURE_TABLE (note TEXT, extra)")
        con.execute("INSERT INTO FUTURE_TABLE VALUES ('data at /home/alice/data', 'HOSTNAME=gpu-node17')")
        con.execute("UPDATE META_DATA_EXPORT SET value = 'alice-workstation' WHERE name = 'EXPORT_HOST'")
        con.execute("DELETE FROM META_DATA_EXPORT WHERE name = 'EXPORT_PARAM_OUTPUT_PATH_ABS'")
        con.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_OUTPUT_PATH_ABS', '/home/alice/run.sqlite')")
    con.close()


def _value(path: Path, sql: str, *args):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        row = con.execute(sql, args).fetchone()
    con.close()
    return row[0] if row else None


@pytest.mark.parametrize("version", ["2025.3", "2024.2"])
@pytest.mark.slow
def test_every_form_of_identity_goes_and_the_trace_stays(fixture_copy, version):
    path = fixture_copy(f"layernorm-3impl/layernorm-3impl-nsys{version}.sqlite")
    before = kernel_summary([path])
    plant(path)
    assert SECRET.encode() in path.read_bytes()
    report = scrub(path)
    raw = path.read_bytes()
    for needle in NEEDLES:
        assert needle.encode() not in raw, needle
    assert report.changed["capture environment rows"] >= 2
    assert report.changed["environment and credentials"] >= 5
    assert (
        _value(path, "SELECT value FROM StringIds WHERE id = 900003")
        == "Loaded CUPTI library: <nsys>/target-linux-x64/libcupti.so.13.0"
    )
    assert _value(path, "SELECT value FROM StringIds WHERE id = 900004") == "/home/user/run/bench.py --out /home/user/out"
    assert _value(path, "SELECT value FROM StringIds WHERE id = 900006") == r"C:\Users\user\proj\train.py"
    assert _value(path, "SELECT text FROM DIAGNOSTIC_EVENT WHERE timestamp = 1") == "connected to <host2> as <user>"
    assert _value(path, "SELECT name FROM PROCESSES WHERE pid = 99999") == "python3"
    assert _value(path, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PARAM_OUTPUT_PATH_ABS'") == "report.sqlite"
    assert _value(path, "SELECT value FROM META_DATA_CAPTURE WHERE name = 'PROCESS_1:COMMAND'") == ""
    assert _value(path, "SELECT note || '|' || extra FROM FUTURE_TABLE") == "data at /home/user/data|[scrubbed]"
    # Analysis data, though it looks like NAME=value, is untouched.
    assert _value(path, "SELECT value FROM StringIds WHERE id = 910001") == "step=1"
    assert _value(path, "SELECT value FROM StringIds WHERE id = 910002") == "batch_size=64"
    assert _value(path, "SELECT text FROM NVTX_EVENTS WHERE start = 5") == "train=main"
    after = kernel_summary([path])
    assert_frame_equal(after.filter(~after["range"].is_in(DATA)), before, rel_tol=1e-12)
    assert check(path).clean


def test_older_schema_export_paths(fixture_copy):
    """Older exports name the metadata table EXPORT_META_DATA and keep absolute paths in it."""
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2024.2.sqlite")
    with sqlite3.connect(path) as con:
        con.execute("ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA")
        con.execute("INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_OUTPUT_PATH_ABS', '/home/bob/exports/run.sqlite')")
    con.close()
    scrub(path)
    assert _value(path, "SELECT value FROM EXPORT_META_DATA WHERE name = 'EXPORT_OUTPUT_PATH_ABS'") == "report.sqlite"
    assert b"/home/bob" not in path.read_bytes()


def test_identity_in_analysis_strings_is_reported_not_changed(fixture_copy):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    scrub(path)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE NVTX_EVENTS SET text = 'load /home/carol/data.bin' WHERE text = 'triton/4096x768'")
        con.execute("UPDATE StringIds SET value = 'AWS_SECRET_ACCESS_KEY=x' WHERE value = 'norm_kernel'")
    con.close()
    found = check(path)
    assert found.total == 0 and not found.clean and len(found.kept) == 2
    assert any("NVTX_EVENTS.text (read by the analysis): a home path" in k for k in found.kept)
    assert any("StringIds.value (id " in k and "a credential" in k for k in found.kept)
    scrub(path)
    assert _value(path, "SELECT count(*) FROM NVTX_EVENTS WHERE text = 'load /home/carol/data.bin'") == 1
    assert _value(path, "SELECT count(*) FROM StringIds WHERE value = 'AWS_SECRET_ACCESS_KEY=x'") == 1


def test_check_writes_nothing_and_gates(fixture_copy):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    plant(path)
    raw, mtime = path.read_bytes(), path.stat().st_mtime_ns
    res = CliRunner().invoke(app, ["scrub", "--check", str(path)])
    assert res.exit_code == 1 and "would remove" in res.stderr and "hold identity" in res.stderr
    assert "StringIds.value: environment and credentials" in res.stdout
    assert SECRET not in res.stdout + res.stderr  # values are not printed, only names
    assert path.read_bytes() == raw and path.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert CliRunner().invoke(app, ["scrub", str(path)]).exit_code == 0
    res = CliRunner().invoke(app, ["scrub", "--check", str(path)])
    assert res.exit_code == 0 and "nothing to remove" in res.stderr


def test_through_a_symlink_the_real_file_is_scrubbed(fixture_copy, tmp_path):
    real = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    plant(real)
    real.chmod(0o600)
    link = tmp_path / "elsewhere" / "link.sqlite"
    link.parent.mkdir()
    link.symlink_to(real)
    scrub(link)
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert SECRET.encode() not in real.read_bytes()
    assert stat.S_IMODE(real.stat().st_mode) == 0o600  # its permissions are kept


def test_interrupt_leaves_nothing_unscrubbed(fixture_copy, monkeypatch):
    """The working copy lives in SQLite's private temporary database, whose file SQLite unlinks
    as soon as it makes it: while scrubbing, no copy shows beside the export or anywhere else;
    an interrupt leaves the export as it was and nothing beside it."""
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    plant(path)
    raw = path.read_bytes()
    real = scrub_module._scrub_connection
    seen = {}

    def interrupted(con, report):
        real(con, report)
        con.execute("PRAGMA cache_size = 1")  # make SQLite spill the copy to its temporary file
        con.execute("CREATE TABLE spill AS SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME")
        seen["beside"] = sorted(p.name for p in path.parent.iterdir())
        seen["open"] = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                seen["open"].append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:  # the descriptor of the listing itself
                pass
        raise KeyboardInterrupt

    monkeypatch.setattr(scrub_module, "_scrub_connection", interrupted)
    with pytest.raises(KeyboardInterrupt):
        scrub(path)
    temporary = [f for f in seen["open"] if "etilqs_" in f]  # SQLite's name for its temporary files
    assert seen["beside"] == [path.name]
    assert temporary and all(f.endswith("(deleted)") for f in temporary)
    assert path.read_bytes() == raw
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_wal_export_and_cache_are_cleaned(fixture_copy, monkeypatch):
    """An export in WAL mode with un-checkpointed rows: they are scrubbed and kept, and no WAL,
    shared-memory file or Parquet cache from before survives."""
    monkeypatch.setenv("NSYS_TOOLS_CACHE_MIN_BYTES", "0")
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    kernel_summary([path])
    assert cache.entries(path)
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("INSERT INTO StringIds VALUES (990001, 'USER=alice')")
    writer.execute("INSERT INTO StringIds VALUES (990002, 'kept row')")
    writer.commit()
    assert path.with_name(path.name + "-wal").stat().st_size > 0
    scrub(path)
    writer.close()
    assert not path.with_name(path.name + "-wal").exists() and not path.with_name(path.name + "-shm").exists()
    assert path.read_bytes()[18:20] == b"\x01\x01"  # rollback journal, not WAL
    assert _value(path, "SELECT value FROM StringIds WHERE id = 990002") == "kept row"
    assert _value(path, "SELECT value FROM StringIds WHERE id = 990001") == "[scrubbed]"
    assert not cache.entries(path)


def test_scrub_is_idempotent(fixture_copy):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    plant(path)
    scrub(path)
    assert scrub(path).total == 0


def test_refuses_what_it_cannot_scrub_in_place(fixture_copy, tmp_path):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2024.2.sqlite")
    path.chmod(0o444)
    with pytest.raises(BadExport, match="is read-only"):
        scrub(path)
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"report")
    res = CliRunner().invoke(app, ["scrub", str(rep)])
    assert res.exit_code == 1 and "is a report, not a .sqlite export" in res.stderr


def test_cli_scrub_and_bad_input(fixture_copy, tmp_path):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2024.2.sqlite")
    plant(path)
    bad = tmp_path / "x.sqlite"
    bad.write_text("no")
    res = CliRunner().invoke(app, ["scrub", str(bad), str(path)])  # keeps going past a bad file
    assert res.exit_code == 1 and "not an SQLite file" in res.stderr and "environment" in res.stderr
    assert SECRET.encode() not in path.read_bytes()
    assert bad.read_text() == "no"


@pytest.mark.slow
def test_committed_fixture_exports_pass_the_check(tmp_path):
    """`scrub --check` on every export under tests/fixtures, the gzip-compressed ones unpacked:
    exit 0, nothing found (the sweeps' exports are checked with their archives)."""
    import gzip

    plain = sorted(FIXTURES.glob("**/*.sqlite"))
    for packed in FIXTURES.glob("**/*.sqlite.gz"):
        (tmp_path / packed.name.removesuffix(".gz")).write_bytes(gzip.decompress(packed.read_bytes()))
    assert len(plain) >= 7 and len(list(tmp_path.iterdir())) >= 3
    res = CliRunner().invoke(app, ["scrub", "--check", str(FIXTURES), str(tmp_path)])
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == len(plain) + len(list(tmp_path.iterdir())) and all(
        line.endswith(": nothing to remove") for line in lines
    )


def test_a_folder_means_every_export_under_it(fixture_copy, tmp_path):
    """`scrub --check reports/sweeps/<id>` checks the sweep's exports, nested ones included."""
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    nested = tmp_path / "sweep" / "more"
    nested.mkdir(parents=True)
    inner = nested / path.name
    path.rename(inner)
    plant(inner)
    partial = nested / f".{path.name}.tmp.sqlite"  # a write in progress, as replaced_atomically names it
    partial.write_bytes(b"partial")
    res = CliRunner().invoke(app, ["scrub", "--check", str(tmp_path / "sweep")])
    assert res.exit_code == 1 and f"{inner}: would remove" in res.stderr and "1 of 1 exports hold identity" in res.stderr
    assert CliRunner().invoke(app, ["scrub", str(tmp_path / "sweep")]).exit_code == 0
    assert SECRET.encode() not in inner.read_bytes() and partial.read_bytes() == b"partial"
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(app, ["scrub", "--check", str(empty)])
    assert res.exit_code == 1 and f"Error: {empty}: holds no .sqlite exports" in res.stderr and "Traceback" not in res.output
    assert res.stderr.splitlines()[-1] == "Error: no export was checked"


# -- the planted-identity corpus: every kind, in every bundled schema version ------------------

# (needle that must not survive, where it is planted): one row each, so that --check can name it.
PLANTED_TEXT = {
    "bob:hunter2": "clone https://bob:hunter2@git.example.com/repo.git",
    "carol": "USER: carol",
    "dave": "cd ~dave/projects && make",
    "erin": "/scratch/erin/run1/out.log",
    "frank": "/pscratch/sd/f/frank/out",
    "grace": "/work/grace/jobs/42",
    "proj42": "/gpfs/alpine/proj42/scratch/heidi/data",
    "Ivanov": r"C:\Users\Ivan Ivanov\proj\train.py",
}
NON_UTF8 = b"\xff\xfe caf\xe9 /home/olivia/x"  # Latin-1 and stray bytes: they stay, the home path goes
VERSIONS = [
    "layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite",
    "layernorm-3impl/layernorm-3impl-nsys2024.2.sqlite",
    "multi-gpu/multi-gpu-nsys2025.3.sqlite",
]


def plant_every_kind(path: Path) -> list[str]:
    """Each kind of identity issue 23 lists, planted where nsys or a user puts it; returns the
    needles (none may survive the scrub)."""
    with sqlite3.connect(path) as con:
        base = 920000
        for k, text in enumerate(PLANTED_TEXT.values()):
            con.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (base + k, text))
        con.execute("INSERT INTO StringIds (id, value) VALUES (?, CAST(? AS TEXT))", (base + 99, NON_UTF8))
        # an NVTX binary payload (a BLOB; 2024.2 has no binaryData column: a payload column then)
        cols = {r[1] for r in con.execute("PRAGMA table_info(NVTX_EVENTS)")}
        payload = "binaryData" if "binaryData" in cols else "uint64Value"
        con.execute(
            f"UPDATE NVTX_EVENTS SET {payload} = ? WHERE rowid = (SELECT min(rowid) FROM NVTX_EVENTS)",
            (b"\x00\x01payload /home/judy/secret.bin\x00\xff",),
        )
        # text stored in INTEGER columns
        con.execute(
            "INSERT INTO DIAGNOSTIC_EVENT (timestamp, timestampType, source, severity, text) "
            "VALUES (7, 1, 1, '/home/mallory/x', 'ok')"
        )
        con.execute("INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('PROCESS_0:CWD', '/opt/site-xyz/runs')")
        con.execute(
            "INSERT INTO TARGET_INFO_SYSTEM_ENV (globalVid, devStateName, name, nameEnum, value) "
            "VALUES (0, 'x', 'Hostname', 0, 'node-a17.cluster.example')"
        )
        # device UUIDs as nsys records them (the committed exports hold scrub's pseudonyms)
        con.execute("UPDATE TARGET_INFO_GPU SET uuid = printf('db6a4720-7b79-d39b-77c6-c67f85f1%04x', id)")
        con.execute(
            "INSERT INTO DIAGNOSTIC_EVENT (timestamp, timestampType, source, severity, text) "
            "VALUES (8, 1, 1, 1, 'ran on node-a17 with GPU-' || (SELECT uuid FROM TARGET_INFO_GPU ORDER BY id LIMIT 1))"
        )
        # the system's process list: processes without an event in the trace, one naming its user
        for k, name in enumerate(("sshd: oscar@pts/0", "top", "bash")):
            con.execute("INSERT INTO PROCESSES (globalPid, pid, name) VALUES (?, ?, ?)", ((990001 + k) << 24, 990001 + k, name))
        uuids = [u for (u,) in con.execute("SELECT uuid FROM TARGET_INFO_GPU")]
    con.close()
    return [*PLANTED_TEXT, "Ivan ", "olivia", "judy", "mallory", "site-xyz", "node-a17", "oscar", *uuids]


def _report_outputs(path: Path) -> dict[str, str]:
    runner = CliRunner()
    out = {}
    for args in (["-f", "csv"], ["-f", "markdown"], ["--view", "ranges", "-f", "csv"], ["--view", "api", "-f", "csv"]):
        res = runner.invoke(app, ["report", str(path), *args])
        assert res.exit_code == 0, res.stderr
        out[" ".join(args)] = res.stdout
    return out


@pytest.mark.parametrize("fixture", VERSIONS)
def test_planted_identity_is_found_then_gone_and_the_report_is_unchanged(fixture, fixture_copy):
    path = fixture_copy(fixture)
    needles = plant_every_kind(path)
    processes = _value(path, "SELECT count(*) FROM PROCESSES")
    before = _report_outputs(path)
    found = check(path)
    text = "\n".join(found.examples)
    for needle in needles:
        if needle not in ("site-xyz", "node-a17", "oscar", "bob:hunter2"):  # identity-only rows and secrets: value hidden
            assert needle.strip() in text, (needle, found.examples)
    assert "META_DATA_CAPTURE PROCESS_0:CWD" in text and "system environment, user and host rows" in found.changed
    assert found.changed["the system's process list"] > 0 and found.changed["device UUIDs"] >= 1
    scrub(path)
    raw = path.read_bytes()
    for needle in needles:
        assert needle.encode() not in raw, needle
    assert check(path).clean, check(path).examples
    assert _report_outputs(path) == before
    # non-UTF-8 text: only the identity changed, every other byte is the same
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        con.text_factory = bytes
        assert con.execute("SELECT value FROM StringIds WHERE id = 920099").fetchone()[0] == b"\xff\xfe caf\xe9 /home/user/x"
        blob = con.execute(
            "SELECT coalesce(binaryData, uint64Value) FROM NVTX_EVENTS WHERE typeof(coalesce(binaryData, uint64Value)) = 'blob'"
            if "2025" in fixture
            else "SELECT uint64Value FROM NVTX_EVENTS WHERE typeof(uint64Value) = 'blob'"
        ).fetchone()[0]
        assert blob == b"\x00\x01payload /home/user/secret.bin\x00\xff"
        # GPU UUIDs: the same pseudonym in every place it stands
        uuid = con.execute("SELECT uuid FROM TARGET_INFO_GPU ORDER BY id LIMIT 1").fetchone()[0].decode()
        note = con.execute("SELECT text FROM DIAGNOSTIC_EVENT WHERE timestamp = 8").fetchone()[0].decode()
    con.close()
    assert uuid.startswith("00000000-0000-0000-0000-") and note == f"ran on <host> with GPU-{uuid}"
    assert 0 < _value(path, "SELECT count(*) FROM PROCESSES") < processes


def test_scrub_check_agrees_on_non_utf8_exports(fixture_copy):
    """An export holding invalid UTF-8 is checked and scrubbed, not refused (issue 22, item 3)."""
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    with sqlite3.connect(path) as con:
        con.execute("INSERT INTO StringIds (id, value) VALUES (930001, CAST(? AS TEXT))", (b"caf\xe9 \xc3\x28 plain",))
    con.close()
    res = CliRunner().invoke(app, ["scrub", "--check", str(path)])
    assert "Traceback" not in res.output and "not valid UTF-8" not in res.stderr
    scrub(path)
    assert check(path).clean
    assert _value(path, "SELECT hex(value) FROM StringIds WHERE id = 930001") == b"caf\xe9 \xc3\x28 plain".hex().upper()


def test_other_hard_links_are_named_and_folder_symlinks_are_not_followed(fixture_copy, tmp_path):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    plant(path)
    os.link(path, tmp_path / "second-name.sqlite")
    res = CliRunner().invoke(app, ["scrub", str(path)])
    assert res.exit_code == 0 and "1 other hard link(s) to this file still hold the unscrubbed bytes" in res.stderr
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.sqlite"
    shutil.copyfile(FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite", victim)
    plant(victim)
    before = victim.read_bytes()
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "link.SQLITE").symlink_to(victim)
    res = CliRunner().invoke(app, ["scrub", str(folder)])
    assert victim.read_bytes() == before and "link.SQLITE: skipped, a symlink" in res.stderr
