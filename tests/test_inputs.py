"""Which exports a report reads: each once, a report's export kept current, folders searched."""

from __future__ import annotations

import os
import shutil
import stat

import pytest
from polars.testing import assert_frame_equal

from nsys_tools.cli import app
from nsys_tools.errors import BadExport, NsysNotFound
from nsys_tools.read.inputs import expand_inputs
from nsys_tools.run.report import kernel_summary

from .cli import CliRunner
from .conftest import FIXTURES

NEW = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
OLD = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite"


def fake_nsys(folder, source=NEW):
    """A stand-in for nsys: ``export`` copies ``source`` to the --output path and logs the call."""
    exe = folder / "nsys"
    exe.write_text(
        f'#!/bin/sh\necho "$@" >> "{folder}/nsys.log"\nwhile [ "$1" != "--output" ]; do shift; done\ncp "{source}" "$2"\n'
    )
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_the_same_export_by_several_paths_counts_once(tmp_path):
    path = tmp_path / "run.sqlite"
    shutil.copyfile(NEW, path)
    (tmp_path / "link.sqlite").symlink_to(path)
    os.link(path, tmp_path / "hard.sqlite")
    assert expand_inputs([path, tmp_path / "link.sqlite", tmp_path / "hard.sqlite", path]) == [path]
    assert len(expand_inputs([tmp_path])) == 1
    once = kernel_summary([NEW])
    assert_frame_equal(kernel_summary([path, tmp_path / "link.sqlite", tmp_path]), once, rel_tol=1e-12)
    res = CliRunner().invoke(app, ["report", str(path), str(path), "-f", "csv", "--range", "triton*"])
    assert res.exit_code == 0 and ",100," in res.stdout.splitlines()[1]  # 100 calls, not 200


def test_a_report_and_its_export_are_one(tmp_path):
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"report")
    os.utime(rep, (1, 1))
    shutil.copyfile(NEW, tmp_path / "run.sqlite")
    assert expand_inputs([rep, tmp_path / "run.sqlite"]) == [rep]
    assert expand_inputs([tmp_path]) == [tmp_path / "run.sqlite"]  # a folder holding both: the .sqlite
    assert expand_inputs([tmp_path], reexport=True) == [rep]


def test_a_named_report_newer_than_its_export_is_exported_again(tmp_path, monkeypatch):
    """x.sqlite older than x.nsys-rep: the named report (or the .sqlite with reexport) is
    exported again (here by a stand-in nsys that writes the 2024.2 export); the .sqlite named
    alone, or found in a folder, is read as given."""
    monkeypatch.setenv("NSYS", str(fake_nsys(tmp_path, source=OLD)))
    stale = tmp_path / "run.sqlite"
    shutil.copyfile(NEW, stale)
    os.utime(stale, (1, 1))
    (tmp_path / "run.nsys-rep").write_bytes(b"newer report")
    assert_frame_equal(kernel_summary([tmp_path]), kernel_summary([NEW]), rel_tol=1e-12)
    assert not (tmp_path / "nsys.log").exists()
    assert_frame_equal(kernel_summary([stale], reexport=True), kernel_summary([OLD]), rel_tol=1e-12)
    assert len((tmp_path / "nsys.log").read_text().splitlines()) == 1
    assert stale.read_bytes() == OLD.read_bytes()
    kernel_summary([tmp_path / "run.nsys-rep"])  # now current: reused, nsys not run again
    assert len((tmp_path / "nsys.log").read_text().splitlines()) == 1


def test_a_named_stale_report_without_nsys_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    stale = tmp_path / "run.sqlite"
    shutil.copyfile(NEW, stale)
    os.utime(stale, (1, 1))
    (tmp_path / "run.nsys-rep").write_bytes(b"newer report")
    with pytest.raises(NsysNotFound, match="run.nsys-rep: nsys .* not found"):
        kernel_summary([tmp_path / "run.nsys-rep"])


def test_folders(tmp_path):
    (tmp_path / "x.sqlite").mkdir()
    with pytest.raises(BadExport, match="x.sqlite: is a folder, not an export"):
        expand_inputs([tmp_path / "x.sqlite"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadExport, match="holds no .sqlite or .nsys-rep exports"):
        expand_inputs([tmp_path / "empty"])
    nested = tmp_path / "x.sqlite" / "rank0"
    nested.mkdir()
    shutil.copyfile(NEW, nested / "a.sqlite")
    (nested / ".a.sqlite.123.partial.sqlite").write_bytes(b"partial")
    (tmp_path / "x.sqlite" / "loop").symlink_to(tmp_path / "x.sqlite")
    assert expand_inputs([tmp_path / "x.sqlite"]) == [nested / "a.sqlite"]


def test_folder_report_goes_on_past_a_bad_export(tmp_path):
    for k in range(3):
        shutil.copyfile(NEW, tmp_path / f"rank{k}.sqlite")
    (tmp_path / "rank1.sqlite").write_bytes(b"SQLite format 3\x00" + bytes(200))
    res = CliRunner().invoke(app, ["report", str(tmp_path), "-f", "csv", "--range", "triton*"])
    assert res.exit_code == 1
    assert res.stdout.splitlines()[1].startswith("triton/4096x768,norm_kernel,200,")  # two good exports of 100 calls
    errors = res.stderr.strip().splitlines()
    assert errors[0].startswith(f"Error: {tmp_path / 'rank1.sqlite'}: ")
    assert errors[-1] == "Error: 1 of 3 exports could not be read; the table covers the other 2"


def test_globs_the_shell_left_quoted(tmp_path):
    for rank in ("a/rank0", "a/rank1", "b/rank2"):
        (tmp_path / rank).parent.mkdir(exist_ok=True)
        shutil.copyfile(NEW, tmp_path / f"{rank}.sqlite")
    assert expand_inputs([tmp_path / "**" / "rank*.sqlite"]) == [
        tmp_path / f"{r}.sqlite" for r in ("a/rank0", "a/rank1", "b/rank2")
    ]
    assert expand_inputs([tmp_path / "?"]) == [
        tmp_path / "a/rank0.sqlite",
        tmp_path / "a/rank1.sqlite",
        tmp_path / "b/rank2.sqlite",
    ]
    with pytest.raises(BadExport, match=r"c\*\.sqlite: matches no file; check the pattern"):
        expand_inputs([tmp_path / "c*.sqlite"])
