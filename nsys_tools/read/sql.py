"""SQL identifiers, quoted by one function: table and column names come from the file, and a
stranger's export may name a column ``x" FROM t WHERE 0 --``. Every name written into SQL goes
through ``ident``, never formatted raw, whether or not it is one nsys writes."""

from __future__ import annotations

import sqlite3


def ident(name: str) -> str:
    """``name`` as an SQLite identifier: in double quotes, each quote in it doubled. A name that
    holds a NUL cannot be written into SQL: the file's damage (``reading`` names the file)."""
    if "\x00" in name:
        raise sqlite3.DatabaseError("a table or column name holds a NUL character (a damaged schema)")
    return '"' + name.replace('"', '""') + '"'
