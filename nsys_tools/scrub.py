"""Remove the profiled process's environment and identifying paths from an export.

Nsight Systems stores the whole environment of the profiled process, its working directory and
arguments, the host and user names, and install paths. Traces get pasted into public issues, so
exports are scrubbed before they leave the GPU machine. What goes:

* ``META_DATA_CAPTURE``: environment rows deleted; working directory, arguments and the host
  display name blanked;
* ``TARGET_INFO_SYSTEM_ENV``: the device environment and host-name rows deleted;
* ``StringIds``: every ``NAME=value`` string (environment entries, one per variable or a whole
  block) replaced by a placeholder; home folders rewritten to ``/home/user``;
* export metadata (``META_DATA_EXPORT``): host, user and input/output paths reduced to names;
* the folder nsys was installed in (``TargetInstallDir``), wherever it appears, becomes ``<nsys>``.

The result is written through ``VACUUM INTO``, so deleted rows leave no trace in free pages,
then renamed over the target. Standard library only: it runs on the GPU machine.
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from .errors import BadExport
from .export import check_sqlite
from .files import replaced_atomically

PLACEHOLDER = "[scrubbed]"
ENV_ENTRY = re.compile(r"(?m)^[A-Za-z_][A-Za-z0-9_]*=")
HOME = re.compile(r"/(?:home|Users)/[^/\s\"']+")
CAPTURE_DROP = ("%ENVIRONMENT%",)
CAPTURE_BLANK = ("%WORKING_DIR%", "%ARGUMENT%", "DEVICE_DISPLAY_NAME", "%HOSTNAME%", "%USER%")
SYSTEM_DROP = ("DeviceEnvironment", "Hostname", "HostName", "UserName", "SystemUID")
EXPORT_BLANK = ("EXPORT_HOST", "EXPORT_USER")
EXPORT_PATHS = "EXPORT_PARAM_%PATH%"
INSTALL_PATH_COLUMNS = (("StringIds", "value"), ("DIAGNOSTIC_EVENT", "text"), ("TARGET_INFO_SYSTEM_ENV", "value"))


@dataclass
class ScrubReport:
    path: Path
    changed: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.changed.values())


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _like_any(column: str, patterns: tuple[str, ...]) -> str:
    return "(" + " OR ".join(f"{column} LIKE ?" for _ in patterns) + ")"


def _scrub_connection(con: sqlite3.Connection, report: ScrubReport) -> None:
    tables = _tables(con)

    def run(label: str, sql: str, params: tuple = ()) -> None:
        n = con.execute(sql, params).rowcount
        if n > 0:
            report.changed[label] = report.changed.get(label, 0) + n

    if "META_DATA_CAPTURE" in tables:
        run("capture environment rows", f"DELETE FROM META_DATA_CAPTURE WHERE {_like_any('name', CAPTURE_DROP)}", CAPTURE_DROP)
        run(
            "capture paths and names",
            f"UPDATE META_DATA_CAPTURE SET value = '' WHERE {_like_any('name', CAPTURE_BLANK)} AND value != ''",
            CAPTURE_BLANK,
        )
    if "TARGET_INFO_SYSTEM_ENV" in tables:
        row = con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'TargetInstallDir'").fetchone()
        root = os.path.dirname(row[0].rstrip("/")) if row and row[0] else ""
        if len(root) > 1 and root != "<nsys>":
            pattern = "%" + root.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            for table, column in INSTALL_PATH_COLUMNS:
                if table in tables:
                    run(
                        "install paths",
                        f"UPDATE {table} SET {column} = replace({column}, ?, '<nsys>') WHERE {column} LIKE ? ESCAPE '\\'",
                        (root, pattern),
                    )
        marks = ",".join("?" * len(SYSTEM_DROP))
        run("system environment rows", f"DELETE FROM TARGET_INFO_SYSTEM_ENV WHERE name IN ({marks})", SYSTEM_DROP)
    for meta in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if meta in tables:
            marks = ",".join("?" * len(EXPORT_BLANK))
            run("export host and user", f"UPDATE {meta} SET value = '' WHERE name IN ({marks}) AND value != ''", EXPORT_BLANK)
            rows = con.execute(f"SELECT rowid, value FROM {meta} WHERE name LIKE ?", (EXPORT_PATHS,)).fetchall()
            for rowid, value in rows:
                if value and os.path.basename(value) != value:
                    run("export paths", f"UPDATE {meta} SET value = ? WHERE rowid = ?", (os.path.basename(value), rowid))
    if "StringIds" in tables:
        rows = con.execute(
            "SELECT id, value FROM StringIds WHERE value LIKE '%=%' OR value LIKE '%/home/%' OR value LIKE '%/Users/%'"
        ).fetchall()
        for sid, value in rows:
            if ENV_ENTRY.search(value):
                run("environment strings", "UPDATE StringIds SET value = ? WHERE id = ?", (PLACEHOLDER, sid))
            elif (homeless := HOME.sub("/home/user", value)) != value:
                run("home paths", "UPDATE StringIds SET value = ? WHERE id = ?", (homeless, sid))


def scrub(path: str | Path, output: str | Path | None = None) -> ScrubReport:
    """Scrub ``path`` in place (or into ``output``). The original is never left half-written."""
    src = Path(path)
    check_sqlite(src)
    dst = Path(output) if output else src
    work = dst.with_name(f".{dst.name}.{os.getpid()}.scrub")
    report = ScrubReport(dst)
    try:
        work.write_bytes(src.read_bytes())
        with sqlite3.connect(work) as con:
            _scrub_connection(con, report)
        con.close()
        with sqlite3.connect(work) as con, replaced_atomically(dst) as final:
            con.execute("VACUUM INTO ?", (str(final),))
        con.close()
    except sqlite3.DatabaseError as exc:
        raise BadExport(src, f"cannot be scrubbed ({exc})", "is it a complete Nsight Systems export?") from exc
    finally:
        work.unlink(missing_ok=True)
    return report
