"""Sweep archives (``<id>.tar.xz``): read as the folder they hold, checked member by member as
files from anyone, unpacked into a private folder that goes when the process does."""

from __future__ import annotations

import io
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsys_tools import archives
from nsys_tools.cli import app
from nsys_tools.errors import BadExport

from .conftest import QUIET

runner = CliRunner()


def pack(folder: Path, archive: Path) -> Path:
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(folder, arcname=folder.name)
    return archive


def hostile(archive: Path, *members: tarfile.TarInfo, data: bytes = b"x") -> Path:
    with tarfile.open(archive, "w:xz") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(data) if member.isreg() else None)
    return archive


def member(name: str, kind: bytes = tarfile.REGTYPE, size: int = 1, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size if kind == tarfile.REGTYPE else 0, link
    return info


@pytest.mark.slow  # two reports of a sweep, about 2 s
def test_a_sweep_archive_reports_as_its_folder(tmp_path):
    archive = pack(QUIET, tmp_path / f"{QUIET.name}.tar.xz")
    from_folder = runner.invoke(app, ["report", str(QUIET), "-f", "csv"])
    from_archive = runner.invoke(app, ["report", str(archive), "-f", "csv"])
    assert from_archive.exit_code == 0, from_archive.output
    assert from_archive.stdout == from_folder.stdout and from_folder.stdout.count("\n") == 17


def test_the_folder_is_private_and_goes_with_the_process(tmp_path):
    archive = pack(QUIET, tmp_path / f"{QUIET.name}.tar.xz")
    code = (
        "import stat, sys\nfrom nsys_tools import archives\n"
        f"folder = archives.unpacked({str(archive)!r})\n"
        "print(folder, oct(stat.S_IMODE(folder.parent.stat().st_mode)), (folder / 'manifest.json').is_file())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    folder, mode, found = done.stdout.split()
    assert mode == "0o700" and found == "True" and Path(folder).name == QUIET.name
    assert not Path(folder).parent.exists()  # removed at exit


@pytest.mark.parametrize(
    "members, why",
    [
        ([member("s/x", tarfile.SYMTYPE, link="/etc/passwd")], "link or a special file"),
        ([member("s/a"), member("s/b", tarfile.LNKTYPE, link="s/a")], "link or a special file"),
        ([member("s/dev", tarfile.CHRTYPE)], "link or a special file"),
        ([member("s/fifo", tarfile.FIFOTYPE)], "link or a special file"),
        ([member("/s/abs")], "is not under s/"),
        ([member("s/../../escape")], "'..' part"),
        ([member("other/x")], "is not under s/"),
        ([member("s/.scratch/x.nsys-rep")], "hidden"),
    ],
    ids=["symlink", "hardlink", "device", "fifo", "absolute", "dotdot", "other-top", "hidden"],
)
def test_a_member_that_is_not_a_plain_file_under_the_sweep_is_refused(tmp_path, members, why):
    archive = hostile(tmp_path / "s.tar.xz", *members)
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(BadExport, match=why):
        archives.unpack(archive, into)
    assert not (tmp_path / "escape").exists() and not any(p.is_symlink() for p in into.rglob("*"))


def test_bounds_stop_it_before_the_bytes_past_them(tmp_path, monkeypatch):
    into = tmp_path / "into"
    into.mkdir()
    monkeypatch.setattr(archives, "MEMBER_BYTES", 4)
    with pytest.raises(BadExport, match="over 4"):
        archives.unpack(hostile(tmp_path / "s.tar.xz", member("s/big", size=5), data=b"12345"), into)
    monkeypatch.setattr(archives, "MEMBER_BYTES", 1 << 31)
    monkeypatch.setattr(archives, "TOTAL_BYTES", 8)
    archive = hostile(tmp_path / "s.tar.xz", *(member(f"s/{i}", size=3) for i in range(4)), data=b"abc")
    with pytest.raises(BadExport, match="more than"):
        archives.unpack(archive, into)
    assert len(list((into / "s").iterdir())) == 2  # the third would pass the bound: never written


def test_not_an_archive_is_one_error_line(tmp_path):
    fake = tmp_path / "20261129-183449-quiet.tar.xz"
    fake.write_bytes(b"not xz at all")
    res = runner.invoke(app, ["report", str(fake)])
    assert res.exit_code == 1 and res.stderr.startswith(f"Error: {fake}: is not a readable sweep archive")
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output
    cut = pack(QUIET, tmp_path / f"{QUIET.name}.tar.xz")
    cut.write_bytes(cut.read_bytes()[:50_000])
    res = runner.invoke(app, ["report", str(cut)])
    assert res.exit_code == 1 and "is not a readable sweep archive" in res.stderr


def test_an_archive_cut_between_two_members_is_refused_not_read_short(tmp_path):
    """A cut where the xz stream's decompressed prefix ends exactly at a member's header: tarfile's
    own stream reader took that for the archive's end and gave a sweep without its later files
    (its manifest among them). Every such cut of a packed sweep is refused."""
    import lzma

    archive = pack(QUIET, tmp_path / f"{QUIET.name}.tar.xz")
    data = archive.read_bytes()
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(data))) as tar:
        headers = {m.offset for m in tar.getmembers()} - {0}
    decompressor, produced, cuts = lzma.LZMADecompressor(), 0, []
    for end in range(1, len(data)):
        produced += len(decompressor.decompress(data[end - 1 : end]))
        if produced in headers:
            cuts.append(end)
    assert cuts  # the packed sweep has such cuts: the test reaches the case
    cut = tmp_path / "cut" / archive.name
    cut.parent.mkdir()
    for end in cuts:
        cut.write_bytes(data[:end])
        with pytest.raises(BadExport, match="is not a readable sweep archive"):
            archives.unpack(cut, tmp_path / "cut")


def test_a_tar_without_its_end_marker_is_refused_not_read_short(tmp_path):
    """A whole xz stream around a tar that stops at a member's header, or after its last member,
    without the two zero blocks that end an archive: tarfile takes the missing header for the end
    and gave the members before it. Either is refused, in one ``Error:`` line."""
    import lzma

    archive = pack(QUIET, tmp_path / f"{QUIET.name}.tar.xz")
    whole = lzma.decompress(archive.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(whole)) as tar:
        members = tar.getmembers()
    last = members[-1]
    ends = [members[len(members) // 2].offset, last.offset_data + -(-last.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE]
    assert whole[ends[1] :].strip(b"\0") == b""  # the rest is the end marker and the padding
    cut = tmp_path / "cut" / archive.name
    cut.parent.mkdir()
    for end in ends:
        cut.write_bytes(lzma.compress(whole[:end], format=lzma.FORMAT_XZ))
        with pytest.raises(BadExport, match="is not a readable sweep archive .*end-of-archive marker"):
            archives.unpack(cut, tmp_path / "cut")
    res = runner.invoke(app, ["report", str(cut)])
    assert res.exit_code == 1 and res.stderr.startswith(f"Error: {cut}: is not a readable sweep archive")
    assert len(res.stderr.strip().splitlines()) == 1 and archives.HINT in res.stderr and "Traceback" not in res.output


def test_unpacked_files_carry_no_special_permissions(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "manifest.json").write_text("{}")
    (folder / "manifest.json").chmod(0o4777)
    into = tmp_path / "into"
    into.mkdir()
    out = archives.unpack(pack(folder, tmp_path / "s.tar.xz"), into)
    mode = stat.S_IMODE((out / "manifest.json").stat().st_mode)
    assert not mode & (stat.S_ISUID | stat.S_IWOTH)
