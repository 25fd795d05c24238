"""A write that fails part way (a full disk, a file size limit) in ``report -o``, a chunked read's
spill, ``scrub`` and ``export --to``: exit 1, one ``Error:`` line naming the file being written with
a hint, nothing left behind (partial file, spill folder, SQLite journal), and a file already at the
output path keeps its bytes. A file size limit (``RLIMIT_FSIZE``, SIGXFSZ ignored, so that writes
past it fail with EFBIG) works on any Linux, as any user; a small tmpfs mounted in a user namespace
gives a real ENOSPC where the system lets a user make one."""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nsys_tools.cli import BUG
from nsys_tools.run import chunked
from nsys_tools.run.bigexport import replicate

from .conftest import FIXTURES

REPO = Path(__file__).resolve().parents[1]
NEW = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
OLD = b"the bytes of an earlier run\n"
# The command line, with the spill budget of a chunked read as its first argument.
CLI = (
    "import sys; from nsys_tools.run import chunked; chunked.SPILL_BYTES = int(sys.argv.pop(1)); "
    "from nsys_tools.cli import run; run()"
)


def _size_limit(limit: int):
    def start() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return start


def _cli(tmp_path: Path, *args, limit: int | None = None, spill: int = chunked.SPILL_BYTES, prefix=()):
    """The command line in a child process, its temporary files in ``tmp_path/temp``."""
    temp = tmp_path / "temp"
    temp.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(temp), "SQLITE_TMPDIR": str(temp), "NSYS_TOOLS_CACHE": "0"}
    return subprocess.run(
        [*prefix, sys.executable, "-c", CLI, str(spill), *map(str, args)],
        env=env,
        preexec_fn=None if limit is None else _size_limit(limit),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_error(done, named: str, hint: str) -> str:
    """Exit 1 and one ``Error:`` line that names ``named`` (the start of a path) and holds ``hint``."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith(f"Error: {named}") and hint in line, line
    assert "Traceback" not in done.stderr and BUG not in line and "is damaged" not in line, line
    return line


def _holds(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("fmt, name", [("markdown", "t.md"), ("parquet", "t.parquet")])
def test_report_output_past_a_size_limit(tmp_path, fmt, name):
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_bytes(OLD)
    done = _cli(tmp_path, "report", NEW, "-f", fmt, "-o", out / name, limit=1000)
    _one_error(done, f"{out / name}: cannot be written (File too large)", "a size limit of this system")
    assert (out / name).read_bytes() == OLD and _holds(out) == [name] and _holds(tmp_path / "temp") == []


def test_spill_past_a_size_limit(tmp_path):
    """A chunked read whose buckets go to disk past 1 kB: the spill file is named, TMPDIR is the
    hint, and the spill folder is gone."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "t.md").write_bytes(OLD)
    done = _cli(tmp_path, "report", NEW, "-o", out / "t.md", limit=2000, spill=1024)
    line = _one_error(done, f"{tmp_path / 'temp'}/nsys-tools-spill-", "point TMPDIR at a folder with room")
    assert re.search(r"nsys-tools-spill-\d+-\w+/\w+(-\d+)+\.arrow: cannot be written \(File too large\)", line), line
    assert _holds(tmp_path / "temp") == [] and (out / "t.md").read_bytes() == OLD and _holds(out) == ["t.md"]


def test_export_past_a_size_limit_leaves_no_folder(tmp_path):
    frames = tmp_path / "out" / "frames"
    done = _cli(tmp_path, "export", NEW, "--to", frames, limit=1000)
    _one_error(done, f"{frames}/kernels.parquet: cannot be written (File too large)", "a size limit of this system")
    assert _holds(tmp_path) == ["temp"] and _holds(tmp_path / "temp") == []


def test_export_past_a_size_limit_keeps_the_folder_as_it_was(tmp_path):
    """Frames that fit (kernels, about 21 kB) are written, then a larger one fails (30 kB limit):
    none replaces the folder's files, which are all renamed into place only at the end."""
    frames = tmp_path / "frames"
    frames.mkdir()
    for name in ("kernels.parquet", "frames.json"):
        (frames / name).write_bytes(OLD)
    done = _cli(tmp_path, "export", NEW, "--to", frames, limit=30_000)
    line = _one_error(done, f"{frames}/", "a size limit of this system")
    failed = re.match(rf"Error: {re.escape(str(frames))}/(\w+)\.parquet: cannot be written \(", line)
    assert failed and failed.group(1) != "kernels", line  # kernels.parquet was written whole first
    assert _holds(frames) == ["frames.json", "kernels.parquet"] and all((frames / n).read_bytes() == OLD for n in _holds(frames))
    assert _holds(tmp_path / "temp") == []


@pytest.mark.parametrize(
    "copies, at, hint",
    [(0, "out/x.sqlite", "move the export to another disk"), (20, "temp", "point SQLITE_TMPDIR at a folder with room")],
    ids=["scrubbed-copy", "temporary-database"],
)
def test_scrub_past_a_size_limit(tmp_path, copies, at, hint):
    """The scrubbed copy (VACUUM INTO beside the export), or, for an export past SQLite's page
    cache (4 MB, past its 2 MB), the private temporary database it is scrubbed in, passes a 100 kB limit: the
    export keeps its bytes, and no journal, WAL or partial file is left."""
    out = tmp_path / "out"
    out.mkdir()
    export = out / "x.sqlite"
    if copies:
        replicate(NEW, export, copies)
    else:
        shutil.copyfile(NEW, export)
    raw = export.read_bytes()
    done = _cli(tmp_path, "scrub", export, limit=100_000)
    _one_error(done, f"{tmp_path / at}: cannot be written (disk I/O error)", hint)
    assert export.read_bytes() == raw and _holds(out) == ["x.sqlite"] and _holds(tmp_path / "temp") == []


def _tmpfs_refused(mount: Path) -> str | None:
    if shutil.which("unshare") is None:
        return "no unshare"
    mount.mkdir()
    done = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=64k", "nsys-tools-test", str(mount)])
    return None if done.returncode == 0 else "this system lets no user mount a tmpfs in a user namespace"


@pytest.mark.parametrize("case", ["report-parquet", "scrub"])
def test_a_full_tmpfs_is_one_error(tmp_path, case):
    """A real ENOSPC: the output on a tmpfs of 64 kB nearly filled (report), or just larger than the
    export (scrub in place: no room for the scrubbed copy)."""
    mount = tmp_path / "mnt"
    refused = _tmpfs_refused(mount)
    if refused:
        pytest.skip(refused)
    if case == "scrub":
        size, setup, args, named = "600k", f"cp {NEW} {mount}/x.sqlite", ["scrub", mount / "x.sqlite"], "x.sqlite"
        hint, after = "free some space on that device", f"cmp -s {NEW} {mount}/x.sqlite && echo same"
    else:
        size, setup, named = "64k", f"head -c 60000 /dev/zero > {mount}/.fill", "t.parquet"
        args, hint, after = ["report", NEW, "-f", "parquet", "-o", mount / "t.parquet"], "free some space on that device", "true"
    script = f'mount -t tmpfs -o size={size} nsys-tools-test {mount} && {setup} && "$@"; echo "rc=$?"; ls -A {mount}; {after}'
    done = _cli(tmp_path, *args, prefix=["unshare", "-rm", "sh", "-c", script, "sh"])
    assert done.stdout.startswith("rc=1\n"), (done.stdout, done.stderr)
    done.returncode = 1
    _one_error(done, f"{mount / named}: cannot be written", hint)
    left = done.stdout.splitlines()[1:]
    assert left == (["x.sqlite", "same"] if case == "scrub" else [".fill"]), left
    assert _holds(tmp_path / "temp") == []
