"""Slow steps and their cause: the steady steps ``steps`` marks slow (above ``slow`` times the
steady median), each with the figure that grew most against the rank's steady median of it:

* ``host``: the GPU waited for the host (idle with nothing queued: a data or host stall);
* ``sync``: the host blocked in synchronizations (``host_blocked_ns``);
* ``nccl``: exposed NCCL time;
* ``kernel``: compute time (the kernel whose time in the step grew most is named);
* ``memory``: copies and sets.
"""

from __future__ import annotations

import polars as pl

from . import Finding, Rule
from .setup import per_rank

RULE = Rule("slow_steps", "steps well above the steady median, and what grew")

OPTIONS: dict = {}
CAUSES = {
    "host": (
        "idle_host_ns",
        "the GPU waited for the host (a data or host stall)",
        "Overlap input with compute (DataLoader workers, pin_memory, prefetch) and look at what the host did in these steps.",
    ),
    "sync": (
        "host_blocked_ns",
        "the host blocked in synchronizations",
        "Take the synchronization out of these steps (no .item() or .cpu() in the loop; log every N steps).",
    ),
    "nccl": (
        "nccl_exposed_ns",
        "exposed NCCL time grew",
        "Look for a rank that arrives late at the collective (stragglers) and overlap communication with compute.",
    ),
    "kernel": (
        "compute_ns",
        "compute time grew",
        "Compare the kernel's calls in these steps with a steady step's (shapes, data-dependent work).",
    ),
    "memory": (
        "memory_ns",
        "copies and sets grew",
        "Find the extra copies (report --view memops --within) and move them out of the step or pin their memory.",
    ),
}


def rows(run, **options) -> pl.DataFrame:
    steps = run.steps
    if steps.is_empty():
        return pl.DataFrame()
    figures = [c for c, _, _ in CAUSES.values()]
    steady = steps.filter(pl.col("phase") == "steady")
    medians = steady.group_by("pid", "gpu_id").agg(
        pl.col("duration_ns").median().alias("median_ns"), *(pl.col(c).median().alias(f"median_{c}") for c in figures)
    )
    slow = steps.filter(pl.col("slow")).join(medians, on=["pid", "gpu_id"])
    excess = {name: (pl.col(c) - pl.col(f"median_{c}")).round().cast(pl.Int64) for name, (c, _, _) in CAUSES.items()}
    slow = slow.with_columns(**{f"more_{n}_ns": e for n, e in excess.items()})
    grew = pl.concat_list([pl.col(f"more_{n}_ns") for n in CAUSES])
    return (
        slow.with_columns(
            extra_ns=(pl.col("duration_ns") - pl.col("median_ns")).cast(pl.Int64),
            cause=pl.lit(list(CAUSES)).list.get(grew.list.arg_max()),
        )
        .select(
            "pid",
            "gpu_id",
            "step",
            "name",
            "start_ns",
            "duration_ns",
            "median_ns",
            "extra_ns",
            "cause",
            *(f"more_{n}_ns" for n in CAUSES),
        )
        .sort("pid", "gpu_id", "step")  # the join above keeps no order
    )


def findings(run, table: pl.DataFrame, **options) -> list[Finding]:
    if table.is_empty():
        return []
    out = []
    for (pid, gpu, cause), steps in table.group_by("pid", "gpu_id", "cause", maintain_order=True):
        column, what, advice = CAUSES[cause]
        extra = int(steps["extra_ns"].sum())
        grown = steps[f"more_{cause}_ns"].mean()
        numbers = steps["step"].to_list()
        kernel = top_kernel(run, steps) if cause == "kernel" else None
        named = f" ({kernel})" if kernel else ""
        out.append(
            Finding(
                RULE.name,
                f"Rank {pid} had {steps.height} slow step{'s' if steps.height > 1 else ''} on GPU {gpu} "
                f"({which(steps)}): {steps['duration_ns'].mean() / 1e6:,.2f} ms against a steady "
                f"{steps['median_ns'][0] / 1e6:,.2f} ms; {what}{named}, +{grown / 1e6:,.2f} ms a step",
                extra,
                device=gpu,
                rank=pid,
                steps=numbers,
                kernel=kernel,
                start_ns=int(steps["start_ns"].min()),
                end_ns=int((steps["start_ns"] + steps["duration_ns"]).max()),
                evidence=steps.to_dicts(),
                advice=advice,
            )
        )
    return out


def which(steps: pl.DataFrame) -> str:
    """The steps for a title, as the user knows them: by their range names where each step has
    its own (``step 4, step 7``), else by number (``steps 5, 8``: each rank's n-th step)."""
    names = steps["name"].to_list()
    if len(set(names)) == len(names):
        return listed(names)
    return f"step{'s' if len(names) > 1 else ''} {listed(steps['step'].to_list())}"


def listed(items: list, most: int = 10) -> str:
    """Items for a title: all of them, or the first ``most`` and how many more."""
    shown = ", ".join(map(str, items[:most]))
    return shown if len(items) <= most else f"{shown} and {len(items) - most} more"


def top_kernel(run, slow: pl.DataFrame) -> str | None:
    """The kernel whose time in the slow steps grew most over its time in a steady step of the rank."""
    from ..run.chunked import each_piece

    def on_device(trace) -> pl.LazyFrame:  # the device's kernels, a piece of the export at a time
        kernels = trace.kernels(columns=["pid", "gpu_id", "short_name", "start_ns", "end_ns"])
        return kernels.filter((pl.col("pid") == slow["pid"][0]) & (pl.col("gpu_id") == slow["gpu_id"][0]))

    steps = per_rank(run.steps).filter(pl.col("pid") == slow["pid"][0])
    windows = steps.filter(pl.col("step") > 0).select("step", "phase", a="start_ns", b=pl.col("start_ns") + pl.col("duration_ns"))
    for ex in run.exports:
        kernels = pl.concat(each_piece(ex, on_device))
        if kernels.is_empty():
            continue
        inside = (
            kernels.sort("start_ns")
            .join_asof(windows.sort("a"), left_on="start_ns", right_on="a")
            .filter(pl.col("start_ns") < pl.col("b"))
        )
        per_step = inside.group_by("short_name", "step", "phase").agg(ns=(pl.col("end_ns") - pl.col("start_ns")).sum())
        typical = per_step.filter(pl.col("phase") == "steady").group_by("short_name").agg(typical=pl.col("ns").median())
        grown = per_step.filter(pl.col("step").is_in(slow["step"].implode())).join(typical, on="short_name", how="left")
        grown = grown.group_by("short_name").agg(more=(pl.col("ns") - pl.col("typical").fill_null(0)).mean())
        if grown.height:
            return str(grown.sort("more", "short_name", descending=[True, False])["short_name"][0])
    return None
