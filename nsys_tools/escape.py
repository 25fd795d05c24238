"""Text from a file, made safe for where it is written: one function per destination, defined
here and nowhere else. Standard library only (errors and the capture side use it).

* ``markdown``: a markdown table cell or line (issue comments, ``SCHEMA.md``, summaries);
* ``terminal``: a line on the terminal (``Error:``, ``Warning:`` and ``Note:`` lines, file names
  in them, ``--format table``);
* ``html``: text in an HTML page;
* ``script_json``: data inside an HTML ``<script>`` element;
* ``chart``: text a chart draws (Vega in a page, vl-convert's PNG), which must hold no control,
  no line break (Vega-Lite writes sort orders into expressions, whose strings end at one) and
  nothing XML cannot hold (vl-convert aborts on it).

Names stay readable: only what could act (markup, terminal codes, line breaks) or hide (bidi
controls, zero-width characters) is changed.
"""

from __future__ import annotations

import html as _html
import json
import math
import re

# Terminal escape sequences (CSI colour and cursor codes, OSC titles and links) go whole; what
# reorders or hides text (bidi overrides and isolates, zero-width characters) becomes U+FFFD,
# so that a name cannot show as another one.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x9b[0-?]*[ -/]*[@-~]")
_HIDDEN_CODES = [0x061C, *range(0x200B, 0x2010), 0x2060, 0xFEFF, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_HIDDEN = {c: "\ufffd" for c in _HIDDEN_CODES}
_BREAKS = [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029]  # C0, DEL, C1 and the line separators

# Markdown: punctuation gets a backslash; characters HTML would read become entities (``@`` too,
# so a name cannot mention a user); anything that ends a line or is a control becomes a space.
_MARKDOWN = {ord(c): "\\" + c for c in "\\|*_`[]#~$"}
_MARKDOWN |= {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", ord("@"): "&#64;"}
_MARKDOWN |= {c: " " for c in _BREAKS} | _HIDDEN
_TERMINAL = {c: " " for c in _BREAKS} | _HIDDEN
_HTML = {c: "\ufffd" for c in [*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F, *range(0x80, 0xA0)]} | _HIDDEN
# C0 controls (line breaks among them) and DEL are shown as their pictures (U+2400 + code, U+2421);
# C1 controls, the Unicode line separators, surrogates, U+FFFE and U+FFFF (XML 1.0 holds none of
# the last three) as U+FFFD.
_CHART = {c: chr(0x2400 + c) for c in range(0x20)} | {0x7F: "\u2421"}
_CHART |= {c: "\ufffd" for c in [*range(0x80, 0xA0), 0x2028, 0x2029, *range(0xD800, 0xE000), 0xFFFE, 0xFFFF]} | _HIDDEN


def markdown(text: str) -> str:
    """``text`` safe inside a markdown table cell: one line, one cell, no markup, no terminal
    escapes, nothing that reorders or hides characters."""
    return ANSI.sub("", text).translate(_MARKDOWN)


def terminal(text: str) -> str:
    """``text`` safe on a terminal: one line, no escape sequences, no bidi controls."""
    return ANSI.sub("", text).translate(_TERMINAL)


def html(text: str) -> str:
    """``text`` safe in HTML, as element content or a quoted attribute value."""
    return _html.escape(text.translate(_HTML), quote=True)


_SCRIPT = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}


def _finite(value):
    """``value`` with NaN and infinities as null, which JSON has no words for."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def script_json(value) -> str:
    """``value`` as JSON that can stand inside an HTML ``<script>`` element: every character
    outside ASCII (U+2028 and U+2029 among them) and ``<``, ``>`` and ``&`` as ``\\u`` escapes,
    so that no text can end the element or open a comment."""
    text = json.dumps(_finite(value), ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return re.sub("[<>&]", lambda m: _SCRIPT[m.group()], text)


def chart(text: str) -> str:
    """``text`` as a chart can draw it: one line of characters XML holds, controls visible,
    nothing that reorders or hides characters."""
    return text.translate(_CHART)
