"""Open Nsight Systems exports: a ``.sqlite`` read-only, or a ``.nsys-rep`` through ``nsys export``.

``open_export`` checks the file before anything reads it (exists, SQLite, not truncated, an
nsys export) and returns an ``Export`` that knows which tables and columns are present.
``Export.select`` reads one table's projected columns as a LazyFrame; ``Export.windows`` cuts
an export into rowid windows, so that a table of any size can be read a bounded piece at a time.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

from .errors import BadExport, MissingTable, NsysNotFound
from .files import replaced_atomically
from .schema import STRINGS, Field

SQLITE_MAGIC = b"SQLite format 3\x00"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
PARTITION_ROWS = 500_000  # tables larger than this are read in parallel rowid partitions


def find_nsys(explicit: str | Path | None = None, *, needed_for: str | Path | None = None) -> Path:
    """The nsys executable: ``explicit`` (``--nsys``), then ``$NSYS``, then ``PATH``."""
    for origin, candidate in (("--nsys", explicit), ("$NSYS", os.environ.get("NSYS"))):
        if candidate:
            exe = Path(candidate)
            if exe.is_file() and os.access(exe, os.X_OK):
                return exe
            raise NsysNotFound(exe, f"is not an executable nsys (from {origin})", "pass --nsys PATH or set $NSYS to the nsys CLI")
    found = shutil.which("nsys")
    if found:
        return Path(found)
    raise NsysNotFound(
        needed_for,
        "nsys (the Nsight Systems CLI) was not found",
        "pass --nsys PATH, set $NSYS, or put nsys on PATH",
    )


def export_report(report: Path, nsys: str | Path | None = None) -> Path:
    """Export ``report`` (.nsys-rep) to a sibling ``.sqlite``, reusing it while it is newer."""
    target = report.with_suffix(".sqlite")
    if target.exists() and target.stat().st_mtime >= report.stat().st_mtime:
        return target
    exe = find_nsys(nsys, needed_for=report)
    with replaced_atomically(target) as partial:
        cmd = [str(exe), "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(partial), str(report)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not partial.exists():
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise BadExport(report, f"nsys export failed ({last[0]})", "is it a complete .nsys-rep?")
    return target


def check_sqlite(path: Path) -> None:
    """Fail early, naming the file, for anything that is not a whole SQLite database."""
    if not path.exists():
        raise BadExport(path, "no such file", "check the path")
    size = path.stat().st_size
    if size == 0:
        raise BadExport(path, "empty file (0 bytes)", "the export did not finish; run nsys export --type sqlite again")
    with path.open("rb") as fh:
        header = fh.read(100)
    if not header.startswith(SQLITE_MAGIC):
        raise BadExport(path, "not an SQLite file", "pass an Nsight Systems .sqlite export or a .nsys-rep report")
    if len(header) < 100:
        raise BadExport(path, f"truncated SQLite file ({size} bytes)", "copy or export it again")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The in-header page count is valid when "version-valid-for" equals the change counter.
    if header[92:96] == header[24:28] and pages * page_size > size:
        raise BadExport(
            path,
            f"truncated SQLite file ({size} of {pages * page_size} bytes)",
            "copy or export it again",
        )


@dataclass(frozen=True)
class Export:
    """An opened export: its SQLite path, the report it came from, and its tables' columns.

    ``window`` = (k, n) restricts every ``select`` to the k-th of n equal rowid ranges of its
    table (see ``windows``); such reads bypass the Parquet cache."""

    path: Path
    source: Path
    tables: dict[str, frozenset[str]]
    window: tuple[int, int] | None = None

    def has(self, table: str) -> bool:
        return table in self.tables

    def first(self, tables: Sequence[str]) -> str | None:
        return next((t for t in tables if t in self.tables), None)

    def require(self, table: str, hint: str) -> None:
        if table not in self.tables:
            raise MissingTable(self.source, f"no {table} table", hint)

    def connect(self) -> sqlite3.Connection:
        return _connect(self.path)

    @property
    def uri(self) -> str:
        return "sqlite://" + quote(str(self.path.resolve()))

    def rows(self, table: str) -> int:
        """An upper bound on the rows of ``table`` (its largest rowid), without a scan."""
        with self.connect() as con:
            return con.execute(f"SELECT coalesce(max(rowid), 0) FROM {table}").fetchone()[0]

    def windows(self, tables: Iterable[str], rows: int) -> list[Export]:
        """This export as n windows (``window`` = (k, n)), n chosen so that no window holds more
        than ``rows`` rows of any of ``tables``; together they read each table exactly once."""
        largest = max((self.rows(t) for t in tables if self.has(t)), default=0)
        n = max(1, -(-largest // rows))
        return [replace(self, window=(k, n)) for k in range(n)]

    def fetch(self, sql: str | list[str], schema: dict[str, object]):
        """Run ``sql`` (or its partitions, in parallel) and return a DataFrame with ``schema``:
        columns cast to their dtype (None: as stored), columns the query lacks added as nulls.
        Results of large exports come from, and go to, the Parquet cache beside the export (not
        for a window: windows are read once, by a pass that keeps only what it reduces them to)."""
        import polars as pl

        from . import cache

        def read() -> pl.DataFrame:
            try:
                df = pl.read_database_uri(sql, self.uri, engine="connectorx")
            except RuntimeError as exc:
                raise BadExport(self.source, f"cannot be read ({exc})", "the file may be truncated or corrupt") from exc
            return df.select(
                (pl.col(c) if t is None else pl.col(c).cast(t)) if c in df.columns else pl.lit(None, t).alias(c)
                for c, t in schema.items()
            )

        return read() if self.window else cache.memo(self, sql, read)

    def query(self, table: str, fields: Iterable[Field], where: str = "") -> tuple[str, dict[str, object]]:
        """The SQL that reads ``fields`` of ``table`` (``where``: an optional filter) and the
        schema of its result: each field's Polars dtype (None: as stored)."""
        import polars as pl

        dtypes = {"int": pl.Int64, "str": pl.String, "float": pl.Float64, "any": None}
        present = self.tables.get(table, frozenset())
        cols, schema = [], {}
        for fld in fields:
            if fld.expr:
                if all(s in present for s in fld.sources):
                    cols.append(f'{fld.expr} AS "{fld.name}"')
            else:
                src = next((s for s in fld.sources if s in present), None)
                if src:
                    cols.append(f'"{src}" AS "{fld.name}"')
            schema[fld.name] = dtypes[fld.dtype]
        return f"SELECT {', '.join(cols) or 'rowid'} FROM {table}" + (f" WHERE ({where})" if where else ""), schema

    def select(self, table: str, fields: Iterable[Field], where: str = ""):
        """Read ``fields`` of ``table`` as a LazyFrame; ``where`` is an optional SQL filter.

        Columns this export lacks come back as nulls; large tables (or this export's window of
        them) are read in rowid partitions, one per thread of Polars' pool, eight at most."""
        import polars as pl

        sql, schema = self.query(table, fields, where)
        lo, hi = 0, self.rows(table)
        if self.window:
            k, n = self.window
            step = -(-hi // n)
            lo, hi = min(hi, k * step), min(hi, (k + 1) * step)
        parts = min(pl.thread_pool_size(), 8) if hi - lo > PARTITION_ROWS else 1
        if parts > 1 or self.window:
            step = -(-(hi - lo) // parts)
            glue = " AND " if where else " WHERE "
            bounds = [(lo + k * step, min(hi, lo + (k + 1) * step)) for k in range(parts)]
            sql = [f"{sql}{glue}rowid > {a} AND rowid <= {b}" for a, b in bounds]
        return self.fetch(sql, schema).lazy()


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def open_export(path: str | Path, nsys: str | Path | None = None) -> Export:
    """Open an export for reading, exporting a ``.nsys-rep`` through nsys first."""
    source = Path(path)
    if not source.exists():
        raise BadExport(source, "no such file", "check the path")
    sqlite_path = export_report(source, nsys) if source.suffix in REPORT_SUFFIXES else source
    check_sqlite(sqlite_path)
    try:
        with _connect(sqlite_path) as con:
            rows = con.execute(
                "SELECT m.name, p.name FROM sqlite_master AS m, pragma_table_info(m.name) AS p WHERE m.type = 'table'"
            ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise BadExport(source, f"cannot be read ({exc})", "the file may be truncated or corrupt") from exc
    tables: dict[str, set[str]] = {}
    for table, column in rows:
        tables.setdefault(table, set()).add(column)
    if not tables:
        raise BadExport(source, "holds no tables (an empty export)", "was anything captured? check the nsys profile run")
    if STRINGS not in tables:
        raise BadExport(
            source, "is SQLite but not an Nsight Systems export (no StringIds table)", "export it with nsys export --type sqlite"
        )
    return Export(sqlite_path, source, {t: frozenset(c) for t, c in tables.items()})
