"""Rendering: markdown safety, µs formatting, csv/json columns in ns."""

from __future__ import annotations

import json

import polars as pl

from nsys_tools.render.tables import Format, distinct_short, escape, markdown, render, shorten

TORCH = (
    "void at::native::<unnamed>::vectorized_layer_norm_kernel<float, float, (bool)0>"
    "(int, T2, const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)"
)


def _cells(md: str) -> list[list[str]]:
    """Split markdown table rows on unescaped pipes, as GitHub does."""
    import re

    rows = [line for line in md.strip().splitlines() if line.startswith("|")]  # not the footnotes
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in rows]


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


FILL = (
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<{}>, "
    "std::array<char *, (unsigned long)1>>(int, T2, T3)"
)


def test_shortening_never_makes_two_names_alike():
    # Template arguments differ deep inside: the short forms would be equal.
    fills = [FILL.format(t) for t in ("float", "double", "c10::Half")]
    assert len({shorten(n) for n in fills}) == 1
    # emit_nvtx-style ranges that differ only after 60 characters, and one that differs early.
    ranges = [
        f"aten::linear, seq = 1, op_id = 2, sizes = [[8, 1024], [4096, 1024], [{k}]], input_op_ids = [(1, 0)]" for k in range(129)
    ]
    names = [*fills, *ranges, "ln_block", "aten::mm, seq = 3"]
    shown = distinct_short(names)
    assert len(set(shown.values())) == len(names)
    assert (
        shown["ln_block"] == "ln_block"
        and shown[fills[0]]
        == "vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, std::array<char *, (unsigned long)1>>"
    )
    md = markdown(pl.DataFrame({"kernel": names, "total_ns": list(range(len(names)))}))
    cells = [r[0] for r in _cells(md)[2:]]
    assert len(set(cells)) == len(names)


def test_names_that_escape_alike_are_numbered():
    md = markdown(pl.DataFrame({"kernel": ["a\nb", "a b", ""], "total_ns": [1, 2, 3]}))
    assert [r[0] for r in _cells(md)[2:]] == ["a b", "a b #2", "(none)"]


def test_markdown_is_cut_to_fit_and_says_what_was_left_out():
    names = [f"aten::some_long_operator_name_{k}, seq = {k}, sizes = [[8, 1024], [4096, 1024]]" for k in range(3000)]
    df = pl.DataFrame({"range": names, "total_ns": list(range(3000, 0, -1))})
    md = markdown(df, max_chars=60_000, hint="Use --top 0.")
    assert 55_000 < len(md) < 60_000
    shown = len(_cells(md.split("\n\n_")[0])) - 2
    assert md.endswith(f"\n_{3000 - shown} of 3000 rows left out. Use --top 0._\n")
    assert markdown(df.head(5), of=3000).endswith("\n_2995 of 3000 rows left out._\n")
    assert "left out" not in markdown(df.head(5))


# Property-based: whatever a kernel or range name holds, a markdown row stays one line with one
# cell per column, and the cell reads back as the name (line breaks and controls as spaces).
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NAMES = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("|\\\r\n\t\x00\x0b\x0c\x85\u2028\u2029&<>`*_[]#~$@!:;\"' ")),
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
    ),
    max_size=40,
)
_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&#64;": "@"}


def _read_back(cell: str) -> str:
    """What a markdown renderer shows for a cell: backslash escapes and entities undone."""
    import re

    out = re.sub(r"\\(.)", r"\1", cell)
    return re.sub("|".join(map(re.escape, _ENTITIES)), lambda m: _ENTITIES[m.group()], out)


def _shown(name: str) -> str:
    """The name as a cell may show it: terminal escape sequences gone, characters that end a
    line and controls as spaces, characters that reorder or hide text as U+FFFD."""
    from nsys_tools.escape import ANSI

    breaking = {*map(chr, range(0x20)), *map(chr, range(0x7F, 0xA0)), "\u2028", "\u2029"}
    hidden = {*"\u061c\u200b\u200c\u200d\u200e\u200f\u2060\ufeff"}
    hidden |= {*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))}
    return "".join(" " if c in breaking else "\ufffd" if c in hidden else c for c in ANSI.sub("", name))


@settings(max_examples=300, deadline=None)
@given(NAMES, NAMES)
def test_any_name_stays_in_its_cell(kernel, range_):
    df = pl.DataFrame({"range": [range_], "kernel": [kernel], "median_ns": [1000.0]})
    md = markdown(df)
    lines = md.splitlines()
    assert len(lines) == 3 and len(md.split("\n")) == 4  # header, rule, one row: no line break survived
    cells = _cells(md)[2]
    assert len(cells) == 3
    assert cells[2] == "1.00"
    for cell, name in ((cells[0], range_), (cells[1], kernel)):
        if name:
            assert _read_back(cell) == _shown(name).strip() or len(name) > 60  # long names are shortened
        assert "<" not in cell and ">" not in cell and "@" not in cell
        assert not any(c in cell for c in "\r\n\x00\u2028\u2029\x85")


@settings(max_examples=300, deadline=None)
@given(NAMES)
def test_escape_round_trips(name):
    assert _read_back(escape(name)) == _shown(name)
