"""The NVTX naming convention every capture follows, ours or any program's (standard library only).

A timed range is named ``<op>/<impl>/<shape>/<l2>/r<round>``, for example
``layernorm/ours/4096x768/cold/r2`` or ``matmul_bf16/cublas/4096x4096x4096/warm/r0``:

- ``op`` and ``impl``: letters, digits and ``_ . + -``;
- ``shape``: any text without ``/`` or whitespace, as the op writes it (``MxN``, ``MxNxK``);
- ``l2``: ``cold`` (inputs rotated over buffers that together exceed twice the L2) or ``warm``;
- ``round``: 0, 1, 2, ... ; every implementation runs once per round, the order rotated by one
  each round, so that no implementation always runs first or after the same neighbour.

A range may end in ``/n<calls>``, the number of calls made inside it (``.../r2/n100``). The GPU
operations launched inside the range (on the launching thread) are then split, in the order they
ran, into that many calls of equal length, and a call's kernel time is the sum of its operations'
times: a call of cuBLAS that sets a workspace with a memset before its kernel is one call of two
operations, not two calls. Without the count, each operation is one call (``capture sweep``
exports record the count in the harness record instead). Anything outside the ranges (warm-up,
setup, checks) is ignored.
"""

from __future__ import annotations

import re

RANGE = re.compile(
    r"^(?P<op>[A-Za-z0-9_.+-]+)/(?P<impl>[A-Za-z0-9_.+-]+)/(?P<shape>[^/\s]+)/(?P<l2>cold|warm)/r(?P<round>\d+)(?:/n(?P<calls>\d+))?$"
)
RANGE_REGEX = RANGE.pattern
RANGE_FORMAT = "<op>/<impl>/<shape>/<l2>/r<round>[/n<calls>]"
L2_MODES = ("cold", "warm")


def range_name(op: str, impl: str, shape: str, l2: str, rnd: int, calls: int | None = None) -> str:
    return f"{op}/{impl}/{shape}/{l2}/r{rnd}" + (f"/n{calls}" if calls else "")


def rotated(names: list[str], rnd: int) -> list[str]:
    """The order of round ``rnd``: ``names`` rotated left by ``rnd``."""
    k = rnd % len(names)
    return names[k:] + names[:k]
