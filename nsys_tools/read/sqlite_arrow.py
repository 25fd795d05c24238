"""SQLite query results as Polars frames, through the ADBC SQLite driver.

The driver steps SQLite in C and hands the rows over as Arrow record batches (Arrow's C stream
interface), which Polars takes without a copy and without a Python object per row; it opens the
file read-only. A list of queries (rowid partitions of one table) runs on as many threads, each
with its own connection: SQLite and the driver release the GIL while they step.

The driver types a column by the first rows of a batch (``BATCH_ROWS``) and says "type mismatch"
when a later value does not fit, and it passes text on without checking that it is UTF-8: every
text column is checked here (a Polars cast from bytes to text), so bytes that are not UTF-8 fail
the read with "invalid utf8" instead of reaching Polars. ``export.Export`` then reads through
Python's ``sqlite3`` instead.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

BATCH_ROWS = 65_536  # rows per Arrow batch; the first batch also types each column


def read(path: Path, sql: str | list[str]) -> pl.DataFrame:
    """The rows of ``sql`` (or of each query of a list, in parallel, one after another in order)."""
    queries = [sql] if isinstance(sql, str) else sql
    if len(queries) == 1:
        frames = [_query(path, queries[0])]
    else:
        with ThreadPoolExecutor(max_workers=len(queries)) as pool:
            frames = list(pool.map(lambda q: _query(path, q), queries))
    df = frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical_relaxed")
    text = [c for c, t in df.schema.items() if t == pl.String]
    return df.with_columns(pl.col(text).cast(pl.Binary).cast(pl.String)) if text else df


def _query(path: Path, sql: str) -> pl.DataFrame:
    import adbc_driver_manager as adbc
    import adbc_driver_sqlite

    database = adbc_driver_sqlite.connect(f"{path.resolve().as_uri()}?mode=ro")
    try:
        connection = adbc.AdbcConnection(database)
        try:
            statement = adbc.AdbcStatement(connection)
            try:
                statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
                statement.set_sql_query(sql)
                stream, _ = statement.execute_query()
                return pl.DataFrame(stream)
            finally:
                statement.close()
        finally:
            connection.close()
    finally:
        database.close()
