"""The ``nsys-tools`` command line: a thin layer over the library.

This is the only module that imports typer and rich. Data goes to stdout; messages and
progress go to stderr. Errors the user can fix print one ``Error:`` line and exit 1
(``--debug`` shows the traceback); usage errors exit 2.
"""

from __future__ import annotations

import functools
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from .errors import NsysToolsError
from .tables import Format

app = typer.Typer(
    name="nsys-tools",
    help="Nsight Systems exports into kernel-time tables, same-session comparisons and issue comments.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)
stderr = Console(stderr=True, soft_wrap=True, highlight=False)
_debug = {"on": False}


class Names(str, Enum):
    short = "short"
    demangled = "demangled"


class Nesting(str, Enum):
    innermost = "innermost"
    all = "all"


def friendly(fn):
    """Turn the toolkit's errors into one ``Error:`` line and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except NsysToolsError as err:
            if _debug["on"]:
                raise
            stderr.print(f"Error: {err}", markup=False)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            stderr.print("Interrupted.", markup=False)
            raise typer.Exit(130) from None

    return wrapper


def emit(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


@app.callback()
def main(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False) -> None:
    _debug["on"] = debug


@app.command()
@friendly
def report(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Exports (.sqlite or .nsys-rep) or folders of them.", show_default=False)] = None,
    demo: Annotated[bool, typer.Option("--demo", help="Use the bundled H200 capture (no GPU or nsys needed).")] = False,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.markdown,
    range_glob: Annotated[Optional[str], typer.Option("--range", help="Keep NVTX ranges matching this glob.")] = None,
    kernel_glob: Annotated[Optional[str], typer.Option("--kernel", help="Keep kernels matching this glob.")] = None,
    names: Annotated[Names, typer.Option(help="Kernel names: demangled (with templates) or short (base name).")] = Names.demangled,
    include_memops: Annotated[bool, typer.Option("--include-memops", help="Also report memcpy and memset operations.")] = False,
    nesting: Annotated[Nesting, typer.Option(help="Attribute to the innermost NVTX range, or to every enclosing one.")] = Nesting.innermost,
    per_file: Annotated[bool, typer.Option("--per-file", help="With several exports, one row per file instead of aggregating.")] = False,
    nsys: Annotated[Optional[Path], typer.Option(help="nsys executable, to export .nsys-rep files (default: $NSYS, then PATH).")] = None,
) -> None:
    """Kernel time per NVTX range: instances, total, mean, median, min, max, stddev, p10, p90.

    Each kernel is attributed to the NVTX range enclosing the API call that launched it, on the
    launching thread. Kernels outside every range are reported with an empty range.
    """
    from .report import kernel_summary
    from .resources import demo_capture

    if not paths and not demo:
        raise typer.BadParameter("give one or more exports, or --demo", param_hint="PATHS")
    inputs = [demo_capture()] if demo else list(paths or [])
    frame = kernel_summary(
        inputs,
        range_glob=range_glob,
        kernel_glob=kernel_glob,
        names=names.value,
        include_memops=include_memops,
        nesting=nesting.value,
        per_file=per_file,
        nsys=nsys,
    )
    if frame.is_empty():
        stderr.print("No kernels matched: the table is empty.", markup=False)
    from .tables import render

    emit(render(frame, fmt))


capture_app = typer.Typer(help="Run Nsight Systems captures on a GPU.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(capture_app, name="capture")


class L2Mode(str, Enum):
    cold = "cold"
    warm = "warm"


def _sweep_progress(progress, tasks):
    stages = {"profile": 1, "export": 2, "ok": 3, "failed": 3, "skipped": 3}

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
    op: Annotated[str, typer.Option(help="Operation to capture.")] = "layernorm",
    shapes: Annotated[str, typer.Option(help="Comma-separated MxN shapes.")] = "4096x768,8192x768,1024x2048,4096x4096",
    impls: Annotated[str, typer.Option(help="Comma-separated implementations from kernels/.")] = "ours,triton,torch,copy",
    control: Annotated[str, typer.Option(help="The implementation the others are compared against.")] = "triton",
    rounds: Annotated[int, typer.Option(help="Rounds; the order of implementations rotates each round.")] = 3,
    iters: Annotated[int, typer.Option(help="Calls per implementation per round.")] = 100,
    warmup: Annotated[int, typer.Option(help="Untraced warm-up calls per implementation.")] = 20,
    l2: Annotated[L2Mode, typer.Option(help="cold: rotate inputs past twice the L2; warm: reuse one buffer.")] = L2Mode.cold,
    out: Annotated[Optional[Path], typer.Option(help="Sweep folder (default reports/sweeps/<UTC time>).")] = None,
    nsys: Annotated[Optional[Path], typer.Option(help="nsys executable (default: $NSYS, then PATH).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Finish an interrupted sweep: skip completed shapes.")] = False,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Fail instead of waiting when another sweep holds the GPU.")] = False,
    keep_rep: Annotated[bool, typer.Option("--keep-rep", help="Keep the .nsys-rep files (they hold the unscrubbed environment).")] = False,
    commit: Annotated[Optional[str], typer.Option(help="Commit to record when the tree is not a git checkout.")] = None,
) -> None:
    """Profile implementations across shapes in one session, one Nsight Systems capture per shape.

    Writes <shape>.sqlite (scrubbed), <shape>.harness.json (checks, event spans, clocks) and
    manifest.json into the sweep folder, then prints the folder's path on stdout.
    """
    from datetime import datetime, timezone

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from capture.sweep import Sweep, SweepSpec

    spec = SweepSpec(op=op, shapes=shapes.split(","), impls=[s.strip() for s in impls.split(",")], control=control,
                     rounds=rounds, iters=iters, warmup=warmup, l2=l2.value)
    out = out or Path("reports/sweeps") / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=stderr) as progress:
        sweep = Sweep(spec, out, nsys=nsys, resume=resume, wait=not no_wait, keep_rep=keep_rep, argv=sys.argv,
                      commit=commit)
        tasks = {shape: progress.add_task(f"{shape:>11} queued", total=3) for shape in sweep.spec.shapes}
        sweep.progress = _sweep_progress(progress, tasks)
        manifest = sweep.run()
    failed = [s for s, e in manifest["shapes"].items() if e.get("status") != "ok"]
    stderr.print(f"Sweep written to {sweep.out} in {manifest['wall_s']:.1f} s"
                 + (f"; not complete: {', '.join(failed)}" if failed else ""), markup=False)
    emit(f"{sweep.out}\n")


@app.command()
@friendly
def scrub(
    paths: Annotated[list[Path], typer.Argument(help="Exports (.sqlite) to scrub in place.")],
) -> None:
    """Remove the profiled process's environment, user and host names and home paths from exports."""
    from .scrub import scrub as scrub_export

    for path in paths:
        result = scrub_export(path)
        detail = ", ".join(f"{n} {what}" for what, n in result.changed.items()) or "nothing to remove"
        stderr.print(f"{path}: {detail}", markup=False)


def run() -> None:
    """Console-script entry point."""
    app()
