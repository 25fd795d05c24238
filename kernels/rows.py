"""How a register-held LayerNorm kernel is laid out for a shape: a rule, not a table of shapes.

Standard library only (the census and the tests plan launches without a GPU). The rule reads
three things: the bytes of one row, how many rows there are against what one wave of the GPU
holds, and the SM count. It was fitted on the H200 sweeps in ``reports/variants.md`` (rows of
768 to 16384 floats) and is checked on a grid of shapes it was not fitted on (``reports/
variants.md``, "The dispatcher rule").

1. **Threads per row.** A thread holds the row in 16-byte vectors (4 floats, 8 bf16) when rows
   are 16-byte aligned, else in single elements.
   - Vector rows: one warp up to 3 KB (at most 6 vectors a lane); two warps up to 4 KB; from
     there the fewest threads, a power of two and at least 128, that hold at most 8 vectors
     (128 bytes) each: 128 threads up to 16 KB, 256 up to 32 KB, 512 up to 64 KB.
   - Element rows: at most 8 elements a thread, between 128 and 1024 threads.
2. **gamma and beta with x** (the preload): loaded into registers before the reduction, so
   that their latency does not sit between the reduction and the first store, when every SM has
   at least ``PRELOAD_BYTES_PER_SM`` of x to read (below that the grid is about one wave and the
   registers cost more than the latency they hide), and only for vector rows of at most 256
   threads (at 512 threads the preload's registers leave one block per SM); those wider rows
   use streaming (evict-first) loads and stores instead.
3. **Rows per block.** One warp per row runs four rows to a block while the rows are fewer
   than two waves of single-warp blocks (``ONE_ROW_BLOCKS_WAVES`` x 32 resident blocks x SMs)
   and nothing is preloaded; one row per block otherwise.
4. **The row width compiled in** up to 8 KB per row, where one warp holds the row or nothing is
   preloaded (masks go, divisions by N become products).

The bf16 forward (``bf16_row_plan``) has its own rule, fitted on 32 bf16 shapes timed on an H100
(``reports/variants.md``, "Issue 35, third pass"): bf16 is converted by single instructions
there, which leaves registers for more vectors in flight than the fp32 rule allows.

1. **Threads per row.** Vector rows: the power of two that holds at most 4 vectors (32 bf16) a
   thread, 32 to 1024 threads. Element rows: 8 to 16 elements a thread (the largest power of two
   not above N / 8), 32 to 1024 threads.
2. **The preload** for vector rows of at most 256 threads, and for wider ones when there are no
   more rows than SMs (one row an SM: the registers cost no residency); never for element rows.
3. **Rows per block** and **the row width compiled in** as in the fp32 rule, the width whenever
   the row is at most 8 KB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

VECTOR_BYTES = 16
MAX_VECTORS = 8  # per thread: 8 x 16 bytes; more spills the register array
ONE_WARP_BYTES = 3 * 1024
TWO_WARPS_BYTES = 4 * 1024
MIN_WIDE_THREADS = 128
SCALAR_PER_THREAD = 8
# Below this much of x per SM (12 MiB over 132 SMs, the threshold measured on the H200) the
# preload's registers cost more than the latency they hide.
PRELOAD_BYTES_PER_SM = 90 * 1024
PRELOAD_MAX_THREADS = 256
RESIDENT_BLOCKS_PER_SM = 32  # sm_80 and later
ONE_ROW_BLOCKS_WAVES = 2
FIXED_WIDTH_BYTES = 8 * 1024


@dataclass(frozen=True)
class RowPlan:
    """Threads per row, vectors (or elements) per thread, elements per vector, rows per block,
    whether gamma and beta are preloaded, whether x and y stream (evict-first), and the row
    width compiled in (0: an argument)."""

    tpr: int
    slots: int
    vec: int
    rpb: int
    preload: bool
    streaming: bool
    nfix: int


def _pow2(v: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(v, 1))))


def threads_per_row(n: int, element_bytes: int, vector: bool) -> int:
    row = n * element_bytes
    if not vector:
        return min(1024, max(MIN_WIDE_THREADS, _pow2(math.ceil(n / SCALAR_PER_THREAD))))
    if row <= ONE_WARP_BYTES:
        return 32
    if row <= TWO_WARPS_BYTES:
        return 64
    return max(MIN_WIDE_THREADS, _pow2(math.ceil(row / (MAX_VECTORS * VECTOR_BYTES))))


def row_plan(m: int, n: int, element_bytes: int, vector: bool, sm_count: int) -> RowPlan:
    """The layout of ``m`` rows of ``n`` elements of ``element_bytes`` each (``vector``: rows
    16-byte aligned with N a multiple of the vector) on a GPU of ``sm_count`` SMs."""
    vec = VECTOR_BYTES // element_bytes if vector else 1
    tpr = threads_per_row(n, element_bytes, vector)
    slots = math.ceil(n / vec / tpr)
    row = n * element_bytes
    wide = vector and tpr > PRELOAD_MAX_THREADS
    preload = vector and not wide and m * row >= PRELOAD_BYTES_PER_SM * sm_count
    few_rows = m < ONE_ROW_BLOCKS_WAVES * RESIDENT_BLOCKS_PER_SM * sm_count
    rpb = 4 if tpr == 32 and few_rows and not preload else 1
    nfix = n if row <= FIXED_WIDTH_BYTES and (tpr == 32 or not preload) else 0
    return RowPlan(tpr, slots, vec, rpb, preload, wide, nfix)


def _pow2_floor(v: int) -> int:
    return 1 << max(0, math.floor(math.log2(max(v, 1))))


BF16_VECTORS_PER_THREAD = 4
BF16_ELEMENTS_PER_THREAD = 8


def bf16_row_plan(m: int, n: int, vector: bool, sm_count: int) -> RowPlan:
    """The layout of the bf16 forward for ``m`` rows of ``n`` bf16 (``vector``: rows 16-byte
    aligned with N a multiple of 8) on a GPU of ``sm_count`` SMs (the rule in the module's doc)."""
    vec = VECTOR_BYTES // 2 if vector else 1
    if vector:
        tpr = min(1024, max(32, _pow2(math.ceil(n / vec / BF16_VECTORS_PER_THREAD))))
        preload = tpr <= PRELOAD_MAX_THREADS or m <= sm_count
    else:
        tpr = min(1024, max(32, _pow2_floor(n // BF16_ELEMENTS_PER_THREAD)))
        preload = False
    few_rows = m < ONE_ROW_BLOCKS_WAVES * RESIDENT_BLOCKS_PER_SM * sm_count
    rpb = 4 if tpr == 32 and few_rows else 1
    nfix = n if n * 2 <= FIXED_WIDTH_BYTES else 0
    return RowPlan(tpr, math.ceil(n / vec / tpr), vec, rpb, preload, False, nfix)
