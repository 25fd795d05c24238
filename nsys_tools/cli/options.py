"""Options and choices several commands share, and their parsing."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import views
from ..convention import DEFAULT_OUTPUTS, OUTPUT_POLICIES


class Names(str, Enum):
    short = "short"
    demangled = "demangled"
    op = "op"


class Baseline(str, Enum):
    auto = "auto"
    nsys = "nsys"
    sql = "sql"
    none = "none"


class Nesting(str, Enum):
    innermost = "innermost"
    all = "all"


class ViewFormat(str, Enum):
    """Format of a report's table: a text format, or Parquet (written to --output)."""

    markdown = "markdown"
    csv = "csv"
    json = "json"
    table = "table"
    parquet = "parquet"


ReexportOption = Annotated[
    bool,
    typer.Option(
        "--reexport",
        help="Read a .sqlite with a .nsys-rep beside it through the report, exported again through nsys when the "
        "report is newer (by default a .sqlite is read as given); also export again over a scrubbed export.",
    ),
]


# The window every view, summary and timeline takes (read.window).
FromOption = Annotated[
    Optional[str], typer.Option("--from", help="Only what starts after this time from the session start (1.5s, 200ms, 30us).")
]


ToOption = Annotated[Optional[str], typer.Option("--to", help="Only what starts before this time from the session start.")]


WithinOption = Annotated[
    Optional[str],
    typer.Option(
        help="Only each rank's n-th instance of an NVTX range, GLOB#n (GLOB: first to last), and the GPU work launched in it."
    ),
]


MergeOption = Annotated[
    bool,
    typer.Option(
        "--merge", help="Read exports of separate runs (captures that do not overlap in time) as one run; default: refuse."
    ),
]


SkipFirstOption = Annotated[
    int,
    typer.Option(
        "--skip-first",
        min=0,
        help="Drop each rank's first N steps: instances of --within's range, else the steps --view steps finds "
        "(of nested ranges, the outermost).",
    ),
]


def _by(text: str | None) -> list[str]:
    """``--by device,process,stream`` (any subset) as a list, checked."""
    from ..views import BY

    keys = [k.strip() for k in (text or "").split(",") if k.strip()]
    unknown = [k for k in keys if k not in BY]
    if unknown:
        raise typer.BadParameter(f"unknown key {unknown[0]!r}: choose from {', '.join(BY)}", param_hint="--by")
    return keys


def _window(time_from, time_to, within, skip_first, bin_window):
    """The ``--from/--to/--within/--skip-first`` window (None for the whole run) and the
    ``--window`` length in ns (0: none), checked before any export is read."""
    from ..read.window import WindowSpec, parse_time, split_within

    for name, value in (("--from", time_from), ("--to", time_to), ("--window", bin_window)):
        if value is not None:
            try:
                parse_time(value)
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint=name) from None
    if within is not None:
        try:
            split_within(within)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--within") from None
    bin_ns = parse_time(bin_window) if bin_window is not None else 0
    if bin_window is not None and bin_ns <= 0:
        raise typer.BadParameter("a window lasts longer than 0 ns", param_hint="--window")
    spec = WindowSpec(time_from, time_to, within, skip_first)
    return (spec if spec else None), bin_ns


StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict", help="Fail on a bad entry of a folder or glob (broken symlink, FIFO, unreadable) instead of skipping it."
    ),
]


LedgerOption = Annotated[
    Optional[Path], typer.Option("--ledger", help="Ledger database (default: $NSYS_TOOLS_LEDGER, else reports/ledger.sqlite).")
]


class L2Mode(str, Enum):
    cold = "cold"
    warm = "warm"


PluginOption = Annotated[
    Optional[list[str]], typer.Option("--plugin", help="Op plugin: a .py file or an importable module (repeatable).")
]
SettleOption = Annotated[
    float,
    typer.Option(
        help="Seconds of untraced calls after the warm-up, so that compute-bound work is traced at the clock "
        "its power draw settles to (matmul: 10)."
    ),
]
PrepareJobsOption = Annotated[
    int,
    typer.Option(
        min=0,
        help="Build and check every shape's implementations in this many parallel processes before the "
        "captures, so each capture's setup finds its kernels compiled (0: compile inside each capture).",
    ),
]


# The output policies (nsys_tools.convention): one list, one default.
Outputs = Enum("Outputs", {p: p for p in OUTPUT_POLICIES}, type=str)


OUTPUTS_DEFAULT = Outputs(DEFAULT_OUTPUTS)


Declared = Enum("Declared", {p: p for p in (*OUTPUT_POLICIES, "unknown")}, type=str)


def _items(text: str | None) -> list[str]:
    return [s.strip() for s in (text or "").split(",") if s.strip()]


def _view_option(view: str, name: str):
    """Option ``name`` of view ``view`` (its ``Options`` declaration: flag, type, help, default, least value)
    for a command other than ``report``, which makes its view options itself (``cli/generated.py``)."""
    o = views.spec(view).option(name)
    default = "" if o.default in ("", 0, None) else f" (default {o.default:g})"
    info = typer.Option(o.flag, help=f"{o.help}{default}", min=o.min, show_default=False)
    return Annotated[Optional[{"str": str, "int": int, "float": float}[o.type]], info]


# The step model (views.steps) as summary and diagnose take it, from the view's own declaration.
StepOption = _view_option("steps", "step")
WarmupOption = _view_option("steps", "warmup")
SlowOption = _view_option("steps", "slow")
FlopsOption = _view_option("steps", "flops_per_step")
PeakOption = _view_option("steps", "peak_tflops")
