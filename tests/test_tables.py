"""Rendering: markdown safety, µs formatting, csv/json columns in ns."""

from __future__ import annotations

import json

import polars as pl

from nsys_tools.tables import Format, escape, markdown, render, shorten

TORCH = (
    "void at::native::<unnamed>::vectorized_layer_norm_kernel<float, float, (bool)0>"
    "(int, T2, const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)"
)


def _cells(md: str) -> list[list[str]]:
    """Split markdown table rows on unescaped pipes, as GitHub does."""
    import re

    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in md.strip().splitlines()]


def test_special_characters_cannot_break_the_table():
    names = ["a|b", "<script>", "x*y*z", "`tick`", "under_score", "[link](x)"]
    df = pl.DataFrame({"kernel": names, "median_ns": [1000.0] * len(names)})
    rows = _cells(markdown(df))
    assert all(len(r) == 2 for r in rows)
    body = [r[0] for r in rows[2:]]
    assert body == ["a\\|b", "&lt;script&gt;", "x\\*y\\*z", "\\`tick\\`", "under\\_score", "\\[link\\](x)"]


def test_long_template_names_are_shortened_in_markdown_only():
    df = pl.DataFrame({"kernel": [TORCH], "median_ns": [12672.0]})
    md = markdown(df)
    assert "| vectorized\\_layer\\_norm\\_kernel&lt;float, float, (bool)0&gt; |" in md
    assert "T2 \\*" not in md and len(_cells(md)[2][0]) < 90
    assert json.loads(render(df, Format.json))[0]["kernel"] == TORCH
    assert TORCH in render(df, Format.csv)


def test_shorten():
    assert shorten("ln_block") == "ln_block"
    assert shorten(TORCH) == "vectorized_layer_norm_kernel<float, float, (bool)0>"
    deep = "void f<A<B<C<D>>>, E>(int)" + "x" * 60
    assert len(shorten(deep)) <= 60


def test_microseconds_in_markdown_nanoseconds_in_csv():
    df = pl.DataFrame({"range": [""], "kernel": ["k"], "median_ns": [12672.5], "instances": [100]})
    assert "| (none) | k | 12.67 | 100 |" in markdown(df)
    assert render(df, Format.csv).splitlines() == ["range,kernel,median_ns,instances", '"",k,12672.5,100']
    assert escape("a\nb") == "a b"
