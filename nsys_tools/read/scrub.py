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
* a process name that is a command line (a path, or arguments) becomes its program's name;
* identity by kind (``read.identity``): network addresses, e-mail, host names with a domain,
  scheduler, Kubernetes and cloud ids, tokens and keys, each a pseudonym stable within the file
  or ``[scrubbed]``; ``/data``, ``/mnt`` and ``/scratch`` folders become ``/data/user`` and the
  like; the export's own file name becomes ``report.*``;
* the schema: triggers go before any row changes, and table, column, view and index names and
  view SQL are scrubbed like text.

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadExport
from ..files import output_error, replaced_atomically, writing
from . import cache, identity
from . import schema as S
from .export import REPORT_SUFFIXES, SCRUBBED_TABLE, check_sqlite, reading
from .sql import ident

PLACEHOLDER = identity.PLACEHOLDER
USER, HOST, NSYS = "<user>", "<host>", "<nsys>"
ELSEWHERE = "move the export to another disk and scrub it there"  # scrubbed in place
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
    re.compile(
        rf"\b[A-Za-z]:[\\/]+(?:Users|Documents and Settings)[\\/]+(?!user{_END})"
        rf"(?:[^\\/\s\"'`:;,)\]}}][^\\/\n\r\"'`:;,)\]}}]*?(?=[\\/])|[^\\/\s\"'`:;,)\]}}]+{_END})"  # "First Last" too
    ),
    HOME_WINDOWS,
)
HOME_USER = re.compile(
    r"/(?:home|Users|homes/[^/\s]+|u\d+/[^/\s]+)/([^/\\\s\"'`:;,)\]}]+)|[\\/]Users[\\/]+([^\\/\s\"'`:;,)\]}]+)"
)
# Credentials in a URL (scheme://user:password@host): the user and password go.
URL_CREDENTIALS = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s:@]+:[^/\s@]*@")
# "USER: alice", "Username = alice": the name, as a label writes it.
USER_LABEL = re.compile(r"\b((?:USER|USERNAME|LOGNAME|User|Username|user|username|login)\s*[:=]\s*)(?!<user>)([A-Za-z_][\w.-]*)")
TILDE_USER = re.compile(r"(?<![\w~/])~(?!user\b)([A-Za-z_][\w.-]*)")
# Cluster and site storage whose layout puts the user in the path: the folders from the root
# through the user's become ``<root>/user`` (project and group folders name a site too).
_P = r"[^/\\\s\"'`:;,)\]}]+"
SITE_PATHS = re.compile(
    rf"(?<![\w.~/-])/(?P<root>scratch|work|lustre|p/scratch|fs/scratch)/(?!user{_END})(?P<who>{_P}){_END}"
    rf"|(?<![\w.~/-])/(?P<proot>pscratch)/(?:sd/[A-Za-z0-9]/)?(?!user{_END})(?P<pwho>{_P}){_END}"
    rf"|(?<![\w.~/-])/(?P<groot>gpfs|lus|global/cfs)/(?!user{_END})(?:{_P}/)*?"
    rf"(?:scratch|home|users?|world-shared|proj-shared|u\d*)/(?!user{_END})(?P<gwho>{_P}){_END}"
)


# Shared storage that keeps one folder per user or project, whoever the user is: the folder
# after the mount becomes ``user`` (``/mnt/nfs/alice`` -> ``/mnt/nfs/user``); its name is not
# taken for a user name elsewhere, since data sets sit there too.
_MOUNTS = "nfs|lustre|shared|share|data|storage|home|homes|users|scratch|efs|fsx|gpfs|beegfs|cephfs|nvme|ssd"
SHARED_PATHS = re.compile(
    rf"(?<![\w.~/-])/(?P<root>data|mnt/(?:{_MOUNTS})(?=/)|mnt(?!/(?:{_MOUNTS})/))/(?!user{_END})(?P<who>{_P}){_END}"
)


def _site_user(m: re.Match) -> str:
    return m.group("who") or m.group("pwho") or m.group("gwho")


def _site_path(m: re.Match) -> str:
    return f"/{m.group('root') or m.group('proot') or m.group('groot')}/user"


UUID = re.compile(r"(?i)\b(?:(GPU|MIG)-)?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")
PSEUDO_UUID = re.compile(r"^0{8}-0{4}-0{4}-0{4}-0{4}")
COMMAND_LIKE = re.compile(r"^(?:[/~]|\.\.?/|[A-Za-z]:[\\/])|\s(?:-|/|~|[A-Za-z]:\\)|\s\S+\.(?:py|sh|pl|rb|js|jl)\b")

# Environment variables that name the user or the host, whose values are replaced everywhere.
USER_VARIABLES = ("USER", "LOGNAME", "USERNAME", "SUDO_USER", "SLURM_JOB_USER", "PBS_O_LOGNAME", "LSB_USER")
HOST_VARIABLES = ("HOSTNAME", "HOST", "SLURMD_NODENAME", "SLURM_SUBMIT_HOST", "PBS_O_HOST", "LSB_HOSTS", "COMPUTERNAME")
TOKEN_MIN = 3  # shorter names are too likely to be words: matched only in their own case
NOT_NAMES = {"user", "host", "root", "localhost", "local", "none", "null", "unknown", "nobody", "vm"}

# Rows that only carry identity, by table: deleted, or their value blanked.
CAPTURE_DROP = ("%ENVIRONMENT%",)
CAPTURE_BLANK = ("%WORKING_DIR%", "%CWD%", "%ARGUMENT%", "%COMMAND%", "DEVICE_DISPLAY_NAME", "%HOSTNAME%", "%USER%")
SYSTEM_DROP = ("DeviceEnvironment", "Hostname", "HostName", "UserName", "SystemUID")
EXPORT_BLANK = ("EXPORT_HOST", "EXPORT_USER")
OWN_NAME = "report"  # the export's own file name becomes nsys's default one: report.sqlite, report.nsys-rep
TEXT_AFFINITY = ("CHAR", "CLOB", "TEXT")


@dataclass
class ScrubReport:
    """What was (or, for ``check``, would be) removed, per kind; and identity found in strings
    the analysis reads, which scrub leaves as they are."""

    path: Path
    changed: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what scrub cannot reach (other hard links)

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

    def note_kinds(self, labels: list[str], where: str, old: object, n: int = 1) -> None:
        for label in labels:
            self.note(label, where, old, n)


def masked(value: object, limit: int = 80) -> str:
    """A value as it may be printed: entries' values and secrets hidden, control characters escaped, cut."""
    text = re.sub(rf"({_NAME}=)[^\x00\n\r;]*", r"\1…", str(value))
    text = identity.hide_secrets(SECRET_VALUE.sub("…", text))
    text = re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tables(con: sqlite3.Connection) -> dict[str, list[tuple[str, str]]]:
    """Every table's columns with their declared types."""
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    out = {t: [(r[1], (r[2] or "").upper()) for r in con.execute(f"PRAGMA table_info({ident(_sql_name(t))})")] for t in names}
    for columns in out.values():
        for column, _ in columns:
            _sql_name(column)
    return out


def _sql_name(name: object) -> str:
    """A table or column name that SQL can be written with; a damaged schema's undecodable one
    is the file's error (``reading`` names the file)."""
    try:
        str(name).encode("utf-8")
    except UnicodeEncodeError:
        raise sqlite3.DatabaseError("a table or column name is not valid UTF-8 (a damaged schema)") from None
    return str(name)


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


def _url(value: str) -> str:
    return URL_CREDENTIALS.sub(lambda m: m.group(1) + PLACEHOLDER + "@", value)


def _paths(value: str) -> str:
    if "/" not in value and "\\" not in value and "~" not in value:  # no path: most strings
        return value
    for pattern, home in (HOME_PATHS, HOME_WIN):
        value = pattern.sub(lambda _, home=home: home, value)
    value = SITE_PATHS.sub(_site_path, value)
    return TILDE_USER.sub("~user", SHARED_PATHS.sub(lambda m: f"/{m.group('root')}/user", value))


class _Identity:
    """The user and host names and the install folder an export reveals, and how to cut them out.
    Hosts and GPU UUIDs become stable pseudonyms (``<host>``, or ``<host1>``, ``<host2>`` for
    several; ``GPU-00000000-0000-0000-0000-000000000001``), the same in every table, so that
    per-device and per-host rows still line up; so do the kinds ``identity`` finds."""

    def __init__(self, users: set[str], hosts: set[str], install: str, uuids: Iterable[str] = ()):
        def usable(names: set[str], shortest: int = TOKEN_MIN) -> list[str]:
            return sorted({n for n in names if len(n) >= shortest and n.lower() not in NOT_NAMES}, key=len, reverse=True)

        def words(keep: list[str], flags: int = re.IGNORECASE) -> re.Pattern | None:
            # in any case, and as a part of a longer name joined by - _ or . (train_alice, ALICE-py311)
            return (
                re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(map(re.escape, keep)) + r")(?![A-Za-z0-9])", flags) if keep else None
            )

        self.users = words(usable(users))
        self.short_users = words([n for n in usable(users, 2) if len(n) < TOKEN_MIN], 0)  # "jd": in its own case only
        full = usable(hosts)
        shorts = sorted({h.split(".")[0].lower() for h in full} - NOT_NAMES - {""})
        alias = {h: (HOST if len(shorts) == 1 else f"<host{k}>") for k, h in enumerate(shorts, 1)}
        self.host_alias = {
            h.lower(): alias[h.split(".")[0].lower()] for h in {*full, *shorts} if h.split(".")[0].lower() in alias
        }
        self.hosts = words(sorted(self.host_alias, key=len, reverse=True))
        self.install = install if len(install) > 1 and install != NSYS else ""
        self.uuid_alias: dict[str, str] = {}
        self.pseudonyms = identity.Pseudonyms()
        for u in sorted({u.lower() for u in uuids}):
            self._uuid(u)

    def _uuid(self, value: str) -> str:
        value = value.lower()
        if PSEUDO_UUID.match(value):
            return value
        if value not in self.uuid_alias:
            self.uuid_alias[value] = f"00000000-0000-0000-0000-{len(self.uuid_alias) + 1:012d}"
        return self.uuid_alias[value]

    def clean(self, value: str) -> tuple[str, list[str]] | None:
        """``value`` without identity, and the kinds removed; None when there is nothing."""
        if _is_environment(value):
            return PLACEHOLDER, ["environment and credentials"]
        new, kinds = value, []
        changed = _url(new)
        changed = USER_LABEL.sub(lambda m: m.group(1) + USER, changed)
        if changed != new:
            new, kinds = changed, ["credentials in URLs and user labels"]
        new, found = identity.replace(new, self.pseudonyms)
        kinds += found
        for what, step in (
            ("home paths and shared-storage folders", _paths),
            ("user, host and install names", self._words),
            ("device UUIDs", self._uuids),
        ):
            changed = step(new)
            if changed != new:
                new = changed
                kinds.append(what)
        return (new, kinds) if kinds else None

    def _words(self, value: str) -> str:
        if self.install:
            value = value.replace(self.install, NSYS)
        for pattern in (self.users, self.short_users):
            if pattern:
                value = pattern.sub(USER, value)
        if self.hosts:
            value = self.hosts.sub(lambda m: self.host_alias[m.group().lower()], value)
        return value

    def _uuids(self, value: str) -> str:
        return UUID.sub(lambda m: (f"{m.group(1)}-" if m.group(1) else "") + self._uuid(m.group(2)), value)

    def found_in(self, value: str) -> str | None:
        """What identity a string the analysis reads holds (it is left as it is)."""
        kinds = []
        if CREDENTIAL.search(value) or SECRET_VALUE.search(value) or URL_CREDENTIALS.search(value):
            kinds.append("a credential")
        kinds += identity.found(value)
        if _paths(value) != value:
            kinds.append("a home path or shared-storage folder")
        names = (self.users, self.short_users, self.hosts)
        if any(p and p.search(value) for p in names) or USER_LABEL.search(value):
            kinds.append("a user or host name")
        return ", ".join(kinds) or None


def _identity(con: sqlite3.Connection, tables: dict[str, list[tuple[str, str]]]) -> _Identity:
    users: set[str] = set()
    hosts: set[str] = set()

    def values(table: str, where: str, params: tuple = ()) -> list[str]:
        if table not in tables:
            return []
        rows = con.execute(f"SELECT value FROM {ident(table)} WHERE {where}", params).fetchall()
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
    uuids: set[str] = set()
    parts = ("/home/", "Users", "/global/", "scratch/", "/work/", "/gpfs/", "/lus", "~", "user", "USER", "login")
    for table, columns in tables.items():
        for column in _value_columns(con, table, columns):
            col = ident(column)
            like = " OR ".join(f"CAST({col} AS TEXT) LIKE '%{part}%'" for part in parts)
            rows = con.execute(f"SELECT DISTINCT {col} FROM {ident(table)} WHERE typeof({col}) IN ('text', 'blob') AND ({like})")
            for (value,) in rows:
                text = _as_text(value)
                users |= {a or b for a, b in HOME_USER.findall(text)} - {"user"}
                users |= {_site_user(m) for m in SITE_PATHS.finditer(text)}
                users |= {m.group(2) for m in USER_LABEL.finditer(text)} | set(TILDE_USER.findall(text))
            if "uuid" in column.lower():
                found = con.execute(f"SELECT DISTINCT {col} FROM {ident(table)} WHERE typeof({col}) = 'text'").fetchall()
                uuids |= {m.group(2) for (v,) in found for m in UUID.finditer(v)}
    install = values(S.SYSTEM_ENV, "name = 'TargetInstallDir'")
    return _Identity(users - {"user"}, hosts, os.path.dirname(install[0].rstrip("/")) if install else "", uuids)


def _as_text(value: object) -> str:
    """A value's text for searching: a BLOB's bytes as Latin-1 (one character per byte, so a
    rewrite changes only the bytes it replaces)."""
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _value_columns(con: sqlite3.Connection, table: str, columns: list[tuple[str, str]]) -> list[str]:
    """The columns of ``table`` that hold any text or BLOB: text columns, and any other column
    where a value of those types was stored (SQLite keeps a value's own type)."""
    out = []
    for column, declared in columns:
        if column in _text_columns([(column, declared)]):
            out.append(column)
            continue
        col = ident(column)
        if con.execute(f"SELECT 1 FROM {ident(table)} WHERE typeof({col}) IN ('text', 'blob') LIMIT 1").fetchone():
            out.append(column)
    return out


def _protected(con: sqlite3.Connection, tables: dict[str, list[tuple[str, str]]]) -> set[int]:
    """StringIds ids the analysis reads: kernel, API and NVTX names."""
    ids: set[int] = set()
    for table, column in S.ANALYSIS_STRING_IDS:
        if column in {c for c, _ in tables.get(table, ())}:
            ids |= {v for (v,) in con.execute(f"SELECT DISTINCT {ident(column)} FROM {ident(table)}") if isinstance(v, int)}
    return ids


def _name_rows(
    con: sqlite3.Connection, report: ScrubReport, tables, table: str, patterns: tuple, label: str, blank: bool
) -> None:
    """Delete (or, with ``blank``, empty the value of) the rows of a name/value table whose
    name is LIKE one of ``patterns``."""
    if not {"name", "value"} <= {c for c, _ in tables.get(table, ())}:
        return
    where = "(" + " OR ".join("name LIKE ?" for _ in patterns) + ")" + (" AND value != ''" if blank else "")
    for rowid, name in con.execute(f"SELECT rowid, name FROM {ident(table)} WHERE {where}", patterns).fetchall():
        con.execute(
            f"UPDATE {ident(table)} SET value = '' WHERE rowid = ?" if blank else f"DELETE FROM {ident(table)} WHERE rowid = ?",
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
            if not isinstance(value, str) or not value:
                continue
            base = re.split(r"[\\/]", value)[-1]
            own = OWN_NAME + (m.group() if (m := re.search(r"\.[A-Za-z0-9-]+$", base)) else "")
            if own != value:
                con.execute(f"UPDATE {meta} SET value = CAST(? AS TEXT) WHERE rowid = ?", (_bind(own), rowid))
                report.note("export paths" if base != value else "the export's own file name", f"{meta}.value", value)


def _processes(con: sqlite3.Connection, report: ScrubReport, tables) -> None:
    """Process names that are command lines become the program's name."""
    if "name" not in {c for c, _ in tables.get("PROCESSES", ())}:
        return
    for (value,) in con.execute("SELECT DISTINCT name FROM PROCESSES").fetchall():
        if isinstance(value, str) and COMMAND_LIKE.search(value):
            program = re.split(r"[\\/]", value.strip().split()[0] if value.strip() else "")[-1]
            con.execute(
                "UPDATE PROCESSES SET name = CAST(? AS TEXT) WHERE name = CAST(? AS TEXT)", (_bind(program), _bind(value))
            )
            report.note("command lines", "PROCESSES.name", value)


def _walk(con: sqlite3.Connection, report: ScrubReport, tables, who: _Identity, protected: set[int]) -> None:
    """Every text and BLOB value of every table, in columns of any declared type, but the
    analysis strings: identity out. Text that is not valid UTF-8 keeps its other bytes."""
    kept_inline = {(t, c) for t, c in S.ANALYSIS_TEXT}
    for table, columns in tables.items():
        for column in _value_columns(con, table, columns):
            where = f"{table}.{column}"
            if table == S.STRINGS and column == "value":
                rows = con.execute(f"SELECT id, value FROM {S.STRINGS} WHERE typeof(value) = 'text'").fetchall()
                for sid, value in rows:
                    if sid in protected:
                        if what := who.found_in(value):
                            report.kept.append(f"{where} (id {sid}, read by the analysis): {what}: {masked(value)}")
                        continue
                    if done := who.clean(value):
                        con.execute(f"UPDATE {S.STRINGS} SET value = CAST(? AS TEXT) WHERE id = ?", (_bind(done[0]), sid))
                        report.note_kinds(done[1], where, value)
                continue
            col = ident(column)
            rows = con.execute(f"SELECT DISTINCT {col} FROM {ident(table)} WHERE typeof({col}) IN ('text', 'blob')").fetchall()
            for (value,) in rows:
                blob = isinstance(value, bytes)
                text = _as_text(value)
                if (table, column) in kept_inline and not blob:
                    if what := who.found_in(text):
                        report.kept.append(f"{where} (read by the analysis): {what}: {masked(text)}")
                    continue
                if done := who.clean(text):
                    if blob:
                        new, match = done[0].encode("latin-1", "replace"), "?"
                        sql = f"UPDATE {ident(table)} SET {col} = ? WHERE {col} = {match}"
                        n = con.execute(sql, (new, value)).rowcount
                    else:
                        sql = f"UPDATE {ident(table)} SET {col} = CAST(? AS TEXT) WHERE {col} = CAST(? AS TEXT)"
                        n = con.execute(sql, (_bind(done[0]), _bind(value))).rowcount
                    report.note_kinds([k + (" (in BLOBs)" if blob else "") for k in done[1]], where, text, max(n, 1))


def _bind(value: str) -> str | bytes:
    """A text value as SQLite takes it back: bytes where it holds undecodable bytes (read with
    ``surrogateescape``), bound through ``CAST(? AS TEXT)`` so they stay text, byte for byte."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape")


def _process_list(con: sqlite3.Connection, report: ScrubReport, tables) -> None:
    """The system's process list goes: nsys records every process on the machine in PROCESSES
    (and their threads in ThreadNames); only those with events in the trace stay."""
    if "globalPid" not in {c for c, _ in tables.get("PROCESSES", ())}:
        return
    sources = []
    for table, columns in tables.items():
        names = {c for c, _ in columns}
        if table in ("PROCESSES", "ThreadNames"):
            continue
        if "globalPid" in names:
            sources.append(f"SELECT globalPid AS pid FROM {ident(table)}")
        if "globalTid" in names:
            sources.append(f"SELECT globalTid - (globalTid % 16777216) AS pid FROM {ident(table)}")
    con.execute("CREATE TEMP TABLE _active (pid INTEGER PRIMARY KEY)")
    for sql in sources:
        con.execute(f"INSERT OR IGNORE INTO _active SELECT pid FROM ({sql}) WHERE pid IS NOT NULL")
    n = con.execute("DELETE FROM PROCESSES WHERE globalPid NOT IN (SELECT pid FROM _active)").rowcount
    if "globalTid" in {c for c, _ in tables.get("ThreadNames", ())}:
        where = "(globalTid - (globalTid % 16777216)) NOT IN (SELECT pid FROM _active)"
        n += con.execute(f"DELETE FROM ThreadNames WHERE {where}").rowcount
    con.execute("DROP TABLE _active")
    report.note("the system's process list", "PROCESSES", "processes without events", n)


def _triggers(con: sqlite3.Connection, report: ScrubReport) -> None:
    """Triggers go before the first row changes: nsys writes none, and one would run inside scrub."""
    for name, sql in con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall():
        con.execute(f"DROP TRIGGER IF EXISTS {ident(_sql_name(name))}")
        report.note("triggers", f"schema: trigger {name}", sql)


_CREATE = re.compile(
    r"""^\s*CREATE\s+(?:UNIQUE\s+|TEMP(?:ORARY)?\s+)?(?:VIEW|INDEX)\s+(?:IF\s+NOT\s+EXISTS\s+)?"""
    r"""(?P<name>"(?:[^"]|"")*"|\[[^\]]*\]|`(?:[^`]|``)*`|[^\s(]+)""",
    re.IGNORECASE,
)


def _schema_text(who: _Identity, text: str) -> tuple[str, list[str]]:
    """Schema text without identity, pseudonyms written as plain words (``<user>`` -> ``user``)
    so that they stay valid in identifiers."""
    done = who.clean(text)
    if not done:
        return text, []
    plain = re.sub(r"<([a-z0-9]+(?:-\d+)?)>", r"\1", done[0]).replace(PLACEHOLDER, "scrubbed")
    return plain, done[1]


def _schema(con: sqlite3.Connection, report: ScrubReport, who: _Identity) -> None:
    """Table, column, view and index names and view SQL without identity. Tables and columns are
    renamed (SQLite rewrites the views and indexes that use them); views and indexes whose name
    or SQL still holds identity are made again from their scrubbed SQL, or dropped if it no
    longer compiles."""
    master = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    for (table,) in con.execute(master).fetchall():
        for column in [r[1] for r in con.execute(f"PRAGMA table_info({ident(_sql_name(table))})")]:
            new, kinds = _schema_text(who, column)
            if kinds:
                con.execute(
                    f"ALTER TABLE {ident(table)} RENAME COLUMN {ident(column)} TO {ident(_unused_column(con, table, new))}"
                )
                report.note_kinds(kinds, f"schema: column name of {table}", column)
        new, kinds = _schema_text(who, table)
        if kinds:
            con.execute(f"ALTER TABLE {ident(table)} RENAME TO {ident(_unused(con, new))}")
            report.note_kinds(kinds, "schema: table name", table)
    rows = con.execute("SELECT type, name, sql FROM sqlite_master WHERE type IN ('view', 'index') AND sql IS NOT NULL")
    for kind, name, sql in rows.fetchall():
        new_name, name_kinds = _schema_text(who, name)
        header = _CREATE.match(sql)
        body, sql_kinds = _schema_text(who, sql[header.end() :] if header else sql)
        if not name_kinds and not sql_kinds:
            continue
        con.execute(f"DROP {kind.upper()} {ident(name)}")
        report.note_kinds([*name_kinds, *sql_kinds], f"schema: {kind} {'name and ' if name_kinds else ''}SQL", sql)
        if header:
            try:
                con.execute(f"{sql[: header.start('name')]}{ident(_unused(con, new_name))}{body}")
                continue
            except sqlite3.Error:
                pass
        report.note(f"{kind}s dropped (their scrubbed SQL does not compile)", f"schema: {kind}", name)


def _unused(con: sqlite3.Connection, name: str) -> str:
    """``name``, or ``name_2``, ``name_3`` … when the schema has it already."""
    taken = {r[0].lower() for r in con.execute("SELECT name FROM sqlite_master")}
    out, k = name, 1
    while out.lower() in taken:
        k += 1
        out = f"{name}_{k}"
    return out


def _unused_column(con: sqlite3.Connection, table: str, name: str) -> str:
    taken = {r[1].lower() for r in con.execute(f"PRAGMA table_info({ident(table)})")}
    out, k = name, 1
    while out.lower() in taken:
        k += 1
        out = f"{name}_{k}"
    return out


def _scrub_connection(con: sqlite3.Connection, report: ScrubReport) -> None:
    _triggers(con, report)
    who = _identity(con, _tables(con))
    _schema(con, report, who)
    tables = _tables(con)
    protected = _protected(con, tables)
    _identity_rows(con, report, tables)
    _processes(con, report, tables)
    _process_list(con, report, tables)
    _walk(con, report, tables, who, protected)
    # The mark a re-export looks for: replacing this file from its .nsys-rep needs --reexport.
    con.execute(f"CREATE TABLE IF NOT EXISTS {SCRUBBED_TABLE} (name TEXT PRIMARY KEY, value TEXT)")
    con.execute(f"INSERT OR REPLACE INTO {SCRUBBED_TABLE} VALUES ('scrubbed_by', 'nsys-tools scrub')")


def temp_folder() -> str:
    """Where SQLite puts the file of a temporary database: the first writable folder of the ones it tries."""
    tried = (os.environ.get("SQLITE_TMPDIR"), os.environ.get("TMPDIR"), "/var/tmp", "/usr/tmp", "/tmp")
    return next((d for d in tried if d and os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)), ".")


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
        with reading(src), writing(temp_folder(), "point SQLITE_TMPDIR at a folder with room for one copy of the export"):
            source = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True)
            try:
                source.backup(work)
            finally:
                source.close()
            work.text_factory = lambda b: b.decode("utf-8", "surrogateescape")  # any bytes: real exports hold some
            with work:
                _scrub_connection(work, report)
    except BaseException:
        work.close()
        raise
    return work


def in_folder(folder: Path) -> tuple[list[Path], list[Path]]:
    """The ``.sqlite`` exports under ``folder`` (any case of the suffix; hidden files skipped,
    symlinked folders not followed) that scrub may rewrite, and the symlinks among them, which
    it skips: a scrub of a folder never writes outside it."""
    found, links = [], []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith(".") or not name.lower().endswith(".sqlite"):
                continue
            path = Path(root, name)
            if path.is_symlink():
                links.append(path)
            elif path.is_file():
                found.append(path)
    return found, links


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
        links = os.stat(target).st_nlink - 1 if target.exists() else 0
    except OSError:
        links = 0
    if links > 0:
        report.warnings.append(
            f"{links} other hard link(s) to this file still hold the unscrubbed bytes (the scrubbed file replaces this name "
            "only); find them with find -samefile and delete them"
        )
    try:
        with replaced_atomically(target) as final:
            try:
                work.execute("VACUUM INTO ?", (str(final),))
            except sqlite3.Error as exc:  # the disk filled up, or the folder refused the file
                raise output_error(target, exc, ELSEWHERE if output is None else "write elsewhere") from exc
    finally:
        work.close()
    for suffix in ("-wal", "-shm", "-journal"):  # they belong to the file just replaced
        stale = target.with_name(target.name + suffix)
        if stale.exists() and stat.S_ISREG(stale.lstat().st_mode):
            stale.unlink()
    cache.forget(target)
    return report
