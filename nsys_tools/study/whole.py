"""Whole runs side by side: did the run get faster, and where did the time go?

Each side is one run (its exports). Per device, and in total, the run figures in integer ns, as
``utilization`` and ``idle`` define them: ``span_ns`` (first operation to last), ``busy_ns`` (the
union of its kernels, copies and sets), ``compute_ns``, ``nccl_exposed_ns`` (what NCCL kernels add
to compute), ``memory_ns`` (what copies and sets add to both), ``idle_ns`` and its causes
(``idle_host_ns``, ``idle_sync_ns``, ``idle_memory_ns``, ``idle_other_ns``). Devices are matched by
GPU id, led by the export where one id is in several exports of a run (``run.report.view_table``).

The unit of work: the steady steps of ``views.steps`` when both sides have steps (or, with
``per``, the instances of that NVTX range, found the same way); each side's step time is the
median of its steady steps with a 95% interval (order statistics), and the figures per unit are
the steps' own figures summed over the steady steps and divided by their count. Without steps
on either side, figures are compared per second of each device's span: the captures are of
different lengths. One sentence says it: "NEW is 12% slower per step: +8.3 ms NCCL exposed, +47 ms
host idle; kernel time unchanged".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

FIGURES = (
    "span_ns",
    "busy_ns",
    "compute_ns",
    "nccl_exposed_ns",
    "memory_ns",
    "idle_ns",
    "idle_host_ns",
    "idle_sync_ns",
    "idle_memory_ns",
    "idle_other_ns",
)
PER_UNIT = FIGURES[1:]  # the span is the unit's own length
CAUSES = ("host", "sync", "memory", "other")
WORDS = {
    "compute_ns": "kernel time",
    "nccl_exposed_ns": "NCCL exposed",
    "memory_ns": "copies and sets",
    "idle_host_ns": "host idle",
    "idle_sync_ns": "sync idle",
    "idle_memory_ns": "memory idle",
    "idle_other_ns": "other idle",
}
SAME = 0.02  # a change under 2% of the base is "unchanged"


@dataclass
class Side:
    """One run: its figures per device (``device`` key first) and its steady steps."""

    files: list[Path]
    devices: pl.DataFrame
    steps: pl.DataFrame  # device, duration_ns and the per-unit figures of each steady step
    source: str  # where the steps came from ("" without)
    notes: list[str]
    counted: int = 0  # steps of the rank with the most, warm-up included


def device_key(frame: pl.DataFrame) -> pl.Expr:
    """``GPU <id>``, led by the export's file name where the table keeps exports apart."""
    gpu = pl.lit("GPU ") + pl.col("gpu_id").cast(pl.String)
    if "file" in frame.columns:
        return pl.col("file").map_elements(lambda f: Path(f).name, return_dtype=pl.String) + " " + gpu
    return gpu


def figures(
    files: Sequence[Path], *, nsys=None, reexport: bool = False, engine=None, notes: list[str] | None = None
) -> pl.DataFrame:
    """One row per device of the run in ``files``: ``device``, ``gpu_id``, ``gpu_name`` and FIGURES."""
    from ..run.report import view_table

    read = {"nsys": nsys, "reexport": reexport, "engine": engine}
    util = view_table(files, "utilization", by=["device"], notes=notes, **read)
    idle = view_table(files, "idle", by=["device"], **read)
    keys = [c for c in ("file", "gpu_id") if c in util.columns]
    causes = [pl.col("total_ns").filter(pl.col("cause") == c).sum().cast(pl.Int64).alias(f"idle_{c}_ns") for c in CAUSES]
    by_cause = idle.group_by(keys).agg(causes) if idle.height else None
    if by_cause is not None:
        util = util.join(by_cause, on=keys, how="left", nulls_equal=True)
    table = util.rename({"communication_ns": "nccl_exposed_ns"}).with_columns(device=device_key(util))
    ints = [pl.col(c).cast(pl.Int64) if c in table.columns else pl.lit(0, pl.Int64).alias(c) for c in FIGURES]
    return table.select("device", "gpu_id", "gpu_name", *ints).with_columns(pl.col(f"idle_{c}_ns").fill_null(0) for c in CAUSES)


def steady_steps(
    files: Sequence[Path], *, per: str | None = None, nsys=None, reexport: bool = False, engine=None
) -> tuple[pl.DataFrame, str, int]:
    """The run's steady steps (``views.steps``; with ``per``, the instances of that NVTX range):
    ``device``, ``duration_ns`` and PER_UNIT, one row per rank, device and step; where the
    steps came from ("" where there are none); and how many steps the rank with the most ran."""
    from ..run.report import view_table

    options = {"step": per} if per else {}
    steps = view_table(files, "steps", per_file=len(files) > 1, nsys=nsys, reexport=reexport, engine=engine, **options)
    empty = pl.DataFrame(schema={"device": pl.String, "duration_ns": pl.Int64, **dict.fromkeys(PER_UNIT, pl.Int64)})
    if steps.is_empty() or "phase" not in steps.columns:
        return empty, "", 0
    if "file" in steps.columns and steps.select("file", "gpu_id").unique().group_by("gpu_id").len()["len"].max() < 2:
        steps = steps.drop("file")  # each GPU id in one export: devices named by id alone, as the figures name them
    steady = steps.filter(pl.col("phase") == "steady")
    source = str(steps["source"].drop_nulls().first() or "")
    counted = int(steps["step"].max() or 0)
    return steady.select(device_key(steady).alias("device"), "duration_ns", *PER_UNIT), source, counted


def side(files: Sequence[Path], *, per: str | None = None, nsys=None, reexport: bool = False, engine=None) -> Side:
    notes: list[str] = []
    devices = figures(files, nsys=nsys, reexport=reexport, engine=engine, notes=notes)
    steps, source, counted = steady_steps(files, per=per, nsys=nsys, reexport=reexport, engine=engine)
    return Side(list(files), devices, steps, source, notes, counted)


def median_interval(values: Sequence[int], level: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """The median of ``values`` and a distribution-free ``level`` interval for it: the order
    statistics ``x(j)``, ``x(n-j+1)`` with the largest j whose binomial coverage is at least
    ``level`` (None ends with fewer than 6 values: no such interval exists)."""
    xs = sorted(values)
    n = len(xs)
    if not n:
        return None, None, None
    mid = (xs[(n - 1) // 2] + xs[n // 2]) / 2
    best = None
    for j in range(1, n // 2 + 1):  # coverage of [x(j), x(n-j+1)]: P(j <= B(n, 1/2) <= n - j)
        coverage = sum(math.comb(n, k) for k in range(j, n - j + 1)) / 2**n
        if coverage >= level:
            best = j
    if best is None:
        return mid, None, None
    return mid, float(xs[best - 1]), float(xs[n - best])


@dataclass
class RunComparison:
    """The run figures of two runs: ``unit`` ("step", "instance of RANGE" or "second"), per
    device ``{"device", "gpu_id", "gpu_name", "base", "new"}`` (a side's dict None where the
    device is not in it), the ``total``, and the sentence."""

    unit: str
    devices: list[dict]
    total: dict
    sentence: str
    source: str

    def json(self) -> dict:
        """The run figures as ``compare --format json`` writes them under ``run``; ``throughput``:
        units of work per second of each side's median unit (null per second of span)."""

        def rate(side: dict | None) -> float | None:
            median = (side or {}).get("step_median_ns")
            return 1e9 / median if median and self.unit != "second" else None

        throughput = {label: rate(self.total.get(label)) for label in ("base", "new")}
        return {
            "unit": self.unit,
            "devices": self.devices,
            "total": self.total,
            "throughput": throughput,
            "sentence": self.sentence,
        }


def _figures(row: dict | None, steps: pl.DataFrame, unit: str) -> dict | None:
    """A device's (or the total's) dict: FIGURES, the steps and step time with its interval, and
    the figures per unit (``per_unit``), all integer ns."""
    if row is None:
        return None
    out = {f: int(row[f]) for f in FIGURES}
    med, lo, hi = median_interval(steps["duration_ns"].to_list())
    out |= {"steps": steps.height, "step_median_ns": _int(med), "step_lo_ns": _int(lo), "step_hi_ns": _int(hi)}
    if unit == "second":
        per = {f: round(out[f] * 1e9 / out["span_ns"]) if out["span_ns"] else None for f in PER_UNIT}
    else:
        per = {f: round(steps[f].sum() / steps.height) if steps.height else None for f in PER_UNIT}
    return out | {"per_unit": per}


def _int(x: float | None) -> int | None:
    return None if x is None else round(x)


def _total(devices: pl.DataFrame) -> dict | None:
    if devices.is_empty():
        return None
    return {f: int(devices[f].sum()) for f in FIGURES}


def compare_runs(base: Side, new: Side, *, per: str | None = None) -> RunComparison:
    """Side by side, device by device (matched by their ``device`` key), then in total."""
    if per:
        missing = [s for s in (base, new) if s.steps.is_empty()]
        if missing:
            from ..errors import UsageError

            where = missing[0].files[0] if len(missing[0].files) == 1 else missing[0].files[0].parent
            raise UsageError(where, f"holds no steady instance of an NVTX range matching {per!r}", "see `--view ranges`")
        unit = f"instance of {per}"
    else:
        unit = "step" if not base.steps.is_empty() and not new.steps.is_empty() else "second"
    if unit == "second":  # per second of each device's span: no steps to compare by
        base.steps, new.steps = base.steps.clear(), new.steps.clear()
    names = list(dict.fromkeys([*base.devices["device"], *new.devices["device"]]))
    devices = []
    for name in names:
        rows = [s.devices.filter(pl.col("device") == name) for s in (base, new)]
        first = next(r for r in rows if r.height).row(0, named=True)
        entry = {"device": name, "gpu_id": first["gpu_id"], "gpu_name": first["gpu_name"]}
        for label, s, r in (("base", base, rows[0]), ("new", new, rows[1])):
            entry[label] = _figures(r.row(0, named=True) if r.height else None, s.steps.filter(pl.col("device") == name), unit)
        devices.append(entry)
    total = {}
    for label, s in (("base", base), ("new", new)):
        t = _figures(_total(s.devices), s.steps, unit)
        if t is not None:  # per unit in total: the devices' per-unit figures added up
            t["per_unit"] = {f: sum((d[label] or {}).get("per_unit", {}).get(f) or 0 for d in devices) for f in PER_UNIT}
        total[label] = t
    return RunComparison(unit, devices, total, sentence(total, unit), base.source or new.source)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:+.3g} ms"


def sentence(total: dict, unit: str) -> str:
    """One line: how much slower or faster NEW is per unit, and the figures that moved most."""
    a, b = total.get("base"), total.get("new")
    if not a or not b:
        return "One side has no GPU work: nothing to compare."
    pa, pb = a["per_unit"], b["per_unit"]
    if unit == "second":
        scale = 1e9  # ns of each figure per second of span
        head = (
            f"The captures hold no steps to compare by and are of different lengths ({a['span_ns'] / 1e9:.3g} s and "
            f"{b['span_ns'] / 1e9:.3g} s of device time); per second of span, NEW's GPUs are busy "
            f"{100 * pb['busy_ns'] / scale:.1f}% against {100 * pa['busy_ns'] / scale:.1f}%"
        )
    else:
        scale = a["step_median_ns"] or 1
        change = b["step_median_ns"] / scale - 1
        per = "per step" if unit == "step" else f"per {unit}"
        same = abs(change) < 0.005
        head = (
            f"NEW takes the same time {per}"
            if same
            else f"NEW is {abs(change) * 100:.0f}% {'slower' if change > 0 else 'faster'} {per}"
        )
        head += f" ({a['step_median_ns'] / 1e6:.3g} → {b['step_median_ns'] / 1e6:.3g} ms" + (", within 0.5%" if same else "")
        bounds = (a["step_lo_ns"], a["step_hi_ns"], b["step_lo_ns"], b["step_hi_ns"])
        if None not in bounds and bounds[0] <= bounds[3] and bounds[2] <= bounds[1]:
            head += "; the 95% intervals overlap: not distinguishable"
        head += ")"
    moved = sorted(
        ((pb[f] - pa[f], f) for f in WORDS if f != "compute_ns" and abs(pb[f] - pa[f]) >= SAME * scale),
        key=lambda x: -abs(x[0]),
    )[:3]
    parts = [f"{_ms(d)} {WORDS[f]}" for d, f in moved]
    dk = pb["compute_ns"] - pa["compute_ns"]
    kernel = "kernel time unchanged" if abs(dk) < SAME * max(pa["compute_ns"], 1) else f"{_ms(dk)} kernel time"
    return f"{head}: {', '.join(parts) + '; ' if parts else ''}{kernel}."


def explained(run: RunComparison, rows: pl.DataFrame, keys: Sequence[str]) -> RunComparison:
    """``run`` with its sentence naming the row (``compare.compare``'s, per unit) that moved
    kernel time most, where kernel time moved and one row holds at least half of the move."""
    a, b = run.total.get("base"), run.total.get("new")
    if not a or not b or "per_unit" not in a or rows.is_empty():
        return run
    dk = b["per_unit"]["compute_ns"] - a["per_unit"]["compute_ns"]
    if abs(dk) < SAME * max(a["per_unit"]["compute_ns"], 1):
        return run
    moved = rows.with_columns(d=pl.col("new_per_unit_ns").fill_null(0) - pl.col("base_per_unit_ns").fill_null(0))
    top = moved.filter(pl.col("d") * dk > 0).sort(pl.col("d").abs(), descending=True, maintain_order=True).head(1)
    if top.is_empty() or abs(top["d"][0]) < 0.5 * abs(dk):
        return run
    from ..render.tables import shorten

    r = top.row(0, named=True)
    what = " / ".join(shorten(str(r[k])) for k in keys if r.get(k) not in (None, ""))
    how = f", {r['ratio']:.3g}x the base's median call" if r["ratio"] is not None else f", {r['verdict']}"
    per = "a second" if run.unit == "second" else f"a {run.unit}"
    clause = f", most of it {what} ({r['d'] / 1e3:+.3g} µs {per}{how})"
    sentence = run.sentence[:-1] + clause + "." if run.sentence.endswith(".") else run.sentence
    return RunComparison(run.unit, run.devices, run.total, sentence, run.source)


def markdown(run: RunComparison) -> str:
    """The run figures as a table: per device and in total, base, new and the change, per unit."""
    from ..render.tables import escape, grid

    per = "s" if run.unit == "second" else run.unit
    head = ["device", "", "step time (95%)" if run.unit != "second" else "span", *(_label(f) for f in PER_UNIT)]
    body = []
    for d in [*run.devices, {"device": "total", **run.total}]:
        a, b = d.get("base"), d.get("new")
        for label, x in (("base", a), ("new", b)):
            body.append([escape(d["device"]), label, _unit_time(x, run.unit), *(_cell(x, f) for f in PER_UNIT)])
        if a and b:
            body.append([escape(d["device"]), "change", _change(a, b, run.unit), *(_delta(a, b, f) for f in PER_UNIT)])
    source = f" Steps: {run.source}." if run.source and run.unit != "second" else ""
    table = grid(head, body, [False, False] + [True] * (len(head) - 2))
    return f"**Run figures** (ms per {per}; idle by cause).{source}\n\n{table}\n\n**{escape(run.sentence)}**\n"


def _label(f: str) -> str:
    return {"busy_ns": "busy", "idle_ns": "idle", **WORDS}[f]


def _cell(x: dict | None, f: str) -> str:
    v = None if x is None else x["per_unit"][f]
    return "–" if v is None else f"{v / 1e6:.3f}"


def _delta(a: dict, b: dict, f: str) -> str:
    va, vb = a["per_unit"][f], b["per_unit"][f]
    return "–" if va is None or vb is None else f"{(vb - va) / 1e6:+.3f}"


def _unit_time(x: dict | None, unit: str) -> str:
    if x is None:
        return "–"
    if unit == "second":
        return f"{x['span_ns'] / 1e9:.3f} s"
    if x["step_median_ns"] is None:
        return "–"
    band = f" ({x['step_lo_ns'] / 1e6:.3f}–{x['step_hi_ns'] / 1e6:.3f})" if x["step_lo_ns"] is not None else ""
    return f"{x['step_median_ns'] / 1e6:.3f} ms{band}, {x['steps']} steps"


def _change(a: dict, b: dict, unit: str) -> str:
    """The change in step time, and in throughput (steps per second)."""
    if unit == "second" or not a["step_median_ns"] or not b["step_median_ns"]:
        return "–"
    time = b["step_median_ns"] / a["step_median_ns"] - 1
    return f"{100 * time:+.1f}% time, {100 * (1 / (1 + time) - 1):+.1f}% throughput"


def open_run(path: Path, *, per: str | None = None, nsys=None, reexport: bool = False) -> Side | str | None:
    """One side of ``compare`` as a run: its ``Side``, or why it has no run figures (exports of
    several runs, or none readable); None for a sweep folder (compared round by round)."""
    from ..read.inputs import expand_inputs
    from ..read.sessions import runs
    from .folder import is_sweep

    if is_sweep(path):
        return None
    files = [
        f for f in expand_inputs([path], [], reexport=reexport) if _readable(f, nsys, reexport)
    ]  # the rows warned of the rest
    if not files:
        return f"{path.name} holds no export that could be read"
    groups = runs(files, nsys, reexport)
    if len(groups) > 1:
        return f"{path.name} holds {len(groups)} separate runs: no run figures (compare one run with one run)"
    return side(files, per=per, nsys=nsys, reexport=reexport)


def _readable(path: Path, nsys=None, reexport: bool = False) -> bool:
    from ..errors import NsysToolsError
    from ..read.export import open_export, reading

    try:
        with reading(path):
            open_export(path, nsys, reexport=reexport)
    except NsysToolsError:
        return False
    return True


def units(s: Side, unit: str) -> float:
    """How many units of work the side ran, for the kernels' totals per unit: its steps (the
    most of any rank, warm-up included), or the seconds of its devices' longest span."""
    if unit == "second":
        return max(s.devices["span_ns"].max() or 0, 1) / 1e9
    return float(max(s.counted, 1))
