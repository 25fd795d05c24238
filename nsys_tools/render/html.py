"""The one writer of the HTML pages nsys-tools makes: ``report --chart``, ``timeline --chart``,
the charts of ``report SWEEP --issue``, and any page of text, tables and charts
(``page``/``write``).

Nothing from the data can run in a page:

* text (the title, headings, paragraphs, table cells) is HTML-escaped (``escape.html``);
* each Vega-Lite spec, data included, sits in a ``<script type="application/json">`` element as
  ``escape.script_json`` (``<``, ``>``, ``&`` and everything outside ASCII as ``\\u`` escapes),
  and is read with ``JSON.parse``, never evaluated;
* the Content-Security-Policy lets the page run only its two scripts (by hash), fetch nothing
  and connect nowhere; Vega evaluates its expressions with its interpreter (``ast``), not
  ``Function``.

Vega, Vega-Lite and vega-embed are written into the page (vl-convert's bundle), so it opens
offline and wherever it is copied. No I/O except ``write``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..escape import html, script_json
from ..files import replaced_atomically


@dataclass(frozen=True)
class Table:
    """A table of text: its header and rows (any values, shown as text)."""

    columns: Sequence[str]
    rows: Sequence[Sequence[object]]


@dataclass(frozen=True)
class Chart:
    """A Vega-Lite spec (a dict, data inline), drawn in place."""

    spec: dict


@dataclass(frozen=True)
class Section:
    """A heading (none for the page's first part) and what follows it: paragraphs of text,
    tables and charts, in order."""

    heading: str | None = None
    parts: Sequence[str | Table | Chart] = field(default_factory=list)


# Draws every chart of the page; a chart that cannot be drawn says so in its place.
_DRAW = """document.querySelectorAll('script[type="application/json"][data-chart]').forEach(function (data) {
  var target = document.getElementById(data.getAttribute('data-chart'));
  vegaEmbed(target, JSON.parse(data.textContent), {renderer: 'svg', actions: false, ast: true})
    .catch(function (err) { target.textContent = 'This chart could not be drawn: ' + err; });
});"""
_STYLE = (
    "body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}th{background:#f4f4f4}"
)


@functools.cache
def _vega(version: str | None) -> str:
    """Vega, Vega-Lite (``version``, as ``v6_4``; None: vl-convert's newest) and vega-embed as
    one script, made once a run."""
    import vl_convert

    return vl_convert.javascript_bundle(vl_version=version)


def vl_version(spec: dict) -> str | None:
    """The Vega-Lite version a spec names in its ``$schema`` (``.../vega-lite/v6.4.1.json`` ->
    ``v6_4``), as vl-convert takes it; None when it names none."""
    found = re.search(r"/vega-lite/(v\d+)\.(\d+)", str(spec.get("$schema", "")))
    return f"{found.group(1)}_{found.group(2)}" if found else None


def _hash(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


def _table(table: Table) -> str:
    head = "".join(f"<th>{html(str(c))}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(f"<td>{html('' if v is None else str(v))}</td>" for v in row) + "</tr>" for row in table.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, sections: Iterable[Section]) -> str:
    """The HTML of a self-contained page: ``title``, then each section."""
    body, charts, version = [f"<h1>{html(title)}</h1>"], 0, None
    for section in sections:
        if section.heading is not None:
            body.append(f"<h2>{html(section.heading)}</h2>")
        for part in section.parts:
            if isinstance(part, Table):
                body.append(_table(part))
            elif isinstance(part, Chart):
                charts += 1
                version = version or vl_version(part.spec)
                body.append(
                    f'<div id="chart-{charts}"></div>'
                    f'<script type="application/json" data-chart="chart-{charts}">{script_json(part.spec)}</script>'
                )
            else:
                body.append(f"<p>{html(part)}</p>")
    scripts = [_vega(version), _DRAW] if charts else []
    policy = (
        "default-src 'none'; "
        f"script-src {' '.join(_hash(s) for s in scripts) or chr(39) + 'none' + chr(39)}; "
        "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; base-uri 'none'; form-action 'none'"
    )
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{html(policy)}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{html(title)}</title><style>{_STYLE}</style>"
        + (f"<script>{scripts[0]}</script>" if scripts else "")
        + "</head>\n<body>\n"
    )
    tail = (f"<script>{scripts[1]}</script>" if scripts else "") + "\n</body></html>\n"
    return head + "\n".join(body) + tail


def write(path: Path, title: str, sections: Iterable[Section], *, through_link: bool = False) -> Path:
    """Write ``page(title, sections)`` to ``path`` (a new file renamed into place; a link at
    ``path`` is written through only when the user named it: ``through_link``)."""
    text = page(title, sections)
    with replaced_atomically(path, through_link=through_link) as partial:
        partial.write_text(text, encoding="utf-8")
    return path
