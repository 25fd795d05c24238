"""``nsys-tools report SWEEP --issue``: a markdown comment for an issue thread.

It carries what the comparison needs and nothing that could be mistaken for something else:
kernel time and event span in separate, named tables; ratios against the same-session control
with bootstrap intervals; bandwidth against the same-session copy; the control's verdict in a
sentence; the gap across sessions from the ledger; the rejected variants; links to the charts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from . import charts, ledger, metrics, verdict
from .sweep import Sweep, summary
from .tables import escape

HISTORY_SESSIONS = 8
OP_NAMES = {"layernorm": "LayerNorm"}


@dataclass
class Comment:
    markdown: str
    charts: list[Path] = field(default_factory=list)


def _us(ns: float | None) -> str:
    return "–" if ns is None else f"{ns / 1000:,.2f}"


def _spread(row: dict, prefix: str) -> str:
    """``median (p10–p90)`` in µs."""
    return f"{_us(row[f'{prefix}_median_ns'])} ({_us(row[f'{prefix}_p10_ns'])}–{_us(row[f'{prefix}_p90_ns'])})"


def _grid(df: pl.DataFrame, cell: Callable[[dict], str], impls: list[str]) -> str:
    """A markdown table with one row per shape and one column per implementation."""
    shapes = list(dict.fromkeys(df["shape"]))
    cols = [i for i in impls if i in set(df["impl"])]
    cells = {(r["shape"], r["impl"]): cell(r) for r in df.iter_rows(named=True)}
    lines = ["| shape | " + " | ".join(escape(c) for c in cols) + " |", "|---|" + "---:|" * len(cols)]
    lines += ["| " + " | ".join([escape(s)] + [escape(cells.get((s, c), "–")) for c in cols]) + " |" for s in shapes]
    return "\n".join(lines) + "\n"


def _rows(df: pl.DataFrame, headers: dict[str, str]) -> str:
    lines = ["| " + " | ".join(headers.values()) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(escape(str(v)) for v in r) + " |" for r in df.select(list(headers)).iter_rows()]
    return "\n".join(lines) + "\n"


def _header(sweep: Sweep) -> str:
    m = sweep.manifest
    spec = m.get("spec", {})
    first = sweep.setup
    gpu = sweep.gpu or "unknown GPU"
    driver = m.get("gpu_before", {}).get("driver_version", "unknown")
    nsys = m.get("nsys", {}).get("version", "unknown").replace("NVIDIA Nsight Systems version ", "")
    commit = (m.get("git", {}).get("commit") or "unknown")[:10]
    when = (m.get("created_utc") or "")[:16].replace("T", " ")
    if spec.get("l2", "cold") == "cold":
        mib = first.get("gpu", {}).get("l2_bytes", 0) / 2**20
        counts = sorted({h.get("buffer_sets") for h in sweep.harness.values()} - {None})
        sets = f"{counts[0]}–{counts[-1]}" if len(counts) > 1 else str(counts[0]) if counts else "several"
        l2 = f"cold (inputs rotated over {sets} buffer sets per shape, more than twice the {mib:.0f} MiB L2 in all)"
    else:
        l2 = "warm (one buffer set reused)"
    stack = ", ".join(f"{k} {v}" for k, v in first.get("versions", {}).items())
    return (
        f"GPU: {gpu}, driver {driver} · Nsight Systems {nsys} · commit `{commit}` · {when} UTC · L2: {l2} · "
        f"{spec.get('rounds')} rounds × {spec.get('iters')} iterations per implementation, order rotated each round · "
        f"sweep `{sweep.id}`" + (f" · {stack}" if stack else "")
    )


def _verdict(sweep: Sweep, session: verdict.Session, summ: pl.DataFrame, bands: pl.DataFrame, across: pl.DataFrame) -> str:
    control = sweep.control
    rows = summ.filter(pl.col("impl") == control).join(bands, on="shape", how="left").to_dicts()
    name = control.capitalize() if control in ("triton", "torch") else control
    places = [verdict.band_position(r["kernel_median_ns"], r["band_lo_ns"], r["band_hi_ns"]) for r in rows]
    parts = []
    for r, where in zip(rows, places, strict=True):
        at = f"{_us(r['kernel_median_ns'])} µs at {r['shape']}"
        parts.append(
            f"{at} (no band yet: it needs {ledger.BAND_MIN_SESSIONS} quiet sessions in the ledger)"
            if where == "unknown"
            else f"{at}, {where} its band {_us(r['band_lo_ns'])}–{_us(r['band_hi_ns'])} µs ({r['sessions']} quiet sessions)"
        )
    text = f"{name}'s kernel came back at " + "; ".join(parts) + "."
    outside = any(p in ("above", "below") for p in places)
    if session.quiet and not outside:
        return (
            text
            + " The GPU was quiet during the capture (no other process, no slow outliers, full clocks): these numbers are usable."
        )
    spread = ", ".join(f"{r['shape']} {_us(r['lo'])}–{_us(r['hi'])} µs" for r in across.iter_rows(named=True))
    quote = (
        f" Quote the range across quiet sessions instead ({spread})." if spread else " Quote the range across sessions instead."
    )
    if not session.quiet:
        return (
            text
            + " But this capture ran under load: "
            + "; ".join(session.reasons)
            + ". Medians can look normal under contention, so the tails decide."
            + quote
        )
    return text + " The control came back outside its band, so this capture likely ran under load." + quote


def _checks(sweep: Sweep) -> str:
    checks = [(k, v) for h in sweep.harness.values() for k, v in h.get("checks", {}).items()]
    bad = sorted({k for k, v in checks if not v < 1e-5})
    text = (
        f"**Correctness.** Every implementation matched a float64 reference on random inputs (largest relative error "
        f"{max((v for _, v in checks), default=0.0):.1e}).\n"
        if not bad
        else f"**Correctness.** Relative error above 1e-5 for {', '.join(bad)}: their times are not comparable.\n"
    )
    errors = [f"{k} at {s}: {v}" for s, h in sweep.harness.items() for k, v in h.get("errors", {}).items()]
    return text + ("\n**Did not run:** " + escape("; ".join(errors)) + "\n" if errors else "")


def compose(sweep: Sweep, ledger_path: Path | None, charts_dir: Path | None, link_base: str = "charts") -> Comment:
    """The issue comment for ``sweep``; charts are written to ``charts_dir`` when given."""
    summ = summary(sweep)
    control = sweep.control
    shapes = list(dict.fromkeys(summ["shape"]))
    impls = [i for i in sweep.manifest.get("spec", {}).get("impls", []) if i in set(summ["impl"])]
    session = verdict.judge(sweep)
    gpu = sweep.gpu
    l2 = sweep.manifest.get("spec", {}).get("l2", "cold")
    has_ledger = ledger_path is not None and ledger_path.exists()
    bands = ledger.bands(ledger_path, gpu, control, l2, exclude=sweep.id) if has_ledger else ledger.no_bands()
    across = ledger.quiet_range(ledger_path, gpu, control, l2, exclude=sweep.id) if has_ledger else ledger.no_bands()
    across = across.filter(pl.col("shape").is_in(shapes)).sort(pl.col("shape").replace_strict(shapes, list(range(len(shapes)))))
    ratios = metrics.ratios(sweep.calls, control)
    op = sweep.manifest.get("spec", {}).get("op", "op")

    out = [
        f"### {OP_NAMES.get(op, op)}: {', '.join(impls)} (control: {control})\n",
        _header(sweep) + "\n",
        "**Control verdict.** " + _verdict(sweep, session, summ, bands, across) + "\n",
        _checks(sweep),
    ]
    out += [
        "#### Kernel time, µs: median (p10–p90), from the Nsight Systems trace\n",
        _grid(summ, lambda r: _spread(r, "kernel"), impls),
    ]
    method = sweep.setup.get("span_method", "CUDA events around each call")
    out += [
        "\n#### Event span, µs: median (p10–p90), from CUDA events with tracing off\n",
        f"How measured: {method}. The span includes launch overhead the GPU waited for: it is what a caller sees, "
        "not the kernel's own time.\n\n",
        _grid(summ, lambda r: _spread(r, "span"), impls),
    ]
    out += [
        f"\n#### Kernel time relative to {control}, same session: ratio of medians (95% bootstrap interval)\n",
        _grid(
            ratios,
            lambda r: (
                f"{r['ratio']:.3f} ({r['ci_lo']:.3f}–{r['ci_hi']:.3f})"
                + ("" if r["distinguishable"] else ", not distinguishable")
            ),
            [i for i in impls if i != control],
        ),
    ]
    if "copy" in impls:
        copy = dict(summ.filter(pl.col("impl") == "copy").select("shape", "kernel_median_ns").iter_rows())
        out += [
            "\n#### Bandwidth: bytes that must move over the median kernel time, and the same-session copy's time "
            "as a share of it\n",
            _grid(
                summ,
                lambda r: f"{r['gb_per_s']:,.0f} GB/s ({100 * copy[r['shape']] / r['kernel_median_ns']:.1f}% of copy)",
                impls,
            ),
        ]

    chart_files: list[Path] = []
    ours = next((i for i in impls if i not in (control, "torch", "copy")), None)
    if has_ledger and ours:
        lines = []
        for shape in shapes:
            h = ledger.history(ledger_path, shape, ours, control, l2).filter(pl.col("gpu") == gpu)
            h = h.drop_nulls(["impl_ns", "vs_ns"]).tail(HISTORY_SESSIONS)
            if h.is_empty():
                continue
            pairs = ", ".join(
                f"{_us(a)}/{_us(b)}" + ("" if q else "*") for a, b, q in zip(h["impl_ns"], h["vs_ns"], h["quiet"], strict=True)
            )
            lines.append(f"- {shape}: {pairs}")
            if charts_dir is not None:
                band = bands.filter(pl.col("shape") == shape)
                lohi = (band["band_lo_ns"][0], band["band_hi_ns"][0]) if band.height else None
                chart_files += charts.save(charts.history(h, ours, control, shape, lohi), charts_dir / f"history-{shape}")
        if lines:
            out += [
                f"\n#### Gap across sessions: {ours}/{control} kernel medians in µs, same session each time, oldest first "
                "(* ran under load)\n",
                "\n".join(lines) + "\n",
            ]
    rejected = ledger.rejected(ledger_path) if has_ledger else pl.DataFrame()
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

    if not session.quiet and session.tails is not None:
        t = (
            session.tails.filter(pl.col("outlier_share") > 0)
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
