"""census: the codegen of each implementation, compiled with no GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..render.tables import Format
from .app import _capture_exports, _output, _stale_notes, _write, app, friendly, stderr
from .options import PluginOption, _items


@app.command()
@friendly
def census(
    op: Annotated[Optional[str], typer.Option(help="Op (default: the only one installed).")] = None,
    plugin: PluginOption = None,
    shape: Annotated[
        Optional[str], typer.Option(help="Shape the kernels are compiled and launched for (default: the op's first).")
    ] = None,
    impls: Annotated[
        Optional[str], typer.Option(help="Comma-separated implementations with a census hook (default: the op's that have one).")
    ] = None,
    arch: Annotated[str, typer.Option(help="Target architecture.")] = "sm_90",
    capture: Annotated[
        Optional[Path], typer.Option(help="A sweep folder or export of this shape to cross-check against.")
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f")] = Format.markdown,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """The codegen of each implementation, compiled for a target with no GPU present.

    Per kernel: launch grid x block, registers, static shared and local memory, global loads and
    stores by width, barriers, warp shuffles and special-function instructions, read from the
    SASS with cuobjdump. Implementations take part through their census hook (Impl.compile).
    With --capture, registers, shared memory and launch configuration are checked against what
    the trace recorded.
    """
    from ..plugin.loader import load
    from ..render.tables import render
    from ..study import census as C

    if impls is not None and not _items(impls):
        raise typer.BadParameter(f"{impls!r}: name at least one implementation, e.g. ours,triton", param_hint="--impls")
    target = _output(output, [capture] if capture else [])
    registry = load(plugin or [])
    chosen = registry.op(op)
    entries = registry.impls(chosen, impls)
    if not impls:
        entries = [i for i in entries if i.compile is not None]
    table = C.census(chosen, shape or chosen.default_shapes[0], entries, arch)
    if capture is not None:
        _stale_notes(_capture_exports(capture))
        table = C.cross_check(table, capture)
        for impl, fields in zip(table["impl"], table["disagrees"], strict=True):
            if fields:
                stderr.print(f"Warning: {impl}: census and trace disagree on {fields}", markup=False)
    _write(C.markdown(table) if fmt is Format.markdown else render(table, fmt), target)
