"""The NVTX naming convention every capture follows, ours or any program's (standard library only).

A timed range is named ``<op>/<impl>/<shape>/<l2>/r<round>``, for example
``layernorm/ours/4096x768/cold/r2`` or ``matmul_bf16/cublas/4096x4096x4096/warm/r0``:

- ``op`` and ``impl``: letters, digits and ``_ . + -``;
- ``shape``: any text without ``/`` or whitespace, as the op writes it (``MxN``, ``MxNxK``);
- ``l2``: ``cold`` (inputs rotated over buffers that together exceed twice the L2) or ``warm``;
- ``round``: 0, 1, 2, ... ; every implementation runs once per round, the order rotated by one
  each round, so that no implementation always runs first or after the same neighbour.

Every GPU operation launched inside such a range (on the launching thread) is one timed call of
that implementation. Anything outside the ranges (warm-up, setup, checks) is ignored.
"""

from __future__ import annotations

import re

RANGE = re.compile(r"^(?P<op>[A-Za-z0-9_.+-]+)/(?P<impl>[A-Za-z0-9_.+-]+)/(?P<shape>[^/\s]+)/(?P<l2>cold|warm)/r(?P<round>\d+)$")
RANGE_REGEX = RANGE.pattern
RANGE_FORMAT = "<op>/<impl>/<shape>/<l2>/r<round>"
L2_MODES = ("cold", "warm")


def range_name(op: str, impl: str, shape: str, l2: str, rnd: int) -> str:
    return f"{op}/{impl}/{shape}/{l2}/r{rnd}"


def rotated(names: list[str], rnd: int) -> list[str]:
    """The order of round ``rnd``: ``names`` rotated left by ``rnd``."""
    k = rnd % len(names)
    return names[k:] + names[:k]
