"""The standard tables of an export, each checked against its ``nsys stats`` twin.

Each registered view (``names()``) declares what one row of its table is (``View.rows``) and the
``nsys`` report or recipe whose numbers it gives (``View.twin``); the reference pages of the docs
are made from those declarations.

Each view is one module that keeps the contract of ``contract.py``: it declares its name, help,
twin, chart (or why it has none), columns and typed ``Options``, and its steps ``read``,
``partial`` and ``finalize`` (an ordered view: a fold over slices in time order), so that one
export and many (on one machine or one task per export on a cluster) share every step.

A splittable view whose rows come partly from the small tables alone (``nccl``: the payloads of
NCCL's NVTX ranges, which every piece of an export holds whole) names that part ``once(trace,
keys, **options)`` (None where it has none) and the rest ``pieces(trace, keys, **options)``; its
``read`` is the two together. ``run/chunked.py`` reads ``pieces`` per piece and ``once`` one
time per export (``VIEW``'s ``parts``). A view read in pieces only under some options lists the
others in ``VIEW``'s ``whole`` (``hist``: ``(("of", "ranges"),)``, a range instance's operations
may fall in several pieces).

``keys`` are the leading group-by columns: ``by_columns(["device", "process", "stream"])``, and
``file`` when exports are kept apart. ``partial`` and ``finalize`` below run a view by name,
giving each option to the step its declaration names; ``table`` is both for one trace.

The registry finds every module of this folder that declares a view (``discover``, which reads
the declaration from the source, so no view module is imported until it is used): the CLI's
``--view`` choices and options, the Python API's methods, the pipeline and ``run/chunked.py``
read the registry, so a new view is its one file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .contract import TableView, View, check, declared

if TYPE_CHECKING:
    import polars as pl

    from ..read.trace import Trace


REGISTRY: dict[str, View] = {}


def register(view: View) -> View:
    """Add ``view`` (a later registration of a name replaces the earlier one)."""
    if not view.name.isidentifier():
        raise ValueError(f"view name {view.name!r} is not an identifier")
    if view.splittable and view.ordered:
        raise ValueError(f"view {view.name}: a view is read in pieces (splittable) or in time order (ordered), not both")
    if not view.module:
        raise ValueError(f"view {view.name}: no module")
    REGISTRY[view.name] = view
    return view


def discover(folder: Path, package: str) -> list[View]:
    """Register every module of ``folder`` (the package ``package``, "" for a folder on
    ``sys.path``) that declares a view, in order of file name; the views it registered."""
    found = []
    for file in sorted(folder.glob("*.py")):
        view = declared(file)
        if view is not None:
            module = f"{package}.{file.stem}" if package else file.stem
            found.append(register(replace(view, module=module)))
    return found


discover(Path(__file__).parent, __name__)


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def spec(name: str) -> View:
    """The registered view ``name``."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown view {name!r}: choose from {', '.join(REGISTRY)}") from None


def __getattr__(name: str):
    """``NAMES``, ``SPLITTABLE`` and ``ORDERED``: the registered views' names, as they are now."""
    if name == "NAMES":
        return names()
    if name == "SPLITTABLE":
        return tuple(v.name for v in REGISTRY.values() if v.splittable)
    if name == "ORDERED":
        return tuple(v.name for v in REGISTRY.values() if v.ordered)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The --by keys and the columns each adds. A stream id is unique only within a process on one
# device, so the stream key carries both.
BY = {
    "device": ("gpu_id", "gpu_name"),
    "process": ("pid", "process_name"),
    "stream": ("gpu_id", "pid", "stream_id"),
}


def by_columns(by: Iterable[str]) -> list[str]:
    """The group-by columns for ``--by`` keys, in a fixed order (device, process, stream)."""
    wanted = set(by)
    unknown = wanted - set(BY)
    if unknown:
        raise ValueError(f"unknown --by key {sorted(unknown)[0]!r}: choose from {', '.join(BY)}")
    return list(dict.fromkeys(c for key in BY if key in wanted for c in BY[key]))


_CHECKED: set[str] = set()


def get(name: str) -> TableView:
    """The module of view ``name``, held to the contract (``contract.check``) when first loaded: a
    ``TableView`` (an ``OrderedView`` where the view is ordered)."""
    view = spec(name)
    module = view.load()
    if view.module not in _CHECKED:
        check(view, module)
        _CHECKED.add(view.module)
    return module


def windowed(trace: Trace, window) -> Trace:
    """``trace`` through ``window``: a ``read.window.WindowSpec`` (resolved against it), a
    ``Window``, or None (the whole run)."""
    from ..read.window import WindowSpec, resolve

    if window is None:
        return trace
    return trace.within(resolve(trace, window) if isinstance(window, WindowSpec) else window)


def partial(name: str, trace: Trace, by: Sequence[str], *, window=None, part: str = "read", **options) -> pl.LazyFrame:
    """View ``name``'s partial table of one trace, grouped by the ``by`` columns (``by_columns``),
    of what starts inside ``window`` (``windowed``); ``part`` as ``read`` takes it (None where
    the view's ``once`` has no rows)."""
    view = get(name)
    trace = windowed(trace, window)
    options = values(name, options)
    rows = read(name, trace, by, part=part, **options)
    return None if rows is None else view.partial(rows, by, **window_options(name, options))


def values(name: str, options: dict) -> dict:
    """``options`` of view ``name`` as their values (``Option.value``: ``bin_ns="10ms"`` is 10 ms);
    TypeError names an option the view does not take, ValueError a value it cannot or options that
    do not go together (the view's ``check_options``)."""
    view = spec(name)
    given = {k: view.option(k).value(v) for k, v in options.items()}
    check = getattr(get(name), "check_options", None)
    if check is not None:
        check(given)
    return given


def read(name: str, trace: Trace, by: Sequence[str], *, part: str = "read", **options) -> pl.LazyFrame:
    """View ``name``'s frame of one trace (its ``read``; ``part="pieces"`` or ``"once"``, those
    parts of it where the view has them), with the options that step takes."""
    view = get(name)
    if not spec(name).parts:  # all of it is read per piece
        if part == "once":
            return None
        part = "read"
    return getattr(view, part)(trace, by, **spec(name).at("read", options))


def splits(name: str, options: dict) -> bool:
    """Whether view ``name`` with ``options`` is read in pieces: it is splittable, and no option
    has a value its ``whole`` lists."""
    return spec(name).splittable and not any(options.get(k) == v for k, v in spec(name).whole)


def window_options(name: str, options: dict) -> dict:
    """The options of view ``name`` that its ``partial`` (and ``window``) takes."""
    return spec(name).at("partial", options)


def finalize(name: str, partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """View ``name``'s table from partials (of one trace or many, concatenated); its names as
    plain strings."""
    import polars as pl

    return get(name).finalize(partials, keys).with_columns(pl.col(pl.Categorical).cast(pl.String))


def table(trace: Trace, name: str, by: Iterable[str] = (), **options) -> pl.DataFrame:
    """View ``name`` of one trace, split by the ``--by`` keys in ``by``."""
    keys = by_columns(by)
    return finalize(name, partial(name, trace, keys, **options), keys).collect()


def empty(name: str, keys: Sequence[str]) -> pl.DataFrame:
    """View ``name``'s table with no rows (every export failed to read)."""
    import polars as pl

    return pl.DataFrame(schema=dict.fromkeys([*keys, *get(name).COLUMNS], pl.Null))
