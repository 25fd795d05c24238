"""Did a capture run on a quiet GPU, and did the control come back inside its known band?

A median alone does not catch contention: under a background copy load on the H200, Triton's
median kernel time moved under 2%, while single kernels were preempted for milliseconds by
time-slicing. So a session is judged on every signal the sweep records:

* other compute processes on the GPU (NVML in the harness, nvidia-smi before and after);
* kernel-time tails: the share of calls slower than twice their median, and p99 / median;
* SM clocks during the traced phase, against the GPU's maximum (an idle H200 sits at 345 MHz).
  A clock held down by the GPU's own power or thermal limit (NVML's clock-event reasons, which
  the harness records) is not contention: compute-bound work such as a large matmul draws the
  H200 to its 700 W cap, and every implementation then runs at the clock that cap allows. It is
  stated, not counted against the session;
* the control's median against its band from earlier quiet sessions (``ledger.bands``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from ..errors import BadExport
from ..folder_format import Clocks, HarnessRecord
from ..views import stats as metrics

if TYPE_CHECKING:
    from .folder import Sweep

# Thresholds, from quiet and loaded sessions on the H200 (reports/README.md): quiet sessions
# showed p99 / median <= 1.32 and no call above twice its median; loaded ones showed p99 /
# median of 60-100 and 1-2.5% of calls above twice the median.
SLOW_FACTOR = 2.0  # a call this many times its median is an outlier
MAX_OUTLIER_SHARE = 0.005  # more than 0.5% outliers in any (impl, shape) flags the session
MAX_P99_RATIO = 1.5
MIN_CLOCK_SHARE = 0.9  # traced-phase median SM clock below 90% of max: not at full speed
# NVML clock-event reason bits that mean the GPU slowed itself: its software power cap, and
# software or hardware thermal slowdown.
SELF_LIMITED = 0x4 | 0x20 | 0x40


@dataclass
class ContentionVerdict:
    """The contention verdict of one sweep, with the evidence behind it."""

    quiet: bool
    reasons: list[str] = field(default_factory=list)
    other_pids: list[int] = field(default_factory=list)
    tails: pl.DataFrame | None = None
    clocks: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what shaped the numbers without being contention


def tails(calls: pl.DataFrame) -> pl.DataFrame:
    """Per (impl, shape): median, p99, max, p99/median and the share of calls > 2x median."""
    d = metrics.distribution("duration_ns")
    return (
        calls.group_by("impl", "shape")
        .agg(
            median_ns=d["median_ns"],
            p99_ns=d["p99_ns"],
            max_ns=d["max_ns"],
            outlier_share=(pl.col("duration_ns") > SLOW_FACTOR * d["median_ns"]).mean(),
        )
        .with_columns(p99_ratio=pl.col("p99_ns") / pl.col("median_ns"))
        .sort("shape", "impl")
    )


def _busy_samples(clocks: Clocks) -> list[tuple[float, float, int]]:
    """(SM MHz, utilization, clock-event reasons or -1) of the samples taken while the timed work
    ran: the harness's ``trace`` phase; for a program's capture (one ``run`` phase, setup and
    idle included), the samples where the GPU was busy."""
    phases = clocks.phase
    reasons = clocks.reasons or [-1] * len(phases)
    rows = list(zip(clocks.sm_mhz, clocks.util_gpu, phases, reasons, strict=True))
    traced = [(sm, u, r) for sm, u, p, r in rows if p == "trace"]
    return traced or [(sm, u, r) for sm, u, p, r in rows if p == "run" and u > 0]


def _clock_summary(harness: dict[str, HarnessRecord], max_sm: float | None) -> dict[str, float]:
    samples = [x for h in harness.values() for x in _busy_samples(h.clocks)]
    if not samples:
        return {}
    sm = pl.Series([x[0] for x in samples], dtype=pl.Float64)
    util = pl.Series([x[1] for x in samples], dtype=pl.Float64)
    out = {"sm_mhz_median": float(sm.median()), "sm_mhz_min": float(sm.min()), "samples": float(len(samples))}
    out["util_median"] = float(util.median())
    if max_sm:
        out["sm_mhz_max"] = float(max_sm)
        slow = [x[2] for x in samples if x[0] < MIN_CLOCK_SHARE * max_sm]
        # The share of slow samples for which NVML said the GPU held its own clock down.
        out["slow_self_limited"] = sum(r >= 0 and bool(r & SELF_LIMITED) for r in slow) / len(slow) if slow else 0.0
    return out


def judge(sweep: Sweep) -> ContentionVerdict:
    """The contention verdict of a loaded sweep folder."""
    reasons: list[str] = []
    m = sweep.manifest
    seen = [p for h in sweep.harness.values() for p in h.other_pids]
    pids = sorted({*seen, *m.gpu_before.compute_pids, *m.gpu_after.compute_pids})
    if pids:
        reasons.append(f"another process was on the GPU (pid {', '.join(map(str, pids))})")

    t = tails(sweep.calls)
    worst = t.sort("outlier_share", descending=True).row(0, named=True) if t.height else None
    if worst and (worst["outlier_share"] > MAX_OUTLIER_SHARE or t["p99_ratio"].max() > MAX_P99_RATIO):
        slowest = t.sort("max_ns", descending=True).row(0, named=True)
        reasons.append(
            f"{worst['outlier_share']:.1%} of {worst['impl']} calls at {worst['shape']} took more than twice their median, "
            f"and one {slowest['impl']} kernel took {slowest['max_ns'] / 1000:,.0f} µs against a median of "
            f"{slowest['median_ns'] / 1000:.2f} µs"
        )

    max_sm = m.gpu_before.max_sm_mhz
    try:
        clocks = _clock_summary(sweep.harness, float(max_sm) if max_sm else None)
    except (TypeError, ValueError) as exc:
        hint = "was the sweep interrupted? re-run it with --resume"
        raise BadExport(sweep.path, f"its clock samples cannot be read ({exc})", hint) from exc
    notes: list[str] = []
    if clocks.get("sm_mhz_max") and clocks["sm_mhz_median"] < MIN_CLOCK_SHARE * clocks["sm_mhz_max"]:
        low = (
            f"the SM clock ran at {clocks['sm_mhz_median']:.0f} MHz during the trace, "
            f"below its {clocks['sm_mhz_max']:.0f} MHz maximum"
        )
        if clocks.get("slow_self_limited", 0.0) >= 0.5 and not pids:
            notes.append(f"{low}, held there by the GPU's own power or thermal limit (NVML clock-event reasons) under this work")
        else:
            reasons.append(low)
    return ContentionVerdict(quiet=not reasons, reasons=reasons, other_pids=pids, tails=t, clocks=clocks, notes=notes)


def band_position(value: float, lo: float | None, hi: float | None) -> str:
    """ "inside", "above", "below", or "unknown" when there is no band yet."""
    if lo is None or hi is None:
        return "unknown"
    return "above" if value > hi else "below" if value < lo else "inside"
