"""Writing files so that a reader never sees half of one, and nothing already there is lost.
Standard library only (the capture side uses it too)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError

_HINTS = {
    errno.ENOSPC: "free some space on that device, or write elsewhere",
    errno.EDQUOT: "free some space on that device, or write elsewhere",
    errno.EROFS: "that file system is read-only; write elsewhere",
    errno.EACCES: "you may not write there; write elsewhere",
    errno.EPERM: "you may not write there; write elsewhere",
    errno.ENOENT: "check that the folder exists",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
}


def output_error(path: str | Path | None, exc: OSError) -> OutputError:
    """An ``OSError`` met while writing ``path``, as the one line the CLI prints."""
    return OutputError(path, f"cannot be written ({exc.strerror or exc})", _HINTS.get(exc.errno or 0, "write elsewhere"))


@contextmanager
def replaced_atomically(path: Path) -> Iterator[Path]:
    """A hidden sibling of the file ``path`` names (through symlinks: the link stays, its target
    is replaced) to write; same suffix, so writers that go by it still can; unique to this
    process. It is renamed over the target when the block ends, with the target's permissions,
    and removed if the block raises, so the target is either what it was or complete. Errors
    of the file system come out as ``OutputError``."""
    target = Path(os.path.realpath(path))
    partial = target.with_name(f".{target.stem}.{os.getpid()}.partial{target.suffix}")
    try:
        yield partial
        if target.exists():
            os.chmod(partial, stat.S_IMODE(target.stat().st_mode))
        partial.replace(target)
    except OSError as exc:
        raise output_error(path, exc) from exc
    finally:
        try:
            partial.unlink(missing_ok=True)
        except OSError:
            pass


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through ``replaced_atomically``."""
    with replaced_atomically(path) as partial:
        partial.write_text(text)


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through symlinks and hard links)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def output_target(path: Path, inputs: Iterable[Path] = ()) -> Path:
    """Check ``--output path`` before any work: not empty, not a folder, device or read-only
    file, and not one of ``inputs``; its folder is made. Returns the path to write (a symlink's
    target is written through, the link kept)."""
    if str(path) in ("", "."):
        raise OutputError(None, "the output path is empty", "give a file name to --output")
    target = Path(os.path.realpath(path))
    try:
        st = target.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise output_error(path, exc) from exc
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(path, "is a folder", "give a file name for --output")
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(path, "is a device or other special file", "--output writes regular files; redirect stdout instead")
        if not st.st_mode & 0o222:
            raise OutputError(path, "is read-only", "choose another file, or make it writable first")
        for source in inputs:
            if same_file(target, source):
                raise OutputError(path, f"is an input of this command ({source})", "choose another output file")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(target.parent, exc) from exc
    if not target.parent.is_dir():
        raise OutputError(path, "its folder is not a folder", "check the path")
    return target
