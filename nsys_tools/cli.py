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


def _write(text: str, output: Path | None) -> None:
    """Data to ``output`` (written whole, then renamed into place) or to stdout."""
    if output is None:
        emit(text)
        return
    from .files import write_text_atomically

    output.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(output, text)
    stderr.print(f"Wrote {output}", markup=False)


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
    min_gap: Annotated[float, typer.Option(min=0, help="--view gaps: the shortest idle interval reported, in µs.")] = 100.0,
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
        Optional[Path], typer.Option(help="Ledger for bands and history with --issue (default reports/ledger.sqlite).")
    ] = None,
    charts: Annotated[Optional[Path], typer.Option(help="Folder for the --issue charts (default: <sweep>/charts).")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Kernel time per NVTX range and the other standard views, or per implementation and shape for a sweep folder.

    For exports (--view): kernels, the default: instances, total, time %, mean, median, min, max,
    stddev, p10 and p90 of each kernel per NVTX range (the range enclosing the API call that
    launched it, on the launching thread; kernels outside every range have an empty range).
    ranges: the GPU time each NVTX range projects and its CPU time. api: CUDA API calls per
    function. memops: copies and sets by kind, with bytes, time and bandwidth. gaps: GPU idle
    intervals and what ran around them. --by device,process,stream splits any of them.
    Markdown is cut to fit an issue comment, saying how many rows were left out.

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
    from .resources import demo_capture, demo_ledger

    inputs = [demo_capture()] if demo else list(paths or [])
    sweeps = [p for p in inputs if is_sweep(p)]
    if sweeps and len(sweeps) != len(inputs):
        raise typer.BadParameter("give either sweep folders or exports, not both", param_hint="PATHS")
    keys = _by(by)
    if sweeps and (view is not View.kernels or keys):
        raise typer.BadParameter("a sweep folder has one table: leave out --view and --by", param_hint="--view")
    if not sweeps and view is not View.kernels:
        for name, value, column in (("--range", range_glob, "range"), ("--kernel", kernel_glob, "kernel")):
            if value and column not in _view_columns(view):
                raise typer.BadParameter(f"--view {view.value} has no {column} column", param_hint=name)
    if issue:
        if len(sweeps) != 1:
            raise typer.BadParameter("--issue takes exactly one sweep folder", param_hint="PATHS")
        from .issue import compose
        from .ledger import DEFAULT_PATH
        from .sweep import load

        sweep = load(sweeps[0])
        ledger_path = ledger or (demo_ledger() if demo else DEFAULT_PATH)
        charts_dir = charts or (Path("charts") / sweep.id if demo else sweep.path / "charts")
        base = output.parent if output else Path.cwd()  # links work from where the markdown lands
        comment = compose(sweep, ledger_path, charts_dir, link_base=_relative(charts_dir, base))
        _write(comment.markdown, output)
        stderr.print(f"Charts in {charts_dir}", markup=False)
        return
    from .tables import render

    if sweeps:
        from .sweep import sweep_table

        frame = sweep_table(sweeps)
    else:
        from rich.progress import Progress

        from .engine import connect
        from .report import expand_inputs, view_table

        files = expand_inputs(inputs)
        options = {
            View.kernels: {"names": names.value, "include_memops": include_memops, "nesting": nesting.value},
            View.gaps: {"min_gap_ns": round(min_gap * 1000)},
        }.get(view, {})
        with connect(scheduler) as engine, Progress(console=stderr, transient=True, disable=len(files) < 2) as bar:
            task = bar.add_task("Reading exports" + (f" on {scheduler}" if scheduler else ""), total=len(files))
            frame = view_table(
                files,
                view.value,
                by=keys,
                per_file=per_file,
                range_glob=range_glob,
                kernel_glob=kernel_glob,
                nsys=nsys,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                engine=engine,
                **options,
            )
    if frame.is_empty():
        stderr.print("No rows: the table is empty.", markup=False)
    rows = frame.height
    frame = frame.head(top) if top else frame
    cap = COMMENT_CHARS if fmt is Format.markdown and top is None else None
    hint = "`--top 0` shows all of them; `--format csv` or `json` writes them whole."
    _write(render(frame, fmt, of=rows, max_chars=cap, hint=hint) if fmt is Format.markdown else render(frame, fmt), output)


def _view_columns(view: View) -> tuple[str, ...]:
    from .views import get

    return get(view.value).COLUMNS


def _relative(target: Path, base: Path) -> str:
    import os

    return os.path.relpath(target.resolve(), base.resolve())


LedgerOption = Annotated[Optional[Path], typer.Option("--ledger", help="Ledger database (default reports/ledger.sqlite).")]
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
    from datetime import datetime, timezone

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from capture.sweep import Sweep, SweepSpec

    spec = SweepSpec(
        op=op,
        shapes=shapes.split(","),
        impls=[s.strip() for s in impls.split(",")],
        control=control,
        rounds=rounds,
        iters=iters,
        warmup=warmup,
        l2=l2.value,
    )
    out = out or Path("reports/sweeps") / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=stderr) as progress:
        sweep = Sweep(spec, out, nsys=nsys, resume=resume, wait=not no_wait, keep_rep=keep_rep, argv=sys.argv, commit=commit)
        tasks = {shape: progress.add_task(f"{shape:>11} queued", total=3) for shape in sweep.spec.shapes}
        sweep.progress = _sweep_progress(progress, tasks)
        manifest = sweep.run()
    failed = [s for s, e in manifest["shapes"].items() if e.get("status") != "ok"]
    stderr.print(
        f"Sweep written to {sweep.out} in {manifest['wall_s']:.1f} s"
        + (f"; not complete: {', '.join(failed)}" if failed else ""),
        markup=False,
    )
    _add_to_ledger(sweep.out, ledger)
    emit(f"{sweep.out}\n")


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
    row = L.add(load(folder), ledger or L.DEFAULT_PATH)
    stderr.print(f"Added to the ledger {ledger or L.DEFAULT_PATH} ({'quiet' if row['quiet'] else 'under load'}).", markup=False)


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
    """Add sweeps to the ledger, with their statistics and contention verdict."""
    from . import ledger as L
    from .sweep import load

    path = ledger or L.DEFAULT_PATH
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
    ledger: LedgerOption = None,
) -> None:
    """Record a variant that was measured and not kept; reports carry a "Rejected so far" table."""
    from . import ledger as L

    L.reject(ledger or L.DEFAULT_PATH, variant, metric, why, sweep)
    stderr.print(f"{variant}: recorded as rejected", markup=False)


@ledger_app.command("list")
@friendly
def ledger_list(
    fmt: Annotated[Format, typer.Option("--format", "-f")] = Format.markdown,
    ledger: LedgerOption = None,
) -> None:
    """The sessions in the ledger, oldest first."""
    from . import ledger as L
    from .tables import render

    emit(render(L.sessions(ledger or L.DEFAULT_PATH), fmt))


@app.command()
@friendly
def history(
    shape: Annotated[str, typer.Option(help="Shape, e.g. 4096x768.")],
    impl: Annotated[str, typer.Option(help="Implementation to follow.")] = "ours",
    vs: Annotated[str, typer.Option(help="Control it is compared with in each session.")] = "triton",
    l2: Annotated[L2Mode, typer.Option(help="L2 mode of the sessions.")] = L2Mode.cold,
    fmt: Annotated[Format, typer.Option("--format", "-f")] = Format.markdown,
    ledger: LedgerOption = None,
) -> None:
    """The pair impl/vs per session, same session each time: "7.84/9.12, 7.84/9.09, ...", then a table."""
    from kernels.registry import format_shape, parse_shape

    from . import ledger as L
    from .tables import render

    shape = format_shape(*parse_shape(shape))
    frame = (
        L.history(ledger or L.DEFAULT_PATH, shape, impl, vs, l2.value)
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
    op: Annotated[str, typer.Option(help="Operation.")] = "layernorm",
    shape: Annotated[str, typer.Option(help="Shape the kernels are compiled and launched for.")] = "4096x768",
    impls: Annotated[str, typer.Option(help="Comma-separated: ours, its variants, triton.")] = "ours,triton",
    arch: Annotated[str, typer.Option(help="Target architecture.")] = "sm_90",
    capture: Annotated[
        Optional[Path], typer.Option(help="A sweep folder or export of this shape to cross-check against.")
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f")] = Format.markdown,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """The codegen of our kernels against Triton's, compiled for a target with no GPU present.

    Per kernel: launch grid x block, registers, static shared and local memory, global loads and
    stores by width, barriers, warp shuffles and special-function instructions, read from the
    SASS with cuobjdump. With --capture, registers, shared memory and launch configuration are
    checked against what the trace recorded.
    """
    from kernels.registry import format_shape, parse_shape

    from . import census as C
    from .errors import UsageError
    from .tables import render

    if op != "layernorm":
        raise UsageError(None, f"unknown op {op!r}", "the census knows: layernorm")
    shape = format_shape(*parse_shape(shape))
    table = C.census(shape, [s.strip() for s in impls.split(",") if s.strip()], arch)
    if capture is not None:
        table = C.cross_check(table, capture)
        for impl, fields in zip(table["impl"], table["disagrees"], strict=True):
            if fields:
                stderr.print(f"Warning: {impl}: census and trace disagree on {fields}", markup=False)
    _write(C.markdown(table) if fmt is Format.markdown else render(table, fmt), output)


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
