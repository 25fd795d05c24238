"""The NVTX naming convention every capture follows, ours or any program's (standard library only).

A timed range is named ``<op>/<impl>/<shape>/<l2>/r<round>``, for example
``layernorm/ours/4096x768/cold/r2`` or ``matmul_bf16/cublas/4096x4096x4096/warm/r0``:

- ``op`` and ``impl``: letters, digits and ``_ . + -``;
- ``shape``: any text without ``/`` or whitespace, as the op writes it (``MxN``, ``MxNxK``);
- ``l2``: ``cold`` (inputs rotated over buffers that together exceed twice the L2) or ``warm``;
- ``round``: 0, 1, 2, ... ; every implementation runs once per round, in an order shuffled anew
  each round from a recorded seed (``round_orders``), so that no implementation always runs first
  or after the same neighbour. Sweeps recorded before the seed rotated the order by one each
  round (``rotated``), which kept every implementation's predecessor: under a power cap that
  biases compute-bound ops.

A range may end in ``/n<calls>``, the number of calls made inside it (``.../r2/n100``). The GPU
operations launched inside the range (on the launching thread) are then split, in the order they
ran, into that many calls of equal length, and a call's kernel time is the sum of its operations'
times: a call of cuBLAS that sets a workspace with a memset before its kernel is one call of two
operations, not two calls. Without the count, each operation is one call (``capture sweep``
exports record the count in the harness record instead). Anything outside the ranges (warm-up,
setup, checks) is ignored.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Sequence
from typing import TypeVar

RANGE = re.compile(
    r"^(?P<op>[A-Za-z0-9_.+-]+)/(?P<impl>[A-Za-z0-9_.+-]+)/(?P<shape>[^/\s]+)/(?P<l2>cold|warm)/r(?P<round>\d+)(?:/n(?P<calls>\d+))?$"
)
RANGE_REGEX = RANGE.pattern
RANGE_FORMAT = "<op>/<impl>/<shape>/<l2>/r<round>[/n<calls>]"
L2_MODES = ("cold", "warm")
# Where every implementation of a capture writes its output (the capture folder records it):
# ``rotate``, an output per buffer set (cold writes); ``reuse``, one output per shape for every
# implementation. ``reuse`` is the default of every command and the harness: it is what a caller
# whose caching allocator recycles outputs sees, and the one condition that every control, including
# those that allocate their output inside the call, meets alike (docs/guides/sweeps.md).
OUTPUT_POLICIES = ("rotate", "reuse")
DEFAULT_OUTPUTS = "reuse"
# Draws of one round's order before taking the one that repeats the fewest predecessors.
ORDER_DRAWS = 64

T = TypeVar("T")


def range_name(op: str, impl: str, shape: str, l2: str, rnd: int, calls: int | None = None) -> str:
    return f"{op}/{impl}/{shape}/{l2}/r{rnd}" + (f"/n{calls}" if calls else "")


def rotated(names: list[str], rnd: int) -> list[str]:
    """The order of round ``rnd``: ``names`` rotated left by ``rnd``."""
    k = rnd % len(names)
    return names[k:] + names[:k]


def predecessors(order: Sequence[T]) -> dict[T, T | None]:
    """Each name of ``order`` -> the name that ran right before it in the round (None: first)."""
    return {name: order[k - 1] if k else None for k, name in enumerate(order)}


def unit_seed(seed: int, unit: str) -> int:
    """The seed one capture unit (a shape of a sweep) draws its inputs and round orders from: the
    sweep's seed and the unit's text together. With the sweep's seed alone, every shape of a sweep
    ran its implementations in the same positions, so an effect of the position could not be told
    apart from the implementation's own time."""
    return seed * 2**32 + zlib.crc32(unit.encode())


def round_orders(names: Sequence[T], rounds: int, seed: int) -> list[list[T]]:
    """The order of each of ``rounds`` rounds: ``names`` shuffled anew each round by one generator
    seeded with ``seed``, so one seed always gives the same orders. A round's shuffle is drawn
    again (``ORDER_DRAWS`` times at most, keeping the draw with the fewest repeats) while some
    name would follow the same name as in the round before."""
    rng = random.Random(seed)
    orders: list[list[int]] = []  # positions in ``names``, which need not be hashable
    for _ in range(rounds):
        before = predecessors(orders[-1]) if orders else {}
        best: list[int] = []
        fewest = len(names) + 1
        for _ in range(ORDER_DRAWS):
            order = list(range(len(names)))
            rng.shuffle(order)
            repeats = sum(1 for k, prev in predecessors(order).items() if prev is not None and before.get(k) == prev)
            if repeats < fewest:
                best, fewest = order, repeats
            if not repeats:
                break
        orders.append(best)
    return [[names[k] for k in order] for order in orders]
