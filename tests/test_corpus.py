"""The bad-input corpus (tests/fixtures/bad-input/corpus.py): every case gets the outcome it
names, with one ``Error:`` line per failure and never a traceback."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from nsys_tools.cli import BUG, app

from .cli import CliRunner
from .conftest import FIXTURES

pytestmark = pytest.mark.slow  # the 89 named bad inputs, each through the CLI (about 9 s)

_spec = importlib.util.spec_from_file_location("bad_input_corpus", FIXTURES / "bad-input" / "corpus.py")
corpus = sys.modules["bad_input_corpus"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)
runner = CliRunner()


def test_corpus_is_large_and_in_the_manifest():
    assert len(corpus.CASES) >= 85
    text = (FIXTURES / "bad-input" / "MANIFEST.md").read_text()
    assert corpus.manifest() in text  # regenerate with: python tests/fixtures/bad-input/corpus.py --manifest


def _files(folder) -> dict[str, bytes | str]:
    """Every entry under ``folder``: a regular file's bytes (a -wal and -journal included), else its kind."""
    import hashlib
    import os
    import stat

    out = {}
    for root, dirs, names in os.walk(folder):
        for name in [*dirs, *names]:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    out[path] = hashlib.sha256(f.read()).digest()
            else:
                out[path] = stat.filemode(st.st_mode)
    return out


# Inputs whose bytes a read may still change: a WAL export is checkpointed by a reader that opens
# it read-write; opening exports read-only without a checkpoint makes it none.
WRITTEN_BY_READERS = {"wal-pending"}


@pytest.mark.parametrize("name", list(corpus.CASES))
def test_case(name, tmp_path, monkeypatch):
    import tempfile

    case = corpus.CASES[name]
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # nothing may be left in TMPDIR
    (tmp_path / "tmp").mkdir()
    (tmp_path / "in").mkdir()
    args = case.build(tmp_path / "in")
    before = _files(tmp_path)
    res = runner.invoke(app, ["report", *args, "--format", "csv"])
    if name not in WRITTEN_BY_READERS:  # inputs keep their bytes, and nothing is written beside them
        assert _files(tmp_path) == before
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
    assert "Traceback" not in res.stderr and BUG not in res.stderr, res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    if case.expect == "ok":
        assert res.exit_code == 0, res.stderr
        assert res.stdout.startswith("range,kernel,instances")
    elif case.expect == "error":
        assert res.exit_code == 1 and res.stdout == ""
        assert len(res.stderr.strip().splitlines()) == len(errors) and case.message in errors[-1], res.stderr
    else:
        assert res.exit_code == 1 and res.stdout.startswith("range,kernel,instances") and len(res.stdout.splitlines()) > 1
        assert case.message in errors[-1] and len(errors) >= 2, res.stderr


def test_names_stored_as_blobs_read_as_the_text_they_hold(tmp_path):
    """Kernel and API names stored as BLOBs of their UTF-8 bytes give every row of the unedited
    export: the same names and the same numbers."""
    import sqlite3
    from contextlib import closing

    (path,) = corpus.CASES["strings-as-blobs"].build(tmp_path)
    with closing(sqlite3.connect(path)) as con:
        blobs = con.execute(
            "SELECT count(*) FROM StringIds WHERE typeof(value) = 'blob' AND id IN"
            " (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME)"
        ).fetchone()[0]
    assert blobs >= 10  # names the tables below show
    for view in ("kernels", "api"):
        got = runner.invoke(app, ["report", path, "--view", view, "-f", "csv"])
        want = runner.invoke(app, ["report", str(corpus.NEW), "--view", view, "-f", "csv"])
        assert got.exit_code == 0 and want.exit_code == 0, got.stderr
        assert got.stdout == want.stdout and got.stdout.count("\n") > 10
