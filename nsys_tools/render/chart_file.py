"""One chart to one file: ``.html`` through the page writer (``html.py``), ``.png`` through
vl-convert at twice the size. Every text of the spec, names and data alike, is first made text
a chart can draw (``escape.chart``): vl-convert aborts the whole process on text that XML cannot
hold (an ESC byte in a kernel name), and Vega fails to parse the expressions Vega-Lite writes a
sort order into when a name holds a line break. The one I/O of the chart modules."""

from __future__ import annotations

from pathlib import Path

from ..escape import chart as drawable
from ..files import output_error, replaced_atomically
from . import html


def drawable_spec(value):
    """A Vega-Lite spec (or any part of it) with every text made drawable (``escape.chart``)."""
    if isinstance(value, str):
        return drawable(value)
    if isinstance(value, dict):
        return {drawable(k): drawable_spec(v) for k, v in value.items()}
    if isinstance(value, list):
        return [drawable_spec(v) for v in value]
    return value


def _title(spec: dict, path: Path) -> str:
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return title if isinstance(title, str) and title else path.stem


def save(chart, path: Path, *, through_link: bool = False) -> Path:
    """Write the Altair ``chart`` to ``path`` (.html, else .png); a link at ``path`` is written
    through only when the user named it (``through_link``), else replaced."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(path.parent, exc) from exc
    spec = drawable_spec(chart.to_dict())
    if path.suffix.lower() == ".html":
        return html.write(path, _title(spec, path), [html.Section(parts=[html.Chart(spec)])], through_link=through_link)
    import vl_convert

    png = vl_convert.vegalite_to_png(spec, vl_version=html.vl_version(spec), scale=2)
    with replaced_atomically(path, through_link=through_link) as partial:
        partial.write_bytes(png)
    return path
