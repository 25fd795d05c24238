"""The front door: ``nsys_tools.open(path)`` gives a ``Trace`` that also renders the standard views.

It sits above ``read`` and ``views``: the frame layer (``read.trace.Trace``) knows no view, and the
views take a frame-layer trace, so neither imports the other's layer upward.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from . import views
from .read import trace as _trace
from .read.export import open_export

if TYPE_CHECKING:
    import polars as pl


class Trace(_trace.Trace):
    """An opened Nsight Systems export, read as frames, with the standard tables. Use ``nsys_tools.open(path)``."""

    @_trace._deferred
    def view(self, name: str, by: Iterable[str] = (), **options) -> pl.LazyFrame:
        """A standard table of this export (``nsys_tools.views``): "kernels", "ranges", "api",
        "memops" or "gaps", split by any of ``by=["device", "process", "stream"]``; ``options``
        as ``nsys-tools report`` takes them (``names``, ``include_memops``, ``nesting``,
        ``min_gap_ns``)."""
        return views.table(self, name, by, **options).lazy()


def open(path: str | Path, nsys: str | Path | None = None) -> Trace:  # noqa: A001 - the facade's name
    """Open an export (``.sqlite`` as given, or ``.nsys-rep`` exported through nsys) for reading
    as frames: every frame method (and ``view``) returns a LazyFrame at once, read at ``.collect()``."""
    return Trace(open_export(path, nsys), lazy=True)
