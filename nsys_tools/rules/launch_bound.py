"""Launch-bound stretches: steady steps in which the GPU sat idle with nothing queued (``steps``'
``idle_host_ns``: the next operation's launch call had not returned when the device went idle)
for more than ``share`` percent (25 unless given) of the step, in many short waits: a step whose
longest single wait (``idle_host_longest_ns``) holds half its host idle time or more is a host
stall (a data loader, a checkpoint), which ``slow_steps`` and ``gpu_gaps`` report, not launch
overhead. Then how many of the rank's kernels
ran shorter than the call that launched them. That comparison holds only for a kernel launched by a
call of its own: the kernels of a CUDA graph (or any launch that started several) share one call,
say ``cudaGraphLaunch``, so they are counted apart (``in_shared_launches``) and never as short."""

from __future__ import annotations

import polars as pl

from . import Finding, Rule
from .setup import spanned

RULE = Rule("launch_bound", "the GPU waits for the host to queue work")

OPTIONS = {"share": (float, 25.0, "the percentage of a step the GPU waits on the host above which the step is launch-bound")}
ADVICE = (
    "Queue more work per launch: CUDA graphs (torch.compile mode='reduce-overhead'), fused "
    "kernels, larger batches; keep the host loop free of Python overhead."
)


def rows(run, *, share: float = 25.0, **options) -> pl.DataFrame:
    steps = run.steps.filter(pl.col("phase") == "steady")
    waits = pl.col("idle_host_ns")
    bound = steps.filter((waits * 100.0 > share * pl.col("duration_ns")) & (pl.col("idle_host_longest_ns") * 2 < waits))
    table = bound.group_by("pid", "gpu_id").agg(
        steps=pl.col("step").sort(),
        waited_ns=pl.col("idle_host_ns").sum(),
        step_ns=pl.col("duration_ns").sum(),
        **spanned(),
    )
    return table.join(short_kernels(run), on=["pid", "gpu_id"], how="left").sort("pid", "gpu_id")


def short_kernels(run) -> pl.DataFrame:
    """Per rank and device: kernels, and those that ran shorter than their launch call; counted
    a piece of the export at a time (``run.chunked.each_piece``: kernels sharing a launch are in
    one piece) and summed."""
    from ..run.chunked import each_piece

    counts = pl.col("kernels", "shorter_than_launch", "in_shared_launches")
    parts = [
        pl.concat(each_piece(ex, _short_kernels)).group_by("pid", "gpu_id", maintain_order=True).agg(counts.sum())
        for ex in run.exports
    ]
    return pl.concat(parts).with_columns(pl.col("pid").cast(pl.Int64), pl.col("gpu_id").cast(pl.Int64))


def _short_kernels(trace) -> pl.LazyFrame:
    """``short_kernels``' counts of one trace."""
    ops = trace.gpu_ops(
        attributed=True,
        ranges=False,
        kinds=["kernel"],
        columns=["pid", "gpu_id", "start_ns", "end_ns", "api_start_ns", "api_end_ns", "global_pid", "correlation_id"],
    )
    shared = pl.len().over("global_pid", "correlation_id") > 1
    shorter = ~shared & ((pl.col("end_ns") - pl.col("start_ns")) < (pl.col("api_end_ns") - pl.col("api_start_ns")))
    return ops.group_by("pid", "gpu_id").agg(kernels=pl.len(), shorter_than_launch=shorter.sum(), in_shared_launches=shared.sum())


def findings(run, table: pl.DataFrame, **options) -> list[Finding]:
    out = []
    for r in table.iter_rows(named=True):
        n = len(r["steps"])
        own = (r["kernels"] or 0) - (r["in_shared_launches"] or 0)
        short = f"; {r['shorter_than_launch']} of its {own} kernels ran shorter than their launch call" if own else ""
        if r["in_shared_launches"]:
            short += f" ({r['in_shared_launches']} more ran in launches of several kernels, such as CUDA graphs)"
        out.append(
            Finding(
                RULE.name,
                f"GPU {r['gpu_id']} (rank {r['pid']}) waited on the host with nothing queued for {r['waited_ns'] / 1e6:,.2f} ms "
                f"in {n} steady step{'s' if n > 1 else ''} ({100 * r['waited_ns'] / r['step_ns']:.0f}% of them){short}",
                r["waited_ns"],
                device=r["gpu_id"],
                rank=r["pid"],
                steps=r["steps"],
                start_ns=r["first_ns"],
                end_ns=r["last_ns"],
                evidence=[r],
                advice=ADVICE,
            )
        )
    return out
