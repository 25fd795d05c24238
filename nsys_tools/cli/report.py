"""report and summary: the tables of exports and sweep folders."""

from __future__ import annotations

import os
from contextlib import contextmanager
from enum import Enum
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
from .generated import Generated, ViewCommand, flags_given, given_options, view_choice, view_help, view_parameters
from .options import (
    FlopsOption,
    FromOption,
    MergeOption,
    PeakOption,
    ReexportOption,
    SkipFirstOption,
    SlowOption,
    StepOption,
    StrictOption,
    ToOption,
    ViewFormat,
    WarmupOption,
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


PathsArgument = Annotated[
    Optional[list[Path]],
    typer.Argument(help="Exports (.sqlite or .nsys-rep), folders of them, or sweep folders.", show_default=False),
]
DemoOption = Annotated[bool, typer.Option("--demo", help="Use the bundled H200 sweep (no GPU or nsys needed).")]
FormatOption = Annotated[ViewFormat, typer.Option("--format", "-f", help="Output format (parquet: with --output).")]
IssueOption = Annotated[
    bool, typer.Option("--issue", help="For one sweep: the markdown comment for an issue thread, with charts.")
]
RangeOption = Annotated[Optional[str], typer.Option("--range", help="Keep NVTX ranges matching this glob.")]
KernelOption = Annotated[Optional[str], typer.Option("--kernel", help="Keep kernels matching this glob.")]
PerFileOption = Annotated[bool, typer.Option("--per-file", help="With several exports, one row per file instead of aggregating.")]
ByOption = Annotated[
    Optional[str], typer.Option(help="Split rows by any of device,process,stream (comma-separated).", show_default=False)
]
TopOption = Annotated[
    Optional[int],
    typer.Option(min=0, help="Keep the N rows with the largest total time (gaps: the longest); 0 keeps all.", show_default=False),
]
NsysOption = Annotated[
    Optional[Path], typer.Option(help="nsys executable, to export .nsys-rep files (default: $NSYS, then PATH).")
]
SchedulerOption = Annotated[
    Optional[str],
    typer.Option(
        help="Read exports on Dask: tcp://HOST:PORT (a running scheduler whose workers see the same paths) "
        "or local:N (N worker processes here). Needs nsys-tools[dask]."
    ),
]
IssueLedgerOption = Annotated[
    Optional[Path],
    typer.Option(
        help="Ledger for bands and history with --issue (default: $NSYS_TOOLS_LEDGER, else ledger.sqlite "
        "beside the sweeps folder, else reports/ledger.sqlite)."
    ),
]
ChartsOption = Annotated[Optional[Path], typer.Option(help="Folder for the --issue charts (default: charts/<sweep id>).")]
ChartBaseUrlOption = Annotated[
    Optional[str],
    typer.Option(
        "--chart-base-url", help="With --issue or --chart: link the charts as URL/<chart file> (where they will be uploaded)."
    ),
]
ChartOption = Annotated[
    Optional[Path],
    typer.Option(
        "--chart",
        help="For exports: also draw the view as a chart, out.html (offline, interactive) or out.png; markdown output links it.",
    ),
]
ControlOption = Annotated[
    Optional[str], typer.Option(help="With --issue: compare with this implementation instead of the sweep's control.")
]
OutputOption = Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")]
SweepPluginOption = Annotated[
    Optional[list[str]],
    typer.Option("--plugin", help="Op plugin for a sweep's bytes and FLOPs (.py file or module); never taken from a folder."),
]


@friendly
def _report(
    paths: PathsArgument = None,
    demo: DemoOption = False,
    fmt: FormatOption = ViewFormat.markdown,
    issue: IssueOption = False,
    range_glob: RangeOption = None,
    kernel_glob: KernelOption = None,
    per_file: PerFileOption = False,
    merge: MergeOption = False,
    view: str = "kernels",  # the registry's names (``generated.view_choice``)
    by: ByOption = None,
    top: TopOption = None,
    time_from: FromOption = None,
    time_to: ToOption = None,
    within: WithinOption = None,
    skip_first: SkipFirstOption = 0,
    nsys: NsysOption = None,
    reexport: ReexportOption = False,
    scheduler: SchedulerOption = None,
    ledger: IssueLedgerOption = None,
    charts: ChartsOption = None,
    chart_base_url: ChartBaseUrlOption = None,
    chart: ChartOption = None,
    control: ControlOption = None,
    output: OutputOption = None,
    plugin: SweepPluginOption = None,
    strict: StrictOption = False,
    **given,
) -> None:
    """Kernel time per NVTX range and the other standard views, or per implementation and shape for a sweep folder.

    For exports (--view): kernels, the default: instances, total, time %, mean, median, min, max,
    stddev, p10 and p90 of each kernel per NVTX range (the range enclosing the API call that
    launched it, on the launching thread; kernels outside every range have an empty range).
    `report --view NAME --help` lists the options of view NAME. --by device,process,stream splits
    any view. Markdown is cut to fit an issue comment, saying how many rows were left out. A folder
    with exports that cannot be read is still reported: the failures are listed and the exit
    code is 1.

    For a sweep folder: one row per (op, impl, shape, l2) with kernel time from the trace and the
    event span measured with tracing off. With --issue: the comment for an issue thread.
    """
    view = view.value if isinstance(view, Enum) else view
    fmt, parquet = _format(fmt, output)
    inputs, sweeps = _inputs(paths, demo, scheduler, plugin)
    export_only = {"--range": range_glob, "--kernel": kernel_glob, "--per-file": per_file, "--view": view != "kernels"}
    export_only.update({"--by": by, "--scheduler": scheduler, "--reexport": reexport, "--from": time_from, "--to": time_to})
    export_only.update({"--within": within, "--skip-first": skip_first > 0, "--chart": chart})
    _exports_only(sweeps, [*(k for k, v in export_only.items() if v not in (None, False)), *flags_given(given)])
    options = given_options(view, given)
    keys = _keys(view, by)
    window, _ = _window(time_from, time_to, within, skip_first, None)
    _check_view(view, options, range_glob, kernel_glob, chart, sweeps)
    _check_issue_options(issue, chart, ledger, charts, chart_base_url, control)
    if issue:
        return _issue(sweeps, demo, parquet or fmt is not Format.markdown, top, ledger, charts, chart_base_url, control, output)
    if window:
        options["window"] = window
    if sweeps:
        from ..study.folder import sweep_table

        target = _output(output, [f for s in sweeps for f in _folder_files(s)])
        frame = sweep_table(sweeps)
        if frame.is_empty():
            stderr.print("No rows: the table is empty.", markup=False)
        return _emit(frame, None, fmt, parquet, top, target, None)
    read = dict(by=keys, per_file=per_file, range_glob=range_glob, kernel_glob=kernel_glob, nsys=nsys, reexport=reexport)
    frame, files, failures, target = _exports(inputs, view, (scheduler, strict, merge), output, options, read)
    _emit(frame, view, fmt, parquet, top, target, (chart, chart_base_url, _read_by(files)) if chart is not None else None)
    if failures:
        _fail(
            failures,
            f"{len(failures)} of {len(files)} exports could not be read; the table covers the other {len(files) - len(failures)}",
        )


report = app.command(name="report", cls=ViewCommand)(
    Generated(_report, view_parameters, {"view": lambda: (view_choice(), typer.Option(help=view_help()))})
)


def _format(fmt: ViewFormat, output: Path | None) -> tuple[Format, bool]:
    """The text format (csv for parquet) and whether the table goes to a Parquet file."""
    parquet = fmt is ViewFormat.parquet
    if parquet and output is None:
        raise typer.BadParameter("parquet is written to a file: give --output FILE.parquet", param_hint="--format")
    return (Format.csv if parquet else Format(fmt.value)), parquet


def _inputs(paths, demo: bool, scheduler: str | None, plugin) -> tuple[list[Path], list[Path]]:
    """The inputs (the bundled sweep with ``--demo``) and those of them that are sweep folders, checked."""
    from ..folder_format import is_sweep
    from ..resources import demo_capture

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
    inputs = [demo_capture()] if demo else list(paths or [])
    sweeps = [p for p in inputs if is_sweep(p)]
    if sweeps and len(sweeps) != len(inputs):
        raise typer.BadParameter("give either sweep folders or exports, not both", param_hint="PATHS")
    if plugin and not sweeps:
        raise typer.BadParameter("applies to sweep folders, not exports", param_hint="--plugin")
    _allow_plugins(plugin, sweeps)
    return inputs, sweeps


def _exports_only(sweeps: list[Path], given: list[str]) -> None:
    if sweeps and given:
        verb = "apply" if len(given) > 1 else "applies"
        raise typer.BadParameter(f"{', '.join(given)} {verb} to exports, not sweep folders", param_hint=given[0])


def _keys(view: str, by: str | None) -> list[str]:
    """The ``--by`` keys, those the view can be split by (``View.by``)."""
    from ..views import spec

    keys = _by(by)
    allowed = spec(view).by
    if set(keys) - set(allowed):
        raise typer.BadParameter(f"--view {view} splits by {' or '.join(allowed)} only", param_hint="--by")
    return keys


def _check_view(view: str, options: dict, range_glob, kernel_glob, chart: Path | None, sweeps: list[Path]) -> None:
    """``--chart`` needs a view that draws one; ``--range`` and ``--kernel`` the column they filter
    (hist and pace: ``name``, a kernel's or a range's)."""
    from ..views import spec

    if sweeps:
        return
    if chart is not None and spec(view).no_chart:
        raise typer.BadParameter(f"--view {view} draws no chart: {spec(view).no_chart}", param_hint="--chart")
    columns = spec(view).columns
    named = ("range" if options.get("of") == "ranges" else "kernel") if "name" in columns else None
    for option, value, column in (("--range", range_glob, "range"), ("--kernel", kernel_glob, "kernel")):
        if value and column not in columns and column != named:
            raise typer.BadParameter(f"--view {view} has no {column} column", param_hint=option)
        _glob(value, option)


def _check_issue_options(issue: bool, chart, ledger, charts, chart_base_url, control) -> None:
    issue_only = [
        n
        for n, v in (("--ledger", ledger), ("--charts", charts), ("--chart-base-url", chart_base_url), ("--control", control))
        if v is not None and not (n == "--chart-base-url" and chart is not None)
    ]
    if chart is not None and chart.suffix not in (".html", ".png"):
        raise typer.BadParameter("give a .html or .png file", param_hint="--chart")
    if issue_only and not issue:
        raise typer.BadParameter(f"{', '.join(issue_only)} go with --issue", param_hint=issue_only[0])


def _issue(sweeps, demo, not_markdown, top, ledger, charts, chart_base_url, control, output) -> None:
    """The markdown comment of one sweep for an issue thread, and its charts."""
    from ..files import safe_name
    from ..resources import demo_ledger
    from ..study import ledger as L
    from ..study.folder import load
    from ..study.issue import compose

    whole = [n for n, on in (("--format", not_markdown), ("--top", top is not None)) if on]
    if whole:
        raise typer.BadParameter("the issue comment is markdown, written whole", param_hint=whole[0])
    if len(sweeps) != 1:
        raise typer.BadParameter("--issue takes exactly one sweep folder", param_hint="PATHS")
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


def _exports(inputs: list[Path], view: str, how: tuple, output, options: dict, read: dict):
    """The view's table over the exports, read ``how`` (the scheduler, --strict, --merge): the frame, the files
    read, those that failed, the output file."""
    from ..read.inputs import expand_inputs
    from ..run.engine import connect
    from ..run.report import view_table

    scheduler, strict, merge = how
    skipped: list = []
    counted: dict = {}
    notes: list[str] = []
    files = expand_inputs(inputs, skipped, reexport=read["reexport"])
    _skipped(skipped, strict)
    if not (merge or read["per_file"]):
        from ..read.sessions import one_run

        one_run(files, inputs, read["nsys"], read["reexport"])
    _stale_notes(files)
    target = _output(output, _read_by(files))
    failures: list[NsysToolsError] = []
    with (
        connect(scheduler) as engine,
        _progress(len(files), "Reading exports" + (f" on {scheduler}" if scheduler else "")) as moved,
    ):
        frame = view_table(
            files,
            view,
            progress=moved,
            engine=engine,
            failures=failures if len(files) > 1 else None,
            accounting=None if view == "api" else counted,
            notes=notes,
            **read,
            **options,
        )
    for line in notes:
        stderr.print(f"Note: {line}", markup=False)
    if len(failures) == len(files):
        _fail(failures, f"none of the {len(files)} exports could be read")
    _accounting_notes(counted)
    _view_note(view, frame, options)
    if frame.is_empty():
        from ..run.empty import reason

        done = [f for f in files if f not in {e.path for e in failures}]
        globs = {"range_glob": read["range_glob"], "kernel_glob": read["kernel_glob"]}
        why = reason(
            done,
            view,
            window=options.get("window"),
            step=options.get("step"),
            nsys=read["nsys"],
            reexport=read["reexport"],
            **globs,
        )
        stderr.print(f"No rows: {why}.", markup=False)
    return frame, files, failures, target


@contextmanager
def _progress(total: int, label: str):
    """A transient bar on stderr while several exports are read: the callback that moves it
    (``progress(done, total)``). One export gets none, and rich's progress is not imported."""
    if total < 2:
        yield None
        return
    from rich.progress import Progress

    with Progress(console=stderr.console, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _emit(frame, view: str | None, fmt: Format, parquet: bool, top: int | None, target: Path | None, chart) -> None:
    """View ``view``'s table (None: a sweep's), cut to ``--top`` (a view that counts ``--top`` by a column,
    ``View.top``: the first N of it, all their rows), to ``target`` or stdout; with ``chart`` (file, base
    URL, inputs), its chart, linked."""
    from ..render.tables import pieces, render

    rows = frame.height
    frame = _top(frame, top, view)
    cap = COMMENT_CHARS if fmt is Format.markdown and top is None else None
    hint = "`--top 0` shows all of them; `--format csv` or `json` writes them whole."
    link = _chart(frame, target, view, *chart) if chart is not None and not frame.is_empty() else ""
    if parquet:
        _write_parquet(frame, target)
    elif fmt is Format.markdown:
        _write(render(frame, fmt, of=rows, max_chars=cap, hint=hint) + link, target)
    else:
        _write(pieces(frame, fmt) if fmt in (Format.csv, Format.json) else render(frame, fmt), target)


def _top(frame, top: int | None, view: str | None):
    if not top:
        return frame
    from ..views import spec

    column = spec(view).top if view else ""
    if column:
        import polars as pl

        return frame.filter(pl.col(column).is_in(frame[column].unique(maintain_order=True).head(top).implode()))
    return frame.head(top)


def _chart(frame, target: Path | None, view: str, chart: Path, chart_base_url: str | None, inputs: list[Path]) -> str:
    """Draw ``view``'s chart of ``frame`` to ``chart``; the markdown that links it from ``target``."""
    from ..render import view_charts
    from ..views import get

    chart_path = _output(chart, inputs)
    view_charts.save(get(view).chart(frame), chart_path)
    stderr.print(f"Wrote {chart}", markup=False)
    base = target.parent if target else Path.cwd()  # links work from where the markdown lands
    href = f"{chart_base_url.rstrip('/')}/{chart.name}" if chart_base_url else _relative(chart_path, base)
    title = f"{view} chart"
    return f"\n![{title}]({href})\n" if chart.suffix == ".png" else f"\n[{title} (interactive)]({href})\n"


@app.command()
@friendly
def summary(
    paths: Annotated[list[Path], typer.Argument(help="An export, several, or a folder of them (one run; ranks together).")],
    time_from: FromOption = None,
    time_to: ToOption = None,
    within: WithinOption = None,
    skip_first: SkipFirstOption = 0,
    merge: MergeOption = False,
    step: StepOption = None,
    warmup: WarmupOption = None,
    slow: SlowOption = None,
    flops_per_step: FlopsOption = None,
    peak_tflops: PeakOption = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
    page: Annotated[
        Optional[Path],
        typer.Option(
            "--html",
            help="Also write the page of the run: findings, steps, a bar per step, utilization over time, top kernels "
            "(one self-contained file that opens offline).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """One markdown screen for a whole run: devices with utilization, what to look at first,
    idle time by cause, top kernels and ranges, NCCL exposed time. Fits an issue comment.
    Exports of several runs (captures that do not overlap in time) get one section per run.
    --html run.html also writes the page of the run."""
    from ..read.inputs import expand_inputs
    from ..study.summary import summary as compose

    window, _ = _window(time_from, time_to, within, skip_first, None)
    files = expand_inputs(paths)
    target = _output(output, _read_by(files))
    steps = {"step": step, "warmup": warmup, "slow": slow, "flops_per_step": flops_per_step, "peak_tflops": peak_tflops}
    steps = given_options("steps", steps)  # the view's own checks: a peak needs --flops-per-step
    if page is not None:
        if window:
            raise typer.BadParameter("the page is of the whole run: give no window with it", param_hint="--html")
        if page.suffix.lower() != ".html":
            raise typer.BadParameter("give a .html file", param_hint="--html")
        page_target = _output(page, _read_by(files))
    counted: dict = {}  # each export's accounting, counted in the pass that reads its first view
    held: dict = {}  # each run and its findings, read once for the summary and the page
    _write(compose(paths, window=window, merge=merge, steps=steps, accounting=counted, held=held), target)
    if page is not None:
        from ..study.page import write

        write(paths, page_target, merge=merge, steps=steps, held=held)
        stderr.print(f"Wrote {page}", markup=False)
    _accounting_notes({f: counted[f] for f in files})


def _view_note(view: str, frame, options: dict) -> None:
    """The view's ``Note:`` under its table (its ``note``), where it has one."""
    from ..views import get

    note = getattr(get(view), "note", None)
    line = note(frame, **{k: v for k, v in options.items() if k != "window"}) if note and not frame.is_empty() else None
    if line:
        stderr.print(f"Note: {line}.", markup=False)


def _accounting_notes(counted: dict) -> None:
    """One ``Note:`` per export holding GPU operations without a launch row or a time, bad rows
    (``read.badrows``), or cut in time."""
    from ..read.accounted import note

    for f, counts in counted.items():
        line = note(str(f), counts)
        if line:
            stderr.print(f"Note: {line}", markup=False)


def _relative(target: Path, base: Path) -> str:

    return os.path.relpath(target.resolve(), base.resolve())
