"""The Parquet cache of query results, in the user's own cache folder.

Reading a large export is dominated by SQLite scanning its tables; the frames that come out are
small by comparison. So each query's result, and each report's per-file result, is kept as
Parquet in ``$XDG_CACHE_HOME/nsys-tools`` (else ``~/.cache/nsys-tools``), never beside the
export: reading an export writes nothing in its folder, and whoever owns that folder cannot
plant entries.

The folder is used only when it is a real folder (not a link) owned by this user with mode
0700; it is made so when missing, and closed to 0700 when it is this user's and no one else
may write to it. Anything else there (another owner, a folder others may write to, a link)
means no cache, and the reports are the same. An entry's name is a hash of the export's real
path, of its **fingerprint** and of the query: size, modification time, inode, status-change
time, and a content hash of the SQLite header (which holds the page count and the change
counter), a sample of pages across the file and its last pages. Any difference is another
name, so a replaced export is never answered from the cache, even one of the same size with
its modification time restored; the entries of its earlier content are removed when a new one
is stored. A result is stored only when the fingerprint taken before computing it still holds
afterwards: a file replaced during a report leaves no entry. Entries are opened with
``O_NOFOLLOW`` and written as new files (``O_EXCL``, mode 0600) renamed into place, so a link in
the folder is never followed. An entry that cannot be read is dropped and computed again.

Exports under ``MIN_BYTES`` are read directly: they are fast anyway. ``NSYS_TOOLS_CACHE=0``
turns it off. Standard library only at import (``scrub`` forgets a file's entries).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import OutputError
from ..files import replaced_atomically

VERSION = 5  # 2: content fingerprints; 3: partial tables keep value counts; 4: short names keyed by full name; 5: user cache
MIN_BYTES = 32 * 2**20
SAMPLES = 16  # pages hashed across the file
SAMPLE_BYTES = 4096
TAIL_BYTES = 256 * 1024  # the last pages: where SQLite appends
MODE = 0o700


def root() -> Path:
    """Where the cache lives: ``$XDG_CACHE_HOME/nsys-tools`` (an absolute one), else ``~/.cache/nsys-tools``."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "nsys-tools"


def folder() -> Path | None:
    """The cache folder when it may be used (made here, mode 0700, when missing), else None. A
    folder of this user that no one else may write to (another tool made it 0755: Inductor's
    kernels go to ``~/.cache/nsys-tools/inductor``) is closed to 0700 first; one that others may
    write to, or that is not this user's, or is a link, is never used."""
    where = root()
    try:
        if not os.path.lexists(where):
            where.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(where, MODE)
        st = os.lstat(where)
        mine = stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022
        if mine and stat.S_IMODE(st.st_mode) != MODE:
            os.chmod(where, MODE, follow_symlinks=False)
            st = os.lstat(where)
    except OSError:
        return None
    mine = stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == MODE
    return where if mine else None


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _export_key(path: Path) -> str:
    """The part of an entry's name that names the export: its real path."""
    return _hash(os.path.realpath(path))[:20]


def _name(path: Path, stamp: dict, key) -> str:
    text = key if isinstance(key, str) else "\n".join(key)
    return f"{_export_key(path)}-{_hash(json.dumps(stamp, sort_keys=True))[:16]}-{_hash(text)[:24]}.parquet"


def entries(path: Path) -> list[Path]:
    """The cache's entries for the export at ``path``, of all its contents so far."""
    where = folder()
    return [] if where is None else sorted(where.glob(f"{_export_key(path)}-*.parquet"))


def forget(path: Path) -> int:
    """Remove every entry of the export at ``path``; how many."""
    gone = 0
    for entry in entries(path):
        try:
            entry.unlink()
            gone += 1
        except OSError:
            pass
    return gone


def fingerprint(path: Path) -> dict:
    """What identifies the export's current content, cheaply (a few hundred KiB read)."""
    st = os.stat(path)
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        digest.update(fh.read(100))
        step = max(st.st_size // SAMPLES, 1)
        for k in range(1, SAMPLES):
            fh.seek(k * step)
            digest.update(fh.read(SAMPLE_BYTES))
        fh.seek(max(st.st_size - TAIL_BYTES, 0))
        digest.update(fh.read(TAIL_BYTES))
    return {
        "version": VERSION,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "inode": st.st_ino,
        "sha256": digest.hexdigest(),
    }


def enabled(export) -> bool:
    if os.environ.get("NSYS_TOOLS_CACHE", "1") == "0":
        return False
    try:
        minimum = int(os.environ.get("NSYS_TOOLS_CACHE_MIN_BYTES", MIN_BYTES))
    except ValueError:
        minimum = MIN_BYTES
    return export.path.stat().st_size >= minimum


def load(export, key, stamp: dict | None = None):
    """The cached frame for ``key`` (a query, or a name for a derived frame), or None."""
    import polars as pl

    where = folder() if enabled(export) else None
    if where is None:
        return None
    entry = where / _name(export.path, stamp or fingerprint(export.path), key)
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError:  # a link or something else in its place: never followed, computed again
        _drop(entry)
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        try:
            return pl.read_parquet(fh)
        except Exception:  # a damaged entry (Polars or the OS raise many kinds): computed again
            _drop(entry)
            return None


def _drop(entry: Path) -> None:
    try:
        entry.unlink()
    except OSError:
        pass


def store(export, key, df, stamp: dict) -> None:
    """Keep ``df`` under ``key`` if the export still has the fingerprint ``stamp`` that it had
    before ``df`` was computed; the entries of the export's earlier contents are removed."""
    where = folder() if enabled(export) else None
    if where is None or fingerprint(export.path) != stamp:
        return
    name = _name(export.path, stamp, key)
    current = name.split("-")[1]
    try:
        for old in entries(export.path):
            if old.name.split("-")[1] != current:
                _drop(old)
        with replaced_atomically(where / name, mode=0o600) as partial:
            df.write_parquet(partial)
    except (OSError, OutputError):
        return  # a full or read-only place: no cache, same results


def memo(export, key, compute):
    """``compute()``'s DataFrame, from the cache under ``key`` when it is there."""
    if not enabled(export):
        return compute()
    stamp = fingerprint(export.path)
    hit = load(export, key, stamp)
    if hit is None:
        hit = compute()
        store(export, key, hit, stamp)
    return hit


def memo_all(export, keys: Sequence[str], compute: Callable[[list[int]], list]) -> list:
    """``memo`` of several keys at once: the DataFrames under ``keys`` from the cache where they
    are there; ``compute(missing)`` makes those of the others (their positions in ``keys``) together."""
    if not enabled(export):
        return compute(list(range(len(keys))))
    stamp = fingerprint(export.path)
    found = [load(export, key, stamp) for key in keys]
    missing = [i for i, hit in enumerate(found) if hit is None]
    if missing:
        for i, made in zip(missing, compute(missing), strict=True):
            store(export, keys[i], made, stamp)
            found[i] = made
    return found
