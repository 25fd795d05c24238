"""The ledger: every sweep's settings and statistics in one SQLite database (sqlite-utils).

Tables:
  sessions  one row per sweep: id, date, GPU, driver, nsys, commit, L2 mode, rounds x iters,
            control, and the contention verdict with its reasons;
  stats     one row per (session, op, impl, shape, l2): kernel-time and event-span statistics;
  rejected  variants measured and not kept: the variant, its metric, why.

A ledger is checked before use: an empty file, a file that is not SQLite, a damaged one, or
one whose tables are not a ledger's is an error naming it. Ledgers written before the bandwidth
column was named ``gb_per_s`` (it was ``gbps``) are read as they are and migrated on the next
write. A sweep in which no shape completed is never added as a session.

Where the ledger is: ``--ledger``, else ``$NSYS_TOOLS_LEDGER``, else (``default_path``)
``ledger.sqlite`` beside the ``sweeps`` folder a sweep sits in, else ``reports/ledger.sqlite``.

Control bands come from the quiet sessions: for each (GPU, control, shape, L2), the min-max of
the control's per-session kernel median, widened by ``BAND_MARGIN`` on each side (two quiet
sessions of the same build differ by under 1%), under the same output policy (a control that
writes a reused buffer is faster than one that writes cold ones). A band needs
``BAND_MIN_SESSIONS`` sessions. Rows added before the policy was recorded count as ``rotate``
(``ledger add`` again records what each implementation had).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from ..errors import BadExport, CaptureError, UsageError
from ..files import output_error
from ..read.export import SQLITE_MAGIC, reading
from .folder import KEYS, SUMMARY_COLUMNS, Sweep, load, summary
from .verdict import ContentionVerdict, judge

DEFAULT_PATH = Path("reports/ledger.sqlite")
ENV = "NSYS_TOOLS_LEDGER"
BAND_MARGIN = 0.01
BAND_MIN_SESSIONS = 2
STAT_COLUMNS = tuple(c for c in SUMMARY_COLUMNS if c not in (*KEYS, "kernels"))
# The columns each ledger table must have; a ledger holds at least one of these tables.
TABLES = {
    "sessions": {"id", "created_utc", "gpu", "quiet"},
    "stats": {"session_id", *KEYS, "kernel_median_ns"},
    "rejected": {"variant", "metric", "why"},
}
RENAMED = {"gbps": "gb_per_s"}  # old stats column -> its name now


def default_path(near: Path | None = None) -> Path:
    """The ledger when --ledger is not given: ``$NSYS_TOOLS_LEDGER``; for a sweep folder inside
    a ``sweeps`` folder, ``ledger.sqlite`` beside that folder; else ``reports/ledger.sqlite``."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    if near is not None:
        parent = Path(os.path.abspath(near)).parent
        if parent.name == "sweeps":
            return parent.parent / "ledger.sqlite"
    return DEFAULT_PATH


def _check(path: Path) -> None:
    """Stop, naming the file, unless ``path`` is a ledger (or a new, empty place for one)."""
    hint = "pass a ledger written by nsys-tools ledger add, or a new path to start one"
    if path.is_dir():
        raise BadExport(path, "is a folder, not a ledger", hint)
    with reading(path):
        with path.open("rb") as fh:
            header = fh.read(16)
        if not header:
            raise BadExport(path, "is an empty file, not a ledger", "delete it, or " + hint)
        if header != SQLITE_MAGIC:
            raise BadExport(path, "is not a ledger (not an SQLite file)", hint)
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            found = {
                t: {c for (c,) in con.execute("SELECT name FROM pragma_table_info(?)", (t,))}
                for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
        finally:
            con.close()
    known = {t: cols | {RENAMED.get(c, c) for c in cols} for t, cols in found.items() if t in TABLES}
    if not known:
        raise BadExport(path, "is not a ledger (no sessions, stats or rejected table)", hint)
    for table, cols in known.items():
        if missing := sorted(TABLES[table] - cols):
            raise BadExport(path, f"is not a ledger this version reads ({table} lacks {', '.join(missing)})", hint)


def _db(path: Path, *, create: bool = False):
    """The ledger at ``path`` as a sqlite-utils Database, checked; ``create`` allows a new one."""
    from sqlite_utils import Database

    path = Path(path)
    if path.exists():
        _check(path)
    elif not create:
        raise BadExport(path, "no ledger here", "add a sweep first: nsys-tools ledger add SWEEP (or pass --ledger)")
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise output_error(path.parent, exc) from exc
    return Database(path)


def _migrate(db) -> None:
    """Rename the columns of an older ledger (``gbps`` -> ``gb_per_s``) before writing to it."""
    if db["stats"].exists():
        have = set(db["stats"].columns_dict)
        for old, new in RENAMED.items():
            if old in have and new not in have:
                db.execute(f'ALTER TABLE stats RENAME COLUMN "{old}" TO "{new}"')


def session_row(sweep: Sweep, verdict: ContentionVerdict) -> dict:
    m = sweep.manifest
    return {
        "id": sweep.id,
        "created_utc": m.created_utc,
        "gpu": sweep.gpu or None,
        "driver": m.gpu_before.driver_version,
        "nsys": m.nsys_version,
        "git_commit": m.git_commit,
        "l2": m.spec.l2,
        "rounds": m.spec.rounds,
        "iters": m.spec.iters,
        "control": m.spec.control,
        "outputs": sweep.outputs,
        "kind": sweep.kind,
        "quiet": verdict.quiet,
        "reasons": json.dumps(verdict.reasons),
        "added_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def add_folder(folder: Path, ledger: Path | None = None) -> tuple[Path, dict]:
    """Add the capture folder just written to ``ledger`` (default: ``default_path`` near the
    folder); returns the ledger's path and the session row."""
    path = ledger or default_path(folder)
    return path, add(load(folder), path)


def add(sweep: Sweep, path: Path = DEFAULT_PATH, stats: pl.DataFrame | None = None) -> dict:
    """Add (or replace) ``sweep`` in the ledger; returns its session row. A sweep with no
    completed shape (a failed capture) is refused: it has no statistics to stand for."""
    stats = summary(sweep) if stats is None else stats
    if stats.filter(pl.col("instances").fill_null(0) > 0).is_empty():
        raise CaptureError(
            sweep.path, "no shape of this sweep completed, so it is not added to the ledger", "see manifest.json for why"
        )
    verdict = judge(sweep)
    row = session_row(sweep, verdict)
    records = stats.select(*KEYS, *STAT_COLUMNS).with_columns(session_id=pl.lit(sweep.id)).to_dicts()
    db = _db(path, create=True)
    with reading(path), db.conn:
        _migrate(db)
        db["sessions"].upsert(row, pk="id", alter=True)
        if db["stats"].exists():
            db["stats"].delete_where("session_id = ?", [sweep.id])
        db["stats"].insert_all(records, pk=("session_id", *KEYS), replace=True, alter=True)
    return row


def sessions(path: Path = DEFAULT_PATH) -> pl.DataFrame:
    db = _db(path)
    if not db["sessions"].exists():
        return pl.DataFrame()
    with reading(path):
        return pl.DataFrame(list(db["sessions"].rows_where(order_by="created_utc")), infer_schema_length=None)


def stats(path: Path = DEFAULT_PATH) -> pl.DataFrame:
    """Every session's statistics, with the session's GPU, date, commit and verdict."""
    db = _db(path)
    schema = {
        "session_id": pl.String,
        **{k: pl.String for k in KEYS},
        "kernel_median_ns": pl.Float64,
        "outputs": pl.String,
        "created_utc": pl.String,
        "gpu": pl.String,
        "git_commit": pl.String,
        "quiet": pl.Int64,
    }
    if not (db["stats"].exists() and db["sessions"].exists()):
        return pl.DataFrame(schema=schema)
    with reading(path):
        rows = db.execute(
            "SELECT s.*, x.created_utc, x.gpu, x.git_commit, x.quiet FROM stats AS s JOIN sessions AS x ON x.id = s.session_id"
        )
        cols = [RENAMED.get(d[0], d[0]) for d in rows.description]
        data = rows.fetchall()
    if not data:
        return pl.DataFrame(schema={**schema, **{c: pl.Float64 for c in cols if c not in schema}})
    df = pl.DataFrame(data, schema=cols, orient="row", infer_schema_length=None)
    if "outputs" not in df.columns:  # rows added before the output policy was recorded
        df = df.with_columns(outputs=pl.lit(None, pl.String))
    return df.with_columns(outputs=pl.col("outputs").fill_null("rotate"))


def no_bands() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "shape": pl.String,
            "band_lo_ns": pl.Float64,
            "band_hi_ns": pl.Float64,
            "sessions": pl.UInt32,
            "lo": pl.Float64,
            "hi": pl.Float64,
        }
    )


def _of_op(op: str | None) -> pl.Expr:
    """Rows of one op (all, when ``op`` is None): a shape means nothing across ops."""
    return (pl.col("op") == op) if op else pl.lit(True)


def quiet_range(
    path: Path, gpu: str, impl: str, l2: str, exclude: str | None = None, outputs: str | None = None, op: str | None = None
) -> pl.DataFrame:
    """Per shape: ``impl``'s kernel median over quiet sessions (of ``op``, and where it ran
    under the output policy ``outputs``, when given): ``lo``, ``hi`` and ``sessions``."""
    if not Path(path).exists():
        return no_bands()
    df = stats(path).filter(
        (pl.col("gpu") == gpu)
        & (pl.col("impl") == impl)
        & (pl.col("l2") == l2)
        & (pl.col("quiet") == 1)
        & (pl.col("session_id") != (exclude or ""))
        & ((pl.col("outputs") == outputs) if outputs else pl.lit(True))
        & _of_op(op)
    )
    return df.group_by("shape").agg(lo=pl.col("kernel_median_ns").min(), hi=pl.col("kernel_median_ns").max(), sessions=pl.len())


def session_noise(path: Path, gpu: str, exclude: Sequence[str] = (), level: float = 0.95) -> tuple[float, int]:
    """How much one kernel's median moves between quiet sessions of the same build: the pooled
    standard deviation of log kernel medians within groups of the same (commit, op, impl, shape,
    L2, output policy) on ``gpu``, taken at the upper end of its ``level`` confidence interval
    (a CI gate should not fail on noise). Returns (sd, degrees of freedom); (0.0, 0) when the
    ledger holds no replicated session."""
    if not Path(path).exists():
        return 0.0, 0
    df = stats(path).filter((pl.col("gpu") == gpu) & (pl.col("quiet") == 1) & ~pl.col("session_id").is_in(list(exclude)))
    groups = [c for c in ("git_commit", "op", "impl", "shape", "l2", "outputs") if c in df.columns]
    pooled = (
        df.drop_nulls(["git_commit", "kernel_median_ns"])
        .with_columns(log=pl.col("kernel_median_ns").log())
        .group_by(groups)
        .agg(n=pl.len(), ss=((pl.col("log") - pl.col("log").mean()) ** 2).sum())
        .filter(pl.col("n") >= 2)
        .select(ss=pl.col("ss").sum(), dof=(pl.col("n") - 1).sum())
    )
    dof = int(pooled["dof"][0] or 0) if pooled.height else 0
    if dof == 0:
        return 0.0, 0
    return upper_sd(float(pooled["ss"][0]), dof, level), dof


def upper_sd(ss: float, dof: int, level: float = 0.95) -> float:
    """The upper end of the ``level`` confidence interval of a standard deviation from a sum of
    squares ``ss`` over ``dof`` degrees of freedom (normal data)."""
    import math

    # The chi-square quantile by Wilson and Hilferty's cube-root approximation.
    z = _normal_quantile(1 - level)
    chi2 = dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3
    return math.sqrt(ss / chi2)


def _normal_quantile(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def bands(
    path: Path, gpu: str, control: str, l2: str, exclude: str | None = None, outputs: str | None = None, op: str | None = None
) -> pl.DataFrame:
    """Per shape: the control's band (``band_lo_ns``, ``band_hi_ns``) from quiet sessions."""
    return (
        quiet_range(path, gpu, control, l2, exclude, outputs, op)
        .filter(pl.col("sessions") >= BAND_MIN_SESSIONS)
        .with_columns(band_lo_ns=pl.col("lo") * (1 - BAND_MARGIN), band_hi_ns=pl.col("hi") * (1 + BAND_MARGIN))
        .select("shape", "band_lo_ns", "band_hi_ns", "sessions")
    )


def ratio_spread(
    path: Path, gpu: str, commit: str | None, control: str, l2: str, outputs: str | None = None, op: str | None = None
) -> pl.DataFrame:
    """Per (shape, impl): the ratio of its kernel median to ``control``'s, same session each
    time, over the quiet sessions of one build (``commit``) on ``gpu``: ``lo``, ``hi`` and
    ``sessions``. ``outputs`` keeps the sessions where the control ran under that policy."""
    schema = {"shape": pl.String, "impl": pl.String, "lo": pl.Float64, "hi": pl.Float64, "sessions": pl.UInt32}
    if not commit or not Path(path).exists():
        return pl.DataFrame(schema=schema)
    df = stats(path).filter(
        (pl.col("gpu") == gpu) & (pl.col("git_commit") == commit) & (pl.col("l2") == l2) & (pl.col("quiet") == 1) & _of_op(op)
    )
    ref = df.filter(pl.col("impl") == control)
    if outputs:
        ref = ref.filter(pl.col("outputs") == outputs)
    ref = ref.select("session_id", "shape", ref_ns="kernel_median_ns")
    return (
        df.filter(pl.col("impl") != control)
        .join(ref, on=["session_id", "shape"])
        .with_columns(ratio=pl.col("kernel_median_ns") / pl.col("ref_ns"))
        .group_by("shape", "impl")
        .agg(lo=pl.col("ratio").min(), hi=pl.col("ratio").max(), sessions=pl.len())
        .select(*schema)
    )


def reject(path: Path, variant: str, metric: str, why: str, session: str | None = None, op: str | None = None) -> dict:
    """Record ``variant`` as measured and not kept, with the sweep its metric comes from and the op
    it is a variant of (where the sweep does not say, as for a measurement outside any sweep)."""
    row = {
        "variant": variant,
        "metric": metric,
        "why": why,
        "session_id": session,
        "op": op,
        "added_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    db = _db(path, create=True)
    with reading(path), db.conn:
        db["rejected"].upsert(row, pk="variant", alter=True)
    return row


def rejected(path: Path = DEFAULT_PATH, op: str | None = None) -> pl.DataFrame:
    """The variants measured and not kept; with ``op``, those recorded for that op or whose sweep
    measured it (and those recorded with neither, which could be of any op)."""
    schema = {"variant": pl.String, "metric": pl.String, "why": pl.String, "session_id": pl.String, "op": pl.String}
    if not Path(path).exists():
        return pl.DataFrame(schema=schema)
    db = _db(path)
    if not db["rejected"].exists():
        return pl.DataFrame(schema=schema)
    with reading(path):
        rows = list(db["rejected"].rows_where(order_by="added_utc"))
    if not rows:
        return pl.DataFrame(schema=schema)
    df = pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema)
    if op:
        ops = stats(path).select("session_id", pl.col("op").alias("session_op")).unique("session_id")
        df = df.join(ops, on="session_id", how="left").with_columns(of=pl.coalesce("op", "session_op"))
        df = df.filter(pl.col("of").is_null() | (pl.col("of") == op)).select(*schema)
    return df


def latest_control(path: Path = DEFAULT_PATH) -> str:
    """The control the most recent session compared with."""
    df = sessions(path)
    controls = df["control"].drop_nulls() if "control" in df.columns else pl.Series([], dtype=pl.String)
    if controls.is_empty():
        raise BadExport(path, "no session names a control", "pass --vs NAME")
    return controls[-1]


def history(
    path: Path, shape: str, impl: str, vs: str, l2: str = "cold", outputs: str | None = None, op: str | None = None
) -> pl.DataFrame:
    """Per session, oldest first: ``impl`` and ``vs`` kernel medians at ``shape`` (of ``op``, when
    given) and their ratio; with ``outputs``, only sessions where ``vs`` ran under that output policy."""
    if impl == vs:
        raise UsageError(None, f"--impl and --vs are both {impl!r}", "compare two different implementations")
    df = stats(path).filter((pl.col("shape") == shape) & (pl.col("l2") == l2) & pl.col("impl").is_in([impl, vs]) & _of_op(op))
    if outputs:
        under = df.filter((pl.col("impl") == vs) & (pl.col("outputs") == outputs)).select("session_id")
        df = df.join(under, on="session_id", how="semi")
    index = ["session_id", "created_utc", "gpu", "git_commit", "quiet"]
    if df.is_empty():
        wide = df.select(*index)
    else:
        wide = df.pivot(on="impl", index=index, values="kernel_median_ns")
    for name in (impl, vs):
        if name not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Float64).alias(name))
        wide = wide.with_columns(pl.col(name).cast(pl.Float64))
    return (
        wide.select(
            "session_id", "created_utc", "gpu", "git_commit", "quiet", pl.col(impl).alias("impl_ns"), pl.col(vs).alias("vs_ns")
        )
        .with_columns(ratio=pl.col("impl_ns") / pl.col("vs_ns"))
        .sort("created_utc")
    )
