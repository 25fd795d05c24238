"""Which exports a command reads: files as given, folders searched, globs expanded, each export once.

A folder is searched recursively for ``.sqlite`` and ``.nsys-rep`` files (hidden ones, such as
caches and partial writes, are skipped). A ``.nsys-rep`` and the ``.sqlite`` beside it are one
export: the report is kept, and ``export.export_report`` reuses the ``.sqlite`` while it is
current and exports it again when the report is newer. The same file reached by two paths
(a symlink, a hard link, a report and its export) is read once. A path that does not exist but
holds ``*``, ``?`` or ``[`` is a glob (``**`` crosses folders), for shells that pass it on
quoted: ``'runs/**/rank*.sqlite'``.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import BadExport
from .export import REPORT_SUFFIXES

EXPORT_SUFFIXES = (".sqlite", *REPORT_SUFFIXES)


def files_in(folder: Path, suffixes: tuple[str, ...] = EXPORT_SUFFIXES) -> list[Path]:
    """The files under ``folder`` ending in one of ``suffixes``, in order; hidden files and
    folders (caches, partial writes) are skipped, and symlinked folders are not followed."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(root, f) for f in sorted(files) if not f.startswith(".") and f.endswith(suffixes)]
    return [q for q in found if q.is_file()]


def _exports_in(folder: Path) -> list[Path]:
    found = files_in(folder)
    reports = {q.with_suffix("") for q in found if q.suffix in REPORT_SUFFIXES}
    return [q for q in found if q.suffix in REPORT_SUFFIXES or q.with_suffix("") not in reports]


def identity(path: Path) -> tuple:
    """What makes two paths one export: the file read (a report's sibling .sqlite when there is one)."""
    for candidate in (path.with_suffix(".sqlite"), path) if path.suffix in REPORT_SUFFIXES else (path,):
        try:
            st = candidate.stat()
        except OSError:
            continue
        return (st.st_dev, st.st_ino)
    return (os.path.realpath(path),)


def _globbed(paths: Iterable[str | Path]) -> Iterator[Path]:
    for p in map(Path, paths):
        if p.exists() or p.is_symlink() or not any(c in str(p) for c in "*?["):
            yield p
            continue
        matches = sorted(glob.glob(str(p), recursive=True))
        if not matches:
            raise BadExport(p, "matches no file", "check the pattern")
        yield from map(Path, matches)


def expand_inputs(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given, folders searched recursively for exports, globs expanded; each export
    once, in order."""
    found: list[Path] = []
    seen: set[tuple] = set()
    for p in _globbed(paths):
        if not p.exists():
            broken = " (a broken symlink)" if p.is_symlink() else ""
            raise BadExport(p, "no such file or folder" + broken, "check the path")
        if p.is_dir():
            files = _exports_in(p)
            if not files:
                if p.suffix in EXPORT_SUFFIXES:
                    raise BadExport(p, "is a folder, not an export", "pass the export itself, or a folder holding exports")
                raise BadExport(p, "holds no .sqlite or .nsys-rep exports", "point at an export or a folder of them")
        else:
            files = [p]
        for f in files:
            key = identity(f)
            if key not in seen:
                seen.add(key)
                found.append(f)
    return found
