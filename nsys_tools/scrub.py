"""Remove identity from an export, and nothing else.

Nsight Systems stores the whole environment of the profiled process, its working directory,
command line and arguments, the host and user names, and install paths, in different tables
across versions. Traces get pasted into public issues, so exports are scrubbed before they
leave the GPU machine. Every table and every text column is walked (nothing is assumed about
which tables a version writes), and in each text value:

* an environment, in any form nsys writes it (one ``NAME=value`` entry, a block of entries
  separated by newlines, NULs or semicolons, a block that starts with an exported shell
  function ``BASH_FUNC_name%%=() { ... }``, ``export NAME=value`` anywhere), credentials under
  any name (``AWS_*``, ``SSH_*``, ``*_TOKEN``, ``*_KEY``, ``*_SECRET``, ``*PASSWORD``) and
  values shaped like access keys become ``[scrubbed]``;
* home folders (``/home/x``, ``/Users/x``, ``/root``, ``/global/homes/a/x``, ``/global/u2/x``,
  ``C:\\Users\\x`` and the like) become ``/home/user`` (``C:\\Users\\user``);
* the user and host names found in the export (environment, export metadata, system
  information, home folders) become ``<user>`` and ``<host>`` wherever they stand as words;
* the folder nsys was installed in becomes ``<nsys>``;
* a process name that is a command line (a path, or arguments) becomes its program's name.

Rows that only carry identity go: environment rows and the host, user and command-line rows of
``META_DATA_CAPTURE``, ``TARGET_INFO_SYSTEM_ENV`` and the export metadata (whose paths are cut
to file names). The strings the analysis reads are never changed (``schema.ANALYSIS_STRING_IDS``
and ``ANALYSIS_TEXT``: kernel names, API names, NVTX texts and domains, the GPU's name), so an
NVTX range named ``batch_size=64`` stays itself; identity found inside them is reported.

The export is copied into SQLite's private temporary database (unlinked as soon as it is made,
so nothing unscrubbed survives an interrupt), scrubbed there, and written with ``VACUUM INTO``
(deleted rows leave no trace in free pages) to a hidden file renamed over the real file behind
any symlink, keeping its permissions; the export's stale WAL and journal files and its Parquet
cache are removed. ``check`` does the same without writing. Standard library only: it runs on
the GPU machine.
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
from dataclasses import dataclass, field
from pathlib import Path

from . import cache
from . import schema as S
from .errors import BadExport, OutputError
from .export import REPORT_SUFFIXES, check_sqlite, reading
from .files import replaced_atomically

PLACEHOLDER = "[scrubbed]"
USER, HOST, NSYS = "<user>", "<host>", "<nsys>"
HOME_POSIX, HOME_WINDOWS = "/home/user", "C:\\Users\\user"

_NAME = r"(?:BASH_FUNC_[^=\s]+%%|[A-Za-z_][A-Za-z0-9_]*)"
ENV_ENTRY = re.compile(rf"^\s*(?:export\s+)?{_NAME}=")
ENTRY_SEP = re.compile(r"[\x00\n\r;]")
EXPORT_ANYWHERE = re.compile(r"\bexport\s+[A-Za-z_][A-Za-z0-9_]*=")
CREDENTIAL = re.compile(
    r"\b(?:AWS_[A-Z0-9_]+|SSH_[A-Z0-9_]+|[A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|_KEY|CREDENTIALS?))\s*[=:]"
)
SECRET_VALUE = re.compile(
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_\w{20,}|\bxox[abprs]-[\w-]{10,}"
    r"|\bhf_[A-Za-z0-9]{30,}|\bglpat-[\w-]{20,}|-----BEGIN [A-Z ]*PRIVATE KEY-----"
)
_END = r"""(?=$|[/\\\s"'`:;,)\]}])"""
HOME_PATHS = (
    re.compile(
        r"(?<![\w.~/-])(?:/(?:home|Users|usr/home|var/home|export/home|mnt/[a-z]/Users|ccs/home|p/home|gpfs/home)"
        rf"|/global/homes/[^/\s]+|/global/u\d+/[^/\s]+)/(?!user{_END})[^/\\\s\"'`:;,)\]}}]+{_END}"
        rf"|(?<![\w.~/-])/root{_END}"
    ),
    HOME_POSIX,
)
HOME_WIN = (
    re.compile(rf"\b[A-Za-z]:[\\/]+(?:Users|Documents and Settings)[\\/]+(?!user{_END})[^\\/\s\"'`:;,)\]}}]+{_END}"),
    HOME_WINDOWS,
)
HOME_USER = re.compile(
    r"/(?:home|Users|homes/[^/\s]+|u\d+/[^/\s]+)/([^/\\\s\"'`:;,)\]}]+)|[\\/]Users[\\/]+([^\\/\s\"'`:;,)\]}]+)"
)
COMMAND_LIKE = re.compile(r"^(?:[/~]|\.\.?/|[A-Za-z]:[\\/])|\s(?:-|/|~|[A-Za-z]:\\)|\s\S+\.(?:py|sh|pl|rb|js|jl)\b")

# Environment variables that name the user or the host, whose values are replaced everywhere.
USER_VARIABLES = ("USER", "LOGNAME", "USERNAME", "SUDO_USER", "SLURM_JOB_USER", "PBS_O_LOGNAME", "LSB_USER")
HOST_VARIABLES = ("HOSTNAME", "HOST", "SLURMD_NODENAME", "SLURM_SUBMIT_HOST", "PBS_O_HOST", "LSB_HOSTS", "COMPUTERNAME")
TOKEN_MIN = 3  # shorter names are too likely to be words: their rows are blanked, not searched for
NOT_NAMES = {"user", "host", "root", "localhost", "local", "none", "null", "unknown", "nobody", "vm"}

# Rows that only carry identity, by table: deleted, or their value blanked.
CAPTURE_DROP = ("%ENVIRONMENT%",)
CAPTURE_BLANK = ("%WORKING_DIR%", "%ARGUMENT%", "%COMMAND%", "DEVICE_DISPLAY_NAME", "%HOSTNAME%", "%USER%")
SYSTEM_DROP = ("DeviceEnvironment", "Hostname", "HostName", "UserName", "SystemUID")
EXPORT_BLANK = ("EXPORT_HOST", "EXPORT_USER")
TEXT_AFFINITY = ("CHAR", "CLOB", "TEXT")


@dataclass
class ScrubReport:
    """What was (or, for ``check``, would be) removed, per kind; and identity found in strings
    the analysis reads, which scrub leaves as they are."""

    path: Path
    changed: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.changed.values())

    @property
    def clean(self) -> bool:
        return self.total == 0 and not self.kept

    def note(self, label: str, where: str, old: object, n: int = 1) -> None:
        if n <= 0:
            return
        self.changed[label] = self.changed.get(label, 0) + n
        if len(self.examples) < 50:
            self.examples.append(f"{where}: {label}: {masked(old)}")


def masked(value: object, limit: int = 80) -> str:
    """A value as it may be printed: entries' values hidden, control characters escaped, cut."""
    text = re.sub(rf"({_NAME}=)[^\x00\n\r;]*", r"\1…", str(value))
    text = re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], SECRET_VALUE.sub("…", text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _tables(con: sqlite3.Connection) -> dict[str, list[tuple[str, str]]]:
    """Every table's columns with their declared types."""
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    return {t: [(r[1], (r[2] or "").upper()) for r in con.execute(f"PRAGMA table_info({_q(t)})")] for t in names}


def _text_columns(columns: list[tuple[str, str]]) -> list[str]:
    """Columns that hold text: text affinity, or none declared (values keep their own type)."""
    return [c for c, t in columns if any(a in t for a in TEXT_AFFINITY) or t in ("", "BLOB")]


def _is_environment(value: str) -> bool:
    if "=" in value and (EXPORT_ANYWHERE.search(value) or any(ENV_ENTRY.match(e) for e in ENTRY_SEP.split(value))):
        return True
    return bool(CREDENTIAL.search(value) or SECRET_VALUE.search(value))


def _entries(value: str) -> dict[str, str]:
    out = {}
    for entry in ENTRY_SEP.split(value):
        m = re.match(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$", entry)
        if m:
            out[m.group(1)] = m.group(2).strip().strip("\"'")
    return out


class _Identity:
    """The user and host names and the install folder an export reveals, and how to cut them out."""

    def __init__(self, users: set[str], hosts: set[str], install: str):
        def words(names: set[str]) -> re.Pattern | None:
            keep = sorted({n for n in names if len(n) >= TOKEN_MIN and n.lower() not in NOT_NAMES}, key=len, reverse=True)
            return re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, keep)) + r")(?![\w-])") if keep else None

        self.users, self.hosts = words(users), words(hosts | {h.split(".")[0] for h in hosts})
        self.install = install if len(install) > 1 and install != NSYS else ""

    def clean(self, value: str) -> tuple[str, str] | None:
        """``value`` without identity, and what was removed; None when there is nothing."""
        if _is_environment(value):
            return PLACEHOLDER, "environment and credentials"
        new = value
        for pattern, home in (HOME_PATHS, HOME_WIN):
            new = pattern.sub(lambda _, home=home: home, new)
        if new != value:
            return self._names(new), "home paths"
        new = self._names(value)
        return (new, "user, host and install names") if new != value else None

    def _names(self, value: str) -> str:
        if self.install:
            value = value.replace(self.install, NSYS)
        if self.users:
            value = self.users.sub(USER, value)
        if self.hosts:
            value = self.hosts.sub(HOST, value)
        return value

    def found_in(self, value: str) -> str | None:
        """What identity a string the analysis reads holds (it is left as it is)."""
        if CREDENTIAL.search(value) or SECRET_VALUE.search(value):
            return "a credential"
        if any(p.search(value) for p, _ in (HOME_PATHS, HOME_WIN)):
            return "a home path"
        if (self.users and self.users.search(value)) or (self.hosts and self.hosts.search(value)):
            return "a user or host name"
        return None


def _identity(con: sqlite3.Connection, tables: dict[str, list[tuple[str, str]]]) -> _Identity:
    users: set[str] = set()
    hosts: set[str] = set()

    def values(table: str, where: str, params: tuple = ()) -> list[str]:
        if table not in tables:
            return []
        rows = con.execute(f"SELECT value FROM {_q(table)} WHERE {where}", params).fetchall()
        return [v for (v,) in rows if isinstance(v, str) and v]

    envs = values(S.STRINGS, "value LIKE '%=%'") + values("META_DATA_CAPTURE", "name LIKE '%ENVIRONMENT%'")
    envs += values(S.SYSTEM_ENV, "name = 'DeviceEnvironment'")
    for env in envs:
        entries = _entries(env)
        users |= {entries[k] for k in USER_VARIABLES if entries.get(k)}
        hosts |= {entries[k] for k in HOST_VARIABLES if entries.get(k)}
    for meta in S.EXPORT_META:
        users |= set(values(meta, "name = 'EXPORT_USER'"))
        hosts |= set(values(meta, "name = 'EXPORT_HOST'"))
    users |= set(values(S.SYSTEM_ENV, "name = 'UserName'")) | set(values("META_DATA_CAPTURE", "name LIKE '%USER%'"))
    hosts |= set(values(S.SYSTEM_ENV, "name IN ('Hostname', 'HostName')"))
    hosts |= set(values("META_DATA_CAPTURE", "name LIKE '%HOSTNAME%' OR name = 'DEVICE_DISPLAY_NAME'"))
    for table, columns in tables.items():
        for column in _text_columns(columns):
            col = _q(column)
            like = " OR ".join(f"{col} LIKE '%{part}%'" for part in ("/home/", "Users", "/global/"))
            rows = con.execute(f"SELECT DISTINCT {col} FROM {_q(table)} WHERE {like}")
            for (value,) in rows:
                if isinstance(value, str):
                    users |= {a or b for a, b in HOME_USER.findall(value)} - {"user"}
    install = values(S.SYSTEM_ENV, "name = 'TargetInstallDir'")
    return _Identity(users, hosts, os.path.dirname(install[0].rstrip("/")) if install else "")


def _protected(con: sqlite3.Connection, tables: dict[str, list[tuple[str, str]]]) -> set[int]:
    """StringIds ids the analysis reads: kernel, API and NVTX names."""
    ids: set[int] = set()
    for table, column in S.ANALYSIS_STRING_IDS:
        if column in {c for c, _ in tables.get(table, ())}:
            ids |= {v for (v,) in con.execute(f"SELECT DISTINCT {_q(column)} FROM {_q(table)}") if isinstance(v, int)}
    return ids


def _name_rows(
    con: sqlite3.Connection, report: ScrubReport, tables, table: str, patterns: tuple, label: str, blank: bool
) -> None:
    """Delete (or, with ``blank``, empty the value of) the rows of a name/value table whose
    name is LIKE one of ``patterns``."""
    if not {"name", "value"} <= {c for c, _ in tables.get(table, ())}:
        return
    where = "(" + " OR ".join("name LIKE ?" for _ in patterns) + ")" + (" AND value != ''" if blank else "")
    for rowid, name in con.execute(f"SELECT rowid, name FROM {_q(table)} WHERE {where}", patterns).fetchall():
        con.execute(
            f"UPDATE {_q(table)} SET value = '' WHERE rowid = ?" if blank else f"DELETE FROM {_q(table)} WHERE rowid = ?",
            (rowid,),
        )
        report.note(label, f"{table} {name}", "value removed")


def _identity_rows(con: sqlite3.Connection, report: ScrubReport, tables) -> None:
    """The rows that only carry identity: deleted, blanked, or cut to a file name."""
    _name_rows(con, report, tables, "META_DATA_CAPTURE", CAPTURE_DROP, "capture environment rows", blank=False)
    _name_rows(con, report, tables, "META_DATA_CAPTURE", CAPTURE_BLANK, "command lines, paths, user and host names", blank=True)
    _name_rows(con, report, tables, S.SYSTEM_ENV, SYSTEM_DROP, "system environment, user and host rows", blank=False)
    for meta in S.EXPORT_META:
        if meta not in tables:
            continue
        _name_rows(con, report, tables, meta, EXPORT_BLANK, "export host and user", blank=True)
        rows = con.execute(f"SELECT rowid, value FROM {meta} WHERE name LIKE '%PATH%' OR name LIKE '%FILE%'").fetchall()
        for rowid, value in rows:
            if isinstance(value, str) and value and (base := re.split(r"[\\/]", value)[-1]) != value:
                con.execute(f"UPDATE {meta} SET value = ? WHERE rowid = ?", (base, rowid))
                report.note("export paths", f"{meta}.value", value)


def _processes(con: sqlite3.Connection, report: ScrubReport, tables) -> None:
    """Process names that are command lines become the program's name."""
    if "name" not in {c for c, _ in tables.get("PROCESSES", ())}:
        return
    for (value,) in con.execute("SELECT DISTINCT name FROM PROCESSES").fetchall():
        if isinstance(value, str) and COMMAND_LIKE.search(value):
            program = re.split(r"[\\/]", value.strip().split()[0] if value.strip() else "")[-1]
            con.execute("UPDATE PROCESSES SET name = ? WHERE name = ?", (program, value))
            report.note("command lines", "PROCESSES.name", value)


def _walk(con: sqlite3.Connection, report: ScrubReport, tables, who: _Identity, protected: set[int]) -> None:
    """Every text value of every table, but the analysis strings: identity out."""
    kept_inline = {(t, c) for t, c in S.ANALYSIS_TEXT}
    for table, columns in tables.items():
        for column in _text_columns(columns):
            where = f"{table}.{column}"
            if table == S.STRINGS and column == "value":
                rows = con.execute(f"SELECT id, value FROM {S.STRINGS} WHERE typeof(value) = 'text'").fetchall()
                for sid, value in rows:
                    if sid in protected:
                        if what := who.found_in(value):
                            report.kept.append(f"{where} (id {sid}, read by the analysis): {what}: {masked(value)}")
                        continue
                    if done := who.clean(value):
                        con.execute(f"UPDATE {S.STRINGS} SET value = ? WHERE id = ?", (done[0], sid))
                        report.note(done[1], where, value)
                continue
            col = _q(column)
            for (value,) in con.execute(f"SELECT DISTINCT {col} FROM {_q(table)} WHERE typeof({col}) = 'text'").fetchall():
                if (table, column) in kept_inline:
                    if what := who.found_in(value):
                        report.kept.append(f"{where} (read by the analysis): {what}: {masked(value)}")
                    continue
                if done := who.clean(value):
                    n = con.execute(f"UPDATE {_q(table)} SET {col} = ? WHERE {col} = ?", (done[0], value)).rowcount
                    report.note(done[1], where, value, max(n, 1))


def _scrub_connection(con: sqlite3.Connection, report: ScrubReport) -> None:
    tables = _tables(con)
    who = _identity(con, tables)
    protected = _protected(con, tables)
    _identity_rows(con, report, tables)
    _processes(con, report, tables)
    _walk(con, report, tables, who, protected)


def _scrubbed_copy(src: Path, report: ScrubReport) -> sqlite3.Connection:
    """``src`` copied into a private temporary database (SQLite unlinks its file at once, so it
    vanishes with the process, however that ends) and scrubbed there."""
    if src.suffix in REPORT_SUFFIXES:
        raise BadExport(
            src, "is a report, not a .sqlite export", "export it (nsys export --type sqlite), scrub that, delete the report"
        )
    check_sqlite(src)
    work = sqlite3.connect("")
    try:
        with reading(src):
            source = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True)
            try:
                source.backup(work)
            finally:
                source.close()
            with work:
                _scrub_connection(work, report)
    except BaseException:
        work.close()
        raise
    return work


def check(path: str | Path) -> ScrubReport:
    """What ``scrub`` would remove from ``path``, and identity in the analysis strings; nothing is written."""
    src = Path(path)
    report = ScrubReport(src)
    _scrubbed_copy(src, report).close()
    return report


def scrub(path: str | Path, output: str | Path | None = None) -> ScrubReport:
    """Scrub ``path`` in place (the real file behind a symlink), or into ``output``."""
    src = Path(path)
    target = Path(os.path.realpath(output if output else src))
    if output is None and src.exists() and not src.stat().st_mode & 0o222:
        raise BadExport(src, "is read-only", "make it writable (chmod u+w) to scrub it in place")
    report = ScrubReport(src)
    work = _scrubbed_copy(src, report)
    try:
        with replaced_atomically(target) as final:
            try:
                work.execute("VACUUM INTO ?", (str(final),))
            except sqlite3.Error as exc:  # the disk filled up, or the folder refused the file
                raise OutputError(target, f"cannot be written ({exc})", "free some space, or check the folder") from exc
    finally:
        work.close()
    for suffix in ("-wal", "-shm", "-journal"):  # they belong to the file just replaced
        stale = target.with_name(target.name + suffix)
        if stale.exists() and stat.S_ISREG(stale.lstat().st_mode):
            stale.unlink()
    cache.clear(target)
    return report
