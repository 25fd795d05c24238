"""``nsys-tools report SWEEP --issue``: a markdown comment for an issue thread.

It carries what the comparison needs and nothing that could be mistaken for something else:
kernel time and event span in separate, named tables; ratios against the same-session control
with intervals that resample rounds, beside their spread across sessions of the same build;
bandwidth against the same-session bandwidth floor (a copy); the control's verdict in a
sentence; the output policy each implementation ran under; the gap across sessions from the
ledger; the rejected variants; links to the charts. It names no op or implementation: the
sweep's manifest and harness records (or the op's plugin) say which is which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ..errors import UsageError
from ..escape import ANSI
from ..files import safe_name
from ..render import charts
from ..render.tables import escape, grid, us
from ..views import stats as metrics
from . import ledger, verdict
from .folder import Sweep, summary


def _code(text: object) -> str:
    """Manifest text as an inline code span: one line, no backtick to end the span early."""
    line = ANSI.sub("", str(text)).translate({c: " " for c in [*range(0x20), 0x7F, 0x85, 0x2028, 0x2029]})
    return "`" + line.replace("`", "'") + "`"


HISTORY_SESSIONS = 8
ALLOCATES = "†"  # marks, in every table, an implementation that allocates its output inside the call
DEFAULT_TOLERANCE = 1e-5  # sweeps from before the harness recorded each implementation's tolerance
POLICIES = {
    "rotate": "rotate (every implementation writes a cold buffer: one output per buffer set)",
    "reuse": "reuse (every implementation writes the same buffer at a shape, as a caching allocator hands it back)",
    "unknown": "not declared (capture run --outputs)",
}


@dataclass
class Comment:
    markdown: str
    charts: list[Path] = field(default_factory=list)


def _spread(row: dict, prefix: str) -> str:
    """``median (p10–p90)`` in µs."""
    return f"{us(row[f'{prefix}_median_ns'])} ({us(row[f'{prefix}_p10_ns'])}–{us(row[f'{prefix}_p90_ns'])})"


def _grid(df: pl.DataFrame, cell: Callable[[dict], str], impls: list[str], allocating: set[str] = frozenset()) -> str:
    """A markdown table with one row per shape and one column per implementation; the columns
    of implementations in ``allocating`` carry the mark ``ALLOCATES``."""
    shapes = list(dict.fromkeys(df["shape"]))
    cols = [i for i in impls if i in set(df["impl"])]
    cells = {(r["shape"], r["impl"]): cell(r) for r in df.iter_rows(named=True)}
    heads = [escape(c) + (f" {ALLOCATES}" if c in allocating else "") for c in cols]
    body = [[escape(s)] + [escape(cells.get((s, c), "–")) for c in cols] for s in shapes]
    return grid(["shape", *heads], body, [False] + [True] * len(cols))


def _rows(df: pl.DataFrame, headers: dict[str, str]) -> str:
    return grid(list(headers.values()), [[escape(str(v)) for v in r] for r in df.select(list(headers)).iter_rows()])


def _throughput(sweep: Sweep, summ: pl.DataFrame, impls: list[str], allocating: set[str]) -> list[str]:
    """TFLOP/s per implementation and shape, as a share of the GPU's dense peak where the op
    knows it for this GPU (with the figure's source)."""
    op = sweep.op(summ["op"][0])
    peak, source = (getattr(op, "peaks", None) or {}).get(sweep.gpu, (None, ""))

    def cell(r: dict) -> str:
        return f"{r['tflops']:,.1f}" + (f" ({100 * r['tflops'] / peak:.0f}% of peak)" if peak else "")

    lines = ["\n#### Throughput: floating-point operations over the median kernel time, TFLOP/s\n"]
    if peak:
        lines.append(f"\nPeak: {peak:,.1f} TFLOP/s dense at {op.dtype} on the {escape(sweep.gpu)} ({escape(source)}).\n\n")
    return [*lines, _grid(summ.filter(pl.col("tflops") > 0), cell, impls, allocating)]


def _header(sweep: Sweep, summ: pl.DataFrame) -> str:
    m = sweep.manifest
    spec = m.spec
    first = sweep.setup
    gpu = escape(str(sweep.gpu or "unknown GPU"))
    driver = escape(m.gpu_before.driver_version or "unknown")
    nsys = escape((m.nsys_version or "unknown").replace("NVIDIA Nsight Systems version ", ""))
    builds = sweep.commits
    if len(builds) > 1:
        commit = "commits " + ", ".join(f"{_code(c[:10])} ({escape(', '.join(units))})" for c, units in builds.items())
    else:
        commit = f"commit {_code((next(iter(builds), None) or m.git_commit or 'unknown')[:10])}"
    when = escape((m.created_utc or "")[:16].replace("T", " "))
    l2_mode = "cold" if spec.l2 is None else spec.l2
    modes = sorted(set(summ["l2"].drop_nulls())) or [l2_mode]
    if sweep.kind == "run":
        l2 = " and ".join(modes) + " (as the program's ranges say)"
    elif l2_mode == "cold":
        mib = ((first.l2_bytes if first else None) or 0) / 2**20
        counts = sorted({h.buffer_sets for h in sweep.harness.values()} - {None})
        sets = f"{counts[0]}–{counts[-1]}" if len(counts) > 1 else str(counts[0]) if counts else "several"
        l2 = f"cold (inputs rotated over {sets} buffer sets per shape, more than twice the {mib:.0f} MiB L2 in all)"
    else:
        l2 = "warm (one buffer set reused)"
    stack = escape(", ".join(f"{k} {v}" for k, v in (first.versions if first else {}).items()))
    outputs = POLICIES.get(sweep.outputs, sweep.outputs)
    allocating = sorted(set(summ.filter(pl.col("outputs") == "allocates")["impl"]))
    if allocating:
        verb = "allocates its" if len(allocating) == 1 else "allocate their"
        outputs += f", except {', '.join(allocating)} {ALLOCATES}, which {verb} output inside the call"
    if sweep.kind == "run":
        rounds = summ.select("op", "impl", "shape").height and sweep.calls["round"].n_unique()
        program = " ".join(spec.program)[:120]
        how = f"captured with `nsys-tools capture run` from {_code(program)}, {rounds} rounds"
    else:
        order = "order rotated each round"
        if sweep.order == "shuffled":
            order = f"order shuffled each round (seed {spec.seed or 0})"
            if len(sweep.units) > 1:
                same = len({str(sweep.round_orders(u)) for u in sweep.units}) == 1
                order = order[:-1] + ("; the same orders at every shape)" if same else "; each shape's own orders)")
        how = f"{spec.rounds} rounds × {spec.iters} iterations per implementation, {order}"
    missing = escape(", ".join(f"{u} ({status})" for u, status in sweep.not_captured.items()))
    gaps = f" · not captured, see manifest.json: {missing}" if missing else ""
    return (
        f"GPU: {gpu}, driver {driver} · Nsight Systems {nsys} · {commit} · {when} UTC · L2: {l2} · "
        f"Outputs: {escape(outputs)} · {how} · sweep {_code(sweep.id)}" + (f" · {stack}" if stack else "") + gaps
    )


def _verdict(
    sweep: Sweep, contention: verdict.ContentionVerdict, summ: pl.DataFrame, bands: pl.DataFrame, across: pl.DataFrame
) -> str:
    control = sweep.control
    rows = summ.filter(pl.col("impl") == control).join(bands, on="shape", how="left").to_dicts()
    name = f"{control}'s kernel"
    places = [verdict.band_position(r["kernel_median_ns"], r["band_lo_ns"], r["band_hi_ns"]) for r in rows]
    parts = []
    for r, where in zip(rows, places, strict=True):
        at = f"{us(r['kernel_median_ns'])} µs at {r['shape']}"
        parts.append(
            f"{at} (no band yet: it needs {ledger.BAND_MIN_SESSIONS} quiet sessions in the ledger)"
            if where == "unknown"
            else f"{at}, {where} its band {us(r['band_lo_ns'])}–{us(r['band_hi_ns'])} µs ({r['sessions']} quiet sessions)"
        )
    text = f"{name} came back at " + "; ".join(parts) + "." + _policy_warning(summ)
    outside = any(p in ("above", "below") for p in places)
    if contention.quiet and not outside:
        if contention.notes:
            limited = "; ".join(contention.notes)
            return (
                text + " The GPU was quiet during the capture (no other process, no slow outliers), but "
                f"{limited}: every implementation ran at that clock, so the numbers compare with each other, "
                "not with a sweep at full clocks."
            )
        return (
            text
            + " The GPU was quiet during the capture (no other process, no slow outliers, full clocks): these numbers are usable."
        )
    spread = ", ".join(f"{r['shape']} {us(r['lo'])}–{us(r['hi'])} µs" for r in across.iter_rows(named=True))
    quote = (
        f" Quote the range across quiet sessions instead ({spread})." if spread else " Quote the range across sessions instead."
    )
    if not contention.quiet:
        return (
            text
            + " But this capture ran under load: "
            + "; ".join(contention.reasons)
            + ". Medians can look normal under contention, so the tails decide."
            + quote
        )
    return text + " The control came back outside its band, so this capture likely ran under load." + quote


def _policy_warning(summ: pl.DataFrame) -> str:
    """A sentence when the implementations did not all run under one output policy."""
    policies = summ.select("impl", "outputs").unique().drop_nulls()
    if policies["outputs"].n_unique() < 2:
        return ""
    groups = policies.group_by("outputs", maintain_order=True).agg(pl.col("impl").sort())
    said = "; ".join(
        f"{', '.join(impls)}: {'allocate their output inside the call' if p == 'allocates' else p + ' outputs'}"
        for p, impls in groups.iter_rows()
    )
    return (
        f" Warning: the implementations did not all run under one output policy ({said}). Where their writes land in the "
        "L2 differs, so their ratios mix that difference with the kernels'."
    )


def _checks(sweep: Sweep) -> str:
    if sweep.kind == "run":
        return "**Correctness.** Not checked by nsys-tools: the program's own checks, if any, are not recorded.\n"
    tolerance = {
        impl: DEFAULT_TOLERANCE if info.tolerance is None else info.tolerance
        for h in sweep.harness.values()
        for impl, info in h.implementations.items()
    }
    checks = [(k, v) for h in sweep.harness.values() for k, v in h.checks.items()]
    bad = sorted({k for k, v in checks if not v < tolerance.get(k, DEFAULT_TOLERANCE)})
    limits = sorted(set(tolerance.values()) or {DEFAULT_TOLERANCE})
    limit = " / ".join(f"{t:g}" for t in limits)
    text = (
        f"**Correctness.** Every implementation matched a float64 reference on random inputs within {limit} (largest "
        f"relative error {max((v for _, v in checks), default=0.0):.1e}).\n"
        if not bad
        else f"**Correctness.** Relative error above the tolerance ({limit}) for {', '.join(bad)}: their times are not "
        "comparable.\n"
    )
    errors = [f"{k} at {s}: {v}" for s, h in sweep.harness.items() for k, v in h.errors.items()]
    return text + ("\n**Did not run:** " + escape("; ".join(errors)) + "\n" if errors else "")


def compose(
    sweep: Sweep, ledger_path: Path | None, charts_dir: Path | None, link_base: str = "charts", control: str | None = None
) -> Comment:
    """The issue comment for ``sweep``; charts are written to ``charts_dir`` when given.
    ``control`` overrides the one the sweep names (a program's capture may name none)."""
    summ = summary(sweep)
    control = control or sweep.control
    if not control:
        raise UsageError(sweep.path, "names no control to compare with", "pass --control NAME (one of its implementations)")
    order = sweep.spec.impls or list(dict.fromkeys(summ["impl"]))
    impls = [i for i in order if i in set(summ["impl"])]
    if control not in impls:
        raise UsageError(sweep.path, f"has no implementation {control!r} to compare with", f"choose from {', '.join(impls)}")
    shapes = list(dict.fromkeys(summ["shape"]))
    allocating = set(summ.filter(pl.col("outputs") == "allocates")["impl"])
    contention = verdict.judge(sweep)
    gpu = sweep.gpu
    l2 = sweep.spec.l2 or summ["l2"][0]
    policy = summ.filter(pl.col("impl") == control)["outputs"][0]
    has_ledger = ledger_path is not None and ledger_path.exists()
    op = summ["op"][0] if summ["op"].n_unique() == 1 else None  # the ledger's other sessions: of this op only
    bands = ledger.bands(ledger_path, gpu, control, l2, sweep.id, policy, op) if has_ledger else ledger.no_bands()
    across = ledger.quiet_range(ledger_path, gpu, control, l2, sweep.id, policy, op) if has_ledger else ledger.no_bands()
    across = across.filter(pl.col("shape").is_in(shapes)).sort(pl.col("shape").replace_strict(shapes, list(range(len(shapes)))))
    ratios = metrics.ratios(sweep.calls, control)
    commit = sweep.manifest.git_commit
    spread = (
        {
            (r["shape"], r["impl"]): r
            for r in ledger.ratio_spread(ledger_path, gpu, commit, control, l2, policy, op)
            .filter(pl.col("sessions") >= 2)
            .iter_rows(named=True)
        }
        if has_ledger
        else {}
    )
    families = dict(summ.select("impl", "family").drop_nulls().unique("impl").iter_rows())
    floor = sweep.floor if sweep.floor in impls else None
    title = sweep.title or ", ".join(dict.fromkeys(summ["op"]))

    def ratio_cell(r: dict) -> str:
        text = f"{r['ratio']:.3f} ({r['ci_lo']:.3f}–{r['ci_hi']:.3f})" + ("" if r["distinguishable"] else ", not distinguishable")
        other = spread.get((r["shape"], r["impl"]))
        return text + (f"; {other['lo']:.3f}–{other['hi']:.3f} over {other['sessions']} sessions" if other else "")

    out = [
        f"### {escape(str(title))}: {escape(', '.join(impls))} (control: {escape(str(control))})\n",  # one line
        _header(sweep, summ) + "\n",
        "**Control verdict.** " + _verdict(sweep, contention, summ, bands, across) + "\n",
        _checks(sweep),
    ]
    out += [
        "#### Kernel time, µs: median (p10–p90), from the Nsight Systems trace\n",
        _grid(summ, lambda r: _spread(r, "kernel"), impls, allocating),
    ]
    if sweep.has_spans:
        method = sweep.setup.span_method or "CUDA events around each call"
        out += [
            "\n#### Event span, µs: median (p10–p90), from CUDA events with tracing off\n",
            f"How measured: {method}. The span includes launch overhead the GPU waited for: it is what a caller sees, "
            "not the kernel's own time.\n\n",
            _grid(summ, lambda r: _spread(r, "span"), impls, allocating),
        ]
    else:
        out.append("\n#### Event span: absent\n\nThe program measured no event span that nsys-tools records; kernel time only.\n")
    out += [
        f"\n#### Kernel time relative to {control}, same session: ratio of medians (95% interval)\n",
        "The interval resamples rounds, then calls within each round (both implementations' rounds drawn together), "
        "so it carries the variance between rounds of this session. Beside it, where the ledger holds other quiet "
        "sessions of this build: the range of the same ratio across them.\n\n",
        _grid(ratios, ratio_cell, [i for i in impls if i != control], allocating),
    ]
    if floor:
        base = dict(summ.filter(pl.col("impl") == floor).select("shape", "kernel_median_ns").iter_rows())
        out += [
            "\n#### Bandwidth: bytes that must move over the median kernel time, and the same-session "
            f"{floor}'s time as a share of it\n",
            _grid(
                summ.filter(pl.col("gb_per_s").is_not_null()),
                lambda r: f"{r['gb_per_s']:,.0f} GB/s ({100 * base[r['shape']] / r['kernel_median_ns']:.1f}% of {floor})",
                impls,
                allocating,
            ),
        ]
    elif (summ["tflops"].fill_null(0) > 0).any():
        out += _throughput(sweep, summ, impls, allocating)

    chart_files: list[Path] = []
    ours = next((i for i in impls if families.get(i) == "ours"), None) or next(
        (i for i in impls if i not in (control, floor) and families.get(i) != "control"), None
    )
    if has_ledger and ours:
        lines = []
        for shape in shapes:
            h = ledger.history(ledger_path, shape, ours, control, l2, policy, op).filter(pl.col("gpu") == gpu)
            h = h.drop_nulls(["impl_ns", "vs_ns"]).tail(HISTORY_SESSIONS)
            if h.is_empty():
                continue
            pairs = ", ".join(
                f"{us(a)}/{us(b)}" + ("" if q else "*") for a, b, q in zip(h["impl_ns"], h["vs_ns"], h["quiet"], strict=True)
            )
            lines.append(f"- {shape}: {pairs}")
            if charts_dir is not None:
                band = bands.filter(pl.col("shape") == shape)
                lohi = (band["band_lo_ns"][0], band["band_hi_ns"][0]) if band.height else None
                stem = charts_dir / safe_name(f"history-{shape}")
                chart_files += charts.save(charts.history(h, ours, control, shape, lohi), stem)
        if lines:
            out += [
                f"\n#### Gap across sessions: {ours}/{control} kernel medians in µs, same session each time, oldest first "
                "(* ran under load)\n",
                "\n".join(lines) + "\n",
            ]
    rejected = ledger.rejected(ledger_path, op) if has_ledger else pl.DataFrame()
    if rejected.height:
        out += [
            "\n#### Rejected so far (measured, not kept)\n",
            _rows(rejected, {"variant": "variant", "metric": "result", "why": "why"}),
        ]

    if charts_dir is not None:
        chart_files = (
            charts.save(charts.kernel_time(summ, impls), charts_dir / "kernel-time")
            + charts.save(charts.ratio(ratios, control, impls), charts_dir / "ratio")
            + chart_files
        )
        links = " · ".join(f"[{p.stem}]({link_base}/{p.name})" for p in chart_files if p.suffix == ".png")
        out.append(f"\nCharts: {links}\n")

    if not contention.quiet and contention.tails is not None:
        t = (
            contention.tails.filter(pl.col("outlier_share") > 0)
            .sort("outlier_share", descending=True)
            .head(8)
            .with_columns(
                median=pl.col("median_ns") / 1000,
                p99=pl.col("p99_ns") / 1000,
                max=pl.col("max_ns") / 1000,
            )
        )
        table = t.select(
            "shape",
            "impl",
            pl.format("{}", pl.col("median").round(2)),
            pl.format("{}", pl.col("p99").round(1)),
            pl.format("{}", pl.col("max").round(1)),
            (100 * pl.col("outlier_share")).round(2).cast(pl.String) + "%",
        )
        table.columns = ["shape", "impl", "median µs", "p99 µs", "max µs", "calls > 2× median"]
        out += [
            "\n<details><summary>Contention evidence</summary>\n\n",
            _rows(table, {c: c for c in table.columns}),
            "\n</details>\n",
        ]
    return Comment("\n".join(out), chart_files)
