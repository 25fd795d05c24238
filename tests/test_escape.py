"""One escaping function per destination (nsys_tools.escape): what each lets through, on the
texts a stranger's export can hold; and the PNG renderer, which aborts on text XML cannot hold,
gets only text it takes."""

from __future__ import annotations

import json
import shutil
import sqlite3
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from nsys_tools import escape
from nsys_tools.cli import app
from nsys_tools.render import html

from .conftest import FIXTURES

NASTY = [
    "</script><script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "a\u2028b\u2029c",
    "<!-- x",
    "tab\tline\nreturn\r",
    "esc\x1b[31mred\x1b]0;title\x07",
    "bidi\u202eevil\u2066",
    "nul\x00del\x7fc1\x85",
    "ünïcödé 漢字 😀",
    "& &amp; \"quoted\" 'single'",
]


@pytest.mark.parametrize("text", NASTY)
def test_script_json_cannot_end_a_script_and_reads_back(text):
    out = escape.script_json({"name": text, "n": [1.5, float("nan")]})
    assert out.isascii() and not any(c in out for c in "<>&") and "\u2028" not in out
    assert json.loads(out) == {"name": text, "n": [1.5, None]}


@pytest.mark.parametrize("text", NASTY)
def test_html_text_is_never_markup(text):
    out = escape.html(text)
    assert not any(c in out for c in "<>\"'") and "\x00" not in out and "\x1b" not in out
    assert "\u202e" not in out


@pytest.mark.parametrize("text", NASTY)
def test_terminal_text_is_one_line_without_codes(text):
    out = escape.terminal(text)
    assert out.isprintable() or all(c.isprintable() or c == " " for c in out)
    assert "\n" not in out and "\x1b" not in out and "\u202e" not in out and "\u2028" not in out


@pytest.mark.parametrize("text", NASTY)
def test_markdown_text_is_one_cell(text):
    out = escape.markdown(text)
    assert "\n" not in out and "<" not in out and "|" not in out.replace("\\|", "")


@pytest.mark.parametrize("text", NASTY)
def test_chart_text_is_one_line_an_xml_parser_takes(text):
    doc = f"<svg><text>{escape.html(escape.chart(text))}</text></svg>"
    ET.fromstring(doc)  # raises on a character XML cannot hold
    assert escape.chart(text).isprintable()
    assert not any(c in escape.chart(text) for c in "\n\r\x1b\u2028\u2029") and escape.chart("\x1b") == "\u241b"


def test_the_page_writer_escapes_every_part(tmp_path):
    text = NASTY[0]
    page = html.page(text, [html.Section(text, [text, html.Table([text], [[text]]), html.Chart({"title": text})])])
    body = page.rsplit("</head>", 1)[1]
    assert "<script>alert" not in page and body.count("<script") == 2  # the chart's data, and the drawing
    assert "Content-Security-Policy" in page and "default-src 'none'" in page.replace("&#x27;", "'")


@pytest.mark.slow
def test_a_png_chart_of_names_with_control_bytes(tmp_path):
    """vl-convert aborted the process (exit 134) on an ESC byte in a kernel name."""
    path = tmp_path / "run.sqlite"
    shutil.copyfile(FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite", path)
    con = sqlite3.connect(path)
    with con:
        (sid,) = con.execute("SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()
        con.execute("UPDATE StringIds SET value = ? WHERE id = ?", ("k\x1b[31m\x01\x08\ufffe\x0bname", sid))
    con.close()
    res = CliRunner().invoke(app, ["report", str(path), "--chart", str(tmp_path / "k.png")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
