"""report and summary: the tables of exports and sweep folders."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import NsysToolsError
from ..render.tables import Format
from .app import (
    _allow_plugins,
    _fail,
    _folder_files,
    _output,
    _read_by,
    _skipped,
    _stale_notes,
    _write,
    _write_parquet,
    app,
    friendly,
    stderr,
)
from .options import (
    FromOption,
    MergeOption,
    Names,
    Nesting,
    ReexportOption,
    SkipFirstOption,
    StrictOption,
    ToOption,
    View,
    ViewFormat,
    WithinOption,
    _by,
    _window,
)

COMMENT_CHARS = 60_000  # markdown is cut to fit an issue comment (GitHub allows 65,536)


def _glob(pattern: str | None, option: str) -> str | None:
    """A --range or --kernel glob, checked once: a pattern that makes no regular expression is a usage error."""
    if pattern is None:
        return None
    import polars as pl

    from ..read.names import glob_regex

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
    fmt: Annotated[
        ViewFormat, typer.Option("--format", "-f", help="Output format (parquet: with --output).")
    ] = ViewFormat.markdown,
    issue: Annotated[
        bool, typer.Option("--issue", help="For one sweep: the markdown comment for an issue thread, with charts.")
    ] = False,
    range_glob: Annotated[Optional[str], typer.Option("--range", help="Keep NVTX ranges matching this glob.")] = None,
    kernel_glob: Annotated[Optional[str], typer.Option("--kernel", help="Keep kernels matching this glob.")] = None,
    names: Annotated[
        Names,
        typer.Option(
            help="Kernel names: demangled (with templates) or short (base name); op: demangled, with range names "
            "without PyTorch's per-call ids (seq, op_id, sizes)."
        ),
    ] = Names.demangled,
    include_memops: Annotated[bool, typer.Option("--include-memops", help="Also report memcpy and memset operations.")] = False,
    nesting: Annotated[
        Nesting, typer.Option(help="Attribute to the innermost NVTX range, or to every enclosing one.")
    ] = Nesting.innermost,
    per_file: Annotated[
        bool, typer.Option("--per-file", help="With several exports, one row per file instead of aggregating.")
    ] = False,
    merge: MergeOption = False,
    view: Annotated[
        View,
        typer.Option(
            help="The table: kernels, ranges (GPU time projected), api, memops, gaps, utilization, launch, sync, "
            "idle, nccl, overlap, stragglers, hist (duration histogram per kernel), pace (each kernel's instances in "
            "order: interval, gap, drift)."
        ),
    ] = View.kernels,
    hist: Annotated[
        bool, typer.Option("--hist", help="With --view ranges: the histogram of each range's projected GPU time.")
    ] = False,
    pace: Annotated[bool, typer.Option("--pace", help="With --view ranges: the pace of each range's instances.")] = False,
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
    time_from: FromOption = None,
    time_to: ToOption = None,
    within: WithinOption = None,
    skip_first: SkipFirstOption = 0,
    bin_window: Annotated[
        Optional[str], typer.Option("--window", help="--view utilization: one row per window of this length (10ms).")
    ] = None,
    longest: Annotated[
        Optional[int], typer.Option(min=1, help="--view idle: list the N longest idle intervals of each device instead.")
    ] = None,
    step: Annotated[
        Optional[str],
        typer.Option(
            help="--view overlap, stragglers, steps: the NVTX range of one training step (default *step*; "
            "steps: ranges named like steps, else a repeating range or kernel sequence)."
        ),
    ] = None,
    warmup: Annotated[
        Optional[float],
        typer.Option(
            min=1, help="--view steps: leading steps above this many times the median are warm-up (1.5).", show_default=False
        ),
    ] = None,
    slow: Annotated[
        Optional[float],
        typer.Option(
            min=1, help="--view steps: steady steps above this many times the steady median are slow (1.15).", show_default=False
        ),
    ] = None,
    flops_per_step: Annotated[
        Optional[float],
        typer.Option(min=0, help="--view steps: FLOPs one rank does per step, for TFLOP/s and MFU.", show_default=False),
    ] = None,
    peak_tflops: Annotated[
        Optional[float],
        typer.Option(
            min=0,
            help="--view steps: the GPU's peak TFLOP/s (default: the datasheet's dense BF16 peak of a known GPU).",
            show_default=False,
        ),
    ] = None,
    nsys: Annotated[
        Optional[Path], typer.Option(help="nsys executable, to export .nsys-rep files (default: $NSYS, then PATH).")
    ] = None,
    reexport: ReexportOption = False,
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
        typer.Option(
            "--chart-base-url",
            help="With --issue or --chart: link the charts as URL/<chart file> (where they will be uploaded).",
        ),
    ] = None,
    chart: Annotated[
        Optional[Path],
        typer.Option(
            "--chart",
            help="For exports: also draw the view as a chart, out.html (offline, interactive) or out.png; "
            "markdown output links it.",
        ),
    ] = None,
    control: Annotated[
        Optional[str], typer.Option(help="With --issue: compare with this implementation instead of the sweep's control.")
    ] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
    plugin: Annotated[
        Optional[list[str]],
        typer.Option("--plugin", help="Op plugin for a sweep's bytes and FLOPs (.py file or module); never taken from a folder."),
    ] = None,
    strict: StrictOption = False,
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
    from ..study.folder import is_sweep

    parquet = fmt is ViewFormat.parquet
    if parquet and output is None:
        raise typer.BadParameter("parquet is written to a file: give --output FILE.parquet", param_hint="--format")
    fmt = Format.csv if parquet else Format(fmt.value)
    if not paths and not demo:
        raise typer.BadParameter("give one or more exports or sweep folders, or --demo", param_hint="PATHS")
    if scheduler is not None:
        from ..run.engine import parse

        try:
            parse(scheduler)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--scheduler") from None
    if demo and paths:
        raise typer.BadParameter("--demo reads the bundled sweep: give no paths with it", param_hint="--demo")
    from ..resources import demo_capture, demo_ledger

    inputs = [demo_capture()] if demo else list(paths or [])
    sweeps = [p for p in inputs if is_sweep(p)]
    if sweeps and len(sweeps) != len(inputs):
        raise typer.BadParameter("give either sweep folders or exports, not both", param_hint="PATHS")
    if plugin and not sweeps:
        raise typer.BadParameter("applies to sweep folders, not exports", param_hint="--plugin")
    _allow_plugins(plugin, sweeps)
    from ..read.export import allow_reexport

    allow_reexport(reexport)  # for this run only: a process that runs the CLI again starts without it
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
        "--reexport": reexport,
        "--from": time_from is not None,
        "--to": time_to is not None,
        "--within": within is not None,
        "--skip-first": skip_first > 0,
        "--window": bin_window is not None,
        "--longest": longest is not None,
        "--step": step is not None,
        "--warmup": warmup is not None,
        "--slow": slow is not None,
        "--flops-per-step": flops_per_step is not None,
        "--peak-tflops": peak_tflops is not None,
        "--chart": chart is not None,
        "--hist": hist,
        "--pace": pace,
    }
    given = [name for name, on in export_only.items() if on]
    if sweeps and given:
        verb = "apply" if len(given) > 1 else "applies"
        raise typer.BadParameter(f"{', '.join(given)} {verb} to exports, not sweep folders", param_hint=given[0])
    # Options of one view are refused with another, not ignored.
    for name in ("--hist", "--pace"):
        if export_only[name] and view is not View.ranges:
            raise typer.BadParameter(f"applies to --view ranges, not --view {view.value}", param_hint=name)
    if hist and pace:
        raise typer.BadParameter("choose one of --hist and --pace", param_hint="--pace")
    # The table computed: a standard view, or hist/pace of kernels or of ranges.
    table_view, of = ("hist" if hist else "pace", "ranges") if hist or pace else (view.value, "kernels")
    for name, owners in (
        ("--names", (View.kernels, View.launch, View.hist, View.pace)),
        ("--include-memops", (View.kernels,)),
        ("--nesting", (View.kernels,)),
    ):
        if export_only[name] and (view not in owners or of == "ranges" and table_view != "ranges"):
            shown = " or ".join(f"--view {o.value}" for o in owners)
            raise typer.BadParameter(f"applies to {shown}, not --view {view.value}", param_hint=name)
    if min_gap is not None and not sweeps and view is not View.gaps:
        raise typer.BadParameter(f"applies to --view gaps, not --view {view.value}", param_hint="--min-gap")
    if bin_window is not None and not sweeps and view is not View.utilization:
        raise typer.BadParameter(f"applies to --view utilization, not --view {view.value}", param_hint="--window")
    if longest is not None and not sweeps and view is not View.idle:
        raise typer.BadParameter(f"applies to --view idle, not --view {view.value}", param_hint="--longest")
    if step is not None and not sweeps and view not in (View.overlap, View.stragglers, View.steps):
        raise typer.BadParameter(f"applies to --view overlap, stragglers or steps, not --view {view.value}", param_hint="--step")
    step_options = {"warmup": warmup, "slow": slow, "flops_per_step": flops_per_step, "peak_tflops": peak_tflops}
    for name, value in step_options.items():
        if value is not None and not sweeps and view is not View.steps:
            raise typer.BadParameter(
                f"applies to --view steps, not --view {view.value}", param_hint="--" + name.replace("_", "-")
            )
    if peak_tflops is not None and flops_per_step is None:
        raise typer.BadParameter("a peak is for MFU: give --flops-per-step too", param_hint="--peak-tflops")
    if view is View.sync and {"device", "stream"} & set(keys):
        raise typer.BadParameter("synchronization calls run on host threads: split them by process", param_hint="--by")
    window, bin_ns = _window(time_from, time_to, within, skip_first, bin_window)
    for name, value, column in (("--range", range_glob, "range"), ("--kernel", kernel_glob, "kernel")):
        named_by = table_view in ("hist", "pace") and column == ("range" if of == "ranges" else "kernel")
        if value and not sweeps and not named_by and column not in _view_columns(view):
            raise typer.BadParameter(f"--view {view.value} has no {column} column", param_hint=name)
    issue_only = [
        n
        for n, v in (("--ledger", ledger), ("--charts", charts), ("--chart-base-url", chart_base_url), ("--control", control))
        if v is not None and not (n == "--chart-base-url" and chart is not None)
    ]
    if chart is not None and chart.suffix not in (".html", ".png"):
        raise typer.BadParameter("give a .html or .png file", param_hint="--chart")
    if issue_only and not issue:
        raise typer.BadParameter(f"{', '.join(issue_only)} go with --issue", param_hint=issue_only[0])
    if issue:
        whole = [n for n, on in (("--format", parquet or fmt is not Format.markdown), ("--top", top is not None)) if on]
        if whole:
            raise typer.BadParameter("the issue comment is markdown, written whole", param_hint=whole[0])
        if len(sweeps) != 1:
            raise typer.BadParameter("--issue takes exactly one sweep folder", param_hint="PATHS")
        from ..files import safe_name
        from ..study import ledger as L
        from ..study.folder import load
        from ..study.issue import compose

        ledger_path = ledger or (demo_ledger() if demo else L.default_path(sweeps[0]))
        target = _output(output, [*_folder_files(sweeps[0]), *([ledger_path] if ledger_path else [])])
        sweep = load(sweeps[0])
        charts_dir = charts or Path("charts") / safe_name(sweep.id)
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
    from ..render.tables import pieces, render

    failures: list[NsysToolsError] = []
    if sweeps:
        from ..study.folder import sweep_table

        target = _output(output, [f for s in sweeps for f in _folder_files(s)])
        frame = sweep_table(sweeps)
    else:
        from rich.progress import Progress

        from ..read.inputs import expand_inputs
        from ..run.engine import connect
        from ..run.report import view_table

        skipped: list = []
        counted: dict = {}
        notes: list[str] = []
        files = expand_inputs(inputs, skipped, reexport=reexport)
        _skipped(skipped, strict)
        if not (merge or per_file):
            from ..read.sessions import one_run

            one_run(files, inputs, nsys)
        _stale_notes(files)
        target = _output(output, _read_by(files))
        options = {
            "kernels": {"names": names.value, "include_memops": include_memops, "nesting": nesting.value},
            "gaps": {} if min_gap is None else {"min_gap_ns": _min_gap_ns(min_gap)},
            "utilization": {"bin_ns": bin_ns} if bin_ns else {},
            "launch": {"names": names.value},
            "idle": {"longest": longest} if longest else {},
            "overlap": {"step": step} if step else {},
            "stragglers": {"step": step} if step else {},
            "steps": {k: v for k, v in {"step": step, **step_options}.items() if v is not None},
            "hist": {"of": of} if of == "ranges" else {"names": names.value},
            "pace": {"of": of} if of == "ranges" else {"names": names.value},
        }.get(table_view, {})
        if window:
            options["window"] = window
        with connect(scheduler) as engine, Progress(console=stderr, transient=True, disable=len(files) < 2) as bar:
            task = bar.add_task("Reading exports" + (f" on {scheduler}" if scheduler else ""), total=len(files))
            frame = view_table(
                files,
                table_view,
                by=keys,
                per_file=per_file,
                range_glob=_glob(range_glob, "--range"),
                kernel_glob=_glob(kernel_glob, "--kernel"),
                nsys=nsys,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                engine=engine,
                failures=failures if len(files) > 1 else None,
                reexport=reexport,
                accounting=None if view is View.api else counted,
                notes=notes,
                **options,
            )
        for line in notes:
            stderr.print(f"Note: {line}", markup=False)
        if len(failures) == len(files):
            _fail(failures, f"none of the {len(files)} exports could be read")
        _accounting_notes(counted)
    if view is View.steps and not frame.is_empty():
        from ..views.steps import SLOW, WARMUP, thresholds

        sources = "; ".join(sorted(set(frame["source"])))
        stderr.print(f"Note: steps are {sources}; {thresholds(warmup or WARMUP, slow or SLOW)}.", markup=False)
    if frame.is_empty():
        why = "the table is empty"
        if not sweeps:
            from ..run.empty import reason

            read = [f for f in files if f not in {e.path for e in failures}]
            globs = {"range_glob": range_glob, "kernel_glob": kernel_glob}
            why = reason(read, table_view, window=window, step=step, nsys=nsys, **globs) if read else why
        stderr.print(f"No rows: {why}.", markup=False)
    rows = frame.height
    if top and table_view in ("hist", "pace"):  # the first N kernels or ranges, all their rows
        import polars as pl

        frame = frame.filter(pl.col("name").is_in(frame["name"].unique(maintain_order=True).head(top).implode()))
    elif top:
        frame = frame.head(top)
    cap = COMMENT_CHARS if fmt is Format.markdown and top is None else None
    hint = "`--top 0` shows all of them; `--format csv` or `json` writes them whole."
    link = ""
    if chart is not None and not frame.is_empty():
        from ..render import view_charts

        chart_path = _output(chart, _read_by(files))
        view_charts.save(view_charts.chart(table_view, frame), chart_path)
        stderr.print(f"Wrote {chart}", markup=False)
        base = target.parent if target else Path.cwd()  # links work from where the markdown lands
        href = f"{chart_base_url.rstrip('/')}/{chart.name}" if chart_base_url else _relative(chart_path, base)
        title = f"{table_view} chart"
        link = f"\n![{title}]({href})\n" if chart.suffix == ".png" else f"\n[{title} (interactive)]({href})\n"
    if parquet:
        _write_parquet(frame, target)
    elif fmt is Format.markdown:
        _write(render(frame, fmt, of=rows, max_chars=cap, hint=hint) + link, target)
    else:
        _write(pieces(frame, fmt) if fmt in (Format.csv, Format.json) else render(frame, fmt), target)
    if failures:
        _fail(
            failures,
            f"{len(failures)} of {len(files)} exports could not be read; the table covers the other {len(files) - len(failures)}",
        )


@app.command()
@friendly
def summary(
    paths: Annotated[list[Path], typer.Argument(help="An export, several, or a folder of them (one run; ranks together).")],
    time_from: FromOption = None,
    time_to: ToOption = None,
    within: WithinOption = None,
    skip_first: SkipFirstOption = 0,
    merge: MergeOption = False,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """One markdown screen for a whole run: devices with utilization, what to look at first,
    idle time by cause, top kernels and ranges, NCCL exposed time. Fits an issue comment.
    Exports of several runs (captures that do not overlap in time) get one section per run."""
    from ..read.inputs import expand_inputs
    from ..study.summary import summary as compose

    window, _ = _window(time_from, time_to, within, skip_first, None)
    target = _output(output, _read_by(expand_inputs(paths)))
    _write(compose(paths, window=window, merge=merge), target)


def _min_gap_ns(min_gap: float) -> int:
    """``--min-gap`` in µs as integer nanoseconds; beyond what a trace can hold is a parameter error."""
    import math

    if not math.isfinite(min_gap) or min_gap * 1000 > (1 << 63) - 1:
        raise typer.BadParameter(f"{min_gap:g} µs is longer than any trace can be (at most 9.2e15 µs)", param_hint="--min-gap")
    return round(min_gap * 1000)


def _accounting_notes(counted: dict) -> None:
    """One ``Note:`` per export holding GPU operations without a launch row, or cut in time."""
    from ..read.accounted import note

    for f, counts in counted.items():
        line = note(str(f), counts)
        if line:
            stderr.print(f"Note: {line}", markup=False)


def _view_columns(view: View) -> tuple[str, ...]:
    from ..views import get

    return get(view.value).COLUMNS


def _relative(target: Path, base: Path) -> str:

    return os.path.relpath(target.resolve(), base.resolve())
