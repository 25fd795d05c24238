"""Sweep archives: a sweep folder as one ``<id>.tar.xz``, read by unpacking it into a private folder.

An archive is a file from anyone, so it is checked member by member before anything is written:
every member is a regular file or a folder under one top folder named as the archive (``<id>/``),
with a relative path of plain parts (no absolute path, no ``..``, no hidden name); links, devices
and FIFOs are refused, and so is a member over ``MEMBER_BYTES``, an archive over ``TOTAL_BYTES``
unpacked or over ``MEMBERS`` members. What passes is extracted with ``tarfile``'s ``data`` filter,
which checks the same again and drops permission bits a file should not carry. The archive is read
as a stream, in one pass: a bound is met before the bytes past it are written.

Standard library only: the wheel's build hook reads the bundled demo through it.
"""

from __future__ import annotations

import atexit
import lzma
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from .errors import BadExport

SUFFIX = ".tar.xz"
MEMBER_BYTES = 1 << 31  # 2 GiB: the largest export of a committed sweep is 13 MB
TOTAL_BYTES = 1 << 33  # 8 GiB unpacked
MEMBERS = 100_000
HINT = "a sweep archive holds one folder, <id>/, of plain files (tar -cJf <id>.tar.xz <id>)"


def is_archive(path: str | Path) -> bool:
    """Whether ``path`` names a sweep archive (by its name; ``unpack`` checks its content)."""
    path = Path(path)
    return path.name.lower().endswith(SUFFIX) and path.is_file()


def name_of(archive: str | Path) -> str:
    """The sweep id an archive holds: its file name without ``.tar.xz``."""
    name = Path(archive).name
    return name[: -len(SUFFIX)]


def _checked(member: tarfile.TarInfo, top: str, archive: Path) -> None:
    parts = PurePosixPath(member.name).parts
    if PurePosixPath(member.name).is_absolute() or not parts or parts[0] != top:
        raise BadExport(archive, f"member {member.name!r} is not under {top}/", HINT)
    if any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        raise BadExport(archive, f"member {member.name!r} has a hidden, '.' or '..' part", HINT)
    if not (member.isreg() or member.isdir()):
        raise BadExport(archive, f"member {member.name!r} is a link or a special file", HINT)
    if member.size > MEMBER_BYTES:
        raise BadExport(archive, f"member {member.name!r} is {member.size} bytes, over {MEMBER_BYTES}", HINT)


class _Member(tarfile.TarInfo):
    """A member header, read as tarfile reads it; at the end, the end-of-archive marker checked.
    tarfile ends the members at a header that is missing, cut or not a header as it does at the
    marker, a zero block: only the marker, two zero blocks, ends them here."""

    @classmethod
    def fromtarfile(cls, tar: tarfile.TarFile) -> tarfile.TarInfo:
        try:
            return super().fromtarfile(tar)
        except tarfile.EOFHeaderError:  # a zero block: the marker's first, if the second follows
            if tar.fileobj.read(tarfile.BLOCKSIZE) != bytes(tarfile.BLOCKSIZE):
                raise tarfile.ReadError("no end-of-archive marker: a lone zero block") from None
            raise
        except (tarfile.EmptyHeaderError, tarfile.TruncatedHeaderError, tarfile.InvalidHeaderError) as exc:
            if tar.offset == 0:
                raise  # tarfile's own error: not a tar at all
            raise tarfile.ReadError(f"no end-of-archive marker ({exc} at byte {tar.offset}): cut short") from None


def unpack(archive: str | Path, into: str | Path) -> Path:
    """Unpack ``archive`` into the folder ``into`` (which must exist), member by member, and give
    the sweep folder it held (``into/<id>``). Any member that fails a check stops it with a
    ``BadExport`` naming the archive; what was written so far stays in ``into``."""
    archive, into = Path(archive), Path(into)
    top = name_of(archive)
    total = count = 0
    try:
        # The xz stream is read through lzma, which fails at a cut: tarfile's own stream reader
        # takes a cut that falls between two members for the archive's end, and loses the rest.
        with lzma.open(archive) as xz, tarfile.open(fileobj=xz, mode="r|", tarinfo=_Member) as tar:
            for member in tar:
                count += 1
                total += member.size
                if count > MEMBERS or total > TOTAL_BYTES:
                    raise BadExport(archive, f"unpacks to more than {MEMBERS} members or {TOTAL_BYTES} bytes", HINT)
                _checked(member, top, archive)
                tar.extract(member, into, filter="data")
            while xz.read(1 << 16):  # the padding after the last member, up to the stream's end marker
                pass
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as exc:  # not xz, not tar, cut short, or refused
        raise BadExport(archive, f"is not a readable sweep archive ({exc})", HINT) from exc
    folder = into / top
    if not folder.is_dir():
        raise BadExport(archive, f"holds no folder {top}/", HINT)
    return folder


_UNPACKED: list[tempfile.TemporaryDirectory] = []


@atexit.register
def _remove_unpacked() -> None:
    for folder in _UNPACKED:
        folder.cleanup()


def unpacked(archive: str | Path) -> Path:
    """``archive`` unpacked into a new private folder (mode 0700, under the system's temporary
    folder), removed when the process exits: the sweep folder it held."""
    folder = tempfile.TemporaryDirectory(prefix="nsys-tools-sweep-")
    try:
        sweep = unpack(archive, folder.name)
    except BaseException:
        folder.cleanup()
        raise
    _UNPACKED.append(folder)
    return sweep
