"""capture sweep, capture run, capture list: Nsight Systems captures on a GPU."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..render.tables import Format
from .app import app, emit, friendly, stderr
from .options import (
    OUTPUTS_DEFAULT,
    Declared,
    L2Mode,
    LedgerOption,
    Outputs,
    PluginOption,
    PrepareJobsOption,
    SettleOption,
    _items,
)

capture_app = typer.Typer(help="Run Nsight Systems captures on a GPU.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(capture_app, name="capture")


def _command_line() -> list[str]:
    """The command as a user would type it again: ``nsys-tools ...`` whether it ran through the
    console script or ``python -m nsys_tools``."""
    return ["nsys-tools", *sys.argv[1:]]


def _sweep_progress(progress, tasks):
    stages = {"prepare": 0, "prepared": 0, "profile": 1, "export": 2, "ok": 3, "failed": 3, "skipped": 3}

    def update(shape: str, stage: str, details: dict) -> None:
        if stage == "waiting":
            stderr.print(f"Another sweep holds this GPU ({details['lock']}); waiting for it.", markup=False)
            return
        label = {"ok": "done", "failed": "FAILED", "skipped": "skipped"}.get(stage, stage)
        note = f": {details.get('error') or details.get('reason')}" if stage in ("failed", "skipped") else ""
        progress.update(tasks[shape], completed=stages.get(stage, 0), description=f"{shape:>11} {label}{note}")

    return update


@capture_app.command("sweep")
@friendly
def capture_sweep(
    op: Annotated[Optional[str], typer.Option(help="Op to capture (default: the only one installed).")] = None,
    plugin: PluginOption = None,
    shapes: Annotated[
        Optional[str], typer.Option(help="Comma-separated shapes, as the op writes them (default: the op's).")
    ] = None,
    impls: Annotated[
        Optional[str],
        typer.Option(help="Comma-separated implementations: names, or pkg.module:factory (default: the op's)."),
    ] = None,
    control: Annotated[
        Optional[str], typer.Option(help="The implementation the others are compared against (default: the op's).")
    ] = None,
    rounds: Annotated[int, typer.Option(help="Rounds; the order of implementations is shuffled anew each round.")] = 3,
    iters: Annotated[int, typer.Option(help="Calls per implementation per round.")] = 100,
    warmup: Annotated[int, typer.Option(help="Untraced warm-up calls per implementation.")] = 20,
    settle: SettleOption = 0.0,
    l2: Annotated[L2Mode, typer.Option(help="cold: rotate inputs past twice the L2; warm: reuse one buffer.")] = L2Mode.cold,
    outputs: Annotated[
        Outputs, typer.Option(help="reuse: one output buffer per shape for every implementation; rotate: cold outputs.")
    ] = OUTPUTS_DEFAULT,
    out: Annotated[Optional[Path], typer.Option(help="Sweep folder (default reports/sweeps/<UTC time>).")] = None,
    nsys: Annotated[Optional[Path], typer.Option(help="nsys executable (default: $NSYS, then PATH).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Finish an interrupted sweep: skip completed shapes.")] = False,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Fail instead of waiting when another sweep holds the GPU.")] = False,
    keep_rep: Annotated[
        bool, typer.Option("--keep-rep", help="Keep the .nsys-rep files (they hold the unscrubbed environment).")
    ] = False,
    commit: Annotated[Optional[str], typer.Option(help="Commit to record when the tree is not a git checkout.")] = None,
    ledger: LedgerOption = None,
    seed: Annotated[int, typer.Option(help="Seeds the inputs and each round's order (recorded in manifest.json).")] = 0,
    prepare_jobs: PrepareJobsOption = 0,
) -> None:
    """Profile implementations across shapes in one session, one Nsight Systems capture per shape.

    Writes <shape>.sqlite (scrubbed), <shape>.harness.json (checks, event spans, clocks) and
    manifest.json into the sweep folder, then prints the folder's path on stdout.
    """
    from ..capture.sweep import SweepRunner, SweepSpec

    spec = SweepSpec(
        op=op or "",
        plugins=list(plugin or []),
        shapes=_items(shapes),
        impls=_items(impls),
        control=control or "",
        rounds=rounds,
        iters=iters,
        warmup=warmup,
        settle=settle,
        l2=l2.value,
        outputs=outputs.value,
        seed=seed,
    )
    runner = SweepRunner(
        spec,
        _out(out),
        nsys=nsys,
        resume=resume,
        wait=not no_wait,
        keep_rep=keep_rep,
        argv=_command_line(),
        commit=commit,
        prepare_jobs=prepare_jobs,
    )
    manifest = _run_with_progress(runner, spec.shapes)
    failed = [s for s, e in manifest.units.items() if e.status != "ok"]
    if failed and len(failed) == len(manifest.units):
        from ..errors import CaptureError

        first = manifest.units[failed[0]]
        raise CaptureError(runner.out / "manifest.json", f"no shape was captured ({failed[0]}: {first.error})")
    stderr.print(
        f"Sweep written to {runner.out} in {manifest.wall_s:.1f} s" + (f"; not complete: {', '.join(failed)}" if failed else ""),
        markup=False,
    )
    _add_to_ledger(runner.out, ledger)
    emit(f"{runner.out}\n")


@capture_app.command("run", context_settings={"allow_interspersed_args": False})
@friendly
def capture_run(
    program: Annotated[list[str], typer.Argument(help="The program and its arguments, after --.", show_default=False)],
    control: Annotated[
        Optional[str], typer.Option(help="The implementation (second part of the range names) the others are compared with.")
    ] = None,
    outputs: Annotated[Declared, typer.Option(help="The program's output policy, as its author states it.")] = Declared.unknown,
    plugin: Annotated[
        Optional[list[str]], typer.Option("--plugin", help="Op plugin whose bytes and FLOPs the report should use (repeatable).")
    ] = None,
    name: Annotated[str, typer.Option(help="Name of the export in the folder: <name>.sqlite.")] = "capture",
    out: Annotated[Optional[Path], typer.Option(help="Capture folder (default reports/sweeps/<UTC time>).")] = None,
    nsys: Annotated[Optional[Path], typer.Option(help="nsys executable (default: $NSYS, then PATH).")] = None,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Fail instead of waiting when another capture holds the GPU.")
    ] = False,
    keep_rep: Annotated[
        bool, typer.Option("--keep-rep", help="Keep the .nsys-rep file (it holds the unscrubbed environment).")
    ] = False,
    commit: Annotated[Optional[str], typer.Option(help="Commit to record when the tree is not a git checkout.")] = None,
    ledger: LedgerOption = None,
) -> None:
    """Profile any program that follows the NVTX convention: nsys-tools capture run -- ./bench ARGS.

    The program names each timed range <op>/<impl>/<shape>/<l2>/r<round>, rotates the order of
    its implementations each round, keeps the buffers it times preallocated, and brackets the
    timed rounds with cudaProfilerStart/Stop. Writes a folder that report and report --issue read.
    """
    from ..capture.run import ProgramRunner, RunSpec

    spec = RunSpec(list(program), name=name, control=control or "", outputs=outputs.value, plugins=list(plugin or []))
    runner = ProgramRunner(spec, _out(out), nsys=nsys, wait=not no_wait, keep_rep=keep_rep, argv=_command_line(), commit=commit)
    manifest = _run_with_progress(runner, [name])
    entry = manifest.units[name]
    if entry.status != "ok":
        from ..errors import CaptureError

        raise CaptureError(runner.out, entry.error or "the capture failed", "see manifest.json")
    found = ", ".join(f"{k} ({v} rounds)" for k, v in (entry.ranges or {}).items())
    stderr.print(f"Captured to {runner.out} in {manifest.wall_s:.1f} s: {found}", markup=False)
    _add_to_ledger(runner.out, ledger)
    emit(f"{runner.out}\n")


@capture_app.command("list")
@friendly
def capture_list(plugin: PluginOption = None, fmt: Annotated[Format, typer.Option("--format", "-f")] = Format.markdown) -> None:
    """The ops installed and loaded from --plugin, with their implementations."""
    import polars as pl

    from ..plugin.loader import load
    from ..render.tables import render

    registry = load(plugin or [])
    rows = [
        {
            "op": op.name,
            "impl": impl.name,
            "family": impl.family,
            "allocates": impl.allocates,
            "control": impl.name == op.control,
            "summary": impl.summary,
        }
        for op in registry.ops.values()
        for impl in [*op.impls(), *registry.extra.get(op.name, {}).values()]
    ]
    emit(render(pl.DataFrame(rows), fmt))


def _out(out: Path | None) -> Path:
    from datetime import datetime, timezone

    return out or Path("reports/sweeps") / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _run_with_progress(runner, units: list[str]):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=stderr.console) as progress:
        tasks = {unit: progress.add_task(f"{unit:>11} queued", total=3) for unit in units}
        runner.progress = _sweep_progress(progress, tasks)
        return runner.run()


def _add_to_ledger(folder: Path, ledger: Path | None) -> None:
    """Sweeps add themselves to the ledger where the analysis stack (polars, sqlite-utils) is."""
    try:
        from ..study.ledger import add_folder
    except ImportError:
        stderr.print(
            f"Not added to the ledger (no polars or sqlite-utils here): run nsys-tools ledger add {folder} "
            "where they are installed.",
            markup=False,
        )
        return
    path, row = add_folder(folder, ledger)
    stderr.print(f"Added to the ledger {path} ({'quiet' if row['quiet'] else 'under load'}).", markup=False)
