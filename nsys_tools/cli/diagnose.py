"""diagnose: the findings of a run, ranked by the time at stake."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import _output, _read_by, _write, app, friendly, stderr
from .options import MergeOption, SlowOption, StepOption, WarmupOption


class DiagnoseFormat(str, Enum):
    markdown = "markdown"
    json = "json"
    csv = "csv"


@app.command()
@friendly
def diagnose(
    paths: Annotated[list[Path], typer.Argument(help="The exports of one run (.sqlite or .nsys-rep), or a folder of them.")],
    rule: Annotated[
        Optional[list[str]],
        typer.Option(
            "--rule",
            "-r",
            help="Only this rule, as NAME[:option=value]... (nsys analyze's syntax; repeat for several). "
            "With --format csv: that rule's rows.",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[DiagnoseFormat, typer.Option("--format", "-f", help="markdown, json, or csv (one rule's rows).")] = (
        DiagnoseFormat.markdown
    ),
    step: StepOption = None,
    warmup: WarmupOption = None,
    slow: SlowOption = None,
    merge: MergeOption = False,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Ranked findings: what cost the run time, where, the rows behind it, and what to try.

    Every rule runs unless --rule names some. The rules twin to nsys analyze's (cuda_api_sync,
    cuda_memcpy_async, cuda_memcpy_sync, cuda_memset_sync, gpu_gaps, gpu_time_util) give, with
    --format csv, the rows nsys analyze -r NAME:rows=-1 --format csv gives.
    """
    from .. import rules as R
    from ..read.inputs import expand_inputs
    from ..rules.context import Run

    try:
        chosen = [R.parse(r) for r in rule or []]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--rule") from None
    if fmt is DiagnoseFormat.csv and len(chosen) != 1:
        raise typer.BadParameter("csv holds one rule's rows: give exactly one --rule", param_hint="--format")
    files = expand_inputs(paths)
    if not merge:
        from ..read.sessions import one_run

        one_run(files, paths)
    target = _output(output, _read_by(files))
    run = Run(files, {k: v for k, v in {"step": step, "warmup": warmup, "slow": slow}.items() if v is not None})
    if fmt is DiagnoseFormat.csv:
        ((spec, options),) = chosen
        _write(_rows_csv(run, spec, options, files), target)
        return
    try:
        found = R.diagnose(run, [s.name for s, _ in chosen], {s.name: o for s, o in chosen})
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--rule") from None
    for line in run.skipped_notes():
        stderr.print(f"Note: {line}.", markup=False)
    if not found:
        looked = ", ".join(s.name for s, _ in chosen) or f"all {len(R.names())} rules"
        stderr.print(f"No findings: {looked} found nothing worth a look in {len(files)} export(s).", markup=False)
    if not run.steps.is_empty():
        from ..views.steps import note

        stderr.print(f"Note: {note(run.steps, **run.step_options)}.", markup=False)
    _write(R.as_json(found) if fmt is DiagnoseFormat.json else R.markdown(found), target)


def _rows_csv(run, spec, options: dict, files: list[Path]) -> str:
    """One rule's rows as csv; a twin's as nsys analyze writes them (one export: nsys reads one)."""
    from ..render.tables import Format, render
    from ..rules import analyze

    module = spec.load()
    try:
        if spec.twin:
            if len(files) != 1:
                raise typer.BadParameter(
                    f"{spec.name} gives nsys analyze's rows, of one export: give one (got {len(files)})", param_hint="PATHS"
                )
            why = analyze.lacking(run.exports[0], module.NEEDS)
            if why is not None:  # nsys analyze skips the rule, writing an empty csv: so does its twin
                stderr.print(f"No rows: {spec.name} cannot look at {files[0]}: {why}.", markup=False)
                return ""
            rows = module.select(run.dbs[0], **options)
            if not rows:
                stderr.print(f"No rows: {spec.name} found nothing in {files[0]} ({spec.summary}).", markup=False)
            return analyze.csv_text(module.COLUMNS, rows)
        table = module.rows(run, **options)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--rule") from None
    if table.is_empty():
        stderr.print(f"No rows: {spec.name} found nothing in {len(files)} export(s) ({spec.summary}).", markup=False)
    import polars as pl

    lists = [c for c, t in table.schema.items() if isinstance(t, pl.List)]  # step numbers: "2 5 8" in one cell
    return render(table.with_columns(pl.col(c).cast(pl.List(pl.String)).list.join(" ") for c in lists), Format.csv)
