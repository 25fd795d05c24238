"""``nsys-tools summary EXPORT|FOLDER``: one markdown screen for a whole run, short enough for an
issue comment.

It composes the views (``utilization`` and ``idle`` per device, ``kernels``, ``ranges``,
``overlap``) over the exports, in one window if one is given, and ranks the findings by the
time they account for: the three largest are the ones to look at first, each with its figure
(over the whole run ``diagnose``'s; in a window its own, from ``sync`` and ``launch`` too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

TOP = 5


@dataclass(frozen=True)
class Finding:
    """One thing to look at, and the time it accounts for."""

    ns: int
    text: str


def _ms(ns: float | int | None) -> str:
    return "–" if ns is None else f"{ns / 1e6:,.2f} ms"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}%"


def _small_pct(x: float | None) -> str:
    """As ``_pct``, but a share that rounds to nothing and is not nothing says so."""
    return "<0.1%" if x is not None and 0 < x < 0.05 else _pct(x)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    from ..render.tables import escape, row, rule

    body = [row(escape(str(c)) if not r else str(c) for c, r in zip(cells, right, strict=True)) for cells in rows]
    return [row(head), rule(right), *body]


def tables(paths: Sequence[str | Path], *, window=None, engine=None, run=None, ranked: bool = True) -> dict[str, pl.DataFrame]:
    """The views a summary reads, over ``paths`` (a ``read.window.WindowSpec`` in ``window``),
    through ``run`` (a ``rules.context.Run`` of them, where the rules find the tables they read
    too), together (``Run.views``). ``ranked``: with ``sync`` and ``launch``, which ``findings``
    reads beside them (the whole run's summary ranks ``diagnose``'s findings instead, and
    reads neither). ``overlap`` is read only where an export may hold an NCCL kernel
    (``Run.nccl``): the summary reads its NCCL time alone, which is none without one."""
    from .. import views
    from ..rules.context import Run

    run = run or Run(paths, engine=engine)
    options = {"window": window} if window else {}
    asked = {
        "utilization": {"by": ["device"]},
        "idle": {"by": ["device"]},
        "kernels": {"names": "short"},
        "ranges": {},
        **({"sync": {}, "launch": {"names": "short"}} if ranked else {}),
        **({"overlap": {"by": ["device"]}} if run.nccl else {}),
    }
    requests = [(name, {**given, **options}) for name, given in asked.items()]
    # The whole run's summary gives the steps, and its rules read them: read with the rest.
    read = run.views(requests + ([] if ranked else [("steps", run.step_options)]))
    return {"overlap": views.empty("overlap", views.by_columns(["device"]))} | dict(zip(asked, read[: len(asked)], strict=True))


def device(row: dict) -> str:
    """A device's label: its GPU id and name, led by its export where one GPU id is in several
    exports of the run (``run.report.view_table`` keeps them apart by ``file``)."""
    where = f"{Path(row['file']).name} " if row.get("file") else ""
    return f"{where}{row['gpu_id']} {row['gpu_name'] or ''}".strip()


def gpu(row: dict) -> str:
    """``GPU <id>``, led by its export where the run keeps devices apart per export."""
    return (f"{Path(row['file']).name} " if row.get("file") else "") + f"GPU {row['gpu_id']}"


def findings(t: dict[str, pl.DataFrame]) -> list[Finding]:
    """Everything worth a look, each with the time it accounts for, largest first."""
    from ..render.tables import escape, shorten

    out = []
    util, idle, kernels, sync, launch = t["utilization"], t["idle"], t["kernels"], t["sync"], t["launch"]
    if util.height:
        span, busy = util["span_ns"].sum(), util["busy_ns"].sum()
        if idle.height:
            top = idle.group_by("cause").agg(pl.col("total_ns").sum()).sort("total_ns", descending=True).row(0, named=True)
            out.append(
                Finding(
                    span - busy,
                    f"GPUs idle {_pct(100 * (span - busy) / span)} of their span ({_ms(span - busy)}); "
                    f"the top cause is **{top['cause']}**: {_ms(top['total_ns'])}",
                )
            )
        exposed = util["communication_ns"].sum()
        if exposed:
            out.append(Finding(exposed, f"NCCL communication not hidden behind compute: {_ms(exposed)} exposed"))
    if kernels.height:
        by_kernel = kernels.group_by("kernel").agg(pl.col("total_ns").sum()).sort("total_ns", descending=True)
        k = by_kernel.row(0, named=True)
        share = 100 * k["total_ns"] / by_kernel["total_ns"].sum()
        name = escape(shorten(k["kernel"]))
        out.append(Finding(k["total_ns"], f"kernel {name} takes {_pct(share)} of kernel time ({_ms(k['total_ns'])})"))
    if sync.height:
        s = sync.row(0, named=True)
        out.append(Finding(s["total_ns"], f"{escape(s['api'])} blocks the host {_ms(s['total_ns'])} over {s['instances']} calls"))
    if launch.height:
        bound = launch.filter(pl.col("api_median_ns") > pl.col("kernel_median_ns"))
        if bound.height:
            ns = int(bound["api_total_ns"].sum())
            out.append(Finding(ns, f"{bound.height} kernels run shorter than their launch call takes: {_ms(ns)} of launch calls"))
    return sorted(out, key=lambda f: -f.ns)


def summary(
    paths: Sequence[str | Path],
    *,
    window=None,
    engine=None,
    merge: bool = False,
    steps: dict | None = None,
    accounting: dict | None = None,
    held: dict | None = None,
) -> str:
    """The markdown summary of the run in ``paths`` (exports or folders of them); exports of
    several runs (``read.sessions.runs``: captures that do not overlap in time) get one section
    each, unless ``merge`` reads them as one. ``accounting``: a dict that gets each export's
    ``read.accounted.accounting`` (``rules.context.Run``'s); ``held``: as ``run_summary``'s."""
    from ..read.inputs import expand_inputs
    from ..read.sessions import runs

    files = expand_inputs(paths)
    groups = [files] if merge else runs(files)
    if len(groups) == 1:
        return run_summary(files, window=window, engine=engine, steps=steps, accounting=accounting, held=held)
    head = [
        f"## {len(groups)} runs",
        "",
        f"These {len(files)} exports are {len(groups)} separate runs (their captures do not overlap in time), "
        "one section each; `nsys-tools compare BASE NEW` compares two of them, `--merge` reads them as one.",
        "",
    ]
    sections = [run_summary(g, window=window, engine=engine, steps=steps, accounting=accounting, held=held) for g in groups]
    return "\n".join(head + sections)


def run_summary(
    files: Sequence[Path],
    *,
    window=None,
    engine=None,
    steps: dict | None = None,
    accounting: dict | None = None,
    held: dict | None = None,
) -> str:
    """The markdown summary of one run: ``files``, its exports. Over the whole run it leads with
    the three largest findings of ``diagnose`` and gives the steps (``steps``: the step view's
    options: ``step``, ``warmup``, ``slow``, ``flops_per_step``, ``peak_tflops``); in a window,
    with the largest of the window's own figures. ``held``: a dict that gets, under the tuple of
    ``files``, the run (``rules.context.Run``, with the tables it read and its findings), for the
    page of the run (``study.page``) to reuse."""
    from ..render.tables import escape, shorten
    from ..rules.context import Run

    run = Run(files, steps or {}, engine=engine, accounting=accounting)
    t = tables(files, window=window, run=run, ranked=window is not None)
    util, idle = t["utilization"], t["idle"]
    where = f"{len(files)} exports" if len(files) > 1 else f"`{files[0].name}`"
    lines = [f"### Run summary: {where}" + (f" ({window})" if window else ""), ""]
    lines += ["**Look at first:**", ""]
    if window is None:
        if held is not None:
            held[tuple(files)] = run
        found = [Finding(f.time_ns, f"{escape(f.title)} (`{f.rule}`)") for f in run.findings]
    else:
        found = findings(t)
    if not found:
        from ..run.empty import reason

        lines.append(f"(no GPU work found: {reason(files, 'utilization', window=window)})")
    lines += [f"{i}. {f.text}" for i, f in enumerate(found[:3], 1)]
    if run.skipped:  # rules that could not read an export: say which, not a finding less in silence
        left = ", ".join(f"`{r}`" for r in dict.fromkeys(r for _, r, _ in run.skipped))
        lines += ["", f"Left out: {left}; an export lacks a column their queries need (`diagnose` names it)."]
    lines += _steps(run.steps) if window is None else []
    lines += ["", "**Devices**", ""]
    lines += _table(
        ["GPU", "span", "busy", "compute", "NCCL exposed", "memory", "idle"],
        [
            (
                device(r),
                _ms(r["span_ns"]),
                _pct(r["busy_pct"]),
                _pct(r["compute_pct"]),
                _small_pct(r["communication_pct"]),
                _pct(r["memory_pct"]),
                _pct(r["idle_pct"]),
            )
            for r in util.iter_rows(named=True)
        ],
        [False, True, True, True, True, True, True],
    )
    if idle.height:
        causes = idle.group_by("cause").agg(pl.col("intervals", "total_ns").sum(), pl.col("longest_ns").max())
        causes = causes.with_columns(pct=100 * pl.col("total_ns") / pl.col("total_ns").sum()).sort("total_ns", descending=True)
        lines += ["", "**Idle time by cause** (all devices)", ""]
        lines += _table(
            ["cause", "intervals", "total", "share", "longest"],
            [
                (r["cause"], r["intervals"], _ms(r["total_ns"]), _pct(r["pct"]), _ms(r["longest_ns"]))
                for r in causes.iter_rows(named=True)
            ],
            [False, True, True, True, True],
        )
    kernels = t["kernels"].group_by("kernel").agg(pl.col("instances", "total_ns").sum())
    if kernels.height:
        total = kernels["total_ns"].sum()
        top = kernels.sort("total_ns", "kernel", descending=[True, False]).head(TOP)
        lines += ["", f"**Top kernels** (of {kernels.height})", ""]
        lines += _table(
            ["kernel", "calls", "total", "share"],
            [
                (shorten(r["kernel"]), r["instances"], _ms(r["total_ns"]), _pct(100 * r["total_ns"] / total))
                for r in top.iter_rows(named=True)
            ],
            [False, True, True, True],
        )
    from ..read.names import op_name

    ranges = (  # PyTorch's per-call ids dropped, so an operator's calls are one row
        t["ranges"].group_by(op_name(pl.col("range")).alias("range")).agg(pl.col("instances", "busy_ns", "range_total_ns").sum())
    )
    if ranges.height:
        top = ranges.sort("busy_ns", "range", descending=[True, False]).head(TOP)
        lines += ["", f"**Top NVTX ranges** by GPU busy time (of {ranges.height})", ""]
        lines += _table(
            ["range", "instances", "GPU busy", "CPU time"],
            [
                (shorten(r["range"]), r["instances"], _ms(r["busy_ns"]), _ms(r["range_total_ns"]))
                for r in top.iter_rows(named=True)
            ],
            [False, True, True, True],
        )
    lines += ["", f"**NCCL exposed time:** {_nccl(util, t['overlap'])}", ""]
    return "\n".join(lines)


def _steps(steps: pl.DataFrame) -> list[str]:
    """The step model in a few lines: its source, and per rank the setup, warm-up, steady median,
    slow steps, how busy its GPUs were in the steady steps (setup and warm-up left out) and, with
    FLOPs given, the median achieved TFLOP/s and MFU."""
    if steps.is_empty():
        return ["", "**Steps:** none found (no NVTX range named like a step, no repeating range or kernel sequence)"]
    per_rank = steps.unique(["pid", "step"], keep="first")
    lines = ["", f"**Steps** ({'; '.join(sorted(set(steps['source'])))})", ""]
    rows = []
    for (pid,), own in per_rank.sort("pid", "step").group_by("pid", maintain_order=True):
        steady = own.filter(pl.col("phase") == "steady")
        setup = own.filter(pl.col("phase") == "setup")["duration_ns"].sum()
        mfu = steady["mfu_pct"].drop_nulls()
        busy = steps.filter((pl.col("pid") == pid) & (pl.col("phase") == "steady")).select("busy_ns", "duration_ns").sum()
        rows.append(
            (
                pid,
                own.filter(pl.col("step") > 0).height,
                _ms(setup),
                own.filter(pl.col("phase") == "warmup").height,
                _ms(steady["duration_ns"].median()),
                steady.filter(pl.col("slow")).height,
                _pct(100 * busy["busy_ns"].item() / busy["duration_ns"].item()) if busy["duration_ns"].item() else "–",
                "–" if mfu.is_empty() else f"{steady['tflops'].median():,.1f} TFLOP/s, {_pct(mfu.median())} MFU",
            )
        )
    lines += _table(
        ["rank", "steps", "setup", "warm-up", "steady median", "slow", "steady busy", "achieved"],
        rows,
        [True, True, True, True, True, True, True, False],
    )
    return lines


def _nccl(util: pl.DataFrame, overlap: pl.DataFrame) -> str:
    """Communication not hidden behind compute (``utilization``), with the NCCL time and its
    hidden share, per device, and the step that exposed the most (``overlap``)."""
    comm = int(util["communication_ns"].sum()) if util.height else 0
    nccl = int(overlap["nccl_ns"].sum()) if overlap.height else 0
    if not nccl:
        return "none (no NCCL kernel in the run)"
    hidden = 100 * overlap["overlapped_ns"].sum() / nccl
    text = f"{_ms(comm)} (NCCL kernels ran {_ms(nccl)}, {_pct(hidden)} of it beside compute)"
    if not comm:
        return f"none: {text}"
    devices = util.filter(pl.col("communication_ns") > 0)
    text += "; per device: " + ", ".join(f"{gpu(r)} {_ms(r['communication_ns'])}" for r in devices.iter_rows(named=True))
    steps = overlap.filter(pl.col("step").is_not_null() & (pl.col("exposed_ns") > 0))
    if steps.height:
        worst = steps.sort("exposed_ns", "gpu_id", descending=[True, False]).row(0, named=True)
        text += f"; most in one step: {worst['step']} on GPU {worst['gpu_id']}, {_ms(worst['exposed_ns'])}"
    return text
