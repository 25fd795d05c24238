"""The parts of ``report`` made from the views registry (``nsys_tools.views``), each time the command
is built: the ``--view`` choices, one flag per view option (``views.contract.Option``), the help of
``report --view NAME --help`` (the options of NAME only), and the check that an option given
belongs to the view chosen."""

from __future__ import annotations

import copy
import inspect
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import typer
import typer.core

from .. import views
from ..views.contract import Option, OptionError

if TYPE_CHECKING:
    import click

PYTHON = {"int": int, "float": float, "str": str, "bool": bool}
CLI_TYPE = {"us": float, "time": str}  # the flag's type where its text is parsed (Option.parse)


def owners() -> dict[str, tuple[Option, list[str]]]:
    """Each option's keyword -> (its declaration, the views that take it). Views that share an option
    (``--names``, ``--step``) declare it alike: the same flag, type and parsing (a default of each)."""
    found: dict[str, tuple[Option, list[str]]] = {}
    for name in views.names():
        for o in views.spec(name).options:
            if o.name in found:
                first, names = found[o.name]
                if (first.flag, first.type, first.parse) != (o.flag, o.type, o.parse):
                    raise ValueError(f"views {names[0]} and {name} declare option {o.name} differently")
                names.append(name)
            else:
                found[o.name] = (o, [name])
    return found


def _kind(o: Option, name: str):
    """The flag's Python type for typer: a choice for a ``Literal``, else the declared type."""
    if o.choices:
        return Enum(name, {c: c for c in o.choices}, type=str)
    return CLI_TYPE.get(o.parse, PYTHON[o.type])


def view_parameters() -> list[inspect.Parameter]:
    """One keyword parameter per view option, as typer reads it (unset: None; a flag: False)."""
    params = []
    for key, (o, names) in owners().items():
        kind = _kind(o, f"{key}_choice")
        info = typer.Option(o.flag, help=f"--view {' or '.join(names)}: {described(o)}", show_default=False)
        annotation = Annotated[kind if o.type == "bool" else Optional[kind], info]
        default = False if o.type == "bool" else None
        params.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
    return params


def described(o: Option) -> str:
    """An option's help, with its default where the flag's text is the value's."""
    return o.help + ("" if o.parse or o.type == "bool" or o.default in ("", None) else f" (default {o.default})")


def view_choice() -> type[Enum]:
    """The ``--view`` choices: the views registered now."""
    return Enum("View", {name: name for name in views.names()}, type=str)


def view_help() -> str:
    return "The table: " + "; ".join(f"{v.name}, {v.summary}" for v in views.REGISTRY.values()) + "."


def given_options(view: str, given: dict[str, Any]) -> dict[str, Any]:
    """The view options set on the command line, as values of view ``view``'s options: one that
    another view takes is a usage error naming the views it belongs to."""
    known = owners()
    options = {}
    for key, value in given.items():
        if value is None or value is False:
            continue
        o, names = known[key]
        if view not in names:
            shown = " or ".join(f"--view {n}" for n in names)
            raise typer.BadParameter(f"applies to {shown}, not --view {view}", param_hint=o.flag)
        try:
            options[key] = o.value(value.value if isinstance(value, Enum) else value, flag=True)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=o.flag) from None
    check = getattr(views.get(view), "check_options", None)
    try:
        if check is not None:
            check(options)
    except OptionError as exc:
        raise typer.BadParameter(str(exc), param_hint=exc.flag) from None
    return options


def flags_given(given: dict[str, Any]) -> list[str]:
    known = owners()
    return [known[k][0].flag for k, v in given.items() if v is not None and v is not False]


class Generated:
    """A command's callback whose signature is ``base``'s parameters (all but its ``**given``) and
    ``extra()``'s, read from the registry as it is when the command is built: typer makes the flags from it."""

    __annotations__ = {}  # typer reads no type hints beyond the signature's

    def __init__(self, base: Callable, extra: Callable[[], list[inspect.Parameter]], choices: dict):
        self.base, self.extra, self.choices = base, extra, choices
        self.__name__, self.__doc__, self.__module__ = base.__name__, base.__doc__, base.__module__
        self.__qualname__ = base.__qualname__
        self._made: tuple[tuple, inspect.Signature] | None = None

    @property
    def __signature__(self) -> inspect.Signature:
        """Made again when the registry has changed since it was last made (typer reads it twice a build)."""
        registry = tuple(views.REGISTRY.values())
        if self._made is None or self._made[0] != registry:
            self._made = (registry, self._signature())
        return self._made[1]

    def _signature(self) -> inspect.Signature:
        own = inspect.signature(self.base, eval_str=True).parameters.values()
        params = []
        for p in own:
            if p.kind is p.VAR_KEYWORD:
                continue
            if p.name in self.choices:  # a choice of the registry's names now
                kind, info = self.choices[p.name]()
                p = p.replace(annotation=Annotated[kind, info])
            params.append(p.replace(kind=p.KEYWORD_ONLY))
        return inspect.Signature([*params, *self.extra()])

    def __call__(self, **given):
        return self.base(**given)


class ViewCommand(typer.core.TyperCommand):
    """``report``: with ``--view NAME``, ``--help`` lists only NAME's options among the views'."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        for i, arg in enumerate(args):
            if arg == "--view" and i + 1 < len(args):
                ctx.meta["view"] = args[i + 1]
            elif arg.startswith("--view="):
                ctx.meta["view"] = arg.split("=", 1)[1]
        return super().parse_args(ctx, args)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        ctx.meta["helping"] = True
        try:
            super().format_options(ctx, formatter)
        finally:
            ctx.meta["helping"] = False

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        view = ctx.meta.get("view")
        if not ctx.meta.get("helping") or view not in views.REGISTRY:
            return params
        known = owners()
        shown = []
        for p in params:
            if p.name in known and view not in known[p.name][1]:
                continue
            if p.name in known:  # the help of this view's own declaration
                p = copy.copy(p)
                p.help = described(views.spec(view).option(p.name))
            shown.append(p)
        return shown
