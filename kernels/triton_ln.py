"""The Triton control: a LayerNorm forward written after the design of the Triton tutorial
"Layer Normalization" (https://triton-lang.org/main/getting-started/tutorials/05-layer-norm.html).

The tutorial's design, kept here: one program per row; BLOCK the next power of two of N, capped
at 64 KB of elements, rows wider than that refused; three sweeps over the row in BLOCK-wide
chunks (mean, variance of the centred values, normalize and write), accumulating in fp32;
the row's mean and 1/std stored for a backward pass; and the tutorial's warp rule,
``num_warps = min(max(BLOCK // 256, 1), 8)``.
"""

from __future__ import annotations

import triton
import triton.language as tl

from nsys_tools.plugin import Buffers, UnsupportedShape

MAX_FUSED_BYTES = 65536


@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride_x, stride_y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y

    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N

    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        v = tl.where(cols < N, v - mean, 0.0)
        acc += v * v
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)

    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        v = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (v - mean) * rstd * w + b, mask=mask)


def launch_params(n: int, element_bytes: int = 4) -> tuple[int, int]:
    """(BLOCK, num_warps) by the tutorial's rules, or ``UnsupportedShape`` for too-wide rows."""
    block = min(MAX_FUSED_BYTES // element_bytes, triton.next_power_of_2(n))
    if n > block:
        raise UnsupportedShape(None, f"triton supports rows under 64 KB (N <= {block} fp32), got N = {n}")
    return block, min(max(block // 256, 1), 8)


def make(problem: Buffers):
    import torch

    m, n = problem.shape
    block, warps = launch_params(n, problem.x.element_size())
    mean = torch.empty(m, device=problem.x.device, dtype=torch.float32)
    rstd = torch.empty_like(mean)
    x, y, w, b = problem.x, problem.y, problem.gamma, problem.beta
    sx, sy, eps = x.stride(0), y.stride(0), problem.eps
    kernel = layer_norm_fwd[(m,)]

    def launch() -> None:
        kernel(x, y, w, b, mean, rstd, sx, sy, n, eps, BLOCK=block, num_warps=warps)

    return launch
