"""The ``nsys-tools`` command line: a thin layer over the library.

This is the only module that imports typer and rich. Data goes to stdout; messages and
progress go to stderr. Errors the user can fix print one ``Error:`` line and exit 1
(``--debug`` shows the traceback); usage errors exit 2.
"""

from __future__ import annotations

import functools
import io
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from .errors import BadExport, NsysToolsError, OutputError
from .tables import Format

app = typer.Typer(
    name="nsys-tools",
    help="Nsight Systems exports into kernel-time tables, same-session comparisons and issue comments.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)
stderr = Console(stderr=True, soft_wrap=True, highlight=False, emoji=False)  # a path may hold ":name:"
_debug = {"on": False}


class Names(str, Enum):
    short = "short"
    demangled = "demangled"


class Baseline(str, Enum):
    auto = "auto"
    nsys = "nsys"
    sql = "sql"
    none = "none"


class Nesting(str, Enum):
    innermost = "innermost"
    all = "all"


class View(str, Enum):
    kernels = "kernels"
    ranges = "ranges"
    api = "api"
    memops = "memops"
    gaps = "gaps"


COMMENT_CHARS = 60_000  # markdown is cut to fit an issue comment (GitHub allows 65,536)


def _by(text: str | None) -> list[str]:
    """``--by device,process,stream`` (any subset) as a list, checked."""
    from .views import BY

    keys = [k.strip() for k in (text or "").split(",") if k.strip()]
    unknown = [k for k in keys if k not in BY]
    if unknown:
        raise typer.BadParameter(f"unknown key {unknown[0]!r}: choose from {', '.join(BY)}", param_hint="--by")
    return keys


def friendly(fn):
    """Turn the toolkit's errors into one ``Error:`` line and exit code 1. Anything else that
    escapes is a bug: it gets one line too, saying so (``--debug`` shows the traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):  # usage errors (exit 2) and exits
            raise
        except NsysToolsError as err:
            if _debug["on"]:
                raise
            stderr.print(f"Error: {err}", markup=False)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            stderr.print("Interrupted.", markup=False)
            raise typer.Exit(130) from None
        except Exception as err:
            if _debug["on"]:
                raise
            stderr.print(f"Error: {BUG} ({type(err).__name__}: {err}); run again with --debug and report it", markup=False)
            raise typer.Exit(1) from None

    return wrapper


BUG = "unexpected failure, a bug in nsys-tools"


def emit(text: str) -> None:
    """Data to stdout; a closed pipe or a full device is an ``Error:`` (and stdout is closed
    quietly, so the interpreter does not fail again flushing it at exit)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
        raise OutputError(None, f"cannot write to standard output ({exc.strerror or exc})", "check where stdout goes") from exc


def _version(show: bool) -> None:
    if show:
        from . import __version__

        emit(f"nsys-tools {__version__}\n")
        raise typer.Exit()


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    _debug["on"] = debug


def _output(output: Path | None, inputs=()) -> Path | None:
    """``--output``, checked before any work (``files.output_target``): the file to write."""
    if output is None:
        return None
    from .files import output_target

    return output_target(output, inputs)


def _write(text: str, output: Path | None) -> None:
    """Data to ``output`` (written whole, then renamed into place) or to stdout."""
    if output is None:
        emit(text)
        return
    from .files import write_text_atomically

    write_text_atomically(output, text)
    stderr.print(f"Wrote {output}", markup=False)


def _glob(pattern: str | None, option: str) -> str | None:
    """A --range or --kernel glob, checked once: a pattern that makes no regular expression is a usage error."""
    if pattern is None:
        return None
    import polars as pl

    from .report import glob_regex

    try:
        pl.Series([""]).str.contains(glob_regex(pattern))
    except pl.exceptions.PolarsError as exc:
        raise typer.BadParameter(f"{pattern!r} is not a usable pattern ({str(exc).splitlines()[0]})", param_hint=option) from None
    return pattern


@app.command()
@friendly
def report(
    paths: Annotated[
        Optional[list[Path]],
        typer.Argument(help="Exports (.sqlite or .nsys-rep), folders of them, or sweep folders.", show_default=False),
    ] = None,
    demo: Annotated[bool, typer.Option("--demo", help="Use the bundled H200 sweep (no GPU or nsys needed).")] = False,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.markdown,
    issue: Annotated[
        bool, typer.Option("--issue", help="For one sweep: the markdown comment for an issue thread, with charts.")
    ] = False,
    range_glob: Annotated[Optional[str], typer.Option("--range", help="Keep NVTX ranges matching this glob.")] = None,
    kernel_glob: Annotated[Optional[str], typer.Option("--kernel", help="Keep kernels matching this glob.")] = None,
    names: Annotated[
        Names, typer.Option(help="Kernel names: demangled (with templates) or short (base name).")
    ] = Names.demangled,
    include_memops: Annotated[bool, typer.Option("--include-memops", help="Also report memcpy and memset operations.")] = False,
    nesting: Annotated[
        Nesting, typer.Option(help="Attribute to the innermost NVTX range, or to every enclosing one.")
    ] = Nesting.innermost,
    per_file: Annotated[
        bool, typer.Option("--per-file", help="With several exports, one row per file instead of aggregating.")
    ] = False,
    view: Annotated[
        View, typer.Option(help="The table: kernels, ranges (GPU time projected), api, memops, gaps.")
    ] = View.kernels,
    by: Annotated[
        Optional[str], typer.Option(help="Split rows by any of device,process,stream (comma-separated).", show_default=False)
    ] = None,
    top: Annotated[
        Optional[int],
        typer.Option(
            min=0, help="Keep the N rows with the largest total time (gaps: the longest); 0 keeps all.", show_default=False
        ),
    ] = None,
    min_gap: Annotated[
        Optional[float],
        typer.Option(min=0, help="--view gaps: the shortest idle interval reported, in µs (default 100).", show_default=False),
    ] = None,
    nsys: Annotated[
        Optional[Path], typer.Option(help="nsys executable, to export .nsys-rep files (default: $NSYS, then PATH).")
    ] = None,
    scheduler: Annotated[
        Optional[str],
        typer.Option(
            help="Read exports on Dask: tcp://HOST:PORT (a running scheduler whose workers see the same paths) "
            "or local:N (N worker processes here). Needs nsys-tools[dask]."
        ),
    ] = None,
    ledger: Annotated[
        Optional[Path],
        typer.Option(
            help="Ledger for bands and history with --issue (default: $NSYS_TOOLS_LEDGER, else ledger.sqlite "
            "beside the sweeps folder, else reports/ledger.sqlite)."
        ),
    ] = None,
    charts: Annotated[Optional[Path], typer.Option(help="Folder for the --issue charts (default: charts/<sweep id>).")] = None,
    chart_base_url: Annotated[
        Optional[str],
        typer.Option("--chart-base-url", help="With --issue: link the charts as URL/<chart>.png (where they will be uploaded)."),
    ] = None,
    control: Annotated[
        Optional[str], typer.Option(help="With --issue: compare with this implementation instead of the sweep's control.")
    ] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Kernel time per NVTX range and the other standard views, or per implementation and shape for a sweep folder.

    For exports (--view): kernels, the default: instances, total, time %, mean, median, min, max,
    stddev, p10 and p90 of each kernel per NVTX range (the range enclosing the API call that
    launched it, on the launching thread; kernels outside every range have an empty range).
    ranges: the GPU time each NVTX range projects and its CPU time. api: CUDA API calls per
    function. memops: copies and sets by kind, with bytes, time and bandwidth. gaps: GPU idle
    intervals and what ran around them. --by device,process,stream splits any of them.
    Markdown is cut to fit an issue comment, saying how many rows were left out. A folder
    with exports that cannot be read is still reported: the failures are listed and the exit
    code is 1.

    For a sweep folder: one row per (op, impl, shape, l2) with kernel time from the trace and the
    event span measured with tracing off. With --issue: the comment for an issue thread.
    """
    from .sweep import is_sweep

    if not paths and not demo:
        raise typer.BadParameter("give one or more exports or sweep folders, or --demo", param_hint="PATHS")
    if scheduler is not None:
        from .engine import parse

        try:
            parse(scheduler)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--scheduler") from None
    if demo and paths:
        raise typer.BadParameter("--demo reads the bundled sweep: give no paths with it", param_hint="--demo")
    from .resources import demo_capture, demo_ledger

    inputs = [demo_capture()] if demo else list(paths or [])
    sweeps = [p for p in inputs if is_sweep(p)]
    if sweeps and len(sweeps) != len(inputs):
        raise typer.BadParameter("give either sweep folders or exports, not both", param_hint="PATHS")
    keys = _by(by)
    export_only = {
        "--range": range_glob is not None,
        "--kernel": kernel_glob is not None,
        "--names": names is not Names.demangled,
        "--include-memops": include_memops,
        "--nesting": nesting is not Nesting.innermost,
        "--per-file": per_file,
        "--view": view is not View.kernels,
        "--by": bool(keys),
        "--min-gap": min_gap is not None,
        "--scheduler": scheduler is not None,
    }
    given = [name for name, on in export_only.items() if on]
    if sweeps and given:
        verb = "apply" if len(given) > 1 else "applies"
        raise typer.BadParameter(f"{', '.join(given)} {verb} to exports, not sweep folders", param_hint=given[0])
    # Options of one view are refused with another, not ignored.
    for name, owner in (("--names", View.kernels), ("--include-memops", View.kernels), ("--nesting", View.kernels)):
        if export_only[name] and view is not owner:
            raise typer.BadParameter(f"applies to --view {owner.value}, not --view {view.value}", param_hint=name)
    if min_gap is not None and not sweeps and view is not View.gaps:
        raise typer.BadParameter(f"applies to --view gaps, not --view {view.value}", param_hint="--min-gap")
    for name, value, column in (("--range", range_glob, "range"), ("--kernel", kernel_glob, "kernel")):
        if value and not sweeps and column not in _view_columns(view):
            raise typer.BadParameter(f"--view {view.value} has no {column} column", param_hint=name)
    issue_only = [
        n
        for n, v in (("--ledger", ledger), ("--charts", charts), ("--chart-base-url", chart_base_url), ("--control", control))
        if v is not None
    ]
    if issue_only and not issue:
        raise typer.BadParameter(f"{', '.join(issue_only)} go with --issue", param_hint=issue_only[0])
    if issue:
        whole = [n for n, on in (("--format", fmt is not Format.markdown), ("--top", top is not None)) if on]
        if whole:
            raise typer.BadParameter("the issue comment is markdown, written whole", param_hint=whole[0])
        if len(sweeps) != 1:
            raise typer.BadParameter("--issue takes exactly one sweep folder", param_hint="PATHS")
        from . import ledger as L
        from .issue import compose
        from .sweep import load

        ledger_path = ledger or (demo_ledger() if demo else L.default_path(sweeps[0]))
        target = _output(output, [*_folder_files(sweeps[0]), *([ledger_path] if ledger_path else [])])
        sweep = load(sweeps[0])
        charts_dir = charts or Path("charts") / sweep.id
        has_ledger = ledger_path is not None and ledger_path.exists()
        stderr.print(
            f"Ledger: {ledger_path}" if has_ledger else f"No ledger at {ledger_path}: no bands or history (pass --ledger)",
            markup=False,
        )
        base = target.parent if target else Path.cwd()  # links work from where the markdown lands
        link_base = chart_base_url.rstrip("/") if chart_base_url else _relative(charts_dir, base)
        comment = compose(sweep, ledger_path if has_ledger else None, charts_dir, link_base=link_base, control=control)
        _write(comment.markdown, target)
        stderr.print(f"Charts written to {charts_dir} ({len(comment.charts)} files)", markup=False)
        return
    from .tables import render

    failures: list[NsysToolsError] = []
    if sweeps:
        from .sweep import sweep_table

        target = _output(output, [f for s in sweeps for f in _folder_files(s)])
        frame = sweep_table(sweeps)
    else:
        from rich.progress import Progress

        from .engine import connect
        from .inputs import expand_inputs
        from .report import view_table

        files = expand_inputs(inputs)
        target = _output(output, _read_by(files))
        options = {
            View.kernels: {"names": names.value, "include_memops": include_memops, "nesting": nesting.value},
            View.gaps: {} if min_gap is None else {"min_gap_ns": round(min_gap * 1000)},
        }.get(view, {})
        with connect(scheduler) as engine, Progress(console=stderr, transient=True, disable=len(files) < 2) as bar:
            task = bar.add_task("Reading exports" + (f" on {scheduler}" if scheduler else ""), total=len(files))
            frame = view_table(
                files,
                view.value,
                by=keys,
                per_file=per_file,
                range_glob=_glob(range_glob, "--range"),
                kernel_glob=_glob(kernel_glob, "--kernel"),
                nsys=nsys,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                engine=engine,
                failures=failures if len(files) > 1 else None,
                **options,
            )
        if len(failures) == len(files):
            _fail(failures, f"none of the {len(files)} exports could be read")
    if frame.is_empty():
        stderr.print("No rows: the table is empty.", markup=False)
    rows = frame.height
    frame = frame.head(top) if top else frame
    cap = COMMENT_CHARS if fmt is Format.markdown and top is None else None
    hint = "`--top 0` shows all of them; `--format csv` or `json` writes them whole."
    _write(render(frame, fmt, of=rows, max_chars=cap, hint=hint) if fmt is Format.markdown else render(frame, fmt), target)
    if failures:
        _fail(
            failures,
            f"{len(failures)} of {len(files)} exports could not be read; the table covers the other {len(files) - len(failures)}",
        )


def _fail(failures: list[NsysToolsError], summary: str) -> None:
    """List the exports that failed, one ``Error:`` line each, then exit 1."""
    for err in failures:
        stderr.print(f"Error: {err}", markup=False)
    stderr.print(f"Error: {summary}", markup=False)
    raise typer.Exit(1)


def _folder_files(folder: Path) -> list[Path]:
    """The files of a sweep folder, which an output must not replace."""
    return [f for f in folder.iterdir() if f.is_file()]


def _read_by(exports: list[Path]) -> list[Path]:
    """The files reading ``exports`` touches (a report's .sqlite too), which an output must not replace."""
    from .export import REPORT_SUFFIXES

    return [*exports, *(f.with_suffix(".sqlite") for f in exports if f.suffix in REPORT_SUFFIXES)]


def _capture_files(path: Path) -> list[Path]:
    """The files one side of ``compare`` reads: a sweep folder's, or its exports."""
    from .inputs import expand_inputs
    from .sweep import is_sweep

    return _folder_files(path) if is_sweep(path) else _read_by(expand_inputs([path]))


def _view_columns(view: View) -> tuple[str, ...]:
    from .views import get

    return get(view.value).COLUMNS


def _relative(target: Path, base: Path) -> str:
    import os

    return os.path.relpath(target.resolve(), base.resolve())


LedgerOption = Annotated[
    Optional[Path], typer.Option("--ledger", help="Ledger database (default: $NSYS_TOOLS_LEDGER, else reports/ledger.sqlite).")
]
capture_app = typer.Typer(help="Run Nsight Systems captures on a GPU.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(capture_app, name="capture")


class L2Mode(str, Enum):
    cold = "cold"
    warm = "warm"


def _command_line() -> list[str]:
    """The command as a user would type it again: ``nsys-tools ...`` whether it ran through the
    console script or ``python -m nsys_tools``."""
    return ["nsys-tools", *sys.argv[1:]]


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


PluginOption = Annotated[
    Optional[list[str]], typer.Option("--plugin", help="Op plugin: a .py file or an importable module (repeatable).")
]


class Outputs(str, Enum):
    rotate = "rotate"
    reuse = "reuse"


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
    rounds: Annotated[int, typer.Option(help="Rounds; the order of implementations rotates each round.")] = 3,
    iters: Annotated[int, typer.Option(help="Calls per implementation per round.")] = 100,
    warmup: Annotated[int, typer.Option(help="Untraced warm-up calls per implementation.")] = 20,
    settle: Annotated[
        float,
        typer.Option(
            help="Seconds of untraced calls after the warm-up, so that compute-bound work is traced at the clock "
            "its power draw settles to (matmul: 10)."
        ),
    ] = 0.0,
    l2: Annotated[L2Mode, typer.Option(help="cold: rotate inputs past twice the L2; warm: reuse one buffer.")] = L2Mode.cold,
    outputs: Annotated[
        Outputs, typer.Option(help="reuse: one output buffer per shape for every implementation; rotate: cold outputs.")
    ] = Outputs.reuse,
    out: Annotated[Optional[Path], typer.Option(help="Sweep folder (default reports/sweeps/<UTC time>).")] = None,
    nsys: Annotated[Optional[Path], typer.Option(help="nsys executable (default: $NSYS, then PATH).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Finish an interrupted sweep: skip completed shapes.")] = False,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Fail instead of waiting when another sweep holds the GPU.")] = False,
    keep_rep: Annotated[
        bool, typer.Option("--keep-rep", help="Keep the .nsys-rep files (they hold the unscrubbed environment).")
    ] = False,
    commit: Annotated[Optional[str], typer.Option(help="Commit to record when the tree is not a git checkout.")] = None,
    ledger: LedgerOption = None,
) -> None:
    """Profile implementations across shapes in one session, one Nsight Systems capture per shape.

    Writes <shape>.sqlite (scrubbed), <shape>.harness.json (checks, event spans, clocks) and
    manifest.json into the sweep folder, then prints the folder's path on stdout.
    """
    from capture.sweep import SweepRunner, SweepSpec

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
    )
    runner = SweepRunner(
        spec, _out(out), nsys=nsys, resume=resume, wait=not no_wait, keep_rep=keep_rep, argv=_command_line(), commit=commit
    )
    manifest = _run_with_progress(runner, spec.shapes)
    failed = [s for s, e in manifest["shapes"].items() if e.get("status") != "ok"]
    if failed and len(failed) == len(manifest["shapes"]):
        from .errors import CaptureError

        first = manifest["shapes"][failed[0]]
        raise CaptureError(runner.out / "manifest.json", f"no shape was captured ({failed[0]}: {first.get('error')})")
    stderr.print(
        f"Sweep written to {runner.out} in {manifest['wall_s']:.1f} s"
        + (f"; not complete: {', '.join(failed)}" if failed else ""),
        markup=False,
    )
    _add_to_ledger(runner.out, ledger)
    emit(f"{runner.out}\n")


class Declared(str, Enum):
    rotate = "rotate"
    reuse = "reuse"
    unknown = "unknown"


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
    from capture.run import ProgramRunner, RunSpec

    spec = RunSpec(list(program), name=name, control=control or "", outputs=outputs.value, plugins=list(plugin or []))
    runner = ProgramRunner(spec, _out(out), nsys=nsys, wait=not no_wait, keep_rep=keep_rep, argv=_command_line(), commit=commit)
    manifest = _run_with_progress(runner, [name])
    entry = manifest["captures"][name]
    if entry.get("status") != "ok":
        from .errors import CaptureError

        raise CaptureError(runner.out, entry.get("error", "the capture failed"), "see manifest.json")
    found = ", ".join(f"{k} ({v} rounds)" for k, v in entry.get("ranges", {}).items())
    stderr.print(f"Captured to {runner.out} in {manifest['wall_s']:.1f} s: {found}", markup=False)
    _add_to_ledger(runner.out, ledger)
    emit(f"{runner.out}\n")


@capture_app.command("list")
@friendly
def capture_list(plugin: PluginOption = None, fmt: Annotated[Format, typer.Option("--format", "-f")] = Format.markdown) -> None:
    """The ops installed and loaded from --plugin, with their implementations."""
    import polars as pl

    from .plugin import load
    from .tables import render

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


def _items(text: str | None) -> list[str]:
    return [s.strip() for s in (text or "").split(",") if s.strip()]


def _out(out: Path | None) -> Path:
    from datetime import datetime, timezone

    return out or Path("reports/sweeps") / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _run_with_progress(runner, units: list[str]) -> dict:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=stderr) as progress:
        tasks = {unit: progress.add_task(f"{unit:>11} queued", total=3) for unit in units}
        runner.progress = _sweep_progress(progress, tasks)
        return runner.run()


def _add_to_ledger(folder: Path, ledger: Path | None) -> None:
    """Sweeps add themselves to the ledger where the analysis stack (polars, sqlite-utils) is."""
    try:
        from . import ledger as L
        from .sweep import load
    except ImportError:
        stderr.print(
            f"Not added to the ledger (no polars or sqlite-utils here): run nsys-tools ledger add {folder} "
            "where they are installed.",
            markup=False,
        )
        return
    path = ledger or L.default_path(folder)
    row = L.add(load(folder), path)
    stderr.print(f"Added to the ledger {path} ({'quiet' if row['quiet'] else 'under load'}).", markup=False)


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
    nsys: Annotated[Optional[Path], typer.Option(help="nsys executable, to export .nsys-rep files.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """NEW against BASE, call for call: ratio of medians with a 95% interval, and a verdict.

    Rows are (op, impl, shape, l2) where the ranges follow the NVTX convention, else (range,
    kernel). The interval resamples rounds (or exports), then calls; the variance between two
    sessions comes from the ledger's replicated quiet sessions unless --session-noise gives it.
    Exit code 0, or 3 with --fail-on-regression when a row is slower by that much.
    """
    import math

    from . import compare as C
    from . import ledger as L
    from .tables import render

    if session_noise is not None and ledger is not None:
        raise typer.BadParameter("--ledger is not read when --session-noise is given", param_hint="--ledger")
    target = _output(output, [*_capture_files(base), *_capture_files(new)])
    a, b = C.open_capture(base, nsys), C.open_capture(new, nsys)
    if session_noise is not None:
        sd, source = session_noise / 100, "as given"
    else:
        path = ledger or L.default_path(new)
        sd, dof = L.session_noise(path, b.meta.get("gpu", ""), exclude=[*a.ids, *b.ids])
        source = f"pooled over {dof} degrees of freedom of replicated quiet sessions in {path}, upper 95% bound"
    table = C.compare(a, b, session_sd=math.sqrt(2) * sd)
    method = C.method(a, b, math.sqrt(2) * sd, source)
    for line in C.differences(a, b):
        stderr.print(f"Warning: the captures differ in {line}", markup=False)
    _write(C.markdown(a, b, table, method) if fmt is Format.markdown else render(table, fmt), target)
    if fail_on_regression is not None:
        worse = C.regressions(table, fail_on_regression)
        if worse.height:
            keys = [c for c in worse.columns if c in a.keys]
            rows = "; ".join(
                f"{'/'.join(map(str, r[: len(keys)]))} {r[-1]:.3f}" for r in worse.select(*keys, "ratio").iter_rows()
            )
            stderr.print(f"Regression beyond {fail_on_regression:g}%: {rows}", markup=False)
            raise typer.Exit(3)


@app.command()
@friendly
def scrub(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Exports (.sqlite) to scrub in place (the file behind a symlink), or folders: every .sqlite under them "
            "(hidden ones, such as caches, skipped)."
        ),
    ],
    check: Annotated[
        bool,
        typer.Option("--check", help="Write nothing: list what would be removed, and exit 1 if anything identifying is there."),
    ] = False,
) -> None:
    """Remove the profiled process's environment, user and host names, home paths, command lines and
    credentials from exports, and nothing the analysis reads (kernel, API and NVTX names stay)."""
    from .inputs import files_in
    from .scrub import check as check_export
    from .scrub import scrub as scrub_export

    failures, unclean = [], []
    files: list[Path] = []
    for path in paths:
        found = files_in(path, (".sqlite",)) if path.is_dir() else [path]
        if not found:
            failures.append(BadExport(path, "holds no .sqlite exports", "point at an export or a folder of them"))
        files += found
    for path in files:
        try:
            result = check_export(path) if check else scrub_export(path)
        except NsysToolsError as err:
            failures.append(err)
            continue
        detail = ", ".join(f"{n} {what}" for what, n in result.changed.items()) or "nothing to remove"
        stderr.print(f"{path}: {'would remove ' if check and result.total else ''}{detail}", markup=False)
        if check:
            emit("".join(f"{path}: {line}\n" for line in result.examples))
        for line in result.kept:
            stderr.print(f"Warning: {path}: left as it is, {line}", markup=False)
        if not result.clean:
            unclean.append(path)
    if failures:
        what = f"{len(failures)} of {len(files)} exports" if files else "nothing"
        _fail(failures, f"{what} could not be {'checked' if check else 'scrubbed'}")
    if check and unclean:
        stderr.print(f"Error: {len(unclean)} of {len(files)} exports hold identity; run nsys-tools scrub on them", markup=False)
        raise typer.Exit(1)


ledger_app = typer.Typer(
    help="The ledger of sweeps: sessions, statistics, rejected variants.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(ledger_app, name="ledger")


@ledger_app.command("add")
@friendly
def ledger_add(
    sweeps: Annotated[list[Path], typer.Argument(help="Sweep folders to add (or replace).")],
    ledger: LedgerOption = None,
) -> None:
    """Add sweeps to the ledger, with their statistics and contention verdict. A sweep in which no
    shape completed is refused."""
    from . import ledger as L
    from .sweep import load

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
    from . import ledger as L

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
    from . import ledger as L
    from .tables import render

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
    from . import ledger as L
    from .tables import render

    path = ledger or L.default_path()
    shape = shape.strip().lower().replace("×", "x")
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
    from . import census as C
    from .plugin import load
    from .tables import render

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
        table = C.cross_check(table, capture)
        for impl, fields in zip(table["impl"], table["disagrees"], strict=True):
            if fields:
                stderr.print(f"Warning: {impl}: census and trace disagree on {fields}", markup=False)
    _write(C.markdown(table) if fmt is Format.markdown else render(table, fmt), target)


@app.command()
@friendly
def bench(
    kernels: Annotated[
        Optional[str],
        typer.Option(help="Comma-separated export sizes, in kernels (default 300000,3000000; with --workers, one size: 100000)."),
    ] = None,
    source: Annotated[
        Optional[Path], typer.Option(help="Real export to replicate (default: the bundled sweep's 4096x768).")
    ] = None,
    workdir: Annotated[Path, typer.Option(help="Where the large exports are built (and kept for the next run).")] = Path(
        "bench-exports"
    ),
    nsys: Annotated[
        Optional[Path], typer.Option(help="nsys for the baseline (default: $NSYS, then PATH; else plain SQL).")
    ] = None,
    cpus: Annotated[
        Optional[str], typer.Option(help="Pin every timed command to these cores, as taskset -c takes them (0-1, 0,2-5).")
    ] = None,
    baseline: Annotated[
        Baseline, typer.Option(help="What report is timed against: nsys stats, the SQL baseline, auto (nsys if found), none.")
    ] = Baseline.auto,
    workers: Annotated[
        Optional[str],
        typer.Option(
            help="Instead: time a fleet on local Dask clusters of these worker counts (1,2,4,8); needs nsys-tools[dask]."
        ),
    ] = None,
    exports: Annotated[int, typer.Option(min=1, help="With --workers: how many copies of the export make the fleet.")] = 32,
    threads_per_worker: Annotated[
        Optional[int], typer.Option(min=1, help="With --workers: threads per worker (default: cores over the largest count).")
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f")] = Format.markdown,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Time nsys-tools report on large exports against nsys stats (or plain SQL), with peak memory;
    or, with --workers, a fleet of exports on Dask clusters of several sizes.

    Exports of the given sizes are built by replicating a real capture's CUDA and NVTX activity
    with shifted times and fresh correlation ids, so schema and attribution stay real.
    """
    from . import bench as B
    from .resources import demo_capture
    from .tables import render

    def counts(text: str, option: str, what: str, example: str) -> list[int]:
        items = [k.strip() for k in text.split(",") if k.strip()]
        if not items or not all(k.isdigit() and int(k) > 0 for k in items):
            raise typer.BadParameter(f"{text!r}: give positive {what}, e.g. {example}", param_hint=option)
        return [int(k) for k in items]

    sizes = counts(kernels or ("100000" if workers else "300000,3000000"), "--kernels", "kernel counts", "300000,3000000")
    origin = source or demo_capture() / "4096x768.sqlite"
    say = lambda msg: stderr.print(msg, markup=False)  # noqa: E731
    if workers:
        if len(sizes) != 1:
            raise typer.BadParameter("with --workers, give one export size", param_hint="--kernels")
        fleet = counts(workers, "--workers", "worker counts", "1,2,4,8")
        table = B.scaling(fleet, exports, sizes[0], origin, workdir, threads_per_worker, say)
    else:
        try:
            pinned = B.parse_cpus(cpus) if cpus else None
        except ValueError:
            raise typer.BadParameter(f"{cpus!r}: give cores as taskset -c takes them, e.g. 0-1", param_hint="--cpus") from None
        table = B.run(sizes, origin, workdir, nsys, progress=say, cpus=pinned, baseline=baseline.value)
    _write(render(table, fmt), output)


def run() -> None:
    """Console-script entry point."""
    app()
