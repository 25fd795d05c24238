"""The run the rules look at: its exports (the ranks of one job), opened once, its span, and
what several rules read alike (the step table), computed once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..read import badrows
from ..read.export import Export, open_export
from . import analyze

SPAN_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
)


@dataclass
class Run:
    """The exports of one run. ``step_options``: how the step table is made (``views.steps``'s
    options: ``step``, ``warmup``, ``slow``, ``flops_per_step``, ``peak_tflops``)."""

    paths: Sequence[Path]
    step_options: dict[str, Any] = field(default_factory=dict)
    read: dict[tuple, Any] = field(default_factory=dict, repr=False)  # view tables, by ``view_key``

    @cached_property
    def exports(self) -> list[Export]:
        return [open_export(p) for p in self.paths]

    @cached_property
    def bounds(self) -> tuple[int, int] | None:
        """The first start and the last end of any CUDA call or GPU operation, over the exports."""
        lo, hi = None, None
        for ex in self.exports:
            parts = [
                f"SELECT min(start) AS a, max(end) AS b FROM {t} WHERE start > 0 AND {badrows.KEPT}"
                for t in SPAN_TABLES
                if ex.has(t)
            ]
            if not parts:
                continue
            a, b = analyze.fetch(ex, f"SELECT min(a), max(b) FROM ({' UNION ALL '.join(parts)})")[0]
            if a is not None:
                lo, hi = a if lo is None else min(lo, a), b if hi is None else max(hi, b)
        return None if lo is None else (lo, hi)

    @property
    def span_ns(self) -> int:
        return 0 if self.bounds is None else self.bounds[1] - self.bounds[0]

    @cached_property
    def steps(self):
        """The step table (``views.steps``) of the run, and the note that names its source."""
        return self.view("steps", **self.step_options)

    def view(self, name: str, **options):
        """The ``name`` view's table over the run (``run.report.view_table``), read once: the
        rules that need one table, and a caller that already holds it (``hold``), share it."""
        key = view_key(name, options)
        if key not in self.read:
            from ..run.report import view_table

            self.read[key] = view_table(list(self.paths), name, **options)
        return self.read[key]

    def hold(self, name: str, table, **options) -> None:
        """Keep ``table``, the ``name`` view over the whole run with ``options``, for ``view``."""
        self.read[view_key(name, options)] = table

    def in_steady(self, pid: int, lo: int, hi: int) -> int:
        """How much of ``[lo, hi)`` falls in rank ``pid``'s steady steps; all of it where the run
        has no steps (nothing to tell setup and warm-up apart)."""
        import polars as pl

        steps = self.steps
        if steps.is_empty():
            return hi - lo
        own = steps.filter((pl.col("pid") == pid) & (pl.col("phase") == "steady")).unique("step")
        a, b = pl.col("start_ns"), pl.col("start_ns") + pl.col("duration_ns")
        return int(own.select((pl.min_horizontal(b, hi) - pl.max_horizontal(a, lo)).clip(lower_bound=0).sum()).item())


def view_key(name: str, options: dict[str, Any]) -> tuple:
    """A view and its options as a key (lists as tuples)."""
    return name, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items()))
