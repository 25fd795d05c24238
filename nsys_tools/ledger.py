"""The ledger: every sweep's settings and statistics in one SQLite database (sqlite-utils).

Tables:
  sessions  one row per sweep: id, date, GPU, driver, nsys, commit, L2 mode, rounds x iters,
            control, and the contention verdict with its reasons;
  stats     one row per (session, op, impl, shape, l2): kernel-time and event-span statistics;
  rejected  variants measured and not kept: the variant, its metric, why.

Control bands come from the quiet sessions: for each (GPU, control, shape, L2), the min-max of
the control's per-session kernel median, widened by ``BAND_MARGIN`` on each side (two quiet
sessions of the same build differ by under 1%), under the same output policy (a control that
writes a reused buffer is faster than one that writes cold ones). A band needs
``BAND_MIN_SESSIONS`` sessions. Rows added before the policy was recorded count as ``rotate``
(``ledger add`` again records what each implementation had).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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
        "outputs": sweep.outputs,
        "kind": sweep.kind,
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
        db["sessions"].upsert(row, pk="id", alter=True)
        if db["stats"].exists():
            db["stats"].delete_where("session_id = ?", [sweep.id])
        db["stats"].insert_all(records, pk=("session_id", *KEYS), replace=True, alter=True)
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
    df = pl.DataFrame(rows.fetchall(), schema=cols, orient="row", infer_schema_length=None)
    if "outputs" not in df.columns:
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


def quiet_range(path: Path, gpu: str, impl: str, l2: str, exclude: str | None = None, outputs: str | None = None) -> pl.DataFrame:
    """Per shape: ``impl``'s kernel median over quiet sessions (where it ran under the output
    policy ``outputs``, when given): ``lo``, ``hi`` and ``sessions``."""
    if not Path(path).exists():
        return no_bands()
    df = stats(path).filter(
        (pl.col("gpu") == gpu)
        & (pl.col("impl") == impl)
        & (pl.col("l2") == l2)
        & (pl.col("quiet") == 1)
        & (pl.col("session_id") != (exclude or ""))
        & ((pl.col("outputs") == outputs) if outputs else pl.lit(True))
    )
    return df.group_by("shape").agg(lo=pl.col("kernel_median_ns").min(), hi=pl.col("kernel_median_ns").max(), sessions=pl.len())


def session_noise(path: Path, gpu: str, exclude: Sequence[str] = (), level: float = 0.95) -> tuple[float, int]:
    """How much one kernel's median moves between quiet sessions of the same build: the pooled
    standard deviation of log kernel medians within groups of the same (commit, impl, shape,
    L2, output policy) on ``gpu``, taken at the upper end of its ``level`` confidence interval
    (a CI gate should not fail on noise). Returns (sd, degrees of freedom); (0.0, 0) when the
    ledger holds no replicated session."""
    import math

    if not Path(path).exists():
        return 0.0, 0
    df = stats(path).filter((pl.col("gpu") == gpu) & (pl.col("quiet") == 1) & ~pl.col("session_id").is_in(list(exclude)))
    groups = [c for c in ("git_commit", "impl", "shape", "l2", "outputs") if c in df.columns]
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
    # The chi-square quantile by Wilson and Hilferty's cube-root approximation.
    z = _normal_quantile(1 - level)
    chi2 = dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3
    return math.sqrt(float(pooled["ss"][0]) / chi2), dof


def _normal_quantile(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def bands(path: Path, gpu: str, control: str, l2: str, exclude: str | None = None, outputs: str | None = None) -> pl.DataFrame:
    """Per shape: the control's band (``band_lo_ns``, ``band_hi_ns``) from quiet sessions."""
    return (
        quiet_range(path, gpu, control, l2, exclude, outputs)
        .filter(pl.col("sessions") >= BAND_MIN_SESSIONS)
        .with_columns(band_lo_ns=pl.col("lo") * (1 - BAND_MARGIN), band_hi_ns=pl.col("hi") * (1 + BAND_MARGIN))
        .select("shape", "band_lo_ns", "band_hi_ns", "sessions")
    )


def ratio_spread(path: Path, gpu: str, commit: str | None, control: str, l2: str, outputs: str | None = None) -> pl.DataFrame:
    """Per (shape, impl): the ratio of its kernel median to ``control``'s, same session each
    time, over the quiet sessions of one build (``commit``) on ``gpu``: ``lo``, ``hi`` and
    ``sessions``. ``outputs`` keeps the sessions where the control ran under that policy."""
    schema = {"shape": pl.String, "impl": pl.String, "lo": pl.Float64, "hi": pl.Float64, "sessions": pl.UInt32}
    if not commit or not Path(path).exists():
        return pl.DataFrame(schema=schema)
    df = stats(path).filter(
        (pl.col("gpu") == gpu) & (pl.col("git_commit") == commit) & (pl.col("l2") == l2) & (pl.col("quiet") == 1)
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


def latest_control(path: Path = DEFAULT_PATH) -> str:
    """The control the most recent session compared with."""
    df = sessions(path).drop_nulls("control")
    if df.is_empty():
        raise BadExport(path, "no session names a control", "pass --vs NAME")
    return df["control"][-1]


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
