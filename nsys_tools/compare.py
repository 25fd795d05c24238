"""``nsys-tools compare BASE NEW``: any two captures, call for call.

Each side is a sweep folder (``capture sweep`` or ``capture run``), an export, or a folder of
exports. Calls are matched per (op, impl, shape, l2) where the ranges follow the NVTX convention
(``convention.RANGE``), else per (range, kernel). For each match: the ratio of medians NEW/BASE
with a 95% interval from a hierarchical bootstrap (``metrics.ratio_ci``): rounds (or, for
exports without rounds, files) are resampled, then calls within them. Two captures are two
sessions, and a session moves every median a little; that variance cannot be seen from one
capture per side, so it is added from the ledger's replicated quiet sessions
(``ledger.session_noise``), or as given. The verdict: faster, slower, or not distinguishable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from . import metrics
from .convention import RANGE_REGEX
from .errors import BadExport
from .sweep import KEYS, into_calls, is_sweep, parse_ranges

EXPORT_KEYS = ["range", "kernel"]


@dataclass
class Capture:
    """One side: its calls (``keys``, ``cluster``, ``duration_ns``) and what it ran on."""

    path: Path
    calls: pl.DataFrame
    keys: list[str]
    clusters: str  # what a cluster is: "round", "file" or "" (one)
    meta: dict[str, str] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)  # ledger session ids, for sweeps


def _short_nsys(version: str | None) -> str:
    return (version or "").replace("NVIDIA Nsight Systems version ", "").strip()


def _open_sweep(path: Path) -> Capture:
    from .sweep import load

    s = load(path)
    calls = s.calls.select(*KEYS, cluster=pl.col("round").cast(pl.String), duration_ns="duration_ns")
    m = s.manifest
    meta = {
        "gpu": s.gpu,
        "driver": m.get("gpu_before", {}).get("driver_version") or "",
        "nsys": _short_nsys(m.get("nsys", {}).get("version")),
        "commit": ", ".join(
            f"{c[:10]} ({len(units)} of {len(s.units)} units)" if len(s.commits) > 1 else c[:10] for c, units in s.commits.items()
        )
        or (m.get("git", {}).get("commit") or "")[:10],
        "output policy": s.outputs,
    }
    return Capture(path, calls, KEYS, "round", meta, [s.id])


def _open_exports(path: Path, nsys=None) -> Capture:
    from . import events
    from .export import open_export, reading
    from .inputs import expand_inputs
    from .report import named_ops

    files = expand_inputs([path])
    frames = [named_ops(f, nsys=nsys).with_columns(file=pl.lit(str(f))) for f in files]
    rows = pl.concat(frames)
    ranged = rows.filter(pl.col("range") != "")
    with reading(files[0]):
        first = open_export(files[0], nsys)
        gpus = events.gpus(first)
        info = events.session(first)
    meta = {
        "gpu": ", ".join(sorted(set(gpus["gpu_name"].drop_nulls()))) if gpus.height else "",
        "driver": str(info.get("driver") or ""),
        "nsys": str(info.get("nsys_version") or ""),
    }
    several = len(files) > 1
    if ranged.height and ranged["range"].str.contains(RANGE_REGEX).all():
        calls = into_calls(ranged.pipe(parse_ranges), by=["file"]).with_columns(
            cluster=(pl.col("file") + "/" if several else pl.lit("")) + pl.col("round").cast(pl.String)
        )
        return Capture(path, calls.select(*KEYS, "cluster", "duration_ns"), KEYS, "round", meta)
    # As in the report, kernels outside every range are compared under an empty range, not dropped.
    calls = rows.with_columns(cluster=pl.col("file") if several else pl.lit(""))
    return Capture(path, calls.select(*EXPORT_KEYS, "cluster", "duration_ns"), EXPORT_KEYS, "file" if several else "", meta)


def open_capture(path: str | Path, nsys=None) -> Capture:
    """A sweep folder, an export, or a folder of exports, as one side of a comparison."""
    p = Path(path)
    if not p.exists():
        raise BadExport(p, "no such file or folder", "give a sweep folder, an export or a folder of exports")
    return _open_sweep(p) if is_sweep(p) else _open_exports(p, nsys)


def differences(base: Capture, new: Capture) -> list[str]:
    """What differs between the two captures' machines and settings, in words."""
    out = []
    for key in ("gpu", "driver", "nsys", "output policy"):
        a, b = base.meta.get(key, ""), new.meta.get(key, "")
        if a and b and a != b:
            out.append(f"{'GPU' if key == 'gpu' else key}: {a} (base) against {b} (new)")
    return out


def compare(base: Capture, new: Capture, *, session_sd: float = 0.0, level: float = 0.95, seed: int = 0) -> pl.DataFrame:
    """One row per key on either side: medians, ratio NEW/BASE, interval and verdict."""
    if base.keys != new.keys:
        raise BadExport(
            new.path, "holds ranges of another kind than the base", "compare sweeps with sweeps, or exports with exports"
        )
    keys = base.keys
    a = {k: g for k, g in base.calls.partition_by(keys, as_dict=True).items()}
    b = {k: g for k, g in new.calls.partition_by(keys, as_dict=True).items()}
    rows = []
    for key in [*a, *(k for k in b if k not in a)]:
        ga, gb = a.get(key), b.get(key)
        row = dict(zip(keys, key, strict=True))
        row |= {
            "base_median_ns": None if ga is None else float(ga["duration_ns"].median()),
            "new_median_ns": None if gb is None else float(gb["duration_ns"].median()),
            "base_calls": 0 if ga is None else ga.height,
            "new_calls": 0 if gb is None else gb.height,
            "clusters": f"{_count(ga)}/{_count(gb)}",
        }
        if ga is None or gb is None:
            rows.append(
                row | {"ratio": None, "ci_lo": None, "ci_hi": None, "verdict": "only in " + ("new" if ga is None else "base")}
            )
            continue
        r, lo, hi = metrics.ratio_ci(
            gb["duration_ns"], ga["duration_ns"], gb["cluster"], ga["cluster"], session_sd=session_sd, level=level, seed=seed
        )
        rows.append(row | {"ratio": r, "ci_lo": lo, "ci_hi": hi, "verdict": metrics.verdict(lo, hi)})
    schema = {k: pl.String for k in keys}
    schema |= {"base_median_ns": pl.Float64, "new_median_ns": pl.Float64, "base_calls": pl.Int64, "new_calls": pl.Int64}
    schema |= {"clusters": pl.String, "ratio": pl.Float64, "ci_lo": pl.Float64, "ci_hi": pl.Float64, "verdict": pl.String}
    return pl.DataFrame(rows, schema=schema).select(*schema)


def _count(g: pl.DataFrame | None) -> int:
    return 0 if g is None else g["cluster"].n_unique()


def regressions(table: pl.DataFrame, pct: float) -> pl.DataFrame:
    """Rows that are ``slower`` by at least ``pct`` percent (point estimate)."""
    return table.filter((pl.col("verdict") == "slower") & (pl.col("ratio") >= 1 + pct / 100))


def method(base: Capture, new: Capture, session_sd: float, noise_source: str) -> str:
    """One paragraph saying how the intervals were made."""
    units = {"round": "rounds", "file": "exports"}
    what = sorted({units.get(c.clusters, "") for c in (base, new)} - {""})
    clusters = (
        f"{' and '.join(what)} resampled, then calls within each"
        if what
        else "calls resampled (one capture per side, no rounds: the variance between ranges is not in it)"
    )
    noise = (
        f"; variance between sessions added: {100 * session_sd / math.sqrt(2):.2f}% per session ({noise_source})"
        if session_sd > 0
        else "; no variance between sessions added (no replicated sessions in the ledger, no --session-noise): "
        "two sessions of one build may differ by more than this interval"
    )
    return f"Ratio NEW/BASE of median kernel times with a 95% interval from a hierarchical bootstrap: {clusters}{noise}."


def markdown(base: Capture, new: Capture, table: pl.DataFrame, method_text: str) -> str:
    from .tables import escape, shorten

    def side(c: Capture) -> str:
        facts = ", ".join(f"{k} {v}" for k, v in c.meta.items() if v)
        return f"`{escape(str(c.path))}`" + (f" ({escape(facts)})" if facts else "")

    lines = [f"**Base:** {side(base)}  \n**New:** {side(new)}\n"]
    diff = differences(base, new)
    if diff:
        lines.append(
            "**The two captures differ:** " + "; ".join(escape(d) for d in diff) + ". Ratios across them mix that "
            "difference with the code's.\n"
        )
    counts = table["verdict"].value_counts(sort=True)
    tally = ", ".join(f"{n} {v}" for v, n in counts.iter_rows())
    lines.append(f"{method_text} Rows: {tally or 'none'}.\n")
    keys = [c for c in table.columns if c in (*KEYS, *EXPORT_KEYS)]
    head = [*keys, "base µs", "new µs", "new/base (95%)", "verdict"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(keys) + "---:|---:|---:|---|"]
    us = lambda v: "–" if v is None else f"{v / 1000:,.2f}"  # noqa: E731
    for r in table.iter_rows(named=True):
        ratio = "–" if r["ratio"] is None else f"{r['ratio']:.3f} ({r['ci_lo']:.3f}–{r['ci_hi']:.3f})"
        named = [escape(shorten(str(r[k]))) if r[k] != "" else "(none)" for k in keys]
        cells = [*named, us(r["base_median_ns"]), us(r["new_median_ns"]), ratio]
        lines.append(
            "| "
            + " | ".join([*cells, "**" + r["verdict"] + "**" if r["verdict"] in ("faster", "slower") else r["verdict"]])
            + " |"
        )
    return "\n".join(lines) + "\n"
