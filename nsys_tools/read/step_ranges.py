"""Steps as NVTX ranges mark them: which ranges are steps, of nested ones the outermost, and a
repeating top-level range when none is named like a step. The ``steps``, ``overlap`` and
``stragglers`` views find their steps here, and so do windows (``--skip-first``, ``--within
GLOB#n``), so that every view counts the same instances.

Ranges are frames with ``pid`` (a process: a rank), ``range``, ``start_ns`` and ``end_ns``.
"""

from __future__ import annotations

import polars as pl

from .names import glob_regex

STEP_LIKE = r"(?i)step|^ProfilerStep#\d+$"
# Names that hold "step" as a method called inside a step (PyTorch's ``Optimizer.step#AdamW.step``,
# an LR scheduler's ``.step``): not steps.
METHOD_STEP = r"(?i)\.step\b"
# Ranges that frameworks open around one operator or collective (PyTorch's emit_nvtx: ``aten::mm,
# seq = 12, op_id = 40, sizes = ...``; NCCL's): never a step, however often they repeat.
FRAMEWORK_OPS = r"^(aten|autograd|c10d|prim|torch)::|, (seq|op_id) = |^nccl[A-Z]"


def outermost(ranges: pl.DataFrame) -> pl.DataFrame:
    """Of ``ranges`` (``pid, start_ns, end_ns``), those no other one of the same process holds."""
    ordered = ranges.sort("pid", "start_ns", pl.col("end_ns"), descending=[False, False, True])
    before = pl.col("end_ns").cum_max().shift(1).over("pid")
    return ordered.filter(before.is_null() | (pl.col("end_ns") > before))


def step_ranges(ranges, step: str | None = None):
    """The ranges of ``ranges`` (``pid``, ``range``, ``start_ns``, ``end_ns``; eager or lazy) that
    are steps: those ``step`` (a glob) matches, else those named like steps (``STEP_LIKE``) but not
    a method's ``.step``; of ranges nested in one another, the outermost of each process."""
    name = pl.col("range").cast(pl.String)
    wanted = name.str.contains(glob_regex(step)) if step else name.str.contains(STEP_LIKE) & ~name.str.contains(METHOD_STEP)
    return outermost(ranges.filter(wanted & (pl.col("end_ns") > pl.col("start_ns"))))


def numbered(steps: pl.DataFrame, source: str) -> pl.DataFrame:
    """``steps`` (``pid``, ``name``, ``start_ns``, ``end_ns``) numbered from 1 per process in order
    of start, with the ``source`` they came from."""
    steps = steps.sort("pid", "start_ns")
    return steps.select(
        pl.col("pid").cast(pl.Int64),
        step=pl.col("start_ns").rank("ordinal").over("pid").cast(pl.Int64),
        name=pl.col("name").cast(pl.String),
        start_ns="start_ns",
        end_ns="end_ns",
        source=pl.lit(source),
    )


def from_ranges(ranges: pl.DataFrame, step: str | None) -> pl.DataFrame | None:
    """Steps from NVTX ranges: those ``step`` matches, or those that look like steps, or the
    most repeated top-level range; None when none fits."""
    found = step_ranges(ranges, step).rename({"range": "name"})
    if step is not None or found.height:
        source = (
            f"NVTX ranges matching {step!r}" if step is not None else "NVTX ranges named like steps ('*step*', 'ProfilerStep#N')"
        )
        return numbered(found, source) if found.height else None
    timed = ranges.filter(pl.col("end_ns") > pl.col("start_ns")).rename({"range": "name"})
    name = pl.col("name").cast(pl.String)
    top = outermost(timed.filter(~name.str.contains(FRAMEWORK_OPS))).with_columns(pattern=name.str.replace_all(r"\d+", "#"))
    counts = top.group_by("pattern").agg(n=pl.len(), first=pl.col("start_ns").min())
    counts = counts.filter(pl.col("n") >= 3 * top["pid"].n_unique())
    if counts.is_empty():
        return None
    # Of the ranges that repeat most (forward, backward, optimizer: once a step each), the one
    # that comes first opens each step, and a step lasts until the next one opens.
    pattern = counts.sort("n", "first", "pattern", descending=[True, False, False])["pattern"][0]
    opens = top.filter(pl.col("pattern") == pattern).sort("pid", "start_ns")
    last = timed.group_by("pid").agg(last=pl.col("end_ns").max())  # the last step ends with the rank's last range
    opens = opens.join(last, on="pid").with_columns(
        end_ns=pl.col("start_ns").shift(-1).over("pid").fill_null(pl.max_horizontal("end_ns", "last"))
    )
    return numbered(opens, f"the repeating top-level NVTX range {pattern!r}, each step lasting until it opens again")
