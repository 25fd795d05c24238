"""Names as people match and group them: shell globs over names, range names without PyTorch's
per-call ids, and which string ids name what a pattern matches.

``torch.autograd.profiler.emit_nvtx`` names each op's range ``aten::mm, seq = 1234, op_id = 56,
sizes = [[64, 128], [128, 256]], input_op_ids = [...]`` (the shape and id parts vary with the
PyTorch version and options); ``record_function`` ranges and backward nodes carry the same
suffixes. The ids differ from call to call and from run to run, so the names never match
across runs; ``op_name`` keeps only the op (``aten::mm``), so that its calls group together.
"""

from __future__ import annotations

import re

import polars as pl

from .export import Export
from .frames import strings

# The fields emit_nvtx appends after the op's name, each as ", <field> = <value>".
FIELDS = ("seq", "op_id", "sizes", "input_op_ids", "stashed seq", "input_dims", "stream")
SUFFIX = r",\s*(?:" + "|".join(f.replace(" ", r"\s+") for f in FIELDS) + r")\s*=.*$"


def op_name(name: pl.Expr) -> pl.Expr:
    """``name`` without emit_nvtx's per-call fields: everything from the first ``, seq =``,
    ``, op_id =``, ``, sizes =`` (and the like) on."""
    return name.cast(pl.String).str.replace(SUFFIX, "").str.strip_chars_end()


def glob_regex(pattern: str) -> str:
    """A shell glob (``*``, ``?``, ``[seq]``) as an anchored regular expression."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and pattern.find("]", i + 2) > 0:
            j = pattern.find("]", i + 2)
            body = pattern[i + 1 : j]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "^(?s:" + "".join(out) + ")$"


def glob_like(pattern: str) -> str:
    """A SQL ``LIKE`` pattern matching at least what the shell glob ``pattern`` matches (``*``
    -> ``%``, ``?`` and a ``[seq]`` -> ``_``; ``LIKE`` ignores ASCII case, and a ``%`` or ``_``
    in the glob matches more): a cheap filter as rows are read, before ``glob_regex``'s exact one."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "[" and pattern.find("]", i + 2) > 0:
            out.append("_")
            i = pattern.find("]", i + 2)
        else:
            out.append({"*": "%", "?": "_"}.get(c, c))
        i += 1
    return "".join(out)


def matching(ex: Export, ids: pl.Series, pattern: str) -> pl.DataFrame:
    """Of the string ids ``ids``, those whose text matches the regular expression ``pattern``:
    ``id``, ``name``. Each distinct id is read and matched once, however many rows carry it."""
    table = strings(ex, ids.drop_nulls().unique().to_list())
    return table.filter(pl.col("value").str.contains(pattern)).rename({"value": "name"})
