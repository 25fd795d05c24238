"""``nsys-tools compare BASE NEW``: any two captures, call for call.

Each side is a sweep folder (``capture sweep`` or ``capture run``), an export, or a folder of
exports. Calls are matched per (op, impl, shape, l2) where the ranges follow the NVTX convention
(``convention.RANGE``), else per (range, kernel). For each match: the ratio of medians NEW/BASE
with a 95% interval from a hierarchical bootstrap (``metrics.ratio_ci``): rounds (or, for
exports without rounds, files) are resampled, then calls within them. Two captures are two
sessions, and a session moves every median a little; that variance cannot be seen from one
capture per side, so it is added from the ledger's replicated quiet sessions
(``ledger.session_noise``), from two captures of one build (``noise_from``), or as given. The
verdict: faster, slower, or not distinguishable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ..convention import RANGE_REGEX
from ..errors import BadExport
from ..files import shown
from ..views import stats as metrics
from .folder import KEYS, is_sweep, timed_calls

EXPORT_KEYS = ["range", "kernel"]
OP_KEYS = ["op", "kernel"]


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
    from .folder import load

    s = load(path)
    calls = s.calls.select(*KEYS, cluster=pl.col("round").cast(pl.String), duration_ns="duration_ns")
    m = s.manifest
    meta = {
        "gpu": s.gpu,
        "driver": m.gpu_before.driver_version or "",
        "nsys": _short_nsys(m.nsys_version),
        "commit": ", ".join(
            f"{c[:10]} ({len(units)} of {len(s.units)} units)" if len(s.commits) > 1 else c[:10] for c, units in s.commits.items()
        )
        or (m.git_commit or "")[:10],
        "output policy": s.outputs,
    }
    return Capture(path, calls, KEYS, "round", meta, [s.id])


def _open_exports(
    path: Path,
    nsys=None,
    names: str = "short",
    by: tuple[str, ...] = (),
    reexport: bool = False,
    skipped: list | None = None,
) -> Capture:
    from ..errors import NsysToolsError
    from ..read import frames as events
    from ..read.export import open_export, reading
    from ..read.inputs import expand_inputs
    from ..run.report import named_ops
    from ..views import by_columns

    files = expand_inputs([path], skipped, reexport=reexport)
    by_cols = by_columns(by)
    frames, read = [], []
    for f in files:  # one rule for a bad file in a folder: skipped and counted (skipped given), else an error
        try:
            frames.append(named_ops(f, nsys=nsys, names=names, by=by_cols, reexport=reexport).with_columns(file=pl.lit(shown(f))))
            read.append(f)
        except NsysToolsError as err:
            if skipped is None or len(files) == 1:
                raise
            skipped.append((f, err.problem))
    if not frames:
        raise BadExport(path, "holds no export that could be read", "see the warnings above")
    files = read
    rows = pl.concat(frames)
    ranged = rows.filter(pl.col("range") != "")
    with reading(files[0]):
        first = open_export(files[0], nsys, reexport=reexport)
        gpus = events.gpus(first)
        info = events.session(first)
    meta = {
        "gpu": ", ".join(sorted(set(gpus["gpu_name"].drop_nulls()))) if gpus.height else "",
        "driver": str(info.get("driver") or ""),
        "nsys": str(info.get("nsys_version") or ""),
    }
    several = len(files) > 1
    if names != "op" and not by_cols and ranged.height and ranged["range"].str.contains(RANGE_REGEX).all():
        calls = timed_calls(ranged, by=["file"]).with_columns(
            cluster=(pl.col("file") + "/" if several else pl.lit("")) + pl.col("round").cast(pl.String)
        )
        return Capture(path, calls.select(*KEYS, "cluster", "duration_ns"), KEYS, "round", meta)
    # As in the report, kernels outside every range are compared under an empty range, not dropped.
    calls = rows.with_columns(pl.col(by_cols).cast(pl.String), cluster=pl.col("file") if several else pl.lit(""))
    if names == "op":  # rows are (op, kernel): the range names without PyTorch's per-call ids
        calls = calls.rename({"range": "op"})
    keys = [*by_cols, *(OP_KEYS if names == "op" else EXPORT_KEYS)]
    return Capture(path, calls.select(*keys, "cluster", "duration_ns"), keys, "file" if several else "", meta)


def open_capture(
    path: str | Path,
    nsys=None,
    skipped: list | None = None,
    *,
    names: str = "short",
    by: tuple[str, ...] = (),
    reexport: bool = False,
) -> Capture:
    """A sweep folder, an export, or a folder of exports, as one side of a comparison; exports'
    rows by (range, kernel) or, with ``names="op"``, by (op, kernel) (``read.names.op_name``),
    led by the ``by`` columns (device, process, stream); ``reexport``: as
    ``inputs.expand_inputs`` takes it. With a ``skipped`` list, bad entries of a folder
    (unreadable, damaged) are recorded there as ``(path, why)`` and left out; without it they
    are errors."""
    p = Path(path)
    if not p.exists():
        raise BadExport(p, "no such file or folder", "give a sweep folder, an export or a folder of exports")
    return _open_sweep(p) if is_sweep(p) else _open_exports(p, nsys, names, by, reexport, skipped)


def matched_share(base: Capture, new: Capture) -> tuple[float, float]:
    """The share (0 to 1) of each side's kernel time in rows the other side also has."""
    keys = base.keys
    both = base.calls.select(keys).unique().join(new.calls.select(keys).unique(), on=keys, nulls_equal=True)

    def share(c: Capture) -> float:
        total = c.calls["duration_ns"].sum()
        kept = c.calls.join(both, on=keys, nulls_equal=True)["duration_ns"].sum()
        return float(kept / total) if total else 0.0

    return share(base), share(new)


def carries_ids(c: Capture) -> float:
    """The share (0 to 1) of ``c``'s kernel time in rows whose range name carries per-call ids
    (PyTorch's ``seq``, ``op_id``, ``sizes``: ``read.names.op_name`` changes it)."""
    from ..read.names import op_name

    if "range" not in c.calls.columns:
        return 0.0
    total = c.calls["duration_ns"].sum()
    named = c.calls.filter(op_name(pl.col("range")) != pl.col("range"))["duration_ns"].sum()
    return float(named / total) if total else 0.0


def differences(base: Capture, new: Capture) -> list[str]:
    """What differs between the two captures' machines and settings, in words."""
    out = []
    for key in ("gpu", "driver", "nsys", "output policy"):
        a, b = base.meta.get(key, ""), new.meta.get(key, "")
        if a and b and a != b:
            out.append(f"{'GPU' if key == 'gpu' else key}: {a} (base) against {b} (new)")
    return out


def between_sessions(
    base: Capture,
    new: Capture,
    percent: float | None,
    ledger: Path | None,
    near: Path | None = None,
    calibration: tuple[Capture, Capture] | None = None,
) -> tuple[float, str, int]:
    """The variance two sessions add to a ratio, as a standard deviation of log time, where it
    comes from, and its degrees of freedom (0 where given): one session's standard deviation
    (``percent`` as given; else measured on two captures of one build, ``calibration``, as
    ``noise_from`` does; else the ledger's pooled replicated quiet sessions on ``new``'s GPU,
    ``ledger`` or the default one near ``near``) times sqrt(2), as base and new each vary by it
    independently."""
    if percent is not None:
        sd, source, dof = percent / 100, "as given", 0
    elif calibration is not None:
        first, second = calibration
        sd, dof = noise_from(first, second)
        source = f"from {first.path.name} against {second.path.name}, {dof} rows, upper 95% bound"
    else:
        from .ledger import default_path, session_noise

        path = ledger or default_path(near)
        sd, dof = session_noise(path, new.meta.get("gpu", ""), exclude=[*base.ids, *new.ids])
        source = f"pooled over {dof} degrees of freedom of replicated quiet sessions in {path}, upper 95% bound"
    return math.sqrt(2) * sd, source, dof


MIN_CALLS = 3  # fewer calls on a side: "too few calls to tell"
SPREAD = ("p10_ns", "p90_ns")  # the per-call distribution beside each median
MODE_GAP = 4.0  # a gap of this factor between consecutive call times splits them into modes
MODE_SHARE = 0.05  # each mode holds at least this share of the calls (and at least MIN_CALLS)


def modes(values: Sequence[int]) -> list[float]:
    """Where the calls of one row split into modes: the thresholds (geometric means across each
    gap of at least ``MODE_GAP`` times between consecutive call durations, sorted), each mode
    holding at least ``MODE_SHARE`` of the calls and ``MIN_CALLS``; [] for one mode."""
    xs = sorted(v for v in values if v > 0)
    least = max(MIN_CALLS, math.ceil(MODE_SHARE * len(xs)))
    cuts, last = [], 0
    for i in range(least, len(xs) - least + 1):
        if i - last >= least and xs[i] >= MODE_GAP * xs[i - 1]:
            cuts.append(math.sqrt(xs[i] * xs[i - 1]))
            last = i
    return cuts


def compare(
    base: Capture,
    new: Capture,
    *,
    session_sd: float = 0.0,
    level: float = 0.95,
    seed: int = 0,
    units: tuple[float, float] | None = None,
) -> pl.DataFrame:
    """One row per key on either side (per mode, where one side's calls split into modes: the
    base's, else the new's, split both sides): medians, p10 and p90 of the calls,
    calls, total per unit (``units``: how many units of work, steps or seconds, each side
    ran), ratio NEW/BASE of medians with its interval, and verdict. With ``units``, the rows
    whose total per unit moved most come first; else in the base's order."""
    if base.keys != new.keys:
        raise BadExport(
            new.path, "holds ranges of another kind than the base", "compare sweeps with sweeps, or exports with exports"
        )
    keys = base.keys
    a = dict(base.calls.partition_by(keys, as_dict=True).items())
    b = dict(new.calls.partition_by(keys, as_dict=True).items())
    rows = []
    for key in [*a, *(k for k in b if k not in a)]:
        ga, gb = a.get(key), b.get(key)
        # Modes are a side's own (a kernel that runs long on some calls and short on others);
        # a whole side moving (a slower kernel) is not a mode. The base's modes, else the new's.
        cuts = next((c for c in (modes(g["duration_ns"]) for g in (ga, gb) if g is not None) if c), [])
        for k, (ma, mb) in enumerate(zip(_split(ga, cuts), _split(gb, cuts), strict=True), 1):
            mode = f"{k} of {len(cuts) + 1}" if cuts else None
            rows.append(_row(dict(zip(keys, key, strict=True)), mode, ma, mb, units, session_sd, level, seed))
    schema = {k: pl.String for k in keys} | {"mode": pl.String}
    schema |= {"base_median_ns": pl.Float64, "new_median_ns": pl.Float64, "base_calls": pl.Int64, "new_calls": pl.Int64}
    schema |= {f"{side}_{k}": pl.Float64 for side in ("base", "new") for k in SPREAD}
    schema |= {"base_per_unit_ns": pl.Float64, "new_per_unit_ns": pl.Float64}
    schema |= {"clusters": pl.String, "ratio": pl.Float64, "ci_lo": pl.Float64, "ci_hi": pl.Float64, "verdict": pl.String}
    table = pl.DataFrame(rows, schema=schema).select(*schema)
    if units:  # runs: the rows that moved the time per unit most come first
        moved = (pl.col("new_per_unit_ns").fill_null(0) - pl.col("base_per_unit_ns").fill_null(0)).abs()
        table = table.sort(moved, descending=True, maintain_order=True)
    return table


def _split(g: pl.DataFrame | None, cuts: list[float]) -> list[pl.DataFrame | None]:
    """``g``'s calls in each mode (None for a mode, or a side, without calls)."""
    if not cuts:
        return [g]
    bounds = [0.0, *cuts, math.inf]
    if g is None:
        return [None] * len(bounds[1:])
    parts = [
        g.filter((pl.col("duration_ns") >= lo) & (pl.col("duration_ns") < hi))
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    return [p if p.height else None for p in parts]


def _spread(side: str, g: pl.DataFrame | None) -> dict:
    """The per-call distribution of one side: p10 and p90 (as ``views.stats.distribution``)."""
    d = None if g is None else g.select(**{k: v for k, v in metrics.distribution("duration_ns").items() if k in SPREAD}).row(0)
    return {f"{side}_{k}": None if d is None else float(v) for k, v in zip(SPREAD, d or (None, None), strict=True)}


def _row(row: dict, mode, ga, gb, units, session_sd: float, level: float, seed: int) -> dict:
    """One row of the comparison: ``ga``/``gb``, the calls of each side (None: none)."""
    row |= {
        "mode": mode,
        "base_median_ns": None if ga is None else metrics.median(ga["duration_ns"]),
        "new_median_ns": None if gb is None else metrics.median(gb["duration_ns"]),
        "base_calls": 0 if ga is None else ga.height,
        "new_calls": 0 if gb is None else gb.height,
        **_spread("base", ga),
        **_spread("new", gb),
        "base_per_unit_ns": None if ga is None or not units else float(ga["duration_ns"].sum()) / units[0],
        "new_per_unit_ns": None if gb is None or not units else float(gb["duration_ns"].sum()) / units[1],
        "clusters": f"{_count(ga)}/{_count(gb)}",
    }
    none = {"ratio": None, "ci_lo": None, "ci_hi": None}
    if ga is None or gb is None:
        return row | none | {"verdict": "only in " + ("new" if ga is None else "base")}
    if min(ga.height, gb.height) < MIN_CALLS:
        return row | none | {"verdict": "too few calls to tell"}
    r, lo, hi = metrics.ratio_ci(
        gb["duration_ns"], ga["duration_ns"], gb["cluster"], ga["cluster"], session_sd=session_sd, level=level, seed=seed
    )
    return row | {"ratio": r, "ci_lo": lo, "ci_hi": hi, "verdict": metrics.verdict(lo, hi)}


def noise_from(first: Capture, second: Capture, level: float = 0.95) -> tuple[float, int]:
    """The variance between sessions from two captures of one build, as ``ledger.session_noise``
    gives it from replicated sweeps: per row both hold, the log ratio of their medians is the
    difference of two sessions (mean 0: same build), so the per-session standard deviation is
    ``sqrt(sum(d**2) / (2 n))`` over the n rows, taken at the upper end of its ``level``
    confidence interval. The within-session spread of each median is in it too, which errs on
    the side of "not distinguishable". Returns (sd, degrees of freedom); (0.0, 0) when no row
    is on both sides."""
    from .ledger import upper_sd

    if first.keys != second.keys:
        raise BadExport(
            second.path, "holds ranges of another kind than the first", "give two captures of one build, of the same kind"
        )

    def medians(c: Capture) -> pl.DataFrame:
        return c.calls.group_by(c.keys).agg(m=pl.col("duration_ns").median())

    both = medians(first).join(medians(second), on=first.keys, nulls_equal=True)
    both = both.filter((pl.col("m") > 0) & (pl.col("m_right") > 0))
    if both.height == 0:
        return 0.0, 0
    ss = float(both.select(((pl.col("m_right") / pl.col("m")).log() ** 2).sum()).item()) / 2
    return upper_sd(ss, both.height, level), both.height


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
        else "; no variance between sessions added (no replicated sessions in the ledger, no --session-noise or "
        "--noise-from): "
        "two sessions of one build may differ by more than this interval"
    )
    return f"Ratio NEW/BASE of median kernel times with a 95% interval from a hierarchical bootstrap: {clusters}{noise}."


def markdown(base: Capture, new: Capture, table: pl.DataFrame, method_text: str, unit: str | None = None) -> str:
    from ..render.tables import escape, grid, shorten, us

    def side(c: Capture) -> str:
        facts = ", ".join(f"{k} {v}" for k, v in c.meta.items() if v)
        return f"`{escape(shown(c.path))}`" + (f" ({escape(facts)})" if facts else "")

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
    if base.keys == new.keys and base.keys != KEYS:
        a, b = matched_share(base, new)
        lines.append(f"Rows on both sides hold {100 * a:.1f}% of the base's kernel time and {100 * b:.1f}% of the new's.\n")
    keys = [c for c in table.columns if c in (*KEYS, *base.keys)]
    moded = table["mode"].is_not_null().any()
    per = f"per {unit} (µs)" if unit and table["base_per_unit_ns"].is_not_null().any() else None
    head = [
        *keys,
        *(["mode"] if moded else []),
        "calls",
        "base µs",
        "new µs",
        *([per] if per else []),
        "new/base (95%)",
        "verdict",
    ]
    body = []
    for r in table.iter_rows(named=True):
        ratio = "–" if r["ratio"] is None else f"{r['ratio']:.3f} ({r['ci_lo']:.3f}–{r['ci_hi']:.3f})"
        named = [escape(shorten(str(r[k]))) if r[k] != "" else "(none)" for k in keys]
        cells = [*named, *([r["mode"] or ""] if moded else []), f"{r['base_calls']}/{r['new_calls']}"]
        cells += [us(r["base_median_ns"]), us(r["new_median_ns"])]
        cells += [f"{us(r['base_per_unit_ns'])} → {us(r['new_per_unit_ns'])}"] if per else []
        verdict = "**" + r["verdict"] + "**" if r["verdict"] in ("faster", "slower") else r["verdict"]
        body.append([*cells, ratio, verdict])
    right = [False] * (len(keys) + moded) + [True] * (len(head) - len(keys) - moded - 1) + [False]
    lines.append(grid(head, body, right))
    return "\n".join(lines)
