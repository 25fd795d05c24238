"""The Parquet cache of query results, in a folder beside the export.

Reading a large export is dominated by SQLite scanning its tables; the frames that come out are
small by comparison. So each query's result, and each report's per-file result, is kept as
Parquet in ``.<export name>.nsys-tools/`` beside the export, keyed by the query text or the
report's options, and thrown away as soon as the export's size or modification time changes.
Exports under ``MIN_BYTES`` are read directly: they are fast anyway, and fixtures or bundled
files stay free of cache folders. ``NSYS_TOOLS_CACHE=0`` turns it off;
a folder that cannot be written to just means no cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from .files import replaced_atomically

VERSION = 2  # 2: partial tables keep value counts
MIN_BYTES = 32 * 2**20


def _folder(export) -> Path:
    return export.path.with_name(f".{export.path.name}.nsys-tools")


def _stamp(export) -> dict:
    st = export.path.stat()
    return {"version": VERSION, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def enabled(export) -> bool:
    if os.environ.get("NSYS_TOOLS_CACHE", "1") == "0":
        return False
    return export.path.stat().st_size >= int(os.environ.get("NSYS_TOOLS_CACHE_MIN_BYTES", MIN_BYTES))


def _file(export, key) -> Path:
    text = key if isinstance(key, str) else "\n".join(key)
    return _folder(export) / f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.parquet"


def _valid(export) -> bool:
    meta = _folder(export) / "meta.json"
    try:
        return json.loads(meta.read_text()) == _stamp(export)
    except (OSError, ValueError):
        return False


def load(export, key):
    """The cached frame for ``key`` (a query, or a name for a derived frame), or None."""
    import polars as pl

    if not enabled(export) or not _valid(export):
        return None
    file = _file(export, key)
    return pl.read_parquet(file) if file.exists() else None


def store(export, key, df) -> None:
    """Keep ``df`` under ``key``; a stale folder is emptied first."""
    if not enabled(export):
        return
    folder = _folder(export)
    try:
        if not _valid(export):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            (folder / "meta.json").write_text(json.dumps(_stamp(export)))
        with replaced_atomically(_file(export, key)) as partial:
            df.write_parquet(partial)
    except OSError:
        return  # a read-only place: no cache, same results


def memo(export, key, compute):
    """``compute()``'s DataFrame, from the cache under ``key`` when it is there."""
    hit = load(export, key)
    if hit is None:
        hit = compute()
        store(export, key, hit)
    return hit
