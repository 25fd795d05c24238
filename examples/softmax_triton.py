"""The ``rowwise`` softmax of ``softmax_op.py``: one Triton program per row.

The design of the Triton tutorial "Fused Softmax"
(https://triton-lang.org/main/getting-started/tutorials/02-fused-softmax.html): a row is loaded
once into registers (BLOCK = next power of two of N, padded with -inf), its maximum subtracted,
exponentiated, summed and scaled, and written once; so the kernel moves the fewest bytes.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def softmax_rows(X, Y, stride_x, stride_y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    e = tl.exp(z)
    tl.store(Y + row * stride_y + cols, e / tl.sum(e, axis=0), mask=mask)


def make(buffers):
    x, y = buffers.x, buffers.y
    m, n = buffers.shape
    block = triton.next_power_of_2(n)
    warps = min(max(block // 256, 1), 16)
    kernel = softmax_rows[(m,)]
    sx, sy = x.stride(0), y.stride(0)

    def launch() -> None:
        kernel(x, y, sx, sy, n, BLOCK=block, num_warps=warps)

    return launch
