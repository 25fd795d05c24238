"""What a view is: the one contract every module of ``nsys_tools/views`` (and a view written in a file
of its own, ``discover``) keeps. Standard library only: the registry, the command line and the docs
read a view's declaration without importing its module, which needs Polars.

A view module holds, at its top level:

* ``VIEW = View(name, help, ...)``: its name, one line of help, how it may be read
  (``splittable`` or ``ordered``), the ``nsys`` report or recipe it equals (``twin``), and, where it
  draws no chart, the reason (``no_chart``), all as literals;
* ``class Options``: a frozen dataclass whose fields are its options, each ``field: type =
  option(default, flag, help)``: the type, the default, one line of help and the command line's flag
  (``at``: the step that takes it, ``read`` or ``partial``; ``parse``: how the flag's text becomes
  the value);
* ``COLUMNS``: the table's columns after the ``--by`` keys;
* the steps of ``TableView`` (every view) and, for an ordered view, those of ``OrderedView``;
* ``chart(table)``: an Altair chart of its table, unless ``VIEW.no_chart`` says why there is none;
* optionally ``check_options(options)``, raising ``OptionError`` for options that do not go
  together, and ``note(table, **options)``, a line said under the table (or None).

``declared`` reads ``VIEW`` and ``Options`` from the source; ``check`` holds an imported module to
the contract (the steps take exactly the options declared for them).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import polars as pl

# How an option's text on the command line becomes its value (``Option.parse``):
PARSERS = {
    "": "as typed",
    "us": "a time in µs (a number), held in integer ns",
    "time": "a length of time with its unit (10ms, 1.5s, 200us), held in integer ns",
}
STEPS = ("read", "partial")
TYPES = {"int": int, "float": float, "str": str, "bool": bool}


@dataclass(frozen=True)
class Option:
    """One option of a view, as its ``Options`` field declares it."""

    name: str  # the keyword argument (the field's name)
    type: str  # as written: int, float, str, bool, or Literal["a", "b"]
    default: Any
    flag: str  # the command line's flag, --name
    help: str
    at: str = "read"  # the step that takes it: read or partial (and an ordered view's window)
    parse: str = ""  # PARSERS
    min: float | None = None  # the least value it takes (a number)

    @property
    def choices(self) -> tuple[str, ...]:
        """The values a ``Literal[...]`` type allows (empty for other types)."""
        if not self.type.startswith("Literal["):
            return ()
        return tuple(ast.literal_eval(f"({self.type[len('Literal[') : -1]},)"))

    def value(self, given: Any, *, flag: bool = False) -> Any:
        """``given`` as this option's value: as the flag gives it (``flag``), or as a keyword
        argument (where a length of time may also be text, ``"10ms"``); ValueError says what is wrong."""
        if self.parse == "time" and isinstance(given, str):
            from ..read.window import parse_time

            given = parse_time(given)
            if given <= 0:
                raise ValueError("a window lasts longer than 0 ns")
        elif self.parse == "us" and flag:
            import math

            if not math.isfinite(given) or given * 1000 > (1 << 63) - 1:
                raise ValueError(f"{given:g} µs is longer than any trace can be (at most 9.2e15 µs)")
            given = round(given * 1000)
        if self.choices and given not in self.choices:
            raise ValueError(f"{given!r} is not one of {', '.join(map(repr, self.choices))}")
        if self.min is not None and given < self.min:
            raise ValueError(f"{given:g} is below {self.min:g}")
        return given


def option(default: Any, flag: str, help: str, *, at: str = "read", parse: str = "", min: float | None = None) -> Any:
    """An ``Options`` field: its default, its flag on the command line, one line of help, the step
    that takes it, how the flag's text becomes its value (``PARSERS``) and the least value it takes."""
    if at not in STEPS or parse not in PARSERS or not flag.startswith("--"):
        raise ValueError(f"option {flag}: at is one of {STEPS}, parse one of {tuple(PARSERS)}, flag starts with --")
    return dataclasses.field(default=default, metadata={"flag": flag, "help": help, "at": at, "parse": parse, "min": min})


class OptionError(ValueError):
    """Options that do not go together (``check_options``): ``flag`` names the one to change."""

    def __init__(self, flag: str, message: str):
        super().__init__(message)
        self.flag = flag


@dataclass(frozen=True)
class View:
    """A view as the registry knows it, before its module (which needs Polars) is imported.

    Declared with one line of literals, ``VIEW = View(name, help, ...)``; ``options`` and ``module``
    are filled in by the registry (``declared``, ``discover``)."""

    name: str
    summary: str  # one line of help
    # Partials of any subsets of the operations (with their launch calls) merge into the partial of
    # all: ``run/chunked.py`` reads such a view a piece at a time.
    splittable: bool = False
    # The partial needs the operations in order of start time: read as pieces split by launch, then
    # as slices in time order (``OrderedView``), carrying what a slice needs of the earlier ones.
    ordered: bool = False
    twin: str = ""  # the nsys report or recipe whose numbers it gives, "" for none
    rows: str = ""  # what one row of its table is (after the --by keys)
    no_chart: str = ""  # why it draws no chart ("" where its module has ``chart``)
    by: tuple[str, ...] = ("device", "process", "stream")  # the --by keys it can be split by
    top: str = ""  # the column whose first N values ``--top N`` keeps, all their rows ("": the first N rows)
    # A splittable view whose rows come partly from the small tables alone: its ``read`` is ``once``
    # (those rows, read one time per export) and ``pieces`` (the rest, read per piece).
    parts: bool = False
    whole: tuple[tuple[str, Any], ...] = ()  # (option, value) pairs under which a splittable view is read whole
    options: tuple[Option, ...] = ()
    module: str = ""  # the module that declares it

    def load(self) -> ModuleType:
        return import_module(self.module)

    @property
    def columns(self) -> tuple[str, ...]:
        """The table's columns after the ``by`` keys."""
        return tuple(self.load().COLUMNS)

    def option(self, name: str) -> Option:
        for o in self.options:
            if o.name == name:
                return o
        raise TypeError(f"view {self.name} takes no option {name!r}")

    def at(self, step: str, options: dict) -> dict:
        """The options in ``options`` that ``step`` (read or partial) takes."""
        return {k: v for k, v in options.items() if self.option(k).at == step}


class TableView(Protocol):
    """The steps of every view, so that one export and many (one task per export, here or on a
    cluster) share each of them:

    * ``read``: the frame it needs, from the frame layer, only the columns it uses;
    * ``partial``: pure, per export (or per piece of one); partials of several exports concatenate
      and merge exactly (counts, totals, extremes, and the values medians need);
    * ``finalize``: pure, merges the concatenated partials and computes the table."""

    VIEW: View
    COLUMNS: Sequence[str]
    Options: type

    def read(self, trace, by: Sequence[str], **options) -> pl.LazyFrame: ...

    def partial(self, rows: pl.LazyFrame, keys: Sequence[str], **options) -> pl.LazyFrame: ...

    def finalize(self, partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame: ...


@dataclass
class Fold:
    """What an ordered view carries from one slice of the operations to the next: the partials of
    the slices so far (``found``) and the rows the next slice needs of the earlier ones (``held``:
    the operation holding each timeline busy, the end of each union so far). A view that needs
    more subclasses it (``idle.IdleFold``)."""

    found: list = dataclasses.field(default_factory=list)
    held: Any = None


class OrderedView(TableView, Protocol):
    """An ordered view's fold, which ``run/chunked.py`` runs over slices in order of start time:

    * ``split(rows, keys)``: one piece's rows to be ordered by ``start_ns``, and side rows (each
      piece's, kept once: a range instance's ancestry, the blocking calls) or None;
    * ``start(sides, keys)``: the fold's first state, a ``Fold``;
    * ``window(rows, keys, state, **options)``: folds one slice into the state;
    * ``close(state, sides, keys)``: the partial table.

    Its ``partial`` is the fold over one slice holding every row."""

    def split(self, rows: pl.LazyFrame, keys: Sequence[str]) -> tuple[pl.LazyFrame, pl.LazyFrame | None]: ...

    def start(self, sides: list, keys: Sequence[str]) -> Fold: ...

    def window(self, rows: pl.DataFrame, keys: Sequence[str], state: Fold, **options) -> Fold: ...

    def close(self, state: Fold, sides: list, keys: Sequence[str]) -> pl.LazyFrame: ...


def declared(file: Path) -> View | None:
    """The ``VIEW = View(...)`` a module's source declares at its top level, with the options of its
    ``class Options``, read without importing it; None where it declares none."""
    body = _declarations(file.read_text(encoding="utf-8"), str(file))
    view = None
    for node in body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        call = node.value if target is not None else None
        if isinstance(target, ast.Name) and target.id == "VIEW" and _calls(call, View.__name__):
            args, kwargs = _literals(call, file, "VIEW = View(...)")
            view = View(*args, **kwargs)
    if view is None:
        return None
    classes = [n for n in body if isinstance(n, ast.ClassDef) and n.name == "Options"]
    return dataclasses.replace(view, options=_options(classes[0], file) if classes else ())


def _declarations(source: str, name: str) -> list[ast.stmt]:
    """The top-level statements of ``source`` that can hold its ``VIEW`` and ``Options``: none
    where the text never names ``VIEW``; else those before its first top-level function, where
    neither name comes after it (a view's declarations head its module: each start costs a
    parse of every view's module head, not of every view); else all of them."""
    if "VIEW" not in source:
        return []
    first = re.search(r"^(?:async )?def\b", source, re.M)
    if first is not None and "VIEW" not in source[first.start() :] and "Options" not in source[first.start() :]:
        try:
            return ast.parse(source[: first.start()], name).body
        except SyntaxError:  # cut inside a string: read it all
            pass
    return ast.parse(source, name).body


def _calls(node, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _literals(call: ast.Call, file: Path, what: str) -> tuple[list, dict]:
    try:
        return [ast.literal_eval(a) for a in call.args], {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except ValueError:
        raise ValueError(f"{file}: {what} takes literal arguments only") from None


def _options(cls: ast.ClassDef, file: Path) -> tuple[Option, ...]:
    """The fields of ``class Options``: each ``name: type = option(default, flag, help, ...)``."""
    found = []
    for node in cls.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _calls(node.value, "option")):
            raise ValueError(f"{file}: each field of Options is `name: type = option(default, flag, help)`")
        args, kwargs = _literals(node.value, file, "option(...)")
        kind = ast.unparse(node.annotation)
        if kind not in TYPES and not kind.startswith("Literal["):
            raise ValueError(f"{file}: option {node.target.id} is typed {kind}: use {', '.join(TYPES)} or Literal[...]")
        found.append(Option(node.target.id, kind, *args, **kwargs))
    return tuple(found)


def check(view: View, module: ModuleType) -> None:
    """Hold ``module`` to the contract of ``view`` (what its source declared): the members it needs,
    ``Options`` as declared, and steps that take exactly the options declared for them, with the
    same defaults."""
    need = ["COLUMNS", "Options", "read", "partial", "finalize"]
    need += ["split", "start", "window", "close"] if view.ordered else []
    need += [] if view.no_chart else ["chart"]
    need += ["once", "pieces"] if view.parts else []
    missing = [m for m in need if not hasattr(module, m)]
    if missing:
        raise TypeError(f"view {view.name} ({module.__name__}) has no {', '.join(missing)}")
    stray = [m for m in ("once", "pieces", "split", "start", "window", "close") if hasattr(module, m) and m not in need]
    if stray:
        raise TypeError(f"view {view.name} ({module.__name__}) has {', '.join(stray)} that its VIEW does not declare")
    fields = dataclasses.fields(module.Options)
    if tuple((f.name, f.default, f.metadata.get("flag")) for f in fields) != tuple(
        (o.name, o.default, o.flag) for o in view.options
    ):
        raise TypeError(f"view {view.name}: its Options are not those its source declares")
    steps = [("read", module.read), ("partial", module.partial), *([("partial", module.window)] if view.ordered else [])]
    for step, fn in steps:
        takes = {p.name: p.default for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY}
        wanted = {o.name: o.default for o in view.options if o.at == step}
        if takes != wanted:
            raise TypeError(f"view {view.name}: {fn.__name__} takes {takes}, its Options declare {wanted} for {step}")
