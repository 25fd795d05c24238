"""Altair charts of a sweep: kernel time, ratio to the control, history. No I/O except ``save``.

HTML charts are self-contained: Vega, Vega-Lite and vega-embed are written into the page (from
vl-convert, no network), so they open offline and wherever the file is copied."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from . import chart_file

WIDTH = 150
HEIGHT = 220


def _alt():
    import altair as alt

    return alt


def kernel_time(summary: pl.DataFrame, impls: list[str]):
    """Median kernel time per implementation, one panel per shape, whiskers p10-p90."""
    alt = _alt()
    df = summary.select(
        "shape",
        "impl",
        median=pl.col("kernel_median_ns") / 1000,
        p10=pl.col("kernel_p10_ns") / 1000,
        p90=pl.col("kernel_p90_ns") / 1000,
    )
    base = alt.Chart(df).encode(x=alt.X("impl:N", sort=impls, title=None, axis=alt.Axis(labelAngle=-40)))
    bars = base.mark_bar().encode(
        y=alt.Y("median:Q", title="kernel time, µs (median)"),
        color=alt.Color("impl:N", sort=impls, legend=None),
        tooltip=[
            "shape",
            "impl",
            alt.Tooltip("median:Q", format=".2f"),
            alt.Tooltip("p10:Q", format=".2f"),
            alt.Tooltip("p90:Q", format=".2f"),
        ],
    )
    whiskers = base.mark_rule(color="black").encode(y="p10:Q", y2="p90:Q")
    return (
        (bars + whiskers)
        .properties(width=WIDTH, height=HEIGHT)
        .facet(column=alt.Column("shape:N", sort=list(dict.fromkeys(summary["shape"])), title=None))
        .resolve_scale(y="independent")
        .properties(title="Kernel time from the Nsight Systems trace: median, whiskers p10-p90")
    )


def ratio(ratios: pl.DataFrame, control: str, impls: list[str]):
    """Kernel-time ratio to the same-session control per shape, 95% bootstrap interval, line at 1."""
    alt = _alt()
    order = [i for i in impls if i != control]
    base = alt.Chart(ratios).encode(
        x=alt.X("shape:N", sort=list(dict.fromkeys(ratios["shape"])), title=None),
        xOffset=alt.XOffset("impl:N", sort=order),
        color=alt.Color("impl:N", sort=order, title="implementation"),
    )
    points = base.mark_point(filled=True, size=70).encode(
        y=alt.Y("ratio:Q", title=f"kernel time / {control} (same session)", scale=alt.Scale(zero=False)),
        tooltip=[
            "shape",
            "impl",
            alt.Tooltip("ratio:Q", format=".3f"),
            alt.Tooltip("ci_lo:Q", format=".3f"),
            alt.Tooltip("ci_hi:Q", format=".3f"),
        ],
    )
    bars = base.mark_rule(strokeWidth=2).encode(y="ci_lo:Q", y2="ci_hi:Q")
    one = alt.Chart(pl.DataFrame({"y": [1.0]})).mark_rule(color="gray", strokeDash=[4, 4]).encode(y="y:Q")
    return (bars + points + one).properties(
        width=110 * ratios["shape"].n_unique(),
        height=HEIGHT,
        title=f"Ratio to {control}, 95% bootstrap interval; below 1 is faster",
    )


def history(hist: pl.DataFrame, impl: str, vs: str, shape: str, band: tuple[float, float] | None):
    """Both implementations' kernel medians per session, the control's band shaded."""
    alt = _alt()
    long = (
        pl.concat(
            [
                hist.select("session_id", "quiet", us=pl.col("impl_ns") / 1000, impl=pl.lit(impl)),
                hist.select("session_id", "quiet", us=pl.col("vs_ns") / 1000, impl=pl.lit(vs)),
            ]
        )
        .drop_nulls("us")
        .with_columns(session=pl.when(pl.col("quiet") == 1).then(pl.lit("quiet")).otherwise(pl.lit("under load")))
    )
    order = list(hist["session_id"])
    x = alt.X("session_id:N", sort=order, title="session", axis=alt.Axis(labelAngle=-40))
    lines = (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("us:Q", title=f"kernel time at {shape}, µs (median)", scale=alt.Scale(zero=False)),
            color=alt.Color("impl:N", title="implementation"),
            shape=alt.Shape("session:N", title="capture"),
            tooltip=["session_id", "impl", alt.Tooltip("us:Q", format=".2f"), "session"],
        )
    )
    layers = [lines]
    if band:
        lo, hi = band
        shade = (
            alt.Chart(pl.DataFrame({"lo": [lo / 1000], "hi": [hi / 1000]}))
            .mark_rect(opacity=0.15, color="orange")
            .encode(y="lo:Q", y2="hi:Q")
        )
        layers.insert(0, shade)
    return alt.layer(*layers).properties(
        width=max(300, 45 * len(order)),
        height=HEIGHT,
        title=f"{impl} and {vs} across sessions at {shape}" + (f"; shaded: {vs}'s band" if band else ""),
    )


def save(chart, stem: Path) -> list[Path]:
    """Write ``stem``.png and a self-contained ``stem``.html (``chart_file.save``: a link planted
    in the chart folder is replaced, never followed); returns both paths."""
    return [chart_file.save(chart, stem.with_suffix(suffix)) for suffix in (".png", ".html")]
