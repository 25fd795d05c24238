"""``nsys-tools report SWEEP --issue``: a markdown comment for an issue thread.

It carries what the comparison needs and nothing that could be mistaken for something else:
kernel time and event span in separate, named tables; ratios against the same-session control
with bootstrap intervals; bandwidth against the same-session copy; the control's verdict in a
sentence; the gap across sessions from the ledger; the rejected variants; links to the charts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from . import charts, ledger, metrics, verdict
from .sweep import Sweep, summary
from .tables import escape

HISTORY_SESSIONS = 8


@dataclass
class Comment:
    markdown: str
    charts: list[Path] = field(default_factory=list)


def _us(ns: float | None) -> str:
    return "–" if ns is None else f"{ns / 1000:,.2f}"


def _pivot(df: pl.DataFrame, cell: pl.Expr, impls: list[str]) -> pl.DataFrame:
    wide = df.select("shape", "impl", cell.alias("cell")).pivot(on="impl", index="shape", values="cell")
    return wide.select("shape", *[i for i in impls if i in wide.columns])


def _table(df: pl.DataFrame) -> str:
    cols = df.columns
    lines = ["| " + " | ".join(escape(c) for c in cols) + " |", "|" + "|".join(["---"] + ["---:"] * (len(cols) - 1)) + "|"]
    for row in df.iter_rows():
        lines.append("| " + " | ".join("–" if v is None else escape(str(v)) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _header(sweep: Sweep) -> str:
    m = sweep.manifest
    spec = m.get("spec", {})
    first = next(iter(sweep.harness.values()), {})
    gpu = first.get("gpu", {}).get("name") or m.get("gpu_before", {}).get("name", "unknown GPU")
    driver = m.get("gpu_before", {}).get("driver_version", "unknown")
    nsys = m.get("nsys", {}).get("version", "unknown").replace("NVIDIA Nsight Systems version ", "")
    commit = (m.get("git", {}).get("commit") or "unknown")[:10]
    when = (m.get("created_utc") or "")[:16].replace("T", " ")
    l2 = spec.get("l2", "cold")
    if l2 == "cold":
        sets = first.get("buffer_sets")
        mb = first.get("gpu", {}).get("l2_bytes", 0) / 1e6
        l2_text = f"cold (inputs rotated over {sets} buffer sets per shape, more than twice the {mb:.0f} MB L2)"
    else:
        l2_text = "warm (one buffer set reused)"
    versions = first.get("versions", {})
    stack = ", ".join(f"{k} {v}" for k, v in versions.items())
    return (
        f"GPU: {gpu}, driver {driver} · Nsight Systems {nsys} · commit `{commit}` · {when} UTC · "
        f"L2: {l2_text} · {spec.get('rounds')} rounds × {spec.get('iters')} iterations per implementation, order rotated "
        f"each round · sweep `{sweep.id}`" + (f" · {stack}" if stack else "")
    )


def _verdict(sweep: Sweep, session: verdict.Session, summ: pl.DataFrame, bands: pl.DataFrame,
             across: pl.DataFrame) -> str:
    control = sweep.control
    rows = summ.filter(pl.col("impl") == control).join(bands, on="shape", how="left")
    name = control.capitalize() if control in ("triton", "torch") else control
    parts = []
    for r in rows.iter_rows(named=True):
        where = verdict.band_position(r["kernel_median_ns"], r["band_lo_ns"], r["band_hi_ns"])
        at = f"{_us(r['kernel_median_ns'])} µs at {r['shape']}"
        if where == "unknown":
            parts.append(f"{at} (no band yet: it needs {ledger.BAND_MIN_SESSIONS} quiet sessions in the ledger)")
        else:
            parts.append(f"{at}, {where} its band {_us(r['band_lo_ns'])}–{_us(r['band_hi_ns'])} µs ({r['sessions']} quiet sessions)")
    outside = any(verdict.band_position(r["kernel_median_ns"], r["band_lo_ns"], r["band_hi_ns"]) in ("above", "below")
                  for r in rows.iter_rows(named=True))
    text = f"{name}'s kernel came back at " + "; ".join(parts) + "."
    if session.quiet and not outside:
        return text + " The GPU was quiet during the capture (no other process, no slow outliers, full clocks): these numbers are usable."
    spread = ", ".join(
        f"{r['shape']} {_us(r['lo'])}–{_us(r['hi'])} µs" for r in across.iter_rows(named=True)
    )
    quote = f" Quote the range across quiet sessions instead ({spread})." if spread else " Quote the range across sessions instead."
    if not session.quiet:
        return (text + " But this capture ran under load: " + "; ".join(session.reasons)
                + ". Medians can look normal under contention, so the tails decide." + quote)
    return text + " The control came back outside its band, so this capture likely ran under load." + quote


def compose(sweep: Sweep, ledger_path: Path | None, charts_dir: Path | None, link_base: str = "charts") -> Comment:
    """The issue comment for ``sweep``; charts are written to ``charts_dir`` when given."""
    summ = summary(sweep)
    control = sweep.control
    impls = [i for i in sweep.manifest.get("spec", {}).get("impls", []) if i in set(summ["impl"])]
    session = verdict.judge(sweep)
    gpu = next(iter(sweep.harness.values()), {}).get("gpu", {}).get("name", "")
    l2 = sweep.manifest.get("spec", {}).get("l2", "cold")
    have_ledger = ledger_path is not None and ledger_path.exists()
    bands = ledger.bands(ledger_path, gpu, control, l2, exclude=sweep.id) if have_ledger else ledger.bands(Path("/nonexistent"), "", "", "")
    quiet_range = (
        ledger.stats(ledger_path)
        .filter((pl.col("impl") == control) & (pl.col("quiet") == 1) & (pl.col("gpu") == gpu) & (pl.col("l2") == l2)
                & (pl.col("session_id") != sweep.id))
        .group_by("shape").agg(lo=pl.col("kernel_median_ns").min(), hi=pl.col("kernel_median_ns").max())
        if have_ledger else pl.DataFrame(schema={"shape": pl.String, "lo": pl.Float64, "hi": pl.Float64})
    )
    ratios = metrics.ratios(sweep.calls, control)
    cell = pl.format("{} ({}–{})", *[pl.col(c).truediv(1000).round(2).cast(pl.String) for c in ("kernel_median_ns", "kernel_p10_ns", "kernel_p90_ns")])
    span_cell = pl.format("{} ({}–{})", *[pl.col(c).truediv(1000).round(2).cast(pl.String) for c in ("span_median_ns", "span_p10_ns", "span_p90_ns")])
    first = next(iter(sweep.harness.values()), {})

    out = [f"### {sweep.manifest.get('spec', {}).get('op', 'op').capitalize()}: {', '.join(impls)} (control: {control})\n",
           _header(sweep) + "\n",
           "**Control verdict.** " + _verdict(sweep, session, summ, bands, quiet_range.sort("shape")) + "\n"]

    checks = {k: v for h in sweep.harness.values() for k, v in h.get("checks", {}).items()}
    worst = max(checks.values(), default=0.0)
    bad = sorted({k for h in sweep.harness.values() for k, v in h.get("checks", {}).items() if not v < 1e-5})
    errors = {f"{k} at {s}": v for s, h in sweep.harness.items() for k, v in h.get("errors", {}).items()}
    out.append(
        ("**Correctness.** Every implementation matched a float64 reference on random inputs "
         f"(largest relative error {worst:.1e}).\n") if not bad else
        f"**Correctness.** Relative error above 1e-5 for: {', '.join(bad)}. Their times below are not comparable.\n"
    )
    if errors:
        out.append("**Did not run:** " + "; ".join(f"{k}: {escape(v)}" for k, v in errors.items()) + "\n")

    out.append("#### Kernel time, µs: median (p10–p90), from the Nsight Systems trace\n")
    out.append(_table(_pivot(summ, cell, impls)))
    out.append("\n#### Event span, µs: median (p10–p90), from CUDA events with tracing off\n")
    out.append(f"How measured: {first.get('span_method', 'CUDA events around each call')}. The span includes launch "
               "overhead the GPU waited for; it is what a caller sees, not the kernel's own time.\n\n")
    out.append(_table(_pivot(summ, span_cell, impls)))

    ratio_cell = pl.format(
        "{} ({}–{}){}", pl.col("ratio").round(3).cast(pl.String), pl.col("ci_lo").round(3).cast(pl.String),
        pl.col("ci_hi").round(3).cast(pl.String),
        pl.when(pl.col("distinguishable")).then(pl.lit("")).otherwise(pl.lit(", not distinguishable")),
    )
    out.append(f"\n#### Kernel time relative to {control}, same session: ratio of medians (95% bootstrap interval)\n")
    out.append(_table(_pivot(ratios, ratio_cell, [i for i in impls if i != control])))

    if "copy" in impls:
        copy = summ.filter(pl.col("impl") == "copy").select("shape", copy_ns="kernel_median_ns")
        bw = summ.join(copy, on="shape", how="left").with_columns(
            cell=pl.format("{} GB/s ({}% of copy)", pl.col("gbps").round(0).cast(pl.Int64).cast(pl.String),
                           (100 * pl.col("copy_ns") / pl.col("kernel_median_ns")).round(1).cast(pl.String))
        )
        out.append("\n#### Bandwidth from kernel time: bytes that must move / median kernel time, and the same-session copy's "
                   "time as a share of it\n")
        out.append(_table(_pivot(bw, pl.col("cell"), impls)))

    chart_files: list[Path] = []
    hist_lines = []
    if have_ledger:
        ours = next((i for i in impls if i != control and i not in ("torch", "copy")), None)
        for shape in dict.fromkeys(summ["shape"]):
            if ours is None:
                break
            h = ledger.history(ledger_path, shape, ours, control, l2).filter(pl.col("gpu") == gpu).drop_nulls(["impl_ns", "vs_ns"])
            h = h.tail(HISTORY_SESSIONS)
            if h.is_empty():
                continue
            pairs = ", ".join(f"{_us(a)}/{_us(b)}" + ("" if q else "*") for a, b, q in zip(h["impl_ns"], h["vs_ns"], h["quiet"], strict=True))
            hist_lines.append(f"- {shape}: {pairs}")
            if charts_dir is not None:
                band = bands.filter(pl.col("shape") == shape)
                lohi = (band["band_lo_ns"][0], band["band_hi_ns"][0]) if band.height else None
                chart_files += _save(charts.history(h, ours, control, shape, lohi), charts_dir / f"history-{shape}")
        if hist_lines:
            out.append(f"\n#### Gap across sessions: {ours}/{control} kernel medians in µs, same session each time, oldest first "
                       "(* ran under load)\n")
            out.append("\n".join(hist_lines) + "\n")
        rej = ledger.rejected(ledger_path)
        if rej.height:
            out.append("\n#### Rejected so far (measured, not kept)\n")
            out.append(_table(rej.select(variant="variant", result="metric", why="why")))

    if charts_dir is not None:
        chart_files = _save(charts.kernel_time(summ, impls), charts_dir / "kernel-time") + \
            _save(charts.ratio(ratios, control, impls), charts_dir / "ratio") + chart_files
        links = " · ".join(f"[{p.stem}]({link_base}/{p.name})" for p in chart_files if p.suffix == ".png")
        out.append(f"\nCharts: {links}\n")

    if not session.quiet and session.tails is not None:
        t = session.tails.filter(pl.col("outlier_share") > 0).sort("outlier_share", descending=True).head(8)
        out.append("\n<details><summary>Contention evidence</summary>\n\n")
        out.append(_table(t.select("shape", "impl", median_us=(pl.col("median_ns") / 1000).round(2),
                                   p99_us=(pl.col("p99_ns") / 1000).round(2), max_us=(pl.col("max_ns") / 1000).round(1),
                                   slow_share=(100 * pl.col("outlier_share")).round(2).cast(pl.String) + "%")))
        out.append("\n</details>\n")
    return Comment("\n".join(out), chart_files)


def _save(chart, stem: Path) -> list[Path]:
    return charts.save(chart, stem)
