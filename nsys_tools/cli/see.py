"""timeline and export: see a trace, take its frames out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..files import output_folder
from .app import _output, _read_by, app, friendly, stderr
from .options import FromOption, SkipFirstOption, ToOption, WithinOption, _window


@app.command()
@friendly
def timeline(
    path: Annotated[Path, typer.Argument(help="One export (.sqlite or .nsys-rep).")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The trace-event JSON to write (.json, or .json.gz compressed).")
    ],
    time_from: FromOption = None,
    time_to: ToOption = None,
    within: WithinOption = None,
    skip_first: SkipFirstOption = 0,
    chart: Annotated[
        Optional[Path], typer.Option(help="Also draw the window as an Altair chart: out.html (offline) or out.png.")
    ] = None,
    nsys: Annotated[
        Optional[Path], typer.Option(help="nsys executable, to export a .nsys-rep (default: $NSYS, then PATH).")
    ] = None,
) -> None:
    """The export as Chrome/Perfetto trace-event JSON: open it in ui.perfetto.dev or chrome://tracing.

    One track per GPU and stream, one per process and thread (CUDA API calls, NVTX push/pop ranges
    nested; start/end ranges on a second track of the thread); kernels (NCCL ones as their own
    category), memory operations, and an arrow from each launch call to its GPU operation.
    """
    from ..read.export import reading
    from ..read.trace import open as open_trace
    from ..read.window import NO_END, resolve
    from ..render import timeline as T

    spec, _ = _window(time_from, time_to, within, skip_first, None)
    if chart is not None and chart.suffix not in (".html", ".png"):
        raise typer.BadParameter("give a .html or .png file", param_hint="--chart")
    target = _output(output, _read_by([path]))

    def warn(size: int) -> None:
        stderr.print(
            f"Warning: the timeline will take about {size / 1e6:.0f} MB; Perfetto's web UI struggles past 500 MB: "
            "write one window of it (--from/--to, or --within 'step*#3'), or compress it (-o run.json.gz)",
            markup=False,
        )

    with reading(path), open_trace(path, nsys) as trace:
        window = resolve(trace, spec)
        if window is not None and window.ranks:  # each rank's own window, its work by launch, as the views take it
            trace = trace.within(window)
        start_ns = window.start_ns if window else None
        end_ns = window.end_ns if window and window.end_ns < NO_END else None
        written = T.write(trace, target, start_ns=start_ns, end_ns=end_ns, warn=warn)
        if chart is not None:
            from ..render.timeline_chart import save, timeline_chart

            save(timeline_chart(trace, start_ns=start_ns, end_ns=end_ns), _output(chart, _read_by([path])))
            stderr.print(f"Wrote {chart}", markup=False)
    counts = ", ".join(f"{n} {cat}" for cat, n in sorted(written.events.items()))
    stderr.print(f"Wrote {output} ({written.bytes / 1e6:.1f} MB): {counts}, {written.flows} launch arrows", markup=False)
    if written.open_ranges:
        stderr.print(
            f"Warning: {written.open_ranges} NVTX ranges still open at the end of the capture are left out", markup=False
        )
    if not any(written.events.get(cat) for cat in ("kernel", "nccl", "memcpy", "memset")):
        from ..run.empty import reason

        stderr.print(
            f"Note: no GPU operation in the timeline: {reason([path], 'timeline', window=spec, nsys=nsys)}.", markup=False
        )


@app.command("export")
@friendly
def export_frames(
    path: Annotated[Path, typer.Argument(help="One export (.sqlite or .nsys-rep).")],
    to: Annotated[Path, typer.Option("--to", help="The folder to write the Parquet files, SCHEMA.md and frames.json into.")],
    frames: Annotated[
        Optional[str], typer.Option(help="Only these frames (comma-separated; default: all).", show_default=False)
    ] = None,
    nsys: Annotated[
        Optional[Path], typer.Option(help="nsys executable, to export a .nsys-rep (default: $NSYS, then PATH).")
    ] = None,
) -> None:
    """The export's normalized frames as Parquet: kernels, memops, api, ranges, gpu_ops (with launch
    call and NVTX range), gpu_op_ranges (every enclosing range), gpus, devices, processes.

    Names are resolved and times are integer nanoseconds; SCHEMA.md says what every column holds.
    Read them with DuckDB, Polars or pandas.
    """
    from ..read.export import reading
    from ..read.trace import open as open_trace
    from ..render import frames as F

    only = [f.strip() for f in frames.split(",") if f.strip()] if frames else None
    unknown = [f for f in only or [] if f not in F.FRAMES]
    if unknown:
        raise typer.BadParameter(f"unknown frame {unknown[0]!r}: choose from {', '.join(F.FRAMES)}", param_hint="--frames")
    output_folder(to, [path])
    with reading(path), open_trace(path, nsys) as trace:
        rows = F.write(trace, to, only)
    stderr.print(f"Wrote {to}: " + ", ".join(f"{name} ({n} rows)" for name, n in rows.items()) + ", SCHEMA.md", markup=False)
