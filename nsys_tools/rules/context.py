"""The run the rules look at: its exports (the ranks of one job), opened once, its span, and
what several rules read alike (the step table, a view's table, the twins' connection and
runtime calls), computed once."""

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
    options: ``step``, ``warmup``, ``slow``, ``flops_per_step``, ``peak_tflops``). ``engine``:
    where views are read (``run.engine``; threads here by default). ``accounting``: a dict
    that gets each export's ``read.accounted.accounting``, counted in the pass that reads the
    first view (``run.report.view_table``'s ``accounting``)."""

    paths: Sequence[Path]
    step_options: dict[str, Any] = field(default_factory=dict)
    read: dict[tuple, Any] = field(default_factory=dict, repr=False)  # view tables, by ``view_key``
    engine: Any = None
    accounting: dict[Path, Any] | None = None
    skipped: list[tuple[Path, str, str]] = field(default_factory=list)  # (export, rule, why) a rule read none of

    @cached_property
    def exports(self) -> list[Export]:
        return [open_export(p) for p in self.paths]

    @cached_property
    def dbs(self) -> list[analyze.Db]:
        """The exports as the twins of ``nsys analyze``'s rules read them (``analyze.Db``)."""
        return [analyze.Db(ex) for ex in self.exports]

    @cached_property
    def bounds(self) -> tuple[int, int] | None:
        """The first start and the last end of any CUDA call or GPU operation, over the exports."""
        lo, hi = None, None
        for db in self.dbs:
            ex = db.export
            parts = [
                f"SELECT min(start) AS a, max(end) AS b FROM {t} WHERE start > 0 AND {badrows.KEPT}"
                for t in SPAN_TABLES
                if ex.has(t)
            ]
            if not parts:
                continue
            a, b = db.fetch(f"SELECT min(a), max(b) FROM ({' UNION ALL '.join(parts)})")[0]
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
        rules that need one table, and ``summary``'s sections, share it."""
        return self.views([(name, options)])[0]

    def views(self, requests: Sequence[tuple[str, dict]]) -> list:
        """The tables of several views over the run, each ``(name, options)`` as ``view`` takes
        it: those not read yet are read together (``run.report.view_tables``: the views that
        read the same tables of an export read them once)."""
        keys = [view_key(name, options) for name, options in requests]
        todo = {k: r for k, r in zip(keys, requests, strict=True) if k not in self.read}
        if todo:
            from ..run.report import view_tables

            counted = self.accounting is None or set(self.paths) <= set(self.accounting)
            counts = {} if counted else {"accounting": self.accounting}
            tables = view_tables(list(self.paths), list(todo.values()), engine=self.engine, **counts)
            self.read.update(zip(todo, tables, strict=True))
        return [self.read[k] for k in keys]

    @cached_property
    def findings(self) -> list:
        """Every rule's findings with its default options (``rules.diagnose``), found once: a
        summary and the page of the run share them."""
        from . import diagnose

        return diagnose(self)

    @cached_property
    def nccl(self) -> bool:
        """Whether an export of the run may hold an NCCL kernel (one named ``nccl...``, case
        aside, as ``views.utilization.op_class`` tells them): false only where no string of it
        starts so, which its strings table tells without a read of its kernels."""
        like = "SELECT 1 FROM StringIds WHERE value LIKE 'nccl%' LIMIT 1"
        return any(not db.export.has("StringIds") or db.fetch(like) for db in self.dbs)

    def skipped_notes(self) -> list[str]:
        """One line per export that rules could not read (``skipped``): which, and why."""
        lines = []
        for source in dict.fromkeys(s for s, _, _ in self.skipped):
            rules = [r for s, r, _ in self.skipped if s == source]
            whys = "; ".join(dict.fromkeys(w for s, _, w in self.skipped if s == source))
            lines.append(f"{source}: {', '.join(rules)} left out: {whys}")
        return lines

    def in_steady(self, pid: int, starts: Sequence[int], ends: Sequence[int]) -> list[int]:
        """How much of each interval ``[starts[i], ends[i])`` falls in rank ``pid``'s steady steps
        that are not slow: setup and warm-up are the ``setup`` rule's, slow steps ``slow_steps``',
        which names their cause; all of it where the run has no steps (nothing to tell apart).

        The time of steady steps before ``t`` is ``F(t) = sum over steps with start a < t of
        min(t, b) - a``, and an interval holds ``F(hi) - F(lo)`` of it: with the starts and ends
        sorted and summed once, every interval costs two binary searches."""
        import polars as pl

        lo, hi = pl.Series(starts, dtype=pl.Int64), pl.Series(ends, dtype=pl.Int64)
        steps = self.steps
        if steps.is_empty():
            return (hi - lo).to_list()
        own = steps.filter((pl.col("pid") == pid) & (pl.col("phase") == "steady") & ~pl.col("slow")).unique("step")
        a = own["start_ns"].cast(pl.Int64).sort()
        b = (own["start_ns"] + own["duration_ns"]).cast(pl.Int64).sort()

        def before(t: pl.Series) -> pl.Series:
            total = pl.Series([0], dtype=pl.Int64)
            ia, ib = a.search_sorted(t, side="left"), b.search_sorted(t, side="left")
            sa, sb = pl.concat([total, a.cum_sum()]).gather(ia), pl.concat([total, b.cum_sum()]).gather(ib)
            return (ia.cast(pl.Int64) - ib.cast(pl.Int64)) * t - sa + sb

        return (before(hi) - before(lo)).to_list()


def view_key(name: str, options: dict[str, Any]) -> tuple:
    """A view and its options as a key (lists as tuples)."""
    return name, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items()))
