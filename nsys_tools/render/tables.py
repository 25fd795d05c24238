"""Render a collected DataFrame as markdown, csv, json or a terminal table. No I/O here.

Markdown is for people: nanosecond columns become µs with two decimals, names are escaped so
that no character can break a table row or cell or be read as markup (``escape``), and long
C++ template names are shortened, never two names to the same text. A table can be cut to fit
a length (an issue comment), saying how many rows were left out. csv and json keep full names
and integer or float nanoseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from enum import Enum
from itertools import pairwise
from typing import TYPE_CHECKING

from ..escape import markdown as escape
from ..escape import terminal

if TYPE_CHECKING:  # the CLI imports this module for Format; capture machines have no Polars
    import polars as pl


class Format(str, Enum):
    markdown = "markdown"
    csv = "csv"
    json = "json"
    table = "table"


MAX_NAME = 60
CELL_MAX = 120  # the longest markdown cell; longer text is cut, with the whole in a footnote


def _strip_group(text: str, open_: str, close: str, keep_depth: int) -> str:
    """Replace bracketed groups nested deeper than ``keep_depth`` with an ellipsis."""
    out, depth = [], 0
    for ch in text:
        if ch == open_:
            depth += 1
            if depth == keep_depth + 1:
                out.append(open_ + "…")
            if depth > keep_depth:
                continue
        elif ch == close:
            depth -= 1
            if depth == keep_depth:
                out.append(close)
            if depth >= keep_depth:
                continue
        elif depth > keep_depth:
            continue
        out.append(ch)
    return "".join(out)


def _last_scope(name: str) -> str:
    """``ns::inner::kernel<T>`` -> ``kernel<T>``: the part after the last ``::`` outside templates."""
    depth, cut = 0, 0
    for i, ch in enumerate(name):
        depth += (ch == "<") - (ch == ">")
        if depth == 0 and name.startswith("::", i):
            cut = i + 2
    return name[cut:]


def _without_parameters(text: str) -> str:
    """``text`` less its parameter list: from the "(" matching the last ")" (as it is without one)."""
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += (text[i] == ")") - (text[i] == "(")
            if depth == 0:
                return text[:i]
    return text


def shorten(name: str, limit: int = MAX_NAME) -> str:
    """A readable form of a long kernel name: no return type, no parameter list, no namespaces,
    then templates collapsed, then cut at ``limit`` characters. Short names pass through."""
    if len(name) <= limit:
        return name
    short = re.sub(r"^void ", "", name)
    short = _without_parameters(short)
    short = _last_scope(short)
    short = _strip_group(short, "<", ">", 1) if len(short) > limit else short
    short = _strip_group(short, "<", ">", 0) if len(short) > limit else short
    return short if len(short) <= limit else short[: limit - 1] + "…"


def distinct_short(names: Iterable[str], limit: int = MAX_NAME) -> dict[str, str]:
    """A readable form of each name (``shorten``), no two alike: names whose short forms collide
    are shown longer (a larger limit, then whole) until they differ."""
    limits = [limit, 2 * limit, 4 * limit, None]
    level = dict.fromkeys(names, 0)

    def form(name: str) -> str:
        cap = limits[level[name]]
        return name if cap is None else shorten(name, cap)

    while True:
        shown: dict[str, list[str]] = {}
        for name in level:
            shown.setdefault(form(name), []).append(name)
        grow = [n for group in shown.values() if len(group) > 1 for n in group if level[n] < len(limits) - 1]
        if not grow:
            return {name: form(name) for name in level}
        for name in grow:
            level[name] += 1


def base_name(name: str) -> str:
    """A C++ function's base name: no return type, parameters, namespaces or template arguments
    (``void ns::k<float, 2>(int)`` -> ``k``); other text as it is."""
    short = re.sub(r"^void ", "", name.strip())
    short = _without_parameters(short)
    short = _strip_group(_last_scope(short), "<", ">", 0).replace("<…>", "")
    return short or name


MAX_DIFFERENCE = 40  # the longest differing part shown beside a shared short name; past it, #2, #3


def unique_short_names(names: Iterable[str], short: Mapping[str, str] | None = None) -> dict[str, str]:
    """A short name for each distinct name, no two alike (so a table by short name keeps apart
    every row a table by full name does).

    The base is ``short[name]`` (nsys's short name) where given, else ``base_name(name)``. Names
    that share a base are told apart by the part where they differ: their common prefix and
    suffix are cut, and the rest is shown in brackets (``for_each_kernel […b…]``). Where that
    part is longer than ``MAX_DIFFERENCE`` characters for any of them, the names, in sorted
    order, get ``#2``, ``#3`` after the first; so does any text still taken by another base.
    The same names give the same result in any order."""
    full = sorted(set(names))
    short = short or {}
    base = {n: short.get(n) or base_name(n) for n in full}
    groups: dict[str, list[str]] = {}
    for n in full:
        groups.setdefault(base[n], []).append(n)
    shown: dict[str, str] = {}
    for b, group in groups.items():
        if len(group) == 1:
            shown[group[0]] = b
            continue
        prefix = _common_prefix(group)
        room = min(len(n) for n in group) - len(prefix)
        suffix = _common_prefix([n[::-1] for n in group])[: max(room, 0)][::-1]
        middles = {n: n[len(prefix) : len(n) - len(suffix)] for n in group}
        if max(map(len, middles.values())) <= MAX_DIFFERENCE:
            for n, middle in middles.items():
                shown[n] = f"{b} [{'…' if prefix else ''}{middle}{'…' if suffix else ''}]"
        else:  # differences too long to show: numbered
            for k, n in enumerate(group, start=1):
                shown[n] = b if k == 1 else f"{b} #{k}"
    # Across bases too: a text that is still taken gets the next free number.
    taken: dict[str, str] = {}
    for n in full:
        text, k = shown[n], 1
        while text in taken:
            k += 1
            text = f"{shown[n]} #{k}"
        taken[text] = n
        shown[n] = text
    return shown


def _common_prefix(texts: list[str]) -> str:
    first, last = min(texts), max(texts)
    i = 0
    while i < min(len(first), len(last)) and first[i] == last[i]:
        i += 1
    return first[:i]


def _texts(values: list[object]) -> dict[object, str]:
    """The cell text of each distinct string in a column: escaped, shortened, never two alike
    (``(none)`` for an empty string)."""
    strings = [v for v in dict.fromkeys(values) if isinstance(v, str)]
    short = distinct_short([v for v in strings if v])
    texts, seen = {}, {}
    for v in strings:
        text = escape(short[v]) if v else "(none)"
        seen[text] = seen.get(text, 0) + 1
        texts[v] = text if seen[text] == 1 else f"{text} #{seen[text]}"
    return texts


def _capped(cell: str, notes: dict[str, int]) -> str:
    """A cell of at most ``CELL_MAX`` characters: a longer one is cut and points at its footnote."""
    if len(cell) <= CELL_MAX:
        return cell
    n = notes.setdefault(cell, len(notes) + 1)
    mark = f"… [{n}]"
    cut = cell[: CELL_MAX - len(mark)]
    return cut.removesuffix("\\") + mark  # never leave half of an escape


UNITS = {"_ns": " (µs)", "_pct": " (%)", "_bytes": " (bytes)"}


def _header(col: str) -> str:
    for suffix, unit in UNITS.items():
        if col.endswith(suffix):
            return col.removesuffix(suffix).replace("_", " ") + unit
    return {"gb_per_s": "GB/s"}.get(col, col.replace("_", " "))


def us(ns: float | None, *, grouped: bool = True) -> str:
    """Nanoseconds as µs with two decimals, thousands separated unless ``grouped`` is false
    (the report's columns); ``–`` where there is no value."""
    if ns is None:
        return "–"
    return f"{float(ns) / 1000:,.2f}" if grouped else f"{float(ns) / 1000:.2f}"


def row(cells: Iterable[str]) -> str:
    """One line of a markdown table: cells as they are (escaped and formatted by the caller)."""
    return "| " + " | ".join(cells) + " |"


def rule(right: Iterable[bool]) -> str:
    """The line under a markdown table's header: right-aligned columns where ``right`` says."""
    return "|" + "|".join("---:" if r else "---" for r in right) + "|"


def grid(head: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[bool] | None = None) -> str:
    """A markdown table of ready cells (the one writer behind ``markdown``, the issue comment,
    compare, census and summary); ``right``: the right-aligned columns (none by default)."""
    lines = [row(head), rule(right if right is not None else [False] * len(head))]
    lines += [row(r) for r in rows]
    return "\n".join(lines) + "\n"


def _cell(value: object, col: str) -> str:
    """A cell of ``markdown`` (its texts already made cells by ``_texts``)."""
    if value is None:
        return ""
    if col.endswith("_ns"):
        return us(value, grouped=False)
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def markdown(
    df: pl.DataFrame,
    headers: Mapping[str, str] | None = None,
    *,
    of: int | None = None,
    max_chars: int | None = None,
    hint: str = "",
) -> str:
    """A GitHub markdown table of ``df``; ``headers`` renames columns for display.

    ``df`` may be the first rows of a table of ``of`` rows. With ``max_chars`` the rows that
    fit are kept (whole rows, in order), and a closing line says how many of the table's rows
    are left out, followed by ``hint`` (how to get them all)."""
    import polars as pl

    headers = dict(headers or {})
    cols = df.columns
    texts = {c: _texts(df[c].unique(maintain_order=True).to_list()) for c in cols if not df.schema[c].is_numeric()}
    # Each distinct text made a cell once, in Polars: rows taken as Python values would each carry
    # a copy of their names (a table of a thousand rows with a 20 MB name, 20 GB).
    df = df.with_columns(
        pl.col(c).cast(pl.String).replace_strict(list(t), list(t.values()), return_dtype=pl.String) for c, t in texts.items() if t
    )
    lines = [row(headers.get(c, _header(c)) for c in cols), rule(df.schema[c].is_numeric() for c in cols)]
    budget = None if max_chars is None else max_chars - sum(len(line) + 1 for line in lines) - CLOSING_CHARS - len(hint)
    notes: dict[str, int] = {}
    for values in df.iter_rows():
        before = dict(notes)
        line = row(_capped(_cell(v, c), notes) for v, c in zip(values, cols, strict=True))
        if budget is not None:
            budget -= len(line) + 1 + sum(len(t) + 10 for t in notes if t not in before)
            if budget < 0:
                notes = before
                break
        lines.append(line)
    total = max(of or 0, df.height)
    shown = len(lines) - 2
    closing = f"\n_{total - shown} of {total} rows left out.{' ' + hint if hint else ''}_\n" if shown < total else ""
    footnotes = "".join(f"\n[{n}] {text}  " for text, n in notes.items())
    return "\n".join(lines) + "\n" + (f"\nCut in the table:{footnotes}\n" if notes else "") + closing


CLOSING_CHARS = 80  # the closing line, without its hint


TIME_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"))
SIZE_UNITS = ((1e9, "GB"), (1e6, "MB"), (1e3, "KB"))  # decimal, as nsys stats counts MB


def _scaled(value: pl.Expr, units: tuple[tuple[float, str], ...], base: str) -> pl.Expr:
    """``value`` as text in the largest unit it reaches, with two decimals (``base``, below
    them all, as a whole number)."""
    import polars as pl

    v = value.cast(pl.Float64)

    def fixed(scale: float, unit: str) -> pl.Expr:  # round() drops trailing zeros: pad to two
        hundredths = (v.abs() / scale * 100).round(0).cast(pl.Int64)
        sign = pl.when(v < 0).then(pl.lit("-")).otherwise(pl.lit(""))
        return pl.format("{}{}.{} " + unit, sign, hundredths // 100, (hundredths % 100).cast(pl.String).str.zfill(2))

    text = pl.when(v.abs() >= units[0][0]).then(fixed(*units[0]))
    for scale, unit in units[1:]:
        text = text.when(v.abs() >= scale).then(fixed(scale, unit))
    return text.otherwise(pl.format("{} " + base, v.round(0).cast(pl.Int64)))


def human(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` for a terminal: times (``*_ns``) in ns, µs, ms or s and sizes (``*_bytes``) in B,
    KB, MB or GB, with two decimals, the unit dropped from the column name (``render`` prints
    other floats with two decimals). csv and json keep the raw numbers."""
    import polars as pl

    out = []
    for col, dtype in df.schema.items():
        if not dtype.is_numeric():
            out.append(pl.col(col))
        elif col.endswith("_ns"):
            out.append(_scaled(pl.col(col), TIME_UNITS, "ns").alias(col.removesuffix("_ns")))
        elif col.endswith("_bytes"):
            out.append(_scaled(pl.col(col), SIZE_UNITS, "B").alias(col.removesuffix("_bytes") + "_size"))
        else:
            out.append(pl.col(col))
    return df.select(out)


PIECE_BYTES = 8 * 2**20  # csv and json are made this much text at a time (at least a row)


def pieces(df: pl.DataFrame, fmt: Format) -> Iterator[str]:
    """``df`` as csv or json (``render``'s text) in pieces of about ``PIECE_BYTES``, so that a
    table with a 20 MB name in each of a thousand rows is written without ever being held whole
    (Polars' writers hold the whole text, and more, until they return)."""
    import polars as pl

    size = pl.sum_horizontal(pl.col(pl.String).str.len_bytes().fill_null(0), pl.lit(64, pl.UInt64))
    piece = size.cum_sum() // PIECE_BYTES
    starts = [0, *df.select(pl.arg_where(piece != piece.shift(1))).to_series().to_list(), df.height]
    if fmt is Format.json:
        yield "["
    for i, (start, end) in enumerate(pairwise(starts)):
        rows = df.slice(start, end - start)
        if fmt is Format.csv:
            yield rows.write_csv(include_header=i == 0)
        elif rows.height:
            yield ("," if i else "") + rows.write_json()[1:-1]
    if fmt is Format.json:
        yield "]\n"


def render(df: pl.DataFrame, fmt: Format, headers: Mapping[str, str] | None = None, **markdown_options) -> str:
    """``df`` in one of the four output formats; ``markdown_options`` go to ``markdown``."""
    if fmt in (Format.csv, Format.json):
        return "".join(pieces(df, fmt))
    if fmt is Format.table:
        import polars as pl

        safe = df.with_columns(pl.col(pl.String).map_elements(terminal, return_dtype=pl.String))
        with pl.Config(
            tbl_rows=-1,
            tbl_cols=-1,
            fmt_str_lengths=MAX_NAME,
            tbl_width_chars=250,
            tbl_hide_dataframe_shape=True,
            tbl_hide_column_data_types=True,
            float_precision=2,
        ):
            return str(human(safe)) + "\n"
    return markdown(df, headers, **markdown_options)
