"""The Parquet cache of query results, in a folder beside the export.

Reading a large export is dominated by SQLite scanning its tables; the frames that come out are
small by comparison. So each query's result, and each report's per-file result, is kept as
Parquet in ``.<export name>.nsys-tools/`` beside the export (beside the real file, for a
symlink), keyed by the query text or the report's options.

The folder is stamped with the export's **fingerprint**: its size, modification time, inode and
status-change time, and a content hash of the SQLite header (which holds the page count and
the change counter), a sample of pages across the file and its last pages. Any difference
throws the folder away, so a replaced export is never answered from the cache, even one of the
same size with its modification time restored. A result is stored only when the fingerprint
taken before computing it still holds afterwards: a file replaced during a report leaves no
entry. An entry that cannot be read is dropped and computed again.

Exports under ``MIN_BYTES`` are read directly: they are fast anyway, and fixtures or bundled
files stay free of cache folders. ``NSYS_TOOLS_CACHE=0`` turns it off; a folder that cannot be
written to just means no cache. Standard library only at import (``scrub`` clears caches).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from ..errors import OutputError
from ..files import replaced_atomically

VERSION = 4  # 2: content fingerprints; 3: partial tables keep value counts; 4: short names keyed by full name, names as text
MIN_BYTES = 32 * 2**20
SAMPLES = 16  # pages hashed across the file
SAMPLE_BYTES = 4096
TAIL_BYTES = 256 * 1024  # the last pages: where SQLite appends


def folder_of(path: Path) -> Path:
    """The cache folder of the export at ``path`` (beside the real file behind a symlink)."""
    real = Path(os.path.realpath(path))
    return real.with_name(f".{real.name}.nsys-tools")


def clear(path: Path) -> bool:
    """Remove the cache of the export at ``path``; whether there was one."""
    folder = folder_of(path)
    if not folder.is_dir():
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True


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


def _file(export, key) -> Path:
    text = key if isinstance(key, str) else "\n".join(key)
    return folder_of(export.path) / f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.parquet"


def _stamped(export, stamp: dict) -> bool:
    try:
        return json.loads((folder_of(export.path) / "meta.json").read_text()) == stamp
    except (OSError, ValueError):
        return False


def load(export, key, stamp: dict | None = None):
    """The cached frame for ``key`` (a query, or a name for a derived frame), or None."""
    import polars as pl

    if not enabled(export) or not _stamped(export, stamp or fingerprint(export.path)):
        return None
    file = _file(export, key)
    if not file.exists():
        return None
    try:
        return pl.read_parquet(file)
    except Exception:  # a damaged entry (Polars or the OS raise many kinds): computed again
        file.unlink(missing_ok=True)
        return None


def store(export, key, df, stamp: dict) -> None:
    """Keep ``df`` under ``key`` if the export still has the fingerprint ``stamp`` that it had
    before ``df`` was computed; a folder with another stamp is emptied first."""
    if not enabled(export) or fingerprint(export.path) != stamp:
        return
    folder = folder_of(export.path)
    try:
        if not _stamped(export, stamp):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            (folder / "meta.json").write_text(json.dumps(stamp))
        with replaced_atomically(_file(export, key)) as partial:
            df.write_parquet(partial)
    except (OSError, OutputError):
        return  # a read-only place: no cache, same results


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
