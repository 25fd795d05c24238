"""Outputs that cannot lose data: --output checks, writes through symlinks, and stdout errors."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsys_tools.cli import app
from nsys_tools.errors import OutputError
from nsys_tools.files import output_target, write_text_atomically

from .cli import CliRunner
from .conftest import FIXTURES

runner = CliRunner()
NEW = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
QUIET = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"


def _one_error(res, text: str) -> None:
    assert res.exit_code == 1, res.stderr
    assert res.stderr.startswith("Error: ") and len(res.stderr.strip().splitlines()) == 1 and text in res.stderr, res.stderr


def test_output_never_replaces_an_input(fixture_copy, tmp_path):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    raw = path.read_bytes()
    _one_error(runner.invoke(app, ["report", str(path), "-o", str(path)]), "is an input of this command")
    link = tmp_path / "out.md"
    link.symlink_to(path)
    _one_error(runner.invoke(app, ["report", str(path), "-o", str(link)]), "is an input of this command")
    hard = tmp_path / "hard.md"
    hard.hardlink_to(path)
    _one_error(runner.invoke(app, ["report", str(tmp_path), "-o", str(hard)]), "is an input of this command")
    assert path.read_bytes() == raw
    sweep = tmp_path / "sweep"
    shutil.copytree(QUIET, sweep)
    _one_error(runner.invoke(app, ["report", str(sweep), "-o", str(sweep / "manifest.json")]), "is an input")


def test_output_writes_through_a_symlink(tmp_path):
    real = tmp_path / "real" / "table.md"
    real.parent.mkdir()
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "table.md"
    link.symlink_to(real)
    res = runner.invoke(app, ["report", str(NEW), "-o", str(link)])
    assert res.exit_code == 0, res.stderr
    assert link.is_symlink() and real.read_text().startswith("| range | kernel |")
    assert real.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in real.parent.iterdir()) == ["table.md"]  # no partial file left


@pytest.mark.parametrize(
    "target, text",
    [("/dev/null", "is a device or other special file"), ("", "the output path is empty"), (".", "the output path is empty")],
)
def test_output_refuses_devices_and_empty_paths(target, text):
    _one_error(runner.invoke(app, ["report", str(NEW), "-o", target]), text)
    assert Path("/dev/null").is_char_device()


def test_output_refuses_folders_and_read_only_files(tmp_path):
    _one_error(runner.invoke(app, ["report", str(NEW), "-o", str(tmp_path)]), "is a folder")
    locked = tmp_path / "locked.md"
    locked.write_text("keep me\n")
    locked.chmod(0o444)
    _one_error(runner.invoke(app, ["report", str(NEW), "-o", str(locked)]), "is read-only")
    assert locked.read_text() == "keep me\n"
    under_a_file = tmp_path / "locked.md" / "x.md"
    _one_error(runner.invoke(app, ["report", str(NEW), "-o", str(under_a_file)]), "cannot be written")


def test_write_errors_are_output_errors(tmp_path):
    """A folder that cannot hold files (procfs) gives an OutputError naming the path; nothing is left."""
    with pytest.raises(OutputError, match="cannot be written"):
        write_text_atomically(Path("/proc/nsys-tools-test.md"), "x")
    _one_error(runner.invoke(app, ["report", str(NEW), "-o", "/proc/table.md"]), "cannot be written")
    assert output_target(tmp_path / "new" / "t.md") == tmp_path / "new" / "t.md"


@pytest.mark.parametrize("device, text", [("/dev/full", "No space left on device")])
def test_stdout_on_a_full_device_is_one_error(device, text):
    exe = Path(sys.executable).with_name("nsys-tools")
    with open(device, "w") as out:
        done = subprocess.run([str(exe), "report", str(NEW)], stdout=out, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("Error: cannot write to standard output") and text in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_stdout_closed_early_ends_quietly():
    """The reader went away (``| head``): exit 0 and nothing on stderr, as Unix tools do."""
    exe = Path(sys.executable).with_name("nsys-tools")
    proc = subprocess.Popen([str(exe), "report", "--demo", "-f", "csv"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader went away (like `| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err == "", err
