"""A planted corpus of identity, by kind, for ``scrub``: every probe goes into every table nsys
writes that holds text or BLOBs, into a table nsys does not write, and into the schema (a table
name, a column name, a view's name and SQL, an index, a trigger).

``plant(path)`` rewrites a copy of a real export and returns the probes. Each ``Probe`` names
its kind, the text planted, the part that must not survive (``needle``) and the label scrub's
report gives it. The user and host named by the planted environment (``USER``, ``SHORT_USER``,
``HOST``) are found from the environment rows; the folder shapes carry other users, whom no
environment names.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

USER, SHORT_USER, HOST = "wzhang", "jq", "gpu-node-0042"
OWN_NAME = "ablation-7b-final"  # the export's own file name, as nsys records it
ENVIRONMENT = f"USER={USER}\nLOGNAME={SHORT_USER}\nHOSTNAME={HOST}\nPATH=/usr/bin"

URLS = "credentials in URLs and user labels"
ENV = "environment and credentials"
NAMES = "user, host and install names"
FOLDERS = "home paths and shared-storage folders"


@dataclass(frozen=True)
class Probe:
    kind: str
    text: str
    needle: str
    label: str  # the kind scrub's report names


PROBES = (
    Probe("IPv4 address", "rendezvous at 10.23.45.67:29500", "10.23.45.67", "IPv4 addresses"),
    Probe("IPv4 in JSON", '{"master_addr": "172.16.9.201", "port": 29500}', "172.16.9.201", "IPv4 addresses"),
    Probe("IPv6 address", "peer 2001:0db8:85a3:0000:0000:8a2e:0370:7334 up", "8a2e:0370:7334", "IPv6 addresses"),
    Probe("IPv6, compressed", "link fe80::1ff:fe23:4567:890a%ib0", "fe23:4567:890a", "IPv6 addresses"),
    Probe("IPv6 in JSON", '{"peer": "2001:db8:4::17"}', "2001:db8:4::17", "IPv6 addresses"),
    Probe("MAC address", "ib0 hwaddr 3c:ec:ef:12:34:56", "3c:ec:ef:12:34:56", "MAC addresses"),
    Probe("MAC in JSON", '{"mac": "3C-EC-EF-65-43-21"}', "3C-EC-EF-65-43-21", "MAC addresses"),
    Probe("e-mail address", "mail ana.lopez@research.example.org when done", "ana.lopez@research", "e-mail addresses"),
    Probe("FQDN", "node gpu17.hpc.unibern.ch ready", "gpu17.hpc.unibern", "fully qualified host names"),
    Probe("FQDN, private domain", "mounted trainbox07.corp:/export", "trainbox07", "fully qualified host names"),
    Probe("EC2 host name", "host ip-10-1-2-3.ec2.internal", "ip-10-1-2-3", "cloud instance ids"),
    Probe("SLURM variable, NAME: value", "SLURM_JOB_ID: 4815162", "4815162", "scheduler job and node variables"),
    Probe(
        "SLURM node list in a line",
        "got SLURM_JOB_NODELIST=nid00[12-15] for 4h",
        "nid00[12-15]",
        "scheduler job and node variables",
    ),
    Probe("SLURM variable in JSON", '{"SLURM_JOB_ID": "4815163"}', "4815163", "scheduler job and node variables"),
    Probe("PBS variable", "PBS_JOBID: 9876.pbs-server", "9876.pbs-server", "scheduler job and node variables"),
    Probe("LSF variable", "LSB_JOBID: 552211", "552211", "scheduler job and node variables"),
    Probe(
        "Kubernetes pod name", "pod trainer-7d9f8b6c5d-x2x9z started", "trainer-7d9f8b6c5d", "Kubernetes pod and namespace names"
    ),
    Probe("Kubernetes namespace", "namespace: vision-team-a", "vision-team-a", "Kubernetes pod and namespace names"),
    Probe("Kubernetes variable", "POD_NAME: ddp-worker-3b", "ddp-worker-3b", "Kubernetes pod and namespace names"),
    Probe("AWS instance id", "instance i-0f1e2d3c4b5a69788 ready", "i-0f1e2d3c4b5a69788", "cloud instance ids"),
    Probe(
        "GCP instance",
        "projects/acme-ml/zones/us-central1-a/instances/trainer-vm-3",
        "acme-ml/zones",
        "cloud instance ids",
    ),
    Probe(
        "Azure virtual machine",
        "/subscriptions/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0/resourceGroups/rg-ml/providers/Microsoft.Compute/virtualMachines/nd96",
        "rg-ml/providers",
        "cloud instance ids",
    ),
    Probe("Azure vmId", '{"vmId": "vm7f3e9c21"}', "vm7f3e9c21", "cloud instance ids"),
    Probe("JWT", "auth eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ3emhhbmcifQ.c2lnbmF0dXJlMTIz", "eyJzdWIiOiJ3emhhbmcifQ", "JWTs"),
    Probe("Bearer token", "Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543", "8f14e45fceea167a", "bearer tokens"),
    Probe("OpenAI key", "using sk-proj-Zx8Qw3Er5Ty7Ui9Op1As", "Zx8Qw3Er5Ty7Ui9Op1As", "keys with known prefixes"),
    Probe("GitHub token", "clone with ghp_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78", "Ab12Cd34Ef56Gh78Ij90", ENV),
    Probe("AWS access key", "key AKIAQ3EGRTYB6XAMPL12 in use", "AKIAQ3EGRTYB6XAMPL12", ENV),
    Probe("Slack token", "notify xoxb-1234567890-abcdefghij", "xoxb-1234567890", ENV),
    Probe("Hugging Face token", "hub hf_Qw3Er5Ty7Ui9Op1AsDf3Gh5Jk7", "hf_Qw3Er5Ty7Ui9Op1", "keys with known prefixes"),
    Probe(
        "aws_session_token",
        "aws_session_token = IQoJb3JpZ2luX2VjEJr//wEaCXVzLWVhc3QtMSJH",
        "IQoJb3JpZ2luX2VjEJr",
        "credentials after credential words",
    ),
    Probe(
        "Azure SAS signature",
        "https://acct.blob.core.windows.net/c/ckpt.pt?sv=2022-11-02&sig=Qm9vZ1NpZ25hdHVyZQ%3D%3D",
        "Qm9vZ1NpZ25hdHVyZQ",
        "Azure SAS signatures",
    ),
    Probe("password after a word", "db password: Tr0ub4dor3x", "Tr0ub4dor3x", "credentials after credential words"),
    Probe("API key in JSON", '{"api_key": "a1b2c3d4e5f6g7h8"}', "a1b2c3d4e5f6g7h8", "credentials after credential words"),
    Probe("credentials in a URL", "git clone https://wz:Hunt3r2pass@git.example.com/x.git", "Hunt3r2pass", URLS),
    Probe(
        "private key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bqXyZ\n-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEA7bqXyZ",
        ENV,
    ),
    Probe("user joined by _", f"ckpt/train_{USER}/step100", f"train_{USER}", NAMES),
    Probe("user joined by -", f"env {USER}-py311 active", f"{USER}-py311", NAMES),
    Probe("user in capitals", f"{USER.upper()}_RUNS done", USER.upper(), NAMES),
    Probe("host in capitals", f"on {HOST.upper()} now", HOST.upper(), NAMES),
    Probe("host joined by _", f"{HOST}_ib0 up", f"{HOST}_ib0", NAMES),
    Probe("two-letter user", f"{SHORT_USER}_sweeps/out", f"{SHORT_USER}_sweeps", NAMES),
    Probe("/data/USER", "/data/mkowalski/imagenet", "mkowalski", FOLDERS),
    Probe("/mnt/USER", "/mnt/rdesai/ckpt", "rdesai", FOLDERS),
    Probe("/mnt/nfs/USER", "/mnt/nfs/tnguyen/out", "tnguyen", FOLDERS),
    Probe("/scratch/USER", "/scratch/lfischer/run", "lfischer", FOLDERS),
    Probe("/home/USER", "/home/okafor/.cache", "okafor", FOLDERS),
    Probe("/Users/USER", "/Users/sbergstrom/Downloads", "sbergstrom", FOLDERS),
)
# Planted only where they belong, with the kinds scrub's report gives them.
SCHEMA_PROBES = (
    Probe("table name", "runs from 10.9.8.7", "10.9.8.7", "IPv4 addresses"),
    Probe("column name", f"{USER}_note", f"{USER}_note", NAMES),
    Probe("view name", f"jobs on {HOST}", f"jobs on {HOST}", NAMES),
    Probe("view SQL", "owner@lab.example.org", "owner@lab.example.org", "e-mail addresses"),
    Probe("index name", "by_192.168.77.5", "192.168.77.5", "IPv4 addresses"),
    Probe("trigger", "sk-live-Trig9Zx8Qw3Er5Ty7Ui", "Trig9Zx8Qw3Er5Ty7Ui", "triggers"),
    Probe("the export's own file name", f"{OWN_NAME}.sqlite", OWN_NAME, "the export's own file name"),
)
FOREIGN_TABLE = "LAB_NOTES"  # a table nsys does not write
# Columns whose text the analysis reads: scrub leaves them, so probes go elsewhere.
ANALYSIS_COLUMNS = {("NVTX_EVENTS", "text"), ("TARGET_INFO_GPU", "name")}
# Columns that tie a row to the trace: a planted row gets values of its own, so that it joins no
# process, thread or device of the run and no report's rows change.
KEYS = {"id", "globalPid", "globalTid", "globalVid", "deviceId", "gpuId", "contextId"}
PROBE_IDS = 7_000_000  # StringIds ids of the planted strings, none of which the trace uses


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _text_columns(con: sqlite3.Connection, table: str) -> list[tuple[str, bool]]:
    """(column, is BLOB) for the columns that hold text or BLOBs."""
    out = []
    for _, name, declared, *_ in con.execute(f"PRAGMA table_info({_q(table)})"):
        declared = (declared or "").upper()
        if (table, name) not in ANALYSIS_COLUMNS and (
            any(a in declared for a in ("CHAR", "CLOB", "TEXT", "BLOB")) or not declared
        ):
            out.append((name, "BLOB" in declared))
    return out


def _unique_columns(con: sqlite3.Connection, table: str) -> set[str]:
    cols = {r[1] for r in con.execute(f"PRAGMA table_info({_q(table)})") if r[5]}
    for _, index, unique, *_ in con.execute(f"PRAGMA index_list({_q(table)})"):
        if unique:
            cols |= {r[2] for r in con.execute(f"PRAGMA index_info({_q(index)})")}
    return cols


def _insert(con: sqlite3.Connection, table: str, texts: dict[str, str | bytes]) -> None:
    """One new row of ``table``: ``texts`` in their columns, other columns copied from its first
    row (0 when it has none), keys made new."""
    columns = [r[1] for r in con.execute(f"PRAGMA table_info({_q(table)})")]
    first = con.execute(f"SELECT * FROM {_q(table)} LIMIT 1").fetchone() or (0,) * len(columns)
    unique = _unique_columns(con, table)
    values = []
    for column, value in zip(columns, first, strict=True):
        if column in texts:
            value = texts[column]
        elif column in unique or column in KEYS:
            value = con.execute(f"SELECT coalesce(max({_q(column)}), 0) + 1000 FROM {_q(table)}").fetchone()[0]
        values.append(value)
    marks = ", ".join("?" for _ in columns)
    con.execute(f"INSERT INTO {_q(table)} ({', '.join(map(_q, columns))}) VALUES ({marks})", values)


def plant(path: Path) -> list[Probe]:
    """Plant every probe into ``path`` (a copy of a real export); returns the probes planted."""
    texts = [p.text for p in PROBES]
    con = sqlite3.connect(path)
    with con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        # every probe as a string of its own, and a process's captured output naming two of them
        con.executemany("INSERT INTO StringIds (id, value) VALUES (?, ?)", [(PROBE_IDS + k, t) for k, t in enumerate(texts)])
        con.execute(f"INSERT INTO StringIds (id, value) VALUES ({PROBE_IDS - 1}, ?)", (ENVIRONMENT,))
        if "ProcessStreams" not in tables:  # as nsys writes it when the run's output is captured
            con.execute(
                "CREATE TABLE ProcessStreams "
                "(globalPid INTEGER NOT NULL, filenameId INTEGER NOT NULL, contentId INTEGER NOT NULL)"
            )
            tables.append("ProcessStreams")
        home = next(k for k, p in enumerate(PROBES) if p.kind == "/home/USER")
        con.execute(f"INSERT INTO ProcessStreams VALUES (0, {PROBE_IDS + home}, {PROBE_IDS})")
        # the environment names the user and the host, as nsys records it
        con.execute("INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', ?)", (ENVIRONMENT,))
        con.execute(
            "INSERT INTO TARGET_INFO_SYSTEM_ENV (globalVid, devStateName, name, nameEnum, value) VALUES (0, 'x', ?, 0, ?)",
            ("DeviceEnvironment", ENVIRONMENT.replace("\n", ";")),
        )
        # every probe as a name/value row of each metadata table, and as a JSON row
        for meta in ("META_DATA_CAPTURE", "META_DATA_EXPORT"):
            con.executemany(f"INSERT INTO {meta} (name, value) VALUES (?, ?)", [(f"PROBE_{k}", t) for k, t in enumerate(texts)])
        con.executemany(
            "INSERT INTO TARGET_INFO_SYSTEM_ENV (globalVid, devStateName, name, nameEnum, value) VALUES (0, 'x', ?, 0, ?)",
            [(f"Probe{k}", t) for k, t in enumerate(texts)],
        )
        con.execute(
            "INSERT INTO TARGET_INFO_SYSTEM_ENV (globalVid, devStateName, name, nameEnum, value) "
            "VALUES (0, 'x', 'NicInfo', 0, ?)",
            ('{"items": [' + ", ".join(f'{{"note": "{t}"}}' for t in texts if '"' not in t and "\n" not in t) + "]}",),
        )
        con.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name LIKE '%OUTPUT_FILE'", (f"{OWN_NAME}.sqlite",))
        con.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name LIKE '%INPUT_FILE'", (f"{OWN_NAME}.nsys-rep",))
        # one new row in each other table with text or BLOB columns, a probe in each of them
        k = 0
        for table in tables:
            if table in ("StringIds", "META_DATA_CAPTURE", "META_DATA_EXPORT"):
                continue
            columns = _text_columns(con, table)
            if not columns:
                continue
            row: dict[str, str | bytes] = {}
            for column, blob in columns:
                text = texts[k % len(texts)]
                row[column] = b"\x00\x01" + text.encode() + b"\xff" if blob else text
                k += 1
            _insert(con, table, row)
        # a table nsys does not write: every probe, as text, as a BLOB, and as text in an INTEGER column
        con.execute(f"CREATE TABLE {FOREIGN_TABLE} (note TEXT, payload BLOB, count INTEGER)")
        con.executemany(f"INSERT INTO {FOREIGN_TABLE} VALUES (?, ?, ?)", [(t, t.encode(), t) for t in texts])
        _plant_schema(con)
    con.close()
    return [*PROBES, *SCHEMA_PROBES]


def _plant_schema(con: sqlite3.Connection) -> None:
    table, column, view, sql_probe, index, trigger = (p.text for p in SCHEMA_PROBES[:6])
    con.execute(f"CREATE TABLE {_q(table)} ({_q(column)} TEXT, n INTEGER)")
    con.execute(f"INSERT INTO {_q(table)} VALUES ('plain', 1)")
    con.execute(f"CREATE VIEW {_q(view)} AS SELECT {_q(column)}, n, '{sql_probe}' AS owner FROM {_q(table)}")
    con.execute(f"CREATE INDEX {_q(index)} ON {_q(table)} (n)")
    # fires on every change of StringIds, so scrub must drop it before the first row changes
    con.execute(
        f"CREATE TRIGGER keep_a_copy AFTER UPDATE ON StringIds BEGIN "
        f"INSERT INTO {FOREIGN_TABLE} VALUES (old.value, '{trigger}', 0); END"
    )
