"""Open Nsight Systems exports: a ``.sqlite`` read-only, or a ``.nsys-rep`` through ``nsys export``.

``open_export`` checks the file before anything reads it (exists, SQLite, not truncated, an
nsys export) and returns an ``Export`` that knows which tables and columns are present.
``Export.select`` reads one table's projected columns as a LazyFrame; ``Export.windows`` cuts
an export into rowid windows, so that a table of any size can be read a bounded piece at a time;
``check_columns`` stops a reader that would otherwise get nulls for a column its analysis needs.
``reading(path)`` turns what SQLite, the ADBC driver or Polars raise on a damaged file into one
``BadExport``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import BadExport, MissingColumn, MissingTable, NsysNotFound, NsysToolsError, OutputError, UsageError
from ..files import replaced_atomically
from .schema import REQUIRED_COLUMNS, STRINGS, Field
from .sql import ident

if TYPE_CHECKING:
    import polars as pl

SQLITE_MAGIC = b"SQLite format 3\x00"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
PARTITION_ROWS = 500_000  # tables larger than this are read in parallel rowid partitions
NSYS_TIMEOUT_S = 3600  # the longest any nsys call may take; $NSYS_TOOLS_NSYS_TIMEOUT overrides it
SCRUBBED_TABLE = "NSYS_TOOLS_SCRUBBED"  # written by scrub: a re-export would bring back what it removed
# What the ADBC SQLite driver (or Polars, checking its text) says when it cannot read a result
# that SQLite can: text that is not UTF-8, or a column whose later values do not fit the type its
# first rows gave it.
ARROW_FALLBACK = ("utf-8", "utf8", "type mismatch")


def is_scrubbed(path: Path) -> bool:
    """Whether ``path`` is an export that ``scrub`` wrote (it holds our marker table)."""
    try:
        con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
        try:
            return bool(con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (SCRUBBED_TABLE,)).fetchone())
        finally:
            con.close()
    except sqlite3.Error:
        return False


def _replaceable(report: Path, target: Path, reexport: bool) -> None:
    """Refuse to re-export over anything but a plain export of one name, unscrubbed unless
    ``reexport`` (``--reexport``) allows it: never through a symlink, onto a hard link, a special
    file, or a file that is not SQLite."""
    try:
        st = target.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise BadExport(target, f"cannot be checked ({exc.strerror})", "check the folder") from exc
    hint = f"move it away, or export the report yourself: nsys export --type sqlite --output NEW.sqlite {report.name}"
    if os.path.islink(target):
        raise BadExport(target, "is a symlink: a re-export never writes through one", hint)
    if not os.path.isfile(target):
        raise BadExport(target, "is not a regular file: a re-export writes only over an export", hint)
    if st.st_nlink > 1:
        raise BadExport(target, f"has {st.st_nlink - 1} other hard link(s): a re-export would change them too", hint)
    try:
        with open(target, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise BadExport(target, f"cannot be read ({exc.strerror})", hint) from exc
    if head and head != SQLITE_MAGIC:
        raise BadExport(target, "is not an SQLite export: a re-export writes only over an export", hint)
    if is_scrubbed(target) and not reexport:
        raise BadExport(
            target,
            f"is a scrubbed export older than {report.name}: re-exporting would bring back what scrub removed",
            "pass --reexport to export it again (then scrub the new export), or read it as it is by removing the report",
        )


def find_nsys(explicit: str | Path | None = None, *, needed_for: str | Path | None = None) -> Path:
    """The nsys executable, as an absolute path: ``explicit`` (``--nsys``), then ``$NSYS``, then ``PATH``."""
    for origin, candidate in (("--nsys", explicit), ("$NSYS", os.environ.get("NSYS"))):
        if candidate:
            exe = Path(os.path.abspath(candidate))
            if exe.is_file() and os.access(exe, os.X_OK):
                return exe
            raise NsysNotFound(
                candidate, f"is not an executable nsys (from {origin})", "pass --nsys PATH or set $NSYS to the nsys CLI"
            )
    found = shutil.which("nsys")
    if found:
        return Path(found).absolute()
    raise NsysNotFound(
        needed_for,
        "nsys (the Nsight Systems CLI) was not found",
        "pass --nsys PATH, set $NSYS, or put nsys on PATH",
    )


def nsys_timeout() -> float:
    """Seconds any nsys call may run: ``$NSYS_TOOLS_NSYS_TIMEOUT`` or ``NSYS_TIMEOUT_S``."""
    raw = os.environ.get("NSYS_TOOLS_NSYS_TIMEOUT", "")
    try:
        value = float(raw) if raw else NSYS_TIMEOUT_S
    except ValueError:
        value = -1.0
    if not value > 0:
        raise UsageError(None, f"NSYS_TOOLS_NSYS_TIMEOUT={raw!r} is not a positive number of seconds", "unset it or fix it")
    return value


def _die_with_parent() -> None:
    """In the child, before nsys starts: be killed when this process dies (Linux), so that a
    killed run leaves no orphan nsys."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_nsys(cmd: Sequence[str], about: str | Path | None, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` for an nsys command, with the timeout; a hung or missing nsys is an error."""
    limit = nsys_timeout()
    try:
        return subprocess.run(list(cmd), timeout=limit, preexec_fn=_die_with_parent, **kwargs)
    except subprocess.TimeoutExpired as exc:
        raise NsysToolsError(
            about,
            f"nsys {cmd[1] if len(cmd) > 1 else ''} did not finish within {limit:g} s",
            "set NSYS_TOOLS_NSYS_TIMEOUT to allow longer",
        ) from exc
    except OSError as exc:
        raise NsysNotFound(
            cmd[0], f"cannot be run ({exc.strerror or exc})", "pass --nsys PATH or set $NSYS to the nsys CLI"
        ) from exc


def _nsys_complaint(output: str) -> tuple[str, str]:
    """The line of nsys's output worth showing, and a hint: a version mismatch is named as nsys put it."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    version = [line for line in lines if "version" in line.lower()]
    if version:
        return version[-1], "export it with the Nsight Systems version that wrote it, or a newer one (--nsys PATH)"
    return (lines[-1] if lines else "no output"), "is it a complete .nsys-rep?"


def export_is_current(report: Path, target: Path) -> bool:
    """Whether ``target`` (a .sqlite) is at least as new as ``report`` (its .nsys-rep)."""
    return target.is_file() and target.stat().st_mtime >= report.stat().st_mtime


def export_report(report: Path, nsys: str | Path | None = None, *, reexport: bool = False) -> Path:
    """Export ``report`` (.nsys-rep) to a sibling ``.sqlite``, reusing it while it is newer;
    ``reexport``: also over a scrubbed export (``--reexport``)."""
    target = report.with_suffix(".sqlite")
    if export_is_current(report, target):
        return target
    _replaceable(report, target, reexport)
    exe = find_nsys(nsys, needed_for=report)
    with ExitStack() as stack:
        try:
            partial = stack.enter_context(replaced_atomically(target))
        except OutputError as exc:
            cause = exc.__cause__
            raise BadExport(
                report,
                f"its export cannot be written beside it ({cause.strerror if isinstance(cause, OSError) else exc.problem})",
                f"copy it to a writable folder, or run nsys export --type sqlite --output DIR/{target.name} on it and pass that",
            ) from exc
        # Absolute paths: a file named like an option (--stats=true.nsys-rep) reaches nsys as a path.
        out_path, in_path = os.path.abspath(partial), os.path.abspath(report)
        cmd = [str(exe), "export", "--type", "sqlite", "--force-overwrite", "true", "--output", out_path, in_path]
        done = run_nsys(cmd, report, capture_output=True, text=True, errors="replace")
        if done.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
            line, hint = _nsys_complaint(f"{done.stdout}\n{done.stderr}")
            raise BadExport(report, f"nsys export failed ({line})", hint)
    return target


_READ_PROBLEMS = (
    (
        ("decode", "utf-8", "utf8"),
        "holds text that is not valid UTF-8",
        "is it an unmodified Nsight Systems export? export it again",
    ),
    (("locked", "busy"), "is locked by another program", "wait for the program writing it to finish, or read a copy"),
    (
        ("unable to open", "permission denied", "readonly"),
        "cannot be opened",
        "check its permissions and its folder's, and for a -journal or -wal file left beside it by a writer that crashed",
    ),
    (
        ("conversion error", "invalid column type", "cannot cast", "mismatched", "could not convert", "datatype mismatch"),
        "holds values of unexpected types",
        "is it an unmodified Nsight Systems export?",
    ),
    (
        ("no such column", "no such table"),
        "lacks a table or column the query needs",
        "is it an unmodified Nsight Systems export?",
    ),
)


def read_error(source: str | Path, exc: BaseException) -> BadExport:
    """What SQLite, the ADBC driver or Polars raised while reading ``source``, as one ``BadExport``."""
    text = " ".join(str(exc).split())[:200] or type(exc).__name__
    low = text.lower()
    for needles, problem, hint in _READ_PROBLEMS:
        if any(n in low for n in needles):
            return BadExport(source, f"{problem} ({text})", hint)
    return BadExport(source, f"is damaged ({text})", "the file may be truncated or corrupt; export or copy it again")


def _reader_failure(exc: BaseException) -> bool:
    """Errors of the readers (not of this toolkit, not interrupts): SQLite, decoding, I/O,
    the ADBC driver, Polars (a Rust panic too)."""
    if isinstance(exc, (NsysToolsError, KeyboardInterrupt, SystemExit, GeneratorExit)):
        return False
    if isinstance(exc, (sqlite3.Error, UnicodeDecodeError, OSError, RuntimeError, OverflowError)):
        return True
    module = type(exc).__module__
    return type(exc).__name__ == "PanicException" or module.startswith(("polars", "adbc_driver_manager"))


@contextmanager
def reading(source: str | Path) -> Iterator[None]:
    """Run a block that reads ``source``; a damaged file comes out as one ``BadExport`` naming it."""
    try:
        yield
    except BaseException as exc:
        if _reader_failure(exc):
            raise read_error(source, exc) from exc
        raise


def check_sqlite(path: Path) -> None:
    """Fail early, naming the file, for anything that is not a whole SQLite database."""
    if not path.exists():
        raise BadExport(path, "no such file", "check the path" + (" (a broken symlink)" if path.is_symlink() else ""))
    if path.is_dir():
        raise BadExport(path, "is a folder, not an export", "pass the .sqlite or .nsys-rep files inside it")
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        raise BadExport(path, f"cannot be read ({exc.strerror or exc})", "check its permissions") from exc
    if size == 0:
        raise BadExport(path, "empty file (0 bytes)", "the export did not finish; run nsys export --type sqlite again")
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


class PlannedReads(Protocol):
    """Where an export's reads of some tables come from instead of its file (``run.chunked``: a
    dry run that records them, then pieces that answer them from their buckets). Every ``select``
    of one of ``tables`` goes to ``rows``, except a lookup by key (``select(lookup=True)``)."""

    tables: Collection[str]

    def rows(self, ex: Export, table: str, fields: tuple[Field, ...], where: str) -> pl.LazyFrame: ...


@dataclass(frozen=True)
class Export:
    """An opened export: its SQLite path, the report it came from, and its tables' columns.

    ``window`` = (k, n) restricts every ``select`` to the k-th of n equal rowid ranges of its
    table (see ``windows``); such reads bypass the Parquet cache. ``planned``: reads of some
    tables answered elsewhere (``PlannedReads``); ``held``: results kept in memory, by query,
    instead of the Parquet cache (what the pieces of one export read alike)."""

    path: Path
    source: Path
    tables: dict[str, frozenset[str]]
    window: tuple[int, int] | None = None
    declared: dict[tuple[str, str], str] = field(default_factory=dict, compare=False, repr=False)  # (table, column): type
    not_null: frozenset[tuple[str, str]] = field(default=frozenset(), compare=False, repr=False)  # declared NOT NULL
    probe: bool = False  # every select reads no row: the frames' schemas, at no cost
    planned: PlannedReads | None = field(default=None, compare=False, repr=False)
    held: dict | None = field(default=None, compare=False, repr=False)
    bounds: dict[str, int] = field(default_factory=dict, compare=False, repr=False)  # ``rows``, each table's read once

    def zero_rows(self) -> Export:
        """This export as one whose every ``select`` reads no row (``Trace`` finds its frames'
        schemas on it without reading the tables)."""
        return replace(self, probe=True)

    def has(self, table: str) -> bool:
        return table in self.tables

    def first(self, tables: Sequence[str]) -> str | None:
        return next((t for t in tables if t in self.tables), None)

    def nullable(self, table: str, columns: Iterable[str]) -> bool:
        """Whether any of ``columns`` of ``table`` may hold NULL: the export does not declare it
        NOT NULL (every nsys export declares its activity records' times so)."""
        return any((table, c) not in self.not_null for c in columns)

    def require(self, table: str, hint: str) -> None:
        if table not in self.tables:
            raise MissingTable(self.source, f"no {table} table", hint)

    def connect(self) -> sqlite3.Connection:
        return _connect(self.path)

    def rows(self, table: str) -> int:
        """An upper bound on the rows of ``table`` (its largest rowid), without a scan; read once
        for this export and those ``replace``d from it, as its tables are."""
        if table not in self.bounds:
            with reading(self.source), self.connect() as con:
                self.bounds[table] = con.execute(f"SELECT coalesce(max(rowid), 0) FROM {ident(table)}").fetchone()[0]
        return self.bounds[table]

    def windows(self, tables: Iterable[str], rows: int) -> list[Export]:
        """This export as n windows (``window`` = (k, n)), n chosen so that no window holds more
        than ``rows`` rows of any of ``tables``; together they read each table exactly once."""
        largest = max((self.rows(t) for t in tables if self.has(t)), default=0)
        n = max(1, -(-largest // rows))
        return [replace(self, window=(k, n)) for k in range(n)]

    def check_columns(self, table: str, needed: Iterable[str | tuple[str, ...]] | None = None) -> None:
        """Stop with an error naming the column when ``table`` lacks one its analysis needs
        (``needed``, by default ``schema.REQUIRED_COLUMNS[table]``; a tuple means any one of
        them), instead of reading it as nulls."""
        present = self.tables.get(table, frozenset())
        for column in REQUIRED_COLUMNS.get(table, ()) if needed is None else needed:
            options = (column,) if isinstance(column, str) else column
            if not any(c in present for c in options):
                raise MissingColumn(
                    self.source,
                    f"{table} has no {' or '.join(options)} column, which the analysis needs",
                    "is it an unmodified Nsight Systems export (2020.5 or later)? export it again",
                )

    def fetch(self, sql: str | list[str], schema: dict[str, object]):
        """Run ``sql`` (or its partitions, in parallel) and return a DataFrame with ``schema``:
        columns cast to their dtype (None: as stored), columns the query lacks added as nulls.
        Results of large exports come from, and go to, the user's Parquet cache (``cache.py``; not
        for a window: windows are read once, by a pass that keeps only what it reduces them to)."""
        import polars as pl

        from . import cache

        def column(df: pl.DataFrame, c: str, t) -> pl.Expr:
            if c not in df.columns:
                return pl.lit(None, t).alias(c)
            if t is None:
                return pl.col(c)
            if t == pl.Int64 and (df.schema[c].is_float() or df.schema[c] == pl.String):  # never truncated nor parsed
                raise BadExport(
                    self.source,
                    f"holds values of unexpected types ({c}: {df.schema[c]} values where integers belong)",
                    "is it an unmodified Nsight Systems export?",
                )
            return pl.col(c).cast(t)

        def read() -> pl.DataFrame:
            with reading(self.source):
                df = self._read_sql(sql)
                return df.select(column(df, c, t) for c, t in schema.items())

        if self.probe and all(t is not None for t in schema.values()):  # no row to read: no query either
            return pl.DataFrame(schema=schema)
        if self.held is not None:
            key = tuple(sql) if isinstance(sql, list) else sql
            if key not in self.held:
                self.held[key] = read()
            return self.held[key]
        return read() if self.window or self.probe else cache.memo(self, sql, read)

    def _read_sql(self, sql: str | list[str]):
        """Run ``sql`` into a DataFrame: through the ADBC SQLite driver (``sqlite_arrow``, a
        read-only connection: a WAL export's pending rows are read from its ``-wal`` and left
        there), or through Python's SQLite where the driver cannot read the result: text that
        is not valid UTF-8 (exports from other machines hold such bytes: they are read as
        U+FFFD, the rest of the text as it is), or a column whose values do not all fit the type
        its first rows gave it (a computed one, in an edited export)."""
        from . import sqlite_arrow

        try:
            return sqlite_arrow.read(self.path, sql)
        except Exception as exc:  # the driver's and Polars' own error types; only these fall back
            if not any(word in str(exc).lower() for word in ARROW_FALLBACK):
                raise
        return self._read_sqlite(sql)

    def _read_sqlite(self, sql: str | list[str]):
        from contextlib import closing

        import polars as pl

        with closing(self.connect()) as con:
            con.text_factory = lambda raw: raw.decode("utf-8", "replace")
            parts = []
            for one in [sql] if isinstance(sql, str) else sql:
                cur = con.execute(one)
                names = [d[0] for d in cur.description]
                rows = cur.fetchall()
                parts.append(pl.DataFrame(rows, schema=names, orient="row", infer_schema_length=None))
        return pl.concat(parts, how="vertical_relaxed")

    def query(self, table: str, fields: Iterable[Field], where: str = "") -> tuple[str, dict[str, object]]:
        """The SQL that reads ``fields`` of ``table`` (``where``: an optional filter) and the
        schema of its result: each field's Polars dtype (None: as stored)."""
        import polars as pl

        dtypes = {"int": pl.Int64, "str": pl.String, "float": pl.Float64, "any": None}
        present = self.tables.get(table, frozenset())
        cols, schema = [], {}
        for fld in fields:
            dtype = dtypes[fld.dtype]
            if fld.expr:
                if all(s in present for s in fld.sources):
                    cols.append(f"{fld.expr} AS {ident(fld.name)}")
            else:
                src = next((s for s in fld.sources if s in present), None)
                if src:
                    cols.append(f"{ident(src)} AS {ident(fld.name)}")
                    dtype = dtype or _declared_dtype(self.declared.get((table, src), ""))
            schema[fld.name] = dtype
        if self.probe:
            where = f"({where}) AND 0" if where else "0"
        return f"SELECT {', '.join(cols) or 'rowid'} FROM {ident(table)}" + (f" WHERE ({where})" if where else ""), schema

    def select(self, table: str, fields: Iterable[Field], where: str = "", *, lookup: bool = False):
        """Read ``fields`` of ``table`` as a LazyFrame; ``where`` is an optional SQL filter.

        Columns this export lacks come back as nulls; large tables (or this export's window of
        them) are read in rowid partitions, one per thread of Polars' pool (which follows the
        CPU affinity and ``POLARS_MAX_THREADS``). A table of ``planned`` is answered by it,
        unless ``lookup``: a read of rows by key (the launches of given correlation ids), which
        always goes to the file."""
        import polars as pl

        fields = tuple(fields)
        if self.planned is not None and table in self.planned.tables and not lookup:
            return self.planned.rows(self, table, fields, where)
        sql, schema = self.query(table, fields, where)
        if self.probe:  # no row is read: one statement, no partitions
            return self.fetch(sql, schema).lazy()
        lo, hi = 0, self.rows(table)
        if self.window:
            k, n = self.window
            step = -(-hi // n)
            lo, hi = min(hi, k * step), min(hi, (k + 1) * step)
        parts = pl.thread_pool_size() if hi - lo > PARTITION_ROWS else 1
        if parts > 1 or self.window:
            step = -(-(hi - lo) // parts)
            glue = " AND " if where else " WHERE "
            bounds = [(lo + k * step, min(hi, lo + (k + 1) * step)) for k in range(parts)]
            sql = [f"{sql}{glue}rowid > {a} AND rowid <= {b}" for a, b in bounds]
        return self.fetch(sql, schema).lazy()


def _declared_dtype(declared: str):
    """The Polars dtype of a column SQLite declares as ``declared`` (its affinity rules), or
    None (read as stored) where the declaration says nothing."""
    import polars as pl

    t = declared.upper()
    if "INT" in t:
        return pl.Int64
    if any(k in t for k in ("CHAR", "CLOB", "TEXT")):
        return pl.String
    if any(k in t for k in ("REAL", "FLOA", "DOUB")):
        return pl.Float64
    return None


SIGNAL_CHECK_STEPS = 100_000  # SQLite's virtual machine steps between two looks for a signal


def _keep_going() -> int:
    """0: let the query go on. Being Python, this call lets a Ctrl-C or SIGTERM's handler run
    (``files.stop_on_interrupt``), whose ``KeyboardInterrupt`` ends the query."""
    return 0


def _connect(path: Path) -> sqlite3.Connection:
    """A read-only connection. ``mode=ro`` never writes the database or its ``-wal`` (a read-only
    connection cannot checkpoint, so a WAL export's pending rows are read from the ``-wal`` and
    left there); ``immutable=1`` would skip the ``-wal`` and read stale pages, so it is not used.
    A signal's Python handler runs only between Python steps, so a long query on the main thread
    would hold it (and a SIGTERM) until the query ends; the progress handler calls back into
    Python every ``SIGNAL_CHECK_STEPS`` steps, where the handler runs and stops the query."""
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    con.set_progress_handler(_keep_going, SIGNAL_CHECK_STEPS)
    return con


def newer_report(export: Path) -> Path | None:
    """The ``.nsys-rep`` beside ``export`` when it is newer than it (the export is stale)."""
    for suffix in REPORT_SUFFIXES:
        report = export.with_suffix(suffix)
        if report.is_file() and not export_is_current(report, export):
            return report
    return None


class StaleExport(UserWarning):
    """A ``.sqlite`` read as given although a newer ``.nsys-rep`` sits beside it."""


def stale_note(export: Path) -> str | None:
    """The note for a ``.sqlite`` that a newer ``.nsys-rep`` sits beside, or None."""
    if export.suffix in REPORT_SUFFIXES:
        return None
    report = newer_report(export)
    if report is None:
        return None
    return (
        f"{export}: read as given, though {report.name} beside it is newer "
        f"(pass --reexport, or name {report.name}, to export it again through nsys)"
    )


def open_export(path: str | Path, nsys: str | Path | None = None, *, reexport: bool = False) -> Export:
    """Open an export for reading: a ``.sqlite`` as given (warning ``StaleExport`` when a newer
    ``.nsys-rep`` sits beside it), a ``.nsys-rep`` through nsys into the ``.sqlite`` beside it
    (reused while it is current; over a scrubbed one only with ``reexport``)."""
    source = Path(path)
    if not source.exists():
        raise BadExport(source, "no such file", "check the path" + (" (a broken symlink)" if source.is_symlink() else ""))
    sqlite_path = export_report(source, nsys, reexport=reexport) if source.suffix in REPORT_SUFFIXES else source
    check_sqlite(sqlite_path)
    note = stale_note(source)
    if note:
        import warnings

        warnings.warn(note, StaleExport, stacklevel=2)
    with reading(source):
        with _connect(sqlite_path) as con:  # the declared types are read too: a damaged schema fails here
            rows = con.execute(
                'SELECT m.name, p.name, p.type, p."notnull" FROM sqlite_master AS m, pragma_table_info(m.name) AS p '
                "WHERE m.type = 'table'"
            ).fetchall()
        con.close()
    tables: dict[str, set[str]] = {}
    for table, column, _, _ in rows:
        tables.setdefault(table, set()).add(column)
    declared = {(table, column): kind or "" for table, column, kind, _ in rows}
    not_null = frozenset((table, column) for table, column, _, flag in rows if flag)
    if not tables:
        raise BadExport(source, "holds no tables (an empty export)", "was anything captured? check the nsys profile run")
    if STRINGS not in tables:
        raise BadExport(
            source, "is SQLite but not an Nsight Systems export (no StringIds table)", "export it with nsys export --type sqlite"
        )
    return Export(sqlite_path, source, {t: frozenset(c) for t, c in tables.items()}, declared=declared, not_null=not_null)
