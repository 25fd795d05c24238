"""The ledger: every sweep's settings and statistics in one SQLite database (sqlite-utils).

Tables:
  sessions  one row per sweep: id, date, GPU, driver, nsys, commit, L2 mode, rounds x iters,
            control, and the contention verdict with its reasons;
  stats     one row per (session, op, impl, shape, l2): kernel-time and event-span statistics;
  rejected  variants measured and not kept: the variant, its metric, why.

Control bands come from the quiet sessions: for each (GPU, control, shape, L2), the min-max of
the control's per-session kernel median, widened by ``BAND_MARGIN`` on each side (two quiet
sessions of the same build differ by under 1%). A band needs ``BAND_MIN_SESSIONS`` sessions.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from .errors import BadExport
from .sweep import KEYS, SUMMARY_COLUMNS, Sweep, summary
from .verdict import Session, judge

DEFAULT_PATH = Path("reports/ledger.sqlite")
BAND_MARGIN = 0.01
BAND_MIN_SESSIONS = 2
STAT_COLUMNS = tuple(c for c in SUMMARY_COLUMNS if c not in (*KEYS, "kernels"))


def _db(path: Path, *, create: bool = False):
    from sqlite_utils import Database

    if not create and not Path(path).exists():
        raise BadExport(path, "no ledger here", "add a sweep first: nsys-tools ledger add SWEEP")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return Database(path)


def session_row(sweep: Sweep, verdict: Session) -> dict:
    m = sweep.manifest
    spec = m.get("spec", {})
    return {
        "id": sweep.id,
        "created_utc": m.get("created_utc"),
        "gpu": sweep.gpu or None,
        "driver": m.get("gpu_before", {}).get("driver_version"),
        "nsys": m.get("nsys", {}).get("version"),
        "git_commit": m.get("git", {}).get("commit"),
        "l2": spec.get("l2"),
        "rounds": spec.get("rounds"),
        "iters": spec.get("iters"),
        "control": spec.get("control"),
        "quiet": verdict.quiet,
        "reasons": json.dumps(verdict.reasons),
        "added_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def add(sweep: Sweep, path: Path = DEFAULT_PATH, stats: pl.DataFrame | None = None) -> dict:
    """Add (or replace) ``sweep`` in the ledger; returns its session row."""
    verdict = judge(sweep)
    row = session_row(sweep, verdict)
    stats = summary(sweep) if stats is None else stats
    records = stats.select(*KEYS, *STAT_COLUMNS).with_columns(session_id=pl.lit(sweep.id)).to_dicts()
    db = _db(path, create=True)
    with db.conn:
        db["sessions"].upsert(row, pk="id")
        if db["stats"].exists():
            db["stats"].delete_where("session_id = ?", [sweep.id])
        db["stats"].insert_all(records, pk=("session_id", *KEYS), replace=True)
    return row


def sessions(path: Path = DEFAULT_PATH) -> pl.DataFrame:
    db = _db(path)
    return pl.DataFrame(list(db["sessions"].rows_where(order_by="created_utc")), infer_schema_length=None)


def stats(path: Path = DEFAULT_PATH) -> pl.DataFrame:
    """Every session's statistics, with the session's GPU, date, commit and verdict."""
    db = _db(path)
    rows = db.execute(
        "SELECT s.*, x.created_utc, x.gpu, x.git_commit, x.quiet FROM stats AS s JOIN sessions AS x ON x.id = s.session_id"
    )
    cols = [d[0] for d in rows.description]
    return pl.DataFrame(rows.fetchall(), schema=cols, orient="row", infer_schema_length=None)


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


def quiet_range(path: Path, gpu: str, impl: str, l2: str, exclude: str | None = None) -> pl.DataFrame:
    """Per shape: ``impl``'s kernel median over quiet sessions: ``lo``, ``hi`` and ``sessions``."""
    if not Path(path).exists():
        return no_bands()
    df = stats(path).filter(
        (pl.col("gpu") == gpu)
        & (pl.col("impl") == impl)
        & (pl.col("l2") == l2)
        & (pl.col("quiet") == 1)
        & (pl.col("session_id") != (exclude or ""))
    )
    return df.group_by("shape").agg(lo=pl.col("kernel_median_ns").min(), hi=pl.col("kernel_median_ns").max(), sessions=pl.len())


def bands(path: Path, gpu: str, control: str, l2: str, exclude: str | None = None) -> pl.DataFrame:
    """Per shape: the control's band (``band_lo_ns``, ``band_hi_ns``) from quiet sessions."""
    return (
        quiet_range(path, gpu, control, l2, exclude)
        .filter(pl.col("sessions") >= BAND_MIN_SESSIONS)
        .with_columns(band_lo_ns=pl.col("lo") * (1 - BAND_MARGIN), band_hi_ns=pl.col("hi") * (1 + BAND_MARGIN))
        .select("shape", "band_lo_ns", "band_hi_ns", "sessions")
    )


def reject(path: Path, variant: str, metric: str, why: str, session: str | None = None) -> dict:
    row = {
        "variant": variant,
        "metric": metric,
        "why": why,
        "session_id": session,
        "added_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    db = _db(path, create=True)
    with db.conn:
        db["rejected"].upsert(row, pk="variant")
    return row


def rejected(path: Path = DEFAULT_PATH) -> pl.DataFrame:
    schema = {"variant": pl.String, "metric": pl.String, "why": pl.String, "session_id": pl.String}
    if not Path(path).exists():
        return pl.DataFrame(schema=schema)
    db = _db(path)
    if not db["rejected"].exists():
        return pl.DataFrame(schema=schema)
    return pl.DataFrame(list(db["rejected"].rows_where(order_by="added_utc")), infer_schema_length=None).select(*schema)


def history(path: Path, shape: str, impl: str, vs: str, l2: str = "cold") -> pl.DataFrame:
    """Per session, oldest first: ``impl`` and ``vs`` kernel medians at ``shape`` and their ratio."""
    df = stats(path).filter((pl.col("shape") == shape) & (pl.col("l2") == l2) & pl.col("impl").is_in([impl, vs]))
    wide = df.pivot(on="impl", index=["session_id", "created_utc", "gpu", "git_commit", "quiet"], values="kernel_median_ns")
    for name in (impl, vs):
        if name not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Float64).alias(name))
    return (
        wide.select(
            "session_id", "created_utc", "gpu", "git_commit", "quiet", pl.col(impl).alias("impl_ns"), pl.col(vs).alias("vs_ns")
        )
        .with_columns(ratio=pl.col("impl_ns") / pl.col("vs_ns"))
        .sort("created_utc")
    )
