"""ledger add, reject, list, and history: the ledger of sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import BadExport
from ..render.tables import Format
from .app import _allow_plugins, app, emit, friendly, stderr
from .options import L2Mode, LedgerOption, PluginOption

ledger_app = typer.Typer(
    help="The ledger of sweeps: sessions, statistics, rejected variants.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(ledger_app, name="ledger")


@ledger_app.command("add")
@friendly
def ledger_add(
    sweeps: Annotated[list[Path], typer.Argument(help="Sweep folders to add (or replace).")],
    ledger: LedgerOption = None,
    plugin: PluginOption = None,
) -> None:
    """Add sweeps to the ledger, with their statistics and contention verdict. A sweep in which no
    shape completed is refused."""
    from ..study import ledger as L
    from ..study.folder import load

    _allow_plugins(plugin, sweeps)

    path = ledger or L.default_path(sweeps[0])
    for folder in sweeps:
        row = L.add(load(folder), path)
        state = "quiet" if row["quiet"] else "under load"
        stderr.print(f"{row['id']}: added to {path} ({state})", markup=False)


@ledger_app.command("reject")
@friendly
def ledger_reject(
    variant: Annotated[str, typer.Argument(help="The variant's name.")],
    metric: Annotated[str, typer.Option(help='What it measured, e.g. "36.49 µs kernel at 4096x4096 vs 34.47".')],
    why: Annotated[str, typer.Option(help="Why it was not kept.")],
    sweep: Annotated[Optional[str], typer.Option(help="The sweep the metric comes from.")] = None,
    op: Annotated[
        Optional[str], typer.Option(help="The op it is a variant of, where no --sweep says (issue comments show an op's own).")
    ] = None,
    ledger: LedgerOption = None,
) -> None:
    """Record a variant that was measured and not kept; reports carry a "Rejected so far" table.
    The default ledger must exist; a new one is made only where --ledger names it."""
    from ..study import ledger as L

    path = ledger or L.default_path()
    if ledger is None and not path.exists():
        raise BadExport(path, "no ledger here", "pass --ledger PATH to start one")
    L.reject(path, variant, metric, why, sweep, op)
    stderr.print(f"{variant}: recorded as rejected in {path}", markup=False)


@ledger_app.command("list")
@friendly
def ledger_list(
    fmt: Annotated[Format, typer.Option("--format", "-f")] = Format.markdown,
    ledger: LedgerOption = None,
) -> None:
    """The sessions in the ledger, oldest first."""
    from ..render.tables import render
    from ..study import ledger as L

    emit(render(L.sessions(ledger or L.default_path()), fmt))


@app.command()
@friendly
def history(
    shape: Annotated[str, typer.Option(help="Shape, as the op writes it, e.g. 4096x768.")],
    impl: Annotated[str, typer.Option(help="Implementation to follow.")],
    vs: Annotated[
        Optional[str], typer.Option(help="Control it is compared with in each session (default: the latest session's control).")
    ] = None,
    l2: Annotated[L2Mode, typer.Option(help="L2 mode of the sessions.")] = L2Mode.cold,
    op: Annotated[Optional[str], typer.Option(help="Op of the sessions, where several ops share a shape (default: any).")] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f")] = Format.markdown,
    ledger: LedgerOption = None,
) -> None:
    """The pair impl/vs per session, same session each time: "7.84/9.12, 7.84/9.09, ...", then a table."""
    from ..render.tables import render
    from ..study import ledger as L
    from ..study.folder import shape_text

    path = ledger or L.default_path()
    shape = shape_text(shape)
    vs = vs or L.latest_control(path)
    if impl == vs:
        raise typer.BadParameter(f"--impl and --vs are both {impl!r}: compare two implementations", param_hint="--vs")
    frame = (
        L.history(path, shape, impl, vs, l2.value, op=op)
        .drop_nulls(["impl_ns", "vs_ns"])
        .rename({"impl_ns": f"{impl}_ns", "vs_ns": f"{vs}_ns"})
    )
    if frame.is_empty():
        stderr.print(f"No session in the ledger has both {impl} and {vs} at {shape}.", markup=False)
        return
    if fmt is Format.markdown:
        pairs = ", ".join(f"{a / 1000:.2f}/{b / 1000:.2f}" for a, b in zip(frame[f"{impl}_ns"], frame[f"{vs}_ns"], strict=True))
        emit(f"{impl}/{vs} at {shape}, kernel median µs per session: {pairs}\n\n")
    emit(render(frame, fmt))
