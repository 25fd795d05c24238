"""Training steps: one row per rank (process), device and step, with where the step's time went.

**Steps.** With ``step`` (a glob), the NVTX ranges it matches. Without: the NVTX ranges that look
like steps (a name holding ``step`` in any case, PyTorch's ``ProfilerStep#N``, but not as a method
called in a step: ``Optimizer.step#AdamW.step``); failing that, the top-level range that repeats
most (names compared with their numbers blanked, at least 3 instances; of several that repeat as
often, the first to open; never a framework's range around one operator, ``FRAMEWORK_OPS``), each
step lasting until it opens again; failing that, a repeating kernel sequence (the shortest period of the kernel names
on the rank's busiest device, each period starting at a kernel that runs once in it). Of ranges
nested in one another, the outermost is the step (``step 3`` holds ``Optimizer.step``). Each
rank's steps are numbered from 1 in order of start: a rank's n-th step is its own. ``source``
names what was used. Step 0 (``phase`` ``setup``) is the time from the rank's first launch call,
GPU operation, blocking call or NVTX range to its first step. In a window (``--from/--to``, ``--within``, ``--skip-first``), the
steps that overlap it (each rank's own window where it has one), numbered as in the whole run,
without the setup row; idle before the window's first operation counts as ``idle_other_ns``.

**Figures** (ns), over the step's time ``[start_ns, start_ns + duration_ns)`` on the device, of
the operations the rank ran there: ``busy_ns`` (the union of its kernels, copies and sets),
``compute_ns`` (of its compute kernels), ``nccl_exposed_ns`` (what NCCL kernels add to compute),
``memory_ns`` (what copies and sets add to both), ``idle_ns`` (the rest), split by the cause of
each idle interval as ``idle`` finds it (``idle_host_ns``, ``idle_sync_ns``, ``idle_memory_ns``;
``idle_other_ns`` the rest, with the time before the device's first operation and after its
last); ``host_blocked_ns``, the time the rank's threads spent in blocking calls
(synchronizations, synchronous copies and sets), summed over threads. ``idle_host_longest_ns``:
the longest single interval of ``idle_host_ns`` (one long stall, or many short waits for the
next launch). ``skew_ns``: how much later
the step started than the earliest rank's step of that number, on the wall clock (exports of
separate ranks each count time from their own session's start).

**Phases.** ``warmup``: the leading steps that took more than ``warmup`` times (1.5) the rank's
median step; the rest are ``steady``; a steady step taking more than ``slow`` times (1.15) the
steady median is ``slow``. With ``flops_per_step`` (per rank), ``tflops`` is the achieved rate and
``mfu_pct`` its share of the GPU's peak (``peak_tflops``, or the dense BF16 datasheet peak of a known
GPU: ``PEAKS``); a GPU without a known peak is refused rather than guessed.

**Reading.** An export of any size is folded in slices of its operations in order of start time
(``chunked.py``), as ``idle`` and ``utilization`` are: the steps NVTX ranges mark, the blocking
calls and each rank's first range are side rows, found before the fold and given to it at its
start (``start``); each slice adds its union pieces and its idle intervals, clipped to each step,
to sums per step, device and figure (``window``), carrying the end of each union and the
operation holding each device busy, and ``close`` merges them. A rank's setup starts at its
first launch, operation, blocking call or range, known only at the end: every interval clipped
to it starts there or later, so its figures do not depend on it (``setups``). Steps from the
kernel sequence need the names of a device's kernels in order: an export with no step-like NVTX
ranges (and no ``step`` given) keeps every operation through the fold and is read whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from ..errors import UsageError
from ..read.step_ranges import from_ranges, numbered
from . import View
from . import utilization as U
from .contract import Fold, OptionError, option
from .gaps import holding
from .idle import BLOCKING_LIKE, CALL, Passed, blocking, slice_gaps

VIEW = View(
    "steps",
    "per rank, device and step: busy, compute, NCCL exposed, memory, idle by cause, phase",
    ordered=True,
    rows="rank, device and step: busy, compute, NCCL exposed, memory, idle by cause, phase, MFU",
)


@dataclass(frozen=True)
class Options:
    """The options of ``steps``."""

    step: str = option(
        "",
        "--step",
        "The NVTX range of one training step (a glob); none: ranges named like steps, else a repeating range or kernel sequence.",
    )
    warmup: float = option(1.5, "--warmup", "Leading steps above this many times the median are warm-up.", at="partial", min=1)
    slow: float = option(1.15, "--slow", "Steady steps above this many times the steady median are slow.", at="partial", min=1)
    flops_per_step: float = option(
        0.0, "--flops-per-step", "FLOPs one rank does per step, for TFLOP/s and MFU (0: none).", at="partial", min=0
    )
    peak_tflops: float = option(
        0.0,
        "--peak-tflops",
        "The GPU's peak TFLOP/s (0: the datasheet's dense BF16 peak of a known GPU).",
        at="partial",
        min=0,
    )


LINE = ["pid", "gpu_id"]
CAUSES = ("host", "sync", "memory")
FIGURES = (
    "busy_ns",
    "compute_ns",
    "nccl_exposed_ns",
    "memory_ns",
    "idle_ns",
    "idle_host_ns",
    "idle_sync_ns",
    "idle_memory_ns",
    "idle_other_ns",
    "host_blocked_ns",
)
COLUMNS = (
    "pid",
    "gpu_id",
    "gpu_name",
    "step",
    "name",
    "phase",
    "start_ns",
    "duration_ns",
    *FIGURES,
    "idle_host_longest_ns",
    "skew_ns",
    "slow",
    "tflops",
    "mfu_pct",
    "source",
)
TYPES = {"gpu_name": pl.String, "name": pl.String, "phase": pl.String, "slow": pl.Boolean, "source": pl.String}
TYPES |= {"tflops": pl.Float64, "mfu_pct": pl.Float64}
WARMUP, SLOW = 1.5, 1.15
# Dense BF16/FP16 tensor-core peaks, TFLOP/s, from NVIDIA's datasheets; the first name held wins.
PEAKS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.4),
    ("H200", 989.4),
    ("A100", 312.0),
    ("B200", 2250.0),
    ("L40S", 362.05),
)
OP_COLUMNS = [
    "gpu_id",
    "gpu_name",
    "pid",
    "kind",
    "name",
    "start_ns",
    "end_ns",
    "global_tid",
    "api_name",
    "api_start_ns",
    "api_end_ns",
]

# The side rows (``read``): which (``side``), and their columns.
SIDE = {
    "side": pl.String,
    "pid": pl.Int64,
    "step": pl.Int64,
    "name": pl.String,
    "a": pl.Int64,
    "b": pl.Int64,
    "source": pl.String,
    "global_tid": pl.Int64,
    "call": pl.String,
    "call_start_ns": pl.Int64,
    "call_end_ns": pl.Int64,
    "call_id": pl.Int64,
}


def peak(gpu_name: str | None) -> float | None:
    return next((p for key, p in PEAKS if gpu_name and key in gpu_name), None)


def period(names: Sequence[str]) -> int | None:
    """The shortest p (at least 2, at most a third of the sequence) with ``names[i] ==
    names[i + p]`` for nine in ten i; None without one."""
    n = len(names)
    for p in range(2, n // 3 + 1):
        same = sum(names[i] == names[i + p] for i in range(n - p))
        if same >= 0.9 * (n - p):
            return p
    return None


def from_kernels(ops: pl.DataFrame) -> pl.DataFrame | None:
    """Steps from a repeating kernel sequence on each rank's busiest device: each step starts at
    a kernel that runs once a period (the first such in the sequence) and ends where the next
    one starts (the last at the device's last operation's end)."""
    found = []
    for (pid,), own in ops.filter(pl.col("kind") == "kernel").group_by("pid", maintain_order=True):
        device = own.group_by("gpu_id").len().sort("len", "gpu_id", descending=[True, False])["gpu_id"][0]
        seq = own.filter(pl.col("gpu_id") == device).sort("start_ns")
        names = seq["name"].cast(pl.String).to_list()
        p = period(names)
        if p is None:
            continue
        counts = seq.group_by("name").len()
        once = set(counts.filter(pl.col("len") == len(names) // p)["name"].to_list())
        anchor = next((n for n in names if n in once), None)
        if anchor is None:
            continue
        starts = seq.filter(pl.col("name") == anchor)["start_ns"]
        last = ops.filter((pl.col("pid") == pid) & (pl.col("gpu_id") == device))["end_ns"].max()
        ends = [*starts.to_list()[1:], last]
        found.append(pl.DataFrame({"pid": pid, "name": anchor, "start_ns": starts, "end_ns": ends}))
    if not found:
        return None
    return numbered(pl.concat(found), "a repeating kernel sequence (no NVTX step ranges)")


def clip(intervals: pl.LazyFrame, windows: pl.DataFrame, keep: Sequence[str]) -> pl.LazyFrame:
    """The part of each interval (``pid``, ``lo``, ``hi``, ``keep``) inside each window of its
    process (``windows``: ``pid, w, a, b``, disjoint within a process), as ``w, ns``."""
    starts = windows.lazy().select("pid", "w", "a").sort("a")
    first = windows.group_by("pid").agg(w0=pl.col("w").min()).lazy()
    lo = intervals.sort("lo").join_asof(starts, left_on="lo", right_on="a", by="pid", strategy="backward", check_sortedness=False)
    lo = lo.drop("a").rename({"w": "w_lo"}).with_columns(probe=pl.col("hi") - 1).sort("probe")
    both = lo.join_asof(starts, left_on="probe", right_on="a", by="pid", strategy="backward", check_sortedness=False)
    both = both.drop("a").rename({"w": "w_hi"})
    both = both.join(first, on="pid").filter(pl.col("w_hi").is_not_null())
    spread = both.with_columns(w=pl.int_ranges(pl.coalesce("w_lo", "w0"), pl.col("w_hi") + 1)).explode("w")
    placed = spread.join(windows.lazy().select("w", "a", "b"), on="w")
    ns = pl.min_horizontal("hi", "b") - pl.max_horizontal("lo", "a")
    return placed.select(*keep, "w", ns=ns).filter(pl.col("ns") > 0)


def read(trace, by: Sequence[str], *, step: str = "") -> pl.LazyFrame:
    """The GPU operations of known processes, each with its launch call; and, as side rows (no
    ``start_ns``, ``side`` saying which): the steps NVTX ranges mark (``step``), or where none
    are and ``step`` is not given a row asking for steps from kernels (``kernels``); the window's
    bounds (``window``); each process's first NVTX range (``range``); the blocking calls
    (``call``); and the session's clock (``clock``)."""
    step = step or None
    ops = trace.gpu_ops(attributed=True, ranges=False, columns=OP_COLUMNS)
    ops = ops.with_columns(pl.col(pl.Categorical).cast(pl.String), pl.col("pid").cast(pl.Int64))
    ops = ops.filter(pl.col("pid").is_not_null()).select(OP_COLUMNS)
    ranges = trace.ranges(columns=["pid", "range", "start_ns", "end_ns"]).collect().with_columns(pl.col("pid").cast(pl.Int64))
    steps = from_ranges(ranges, step)
    bounds = None if trace.window is None else window_bounds(trace.window)
    if steps is not None and bounds is not None:
        steps = inside(steps, bounds)
    sides = [pl.DataFrame(schema=SIDE)]
    if steps is None and step is None:
        sides.append(pl.DataFrame({"side": ["kernels"]}))
    elif steps is not None:
        sides.append(
            steps.select(side=pl.lit("step"), pid="pid", step="step", name="name", a="start_ns", b="end_ns", source="source")
        )
    if bounds is not None:
        sides.append(bounds.select(side=pl.lit("window"), pid="pid", a="lo", b="hi"))
    sides.append(ranges.group_by("pid").agg(a=pl.col("start_ns").min()).with_columns(side=pl.lit("range")))
    clock = trace.session().get("start_utc_ns")  # ranks in exports of their own share the wall clock, not the time base
    sides.append(pl.DataFrame({"side": ["clock"], "a": [clock if isinstance(clock, int) else 0]}))
    calls = trace.api(columns=["pid", "global_tid", "name", "start_ns", "end_ns", "correlation_id"], like=BLOCKING_LIKE)
    calls = calls.filter(blocking(pl.col("name"))).select(
        side=pl.lit("call"),
        pid=pl.col("pid").cast(pl.Int64),
        global_tid="global_tid",
        call=pl.col("name").cast(pl.String),
        call_start_ns="start_ns",
        call_end_ns="end_ns",
        call_id="correlation_id",  # two calls alike in all else stay two (side rows of the pieces are kept once)
    )
    side = pl.concat([pl.concat(sides, how="diagonal_relaxed").lazy(), calls], how="diagonal_relaxed")
    return pl.concat([ops, side], how="diagonal_relaxed")


def window_bounds(window) -> pl.DataFrame:
    """A window's bounds as rows ``pid, lo, hi``: one per rank that has its own, else one for
    every process (``pid`` null)."""
    own = [((g >> 24) & 0xFFFFFF, lo, hi) for g, lo, hi in window.ranks] or [(None, window.start_ns, window.end_ns)]
    return pl.DataFrame(own, schema={"pid": pl.Int64, "lo": pl.Int64, "hi": pl.Int64}, orient="row")


def inside(steps: pl.DataFrame, bounds: pl.DataFrame) -> pl.DataFrame:
    """The steps that overlap the window's ``bounds`` (``window_bounds``: each rank's own, where
    it has them), numbered as in the whole run."""
    if bounds["pid"].is_null().all():
        _, lo, hi = bounds.row(0)
        return steps.filter((pl.col("start_ns") < hi) & (pl.col("end_ns") > lo))
    steps = steps.join(bounds, on="pid")
    return steps.filter((pl.col("start_ns") < pl.col("hi")) & (pl.col("end_ns") > pl.col("lo"))).drop("lo", "hi")


def split(rows: pl.LazyFrame, keys: Sequence[str]) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """The operations, to be ordered by ``start_ns``, and the side rows (``read``)."""
    ops = rows.filter(pl.col("start_ns").is_not_null()).select(OP_COLUMNS)
    side = rows.filter(pl.col("start_ns").is_null()).select(pl.col(c).cast(t) for c, t in SIDE.items())
    return ops, side


@dataclass
class StepsFold(Fold):
    """The fold's state: the slices' sums per window, device and figure (``found``); the
    operation holding each device busy and the end of each union so far (``held``); the windows
    (``windows``: the steps, and each rank's setup before its first step, its start not yet
    known); the blocking calls in order of start and those passed (``idle.near``); each slice's
    devices and each rank's first operation (``seen``); where the steps come from kernels, every
    operation (``kept``); and the options of ``partial``."""

    windows: pl.DataFrame | None = None
    calls: pl.DataFrame | None = None
    passed: Passed | None = None
    seen: pl.DataFrame | None = None
    kept: list | None = None
    options: dict = field(default_factory=dict)


def _fold(calls: pl.DataFrame) -> StepsFold:
    """A fold with nothing folded yet, the blocking calls ``calls`` (in order of start) none passed."""
    return StepsFold(calls=calls, passed=Passed(0, calls.clear()))


def _sides(sides: list) -> pl.DataFrame:
    return pl.concat(sides, how="vertical_relaxed") if sides else pl.DataFrame(schema=SIDE)


def start(sides: list, keys: Sequence[str]) -> StepsFold:
    """The fold's first state, from the side rows: the windows of the steps NVTX ranges mark
    (none where they come from kernels: the operations are then kept), the blocking calls."""
    side = _sides(sides)
    calls = side.filter(pl.col("side") == "call").select(*CALL).sort("call_start_ns", "global_tid", "call_end_ns", "call")
    state = _fold(calls)
    if (side["side"] == "kernels").any():
        state.kept = []
    else:
        steps = side.filter(pl.col("side") == "step")
        steps = steps.select("pid", "step", "name", start_ns="a", end_ns="b", source="source")
        state.windows = windows_of(steps, (side["side"] == "window").any())
    return state


# The start of a rank's setup until the fold has seen its first operation: before everything.
EARLIEST = -(2**63)


def windows_of(steps: pl.DataFrame, windowed: bool) -> pl.DataFrame:
    """The steps, and (outside a window) each rank's setup before its first step, as windows
    ``pid, w, step, name, a, b, source``; the setups start at ``EARLIEST`` (``setups``)."""
    setup = steps.filter((pl.col("step") == 1) & (not windowed))
    setup = setup.select(
        "pid",
        step=pl.lit(0, pl.Int64),
        name=pl.lit("(setup)"),
        start_ns=pl.lit(EARLIEST, pl.Int64),
        end_ns="start_ns",
        source="source",
    )
    windows = pl.concat([setup, steps]).sort("pid", "start_ns").with_row_index("w").with_columns(pl.col("w").cast(pl.Int64))
    return windows.rename({"start_ns": "a", "end_ns": "b"})


def setups(windows: pl.DataFrame, first: pl.DataFrame) -> pl.DataFrame:
    """``windows`` with each setup starting at its rank's first launch call, GPU operation,
    blocking call or NVTX range (``first``: ``pid, t``), and none where that is not before the
    first step. Every interval the fold clipped starts at or after it: the setup's figures are
    the same as if it had started there."""
    setup = pl.col("step") == 0
    windows = windows.join(first, on="pid", how="left")
    windows = windows.filter(~setup | (pl.col("t") < pl.col("b")))
    return windows.with_columns(a=pl.when(setup).then("t").otherwise("a")).drop("t")


def window(
    rows: pl.DataFrame,
    keys: Sequence[str],
    state: StepsFold,
    *,
    warmup: float = WARMUP,
    slow: float = SLOW,
    flops_per_step: float = 0.0,
    peak_tflops: float = 0.0,
) -> StepsFold:
    """One slice of the operations, after the previous slices': its union pieces and its idle
    intervals (classified as ``idle`` does), clipped to each window, summed per window, device
    and figure (with the longest idle interval of each), added to ``state`` (``start``)."""
    state.options = {"warmup": warmup, "slow": slow, "flops_per_step": flops_per_step, "peak_tflops": peak_tflops}
    ops = rows.with_columns(pl.col(pl.Categorical).cast(pl.String))
    if state.kept is not None:  # steps from the kernels' order: every operation is needed first
        state.kept.append(ops)
        return state
    if state.windows is None or state.windows.is_empty() or ops.is_empty():
        return state
    windows, (holder, carried) = state.windows, state.held or (None, None)
    lazy = ops.lazy().with_columns(cls=U.op_class(pl.col("kind"), pl.col("name")))
    parts = []
    for level, column in enumerate(("l0", "l1", "l2")):
        pieces = U.union_pieces(lazy, LINE, level, None if carried is None else carried.lazy())
        parts.append(clip(pieces, windows, ["gpu_id"]).with_columns(what=pl.lit(column)))
    gaps, both, passed = slice_gaps(ops, holder, state.calls, state.passed, LINE)
    gaps = gaps.select("pid", "gpu_id", lo="gap_start_ns", hi="gap_end_ns", what=pl.lit("idle_") + pl.col("cause") + "_ns")
    parts.append(clip(gaps, windows, ["gpu_id", "what"]))
    grouped = pl.concat(parts, how="diagonal_relaxed").group_by("w", "gpu_id", "what")
    state.found.append(grouped.agg(pl.col("ns").sum(), longest=pl.col("ns").max()).collect())
    seen = ops.group_by("pid", "gpu_id", "gpu_name").agg(t=pl.min_horizontal("start_ns", "api_start_ns").min())
    seen = seen if state.seen is None else pl.concat([state.seen, seen])
    state.seen = seen.group_by("pid", "gpu_id", "gpu_name").agg(pl.col("t").min())
    state.held, state.passed = (holding(both, LINE), U.union_ends(lazy, LINE, carried, 3)), passed
    return state


def close(state: StepsFold, sides: list, keys: Sequence[str]) -> pl.LazyFrame:
    """Each step's figures on each device of its rank, from the slices' sums, with the phases'
    thresholds and the rate's inputs (``rated``)."""
    side = _sides(sides)
    if state.kept is not None and state.kept:
        ops = pl.concat(state.kept, how="vertical_relaxed")
        steps = from_kernels(ops)
        bounds = side.filter(pl.col("side") == "window").select("pid", lo="a", hi="b")
        if steps is not None and bounds.height:
            steps = inside(steps, bounds)
        fresh = _fold(state.calls)
        fresh.windows = None if steps is None else windows_of(steps, bounds.height > 0)
        state = window(ops, keys, fresh, **state.options)
    if state.seen is None or state.windows is None or state.windows.is_empty():
        return pl.LazyFrame(schema={c: pl.Int64 for c in ("pid", "gpu_id", "step")})
    calls = side.filter(pl.col("side") == "call")
    first = pl.concat(
        [
            state.seen.select("pid", "t"),
            side.filter(pl.col("side") == "range").select("pid", t="a"),
            calls.select("pid", t="call_start_ns"),
        ]
    )
    windows = setups(state.windows, first.group_by("pid").agg(pl.col("t").min()))
    sums = pl.concat(state.found).group_by("w", "gpu_id", "what").agg(pl.col("ns").sum(), pl.col("longest").max())
    devices = state.seen.select("pid", "gpu_id", "gpu_name").unique()
    clock = side.filter(pl.col("side") == "clock")["a"]
    rows = figures(sums, devices, calls.select("pid", lo="call_start_ns", hi="call_end_ns"), windows)
    return rated(rows.with_columns(clock_ns=pl.lit(clock[0] if clock.len() else 0, pl.Int64)).lazy(), **state.options)


def figures(sums: pl.DataFrame, devices: pl.DataFrame, calls: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """The rows of the table before phases, skew and rates: each window on each device of its
    rank, from the sums per window, device and figure (``sums``: ``w, gpu_id, what, ns,
    longest``) and the blocking calls (``pid, lo, hi``)."""
    wide = sums.pivot(on="what", index=["w", "gpu_id"], values="ns")
    for column in ("l0", "l1", "l2", *(f"idle_{c}_ns" for c in CAUSES)):
        if column not in wide.columns:
            wide = wide.with_columns(pl.lit(0, pl.Int64).alias(column))
    rows = windows.join(devices, on="pid").join(wide, on=["w", "gpu_id"], how="left").fill_null(0)
    blocked = clip(calls.lazy(), windows, []).group_by("w").agg(host_blocked_ns=pl.col("ns").sum())
    rows = rows.join(blocked.collect(), on="w", how="left").with_columns(pl.col("host_blocked_ns").fill_null(0))
    longest = sums.filter(pl.col("what") == "idle_host_ns").select("w", "gpu_id", idle_host_longest_ns="longest")
    rows = rows.join(longest, on=["w", "gpu_id"], how="left").with_columns(pl.col("idle_host_longest_ns").fill_null(0))
    duration = pl.col("b") - pl.col("a")
    known = pl.sum_horizontal(*(f"idle_{c}_ns" for c in CAUSES))
    return rows.select(
        "pid",
        "gpu_id",
        "gpu_name",
        "step",
        "name",
        start_ns="a",
        duration_ns=duration,
        busy_ns="l2",
        compute_ns="l0",
        nccl_exposed_ns=pl.col("l1") - pl.col("l0"),
        memory_ns=pl.col("l2") - pl.col("l1"),
        idle_ns=duration - pl.col("l2"),
        idle_host_ns="idle_host_ns",
        idle_sync_ns="idle_sync_ns",
        idle_memory_ns="idle_memory_ns",
        idle_other_ns=duration - pl.col("l2") - known,
        host_blocked_ns="host_blocked_ns",
        idle_host_longest_ns="idle_host_longest_ns",
        source="source",
    )


def partial(
    rows: pl.LazyFrame,
    keys: Sequence[str],
    *,
    warmup: float = WARMUP,
    slow: float = SLOW,
    flops_per_step: float = 0.0,
    peak_tflops: float = 0.0,
) -> pl.LazyFrame:
    """The export's steps: the fold over one slice holding every operation."""
    ops, side = split(rows, keys)
    sides = [side.collect()]
    options = {"warmup": warmup, "slow": slow, "flops_per_step": flops_per_step, "peak_tflops": peak_tflops}
    return close(window(ops.collect(), keys, start(sides, keys), **options), sides, keys)


def rated(
    rows: pl.LazyFrame,
    *,
    warmup: float = WARMUP,
    slow: float = SLOW,
    flops_per_step: float = 0.0,
    peak_tflops: float = 0.0,
) -> pl.LazyFrame:
    """The steps' rows, carrying the thresholds and the rate's inputs for ``finalize``."""
    flops_per_step, peak_tflops = flops_per_step or None, peak_tflops or None
    if flops_per_step is not None and peak_tflops is None:
        names = rows.select("gpu_name").unique().collect().to_series().drop_nulls().to_list()
        unknown = [n for n in names if peak(n) is None]
        if unknown:
            raise UsageError(
                None,
                f"no known peak for {unknown[0]!r}, so no MFU",
                f"give --peak-tflops (known: {', '.join(k for k, _ in PEAKS)})",
            )
    peaks = pl.col("gpu_name").map_elements(peak, return_dtype=pl.Float64) if peak_tflops is None else pl.lit(peak_tflops)
    return rows.with_columns(
        warmup_x=pl.lit(warmup, pl.Float64),
        slow_x=pl.lit(slow, pl.Float64),
        flops=pl.lit(flops_per_step, pl.Float64),
        peak=peaks,
    )


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    lead = [k for k in keys if k == "file"]
    schema = partials.collect_schema().names()
    if "duration_ns" not in schema:
        return pl.LazyFrame(schema={**dict.fromkeys(lead, pl.String), **{c: TYPES.get(c, pl.Int64) for c in COLUMNS}})
    rank = [*lead, "pid"]
    counted = pl.col("step") > 0
    median = pl.col("duration_ns").filter(counted).median().over(rank)
    above = counted & (pl.col("duration_ns") > pl.col("warmup_x") * median)
    per_rank = partials.unique([*rank, "step"]).sort([*rank, "step"])
    leading = (above | ~counted).cast(pl.Int8).cum_prod().over(rank).cast(pl.Boolean)
    per_rank = per_rank.with_columns(
        phase=pl.when(~counted).then(pl.lit("setup")).when(leading).then(pl.lit("warmup")).otherwise(pl.lit("steady"))
    )
    steady = pl.col("duration_ns").filter(pl.col("phase") == "steady").median().over(rank)
    wall = pl.col("start_ns") + pl.col("clock_ns")
    per_rank = per_rank.with_columns(
        slow=(pl.col("phase") == "steady") & (pl.col("duration_ns") > pl.col("slow_x") * steady),
        skew_ns=pl.when(counted).then(wall - wall.min().over([*lead, "step"])),
    ).select(*rank, "step", "phase", "slow", "skew_ns")
    tflops = pl.when(pl.col("step") > 0).then(pl.col("flops") / pl.col("duration_ns") / 1e3)
    return (
        partials.join(per_rank, on=[*rank, "step"], how="left", nulls_equal=True)
        .with_columns(tflops=tflops)
        .with_columns(mfu_pct=pl.col("tflops") * 100.0 / pl.col("peak"))
        .select(*lead, *COLUMNS)
        # every column, after the keys: two exports of one run may hold the same process and
        # device, and their rows must come in one order however the parts arrive
        .sort([*lead, "pid", "gpu_id", "step", *(c for c in COLUMNS if c not in ("pid", "gpu_id", "step"))], nulls_last=True)
    )


def thresholds(warmup: float = WARMUP, slow: float = SLOW) -> str:
    """The phases' rule in words, for the note under the table."""
    return (
        f"warm-up: the leading steps above {warmup:g}x the rank's median step; "
        f"slow: steady steps above {slow:g}x the steady median"
    )


def check_options(options: dict) -> None:
    if options.get("peak_tflops") and not options.get("flops_per_step"):
        raise OptionError("--peak-tflops", "a peak is for MFU: give --flops-per-step too")


def note(table: pl.DataFrame, *, warmup: float = WARMUP, slow: float = SLOW, **options) -> str:
    """Where the steps came from, and the phases' rule."""
    sources = "; ".join(sorted(set(table["source"])))
    return f"steps are {sources}; {thresholds(warmup, slow)}"


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.steps``)."""
    from ..render import view_charts

    return view_charts.steps(table)
