"""compare: one capture against another, call for call."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..render.tables import Format
from .app import (
    _allow_plugins,
    _capture_exports,
    _folder_files,
    _output,
    _read_by,
    _skipped,
    _stale_notes,
    _write,
    app,
    friendly,
    stderr,
)
from .options import LedgerOption, Names, ReexportOption, StrictOption, _by


def _capture_files(path: Path) -> list[Path]:
    """The files one side of ``compare`` reads: a sweep folder's, or its exports."""
    from ..folder_format import is_sweep
    from ..read.inputs import expand_inputs

    return _folder_files(path) if is_sweep(path) else _read_by(expand_inputs([path]))


def _run(base: Path, new: Path, per: str | None, nsys, reexport: bool):
    """The run figures of BASE and NEW (``study.whole``) and each side's units of work, or None
    (with a note) where a side is not one run of exports."""
    from ..study import whole as W

    sides = [W.open_run(p, per=per, nsys=nsys, reexport=reexport) for p in (base, new)]
    if None in sides:  # sweeps: call for call, no run figures
        if per:
            raise typer.BadParameter("sweeps are compared call for call: --per is for runs of exports", param_hint="--per")
        return None
    why = [s for s in sides if isinstance(s, str)]
    if why:
        if per:
            raise typer.BadParameter(why[0], param_hint="--per")
        stderr.print(f"Note: {why[0]}", markup=False)
        return None
    for line in dict.fromkeys(n for s in sides for n in s.notes):
        stderr.print(f"Note: {line}", markup=False)
    run = W.compare_runs(*sides, per=per)
    return run, tuple(W.units(s, run.unit) for s in sides)


def _compared(a, b, table, method: str, run, fmt: Format) -> str:
    """The comparison as written: the run figures first (markdown, json), then the rows."""
    import json

    from ..render.tables import render
    from ..study import compare as C
    from ..study import whole as W

    if fmt is Format.markdown:
        unit = None if run is None else ("s" if run.unit == "second" else run.unit)
        rows = C.markdown(a, b, table, method, unit=unit)
        return rows if run is None else W.markdown(run) + "\n" + rows
    if fmt is Format.json and run is not None:
        return json.dumps({"run": run.json(), "rows": table.to_dicts()}, indent=1, allow_nan=False)
    return render(table, fmt)


@app.command()
@friendly
def compare(
    base: Annotated[Path, typer.Argument(help="The baseline: a sweep folder, an export, or a folder of exports.")],
    new: Annotated[Path, typer.Argument(help="The capture to judge against it, of the same kind.")],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.markdown,
    fail_on_regression: Annotated[
        Optional[float],
        typer.Option("--fail-on-regression", help="Exit 3 when a row is slower by at least this many percent.", min=0),
    ] = None,
    session_noise: Annotated[
        Optional[float],
        typer.Option(help="Variance between sessions, as a standard deviation in percent (default: from the ledger).", min=0),
    ] = None,
    ledger: LedgerOption = None,
    noise_from: Annotated[
        Optional[tuple[Path, Path]],
        typer.Option(
            help="Two captures of one build (such as two runs of the program before the change): the variance between "
            "sessions from them, not from the ledger.",
            metavar="A B",
            show_default=False,
        ),
    ] = None,
    names: Annotated[
        Optional[Names],
        typer.Option(
            help="Exports: kernel names short or demangled; op: rows by (op, kernel), PyTorch ids dropped "
            "(default: op where most kernel time is in ranges named with per-call ids, else short).",
            show_default=False,
        ),
    ] = None,
    per: Annotated[
        Optional[str],
        typer.Option(
            help="Exports: the unit of work, an NVTX range glob (default: the steps both runs have, else seconds).",
            show_default=False,
        ),
    ] = None,
    by: Annotated[
        Optional[str],
        typer.Option(help="Exports: split rows by any of device,process,stream (comma-separated).", show_default=False),
    ] = None,
    nsys: Annotated[Optional[Path], typer.Option(help="nsys executable, to export .nsys-rep files.")] = None,
    reexport: ReexportOption = False,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
    strict: StrictOption = False,
) -> None:
    """NEW against BASE, call for call: ratio of medians with a 95% interval, and a verdict.

    Rows are (op, impl, shape, l2) where the ranges follow the NVTX convention, else (range,
    kernel). The interval resamples rounds (or exports), then calls; the variance between two
    sessions comes from the ledger's replicated quiet sessions unless --session-noise gives it, or
    --noise-from A B measures it on two captures of one build.
    Exit code 0, or 3 with --fail-on-regression when a row is slower by that much.
    """
    from ..study import compare as C
    from ..study import whole as W

    _noise_sources(session_noise, noise_from, ledger)
    calibration = list(noise_from or ())
    target = _output(output, [*_capture_files(base), *_capture_files(new), *(f for p in calibration for f in _capture_files(p))])
    from ..folder_format import is_sweep

    _allow_plugins(None, [p for p in (base, new) if is_sweep(p)])
    for side in (base, new):
        _stale_notes(_capture_exports(side, reexport))
    keys = tuple(_by(by))
    a, b, names = _captures(base, new, names, keys, nsys, reexport, strict)
    pair = tuple(C.open_capture(p, nsys, names=names.value, by=keys, reexport=reexport) for p in calibration) or None
    session_sd, source = _between_sessions(a, b, session_noise, ledger, new, pair)
    run = _run(base, new, per, nsys, reexport)
    table = C.compare(a, b, session_sd=session_sd, units=run[1] if run else None)
    method = C.method(a, b, session_sd, source)
    for line in C.differences(a, b):
        stderr.print(f"Warning: the captures differ in {line}", markup=False)
    figures = run and W.explained(run[0], table, a.keys)
    _write(_compared(a, b, table, method, figures, fmt), target)
    if fail_on_regression is not None:
        _fail_on_regression(table, a.keys, fail_on_regression)


def _noise_sources(session_noise: float | None, noise_from, ledger: Path | None) -> None:
    """One source for the variance between sessions: --session-noise, --noise-from or the ledger."""
    if session_noise is not None and noise_from is not None:
        raise typer.BadParameter("give --session-noise or --noise-from, not both", param_hint="--noise-from")
    if (session_noise is not None or noise_from is not None) and ledger is not None:
        given = "--session-noise" if session_noise is not None else "--noise-from"
        raise typer.BadParameter(f"--ledger is not read when {given} is given", param_hint="--ledger")


def _between_sessions(a, b, session_noise: float | None, ledger: Path | None, new: Path, pair):
    """The variance between sessions and where it comes from; a note when the ledger's sweeps give it
    for runs of a program."""
    from ..study import compare as C

    session_sd, source, dof = C.between_sessions(a, b, session_noise, ledger, near=new, calibration=pair)
    if session_noise is None and pair is None and dof and a.clusters != "round" and b.clusters != "round":
        stderr.print(
            f"Note: the variance between sessions ({100 * session_sd / math.sqrt(2):.2f}%) comes from the ledger's sweeps; "
            "for runs of a program, --noise-from A B measures it on two captures of one build.",
            markup=False,
        )
    return session_sd, source


def _captures(base: Path, new: Path, names: Names | None, keys: tuple, nsys, reexport: bool, strict: bool):
    """BASE and NEW opened for comparing, and the names used: exports whose kernel time is mostly in
    ranges named with per-call ids are compared by (op, kernel) unless --names says otherwise."""
    from ..study import compare as C

    skipped: list = []
    a, b = (C.open_capture(p, nsys, skipped, names=(names or Names.short).value, by=keys, reexport=reexport) for p in (base, new))
    _skipped(skipped, strict)
    if names is None and a.keys[-2:] == C.EXPORT_KEYS and (share := C.carries_ids(a)) > 0.5:
        stderr.print(
            f"Note: {100 * share:.0f}% of the base's kernel time is in ranges named with per-call ids (seq, op_id, sizes), "
            "which match nothing across runs: rows are by (op, kernel); --names short keeps the range names",
            markup=False,
        )
        names = Names.op
        a, b = (C.open_capture(p, nsys, names="op", by=keys, reexport=reexport) for p in (base, new))
    return a, b, names or Names.short


def _fail_on_regression(table, keys, percent: float) -> None:
    """Exit 3, naming the rows, when a row of ``table`` is slower by at least ``percent``."""
    from ..study import compare as C

    worse = C.regressions(table, percent)
    if worse.height:
        keys = [c for c in worse.columns if c in keys]
        rows = "; ".join(f"{'/'.join(map(str, r[: len(keys)]))} {r[-1]:.3f}" for r in worse.select(*keys, "ratio").iter_rows())
        stderr.print(f"Regression beyond {percent:g}%: {rows}", markup=False)
        raise typer.Exit(3)
