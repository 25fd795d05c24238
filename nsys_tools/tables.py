"""Render a collected DataFrame as markdown, csv, json or a terminal table. No I/O here.

Markdown is for people: nanosecond columns become µs with two decimals, names are escaped so
that no character can break a table row or cell or be read as markup (``escape``), and long
C++ template names are shortened, never two names to the same text. A table can be cut to fit
a length (an issue comment), saying how many rows were left out. csv and json keep full names
and integer or float nanoseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports this module for Format; capture machines have no Polars
    import polars as pl


class Format(str, Enum):
    markdown = "markdown"
    csv = "csv"
    json = "json"
    table = "table"


MAX_NAME = 60
# One pass over the text: markdown punctuation gets a backslash; characters HTML would read
# become entities (``@`` too, so a name cannot mention a user); anything that ends a line (CR,
# LF, and the Unicode line and paragraph separators) or is a control character becomes a space.
_ESCAPES = {ord(c): "\\" + c for c in "\\|*_`[]#~$"}
_ESCAPES |= {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", ord("@"): "&#64;"}
_ESCAPES |= {c: " " for c in [*range(0x20), 0x7F, 0x85, 0x2028, 0x2029]}


def escape(text: str) -> str:
    """Make ``text`` safe inside a markdown table cell: one line, one cell, no markup."""
    return text.translate(_ESCAPES)


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


def shorten(name: str, limit: int = MAX_NAME) -> str:
    """A readable form of a long kernel name: no return type, no parameter list, no namespaces,
    then templates collapsed, then cut at ``limit`` characters. Short names pass through."""
    if len(name) <= limit:
        return name
    short = re.sub(r"^void ", "", name)
    if short.endswith(")"):  # drop the parameter list: from the "(" matching the last ")"
        depth = 0
        for i in range(len(short) - 1, -1, -1):
            depth += (short[i] == ")") - (short[i] == "(")
            if depth == 0:
                short = short[:i]
                break
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


UNITS = {"_ns": " (µs)", "_pct": " (%)", "_bytes": " (bytes)"}


def _header(col: str) -> str:
    for suffix, unit in UNITS.items():
        if col.endswith(suffix):
            return col.removesuffix(suffix).replace("_", " ") + unit
    return {"gbps": "GB/s"}.get(col, col.replace("_", " "))


def _cell(value: object, col: str, texts: Mapping[object, str]) -> str:
    if value is None:
        return ""
    if col.endswith("_ns"):
        return f"{float(value) / 1000:.2f}"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, str):
        return texts[value]
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
    headers = dict(headers or {})
    cols = df.columns
    texts = {c: _texts(df[c].to_list()) for c in cols if not df.schema[c].is_numeric()}
    lines = [
        "| " + " | ".join(headers.get(c, _header(c)) for c in cols) + " |",
        "|" + "|".join("---:" if df.schema[c].is_numeric() else "---" for c in cols) + "|",
    ]
    budget = None if max_chars is None else max_chars - sum(len(line) + 1 for line in lines) - CLOSING_CHARS - len(hint)
    for row in df.iter_rows():
        line = "| " + " | ".join(_cell(v, c, texts.get(c, {})) for v, c in zip(row, cols, strict=True)) + " |"
        if budget is not None:
            budget -= len(line) + 1
            if budget < 0:
                break
        lines.append(line)
    total = max(of or 0, df.height)
    shown = len(lines) - 2
    closing = f"\n_{total - shown} of {total} rows left out.{' ' + hint if hint else ''}_\n" if shown < total else ""
    return "\n".join(lines) + "\n" + closing


CLOSING_CHARS = 80  # the closing line, without its hint


def render(df: pl.DataFrame, fmt: Format, headers: Mapping[str, str] | None = None, **markdown_options) -> str:
    """``df`` in one of the four output formats; ``markdown_options`` go to ``markdown``."""
    if fmt is Format.csv:
        return df.write_csv()
    if fmt is Format.json:
        return df.write_json() + "\n"
    if fmt is Format.table:
        import polars as pl

        with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=MAX_NAME, tbl_width_chars=250, tbl_hide_dataframe_shape=True):
            return str(df) + "\n"
    return markdown(df, headers, **markdown_options)
