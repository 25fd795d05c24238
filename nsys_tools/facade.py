"""The front door: ``nsys_tools.open(path)`` gives a ``Trace`` that also renders the standard views.

``trace.view.NAME(by=..., **options)`` is one method per registered view, its keyword arguments
made from the view's ``Options`` (``views.contract``): ``trace.view.utilization(bin_ns="10ms")``,
``trace.view.idle(longest=5)``. ``trace.view("NAME", ...)`` is the same call by name. Each returns a
LazyFrame at once; the table is computed at the first ``.collect()``.

It sits above ``read`` and ``views``: the frame layer (``read.trace.Trace``) knows no view, and the
views take a frame-layer trace, so neither imports the other's layer upward.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from . import views
from .read import trace as _trace
from .read.export import open_export
from .read.window import WindowSpec, resolve

if TYPE_CHECKING:
    import polars as pl

TYPES = {"int": int, "float": float, "str": str, "bool": bool}


class Trace(_trace.Trace):
    """An opened Nsight Systems export, read as frames, with the standard tables. Use ``nsys_tools.open(path)``."""

    @property
    def view(self) -> Views:
        """The standard tables of this export: ``trace.view.NAME(...)``, one method per view."""
        return Views(self)

    @_trace._deferred
    def _table(self, name: str, by: Iterable[str] = (), **options) -> pl.LazyFrame:
        return views.table(self, name, by, **options).lazy()


class Views:
    """One method per registered view (``dir()`` lists them), each with the view's options as
    keyword arguments: ``by`` (any of ``"device"``, ``"process"``, ``"stream"``), ``window`` (a
    ``read.window.WindowSpec``, as ``--from``/``--to``/``--within``/``--skip-first`` give it, or a
    ``Window``: only what starts in it), and the fields of its ``Options``, typed and with their
    defaults."""

    def __init__(self, trace: Trace):
        self._trace = trace

    def __call__(self, name: str, by: Iterable[str] = (), **options) -> pl.LazyFrame:
        """View ``name``'s table, split by ``by``, with ``options`` (as its method takes them)."""
        return getattr(self, name)(by=by, **options)

    def __getattr__(self, name: str) -> Callable[..., pl.LazyFrame]:
        if name.startswith("_") or name not in views.REGISTRY:
            raise AttributeError(f"no view {name!r}: the views are {', '.join(views.names())}")
        return method(views.spec(name), self._trace)

    def __dir__(self) -> list[str]:
        return sorted([*views.names(), *super().__dir__()])


def signature(view: views.View) -> inspect.Signature:
    """The keyword arguments of view ``view``'s method: ``by``, ``window`` and its options."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter("by", keyword, default=(), annotation=Iterable[str]),
        inspect.Parameter("window", keyword, default=None, annotation="WindowSpec | Window | None"),
    ]
    for o in view.options:
        kind = Literal[o.choices] if o.choices else TYPES[o.type]
        kind = kind | str if o.parse == "time" else kind  # a length of time may be given as text: "10ms"
        params.append(inspect.Parameter(o.name, keyword, default=o.default, annotation=kind))
    return inspect.Signature(params, return_annotation="pl.LazyFrame")


def method(view: views.View, trace: Trace) -> Callable[..., pl.LazyFrame]:
    """The method of view ``view`` on ``trace``: checks its arguments, and returns the table lazily."""
    sig = signature(view)

    def table(**given) -> pl.LazyFrame:
        bound = sig.bind(**given)  # an argument the view does not take is a TypeError here
        by, window = bound.arguments.pop("by", ()), bound.arguments.pop("window", None)
        options = views.values(view.name, bound.arguments)  # a value it cannot take is a ValueError here
        if isinstance(window, WindowSpec):  # resolved now, on the export (its NVTX ranges), not on the empty probe
            window = resolve(trace, window)
        return trace._table(view.name, tuple(by), **({"window": window} if window is not None else {}), **options)

    table.__name__ = table.__qualname__ = view.name
    table.__signature__ = sig
    lines = [f"{view.summary[:1].upper()}{view.summary[1:]} (view ``{view.name}``).", ""]
    lines += [f"{o.name} ({o.type}, default {o.default!r}; {o.flag}): {o.help}" for o in view.options]
    table.__doc__ = "\n".join(lines).strip()
    return table


def open(path: str | Path, nsys: str | Path | None = None) -> Trace:  # noqa: A001 - the facade's name
    """Open an export (``.sqlite`` as given, or ``.nsys-rep`` exported through nsys) for reading
    as frames: every frame method (and each view's) returns a LazyFrame at once, read at ``.collect()``."""
    return Trace(open_export(path, nsys), lazy=True)
