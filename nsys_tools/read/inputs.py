"""Which exports a command reads: files as given, folders searched, globs expanded, each export once.

A folder is searched recursively for ``.sqlite`` and ``.nsys-rep`` files (hidden ones, such as
caches and partial writes, are skipped). A ``.nsys-rep`` and the ``.sqlite`` beside it are one
export, and the ``.sqlite`` is what is read, as a ``.sqlite`` that is named is: only a
``.nsys-rep`` that is named, or alone in its folder, goes through nsys (``reexport=True`` reads
the report instead wherever one sits beside a ``.sqlite``, exported again when it is newer).
The same file reached by two paths (a symlink, a hard link, a report and its export) is read
once. A path that does not exist but holds ``*``, ``?`` or ``[`` is a glob (``**`` crosses
folders), for shells that pass it on quoted: ``'runs/**/rank*.sqlite'``.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import BadExport
from .export import REPORT_SUFFIXES

EXPORT_SUFFIXES = (".sqlite", *REPORT_SUFFIXES)


def unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read as an export (None when it is a regular file): a broken
    symlink, a FIFO, socket or device (which would hang or feed endless bytes), unreadable."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return "a broken symlink" if path.is_symlink() else "no such file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISREG(st.st_mode):
        return None if os.access(path, os.R_OK) else "cannot be read (permission denied)"
    if stat.S_ISDIR(st.st_mode):
        return "a folder"
    return {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}.get(
        stat.S_IFMT(st.st_mode), "not a regular file"
    )


def _has_suffix(name: str, suffixes: tuple[str, ...]) -> bool:
    return name.lower().endswith(tuple(s.lower() for s in suffixes))  # RUN.SQLITE too


def files_in(folder: Path, suffixes: tuple[str, ...] = EXPORT_SUFFIXES, skipped: list | None = None) -> list[Path]:
    """The files under ``folder`` ending in one of ``suffixes`` (in any case), in order; hidden
    files and folders (caches, partial writes) are skipped, and symlinked folders are not
    followed. An entry that is not a readable regular file (a broken symlink, a FIFO, a socket)
    is left out and, with a ``skipped`` list, recorded there as ``(path, why)``."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(root, f) for f in sorted(files) if not f.startswith(".") and _has_suffix(f, suffixes)]
    good = []
    for q in found:
        why = unreadable(q)
        if why is None:
            good.append(q)
        elif skipped is not None:
            skipped.append((q, why))
    return good


def _is_report(path: Path) -> bool:
    return path.suffix.lower() in REPORT_SUFFIXES


def _is_sqlite(path: Path) -> bool:
    return path.suffix.lower() == ".sqlite"


def beside(path: Path, reexport: bool) -> Path:
    """The file read for ``path``: with ``reexport``, a ``.sqlite``'s sibling report, if any."""
    if reexport and _is_sqlite(path):
        return next((r for r in map(path.with_suffix, REPORT_SUFFIXES) if r.is_file()), path)
    return path


def _exports_in(folder: Path, reexport: bool = False, skipped: list | None = None) -> list[Path]:
    found = files_in(folder, skipped=skipped)
    exports = {q.with_suffix("") for q in found if _is_sqlite(q)}
    kept = [q for q in found if _is_sqlite(q) or q.with_suffix("") not in exports]
    return [beside(q, reexport) for q in kept]


def identity(path: Path) -> tuple:
    """What makes two paths one export: the file read (a report's sibling .sqlite when there is one)."""
    for candidate in (path.with_suffix(".sqlite"), path) if _is_report(path) else (path,):
        try:
            st = candidate.stat()
        except OSError:
            continue
        return (st.st_dev, st.st_ino)
    return (os.path.realpath(path),)


def _globbed(paths: Iterable[str | Path], skipped: list | None) -> Iterator[tuple[Path, bool]]:
    """Each path, and whether a glob or a folder found it (rather than the user naming it)."""
    for p in map(Path, paths):
        if p.exists() or p.is_symlink() or not any(c in str(p) for c in "*?["):
            yield p, False
            continue
        matches = sorted(glob.glob(str(p), recursive=True))
        if not matches:
            raise BadExport(p, "matches no file", "check the pattern")
        for m in map(Path, matches):
            if m.is_dir() and not m.is_symlink():
                yield m, True
            elif not _has_suffix(m.name, EXPORT_SUFFIXES):
                continue  # a glob such as runs/* also matches logs and notes
            elif (why := unreadable(m)) is None:
                yield m, True
            elif skipped is not None:
                skipped.append((m, why))
            else:
                raise BadExport(m, f"is {why}", "remove it, or narrow the pattern")


def expand_inputs(paths: Iterable[str | Path], skipped: list | None = None, *, reexport: bool = False) -> list[Path]:
    """Files as given, folders searched recursively for exports, globs expanded; each export
    once, in order. ``reexport``: a ``.sqlite`` with a report beside it stands for the report.
    A path the user named must be a readable export or folder (a FIFO, socket or device is
    refused before anything reads it). One rule for entries found by a folder or a glob: a bad
    one (a broken symlink, a FIFO, unreadable) is left out and, with a ``skipped`` list,
    recorded there as ``(path, why)`` for one warning line each (``--strict`` makes them fatal);
    without the list it is an error."""
    found: list[Path] = []
    seen: set[tuple] = set()
    bad: list = [] if skipped is None else skipped
    for p, from_pattern in _globbed(paths, bad):
        if not p.exists():
            broken = " (a broken symlink)" if p.is_symlink() else ""
            raise BadExport(p, "no such file or folder" + broken, "check the path")
        if p.is_dir():
            files = _exports_in(p, reexport, bad)
            if not files and not from_pattern:
                if _has_suffix(p.name, EXPORT_SUFFIXES):
                    raise BadExport(p, "is a folder, not an export", "pass the export itself, or a folder holding exports")
                if not bad:
                    raise BadExport(p, "holds no .sqlite or .nsys-rep exports", "point at an export or a folder of them")
        else:
            why = unreadable(p)
            if why is not None:
                raise BadExport(p, f"is {why}, not an export file", "pass a .sqlite or .nsys-rep file")
            files = [beside(p, reexport)]
        for f in files:
            key = identity(f)
            if key not in seen:
                seen.add(key)
                found.append(f)
    if skipped is None and bad:
        path, why = bad[0]
        raise BadExport(path, f"is {why}", "remove it from the folder, or name the exports to read")
    return found
