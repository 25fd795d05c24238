"""GPU operations per kind (kernel, memcpy, memset): how many, and their total time.

A view in one file, as ``docs/guides/new-view.md`` writes it: put it in ``nsys_tools/views/`` and it is
``nsys-tools report --view ops``, with its option and its chart, and ``trace.view.ops(...)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from nsys_tools.views import View
from nsys_tools.views.contract import option

VIEW = View("ops", "GPU operations per kind: how many, their total time", splittable=True)


@dataclass(frozen=True)
class Options:
    kind: str = option("", "--kind", "Only the operations of this kind (kernel, memcpy, memset).")


COLUMNS = ("kind", "ops", "total_ns")


def read(trace, by, *, kind=""):
    """The GPU operations: the ``by`` columns, their kind and duration."""
    ops = trace.gpu_ops(attributed=False, columns=[*by, "kind", "duration_ns"]).select(*by, "kind", "duration_ns")
    return ops.filter(pl.col("kind").cast(pl.String) == kind) if kind else ops


def partial(ops, keys):
    """Counts and totals: partials of any parts of the operations add up."""
    return ops.group_by([*keys, "kind"]).agg(ops=pl.len(), total_ns=pl.col("duration_ns").sum())


def finalize(partials, keys):
    groups = [*keys, "kind"]
    merged = partials.group_by(groups).agg(pl.col("ops").sum(), pl.col("total_ns").sum())
    return merged.with_columns(pl.col("kind").cast(pl.String)).sort(groups).select(*keys, *COLUMNS)


def chart(table):
    import altair as alt

    return alt.Chart(table).mark_bar().encode(y="kind:N", x="ops:Q", tooltip=["kind", "ops", "total_ns"])
