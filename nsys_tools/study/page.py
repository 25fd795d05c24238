"""``nsys-tools summary --html run.html``: the page of a run, one self-contained file that opens
offline: the findings of ``diagnose``, the step table and a stacked bar per step and device, the
devices with their utilization over time, and the top kernels (``render.run_page``). Exports of
several runs get one part each, as ``summary`` gives them a section each."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

WINDOWS = 100  # about this many windows of utilization over the run's span


def bin_ns(span_ns: int, windows: int = WINDOWS) -> int:
    """A round window length (1, 2 or 5 times a power of ten, in ns) giving at most about
    ``windows`` windows over ``span_ns``."""
    target = max(1, span_ns // windows)
    step = 1
    while True:
        for k in (1, 2, 5):
            if k * step >= target:
                return k * step
        step *= 10


def run_sections(files: Sequence[Path], *, name: str, steps: dict | None = None, held=None) -> list:
    """The page's sections for the run in ``files``; ``held``: the run (``rules.context.Run``)
    where a summary of it has just read its tables and findings (``study.summary.run_summary``'s
    ``held``)."""
    from ..render import run_page
    from ..rules.context import Run

    run = held or Run(files, steps or {})
    found = run.findings
    table = run.steps
    source = "; ".join(sorted(set(table["source"].drop_nulls()))) if "source" in table.columns and table.height else ""
    util = run.view("utilization", by=["device"])
    span = int((util["end_ns"].max() or 0) - (util["start_ns"].min() or 0)) if util.height else 0
    binned = run.view("utilization", by=["device"], bin_ns=bin_ns(span)) if span else util.clear()
    kernels = run.view("kernels", names="short")
    return run_page.sections(name, found, table, source, binned, util, kernels)


def write(
    paths: Sequence[str | Path], target: Path, *, merge: bool = False, steps: dict | None = None, held: dict | None = None
) -> Path:
    """Write the page of the run in ``paths`` to ``target`` (one part per run unless ``merge``);
    ``held``: the runs a summary of them read (``study.summary.summary``'s)."""
    from ..read.inputs import expand_inputs
    from ..read.sessions import runs
    from ..render import html

    files = expand_inputs(paths)
    groups = [files] if merge else runs(files)

    def name(g: Sequence[Path]) -> str:
        return g[0].name if len(g) == 1 else f"{len(g)} exports ({g[0].name}, ...)"

    held = held or {}
    sections = [s for g in groups for s in run_sections(g, name=f"Findings: {name(g)}", steps=steps, held=held.get(tuple(g)))]
    title = f"Run: {name(files)}" if len(groups) == 1 else f"{len(groups)} runs"
    return html.write(target, title, sections, through_link=True)
