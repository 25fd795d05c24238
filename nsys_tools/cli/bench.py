"""bench: report timed on large exports, or a fleet on Dask."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..render.tables import Format
from .app import _output, _write, app, friendly, stderr
from .options import Baseline


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
    from ..render.tables import render
    from ..resources import demo_capture
    from ..run import bench as B

    origin = source or demo_capture() / "4096x768.sqlite"
    output = _output(output, [origin])  # never over its source, nor a device node

    def counts(text: str, option: str, what: str, example: str) -> list[int]:
        items = [k.strip() for k in text.split(",") if k.strip()]
        if not items or not all(k.isdigit() and int(k) > 0 for k in items):
            raise typer.BadParameter(f"{text!r}: give positive {what}, e.g. {example}", param_hint=option)
        return [int(k) for k in items]

    sizes = counts(kernels or ("100000" if workers else "300000,3000000"), "--kernels", "kernel counts", "300000,3000000")
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
