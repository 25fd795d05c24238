"""Our training-step LayerNorm kernels (``ln_train.cu``): the bf16 forward and the backward of
either precision. Launch plans are pure Python (``forward_plan``, ``backward_plan``), so the
census and the tests can plan without a GPU; ``make_forward`` and ``make_backward`` (the
registry factories) import CuPy and torch.

The forward is laid out by the rules of ``nsys_tools.kernels.rows``: in bf16 by its bf16 rule,
with bf16 converted by single instructions; in fp32 by the rule the fp32 dispatcher follows.
The backward's rule:

- every thread holds 8 elements of a row (16 when the row is wider than 8192 elements is not
  supported: x, dy and the two accumulators of 16 elements leave too few registers for 1024
  threads), so a row takes ``ceil(N / 8)`` threads rounded up to whole warps;
- one block per SM, as many row groups as fit 1024 threads (at most 15 groups of several warps,
  each with its own named barrier, or 32 single warps): rows in flight per SM are what the
  register file holds, and the partial sums of dgamma and dbeta are one row per SM;
- the grid is the SM count (fewer blocks when there are fewer row groups than that), and a
  second kernel adds the SM count's rows of partials into dgamma and dbeta.
"""

from __future__ import annotations

import math
from pathlib import Path

from nsys_tools.plugin import Buffers, UnsupportedShape

from .cuda import NVRTC_OPTIONS, SM_COUNT_DEFAULT, Launch, compile_kernels
from .plans import FORWARD_NAME
from .rows import FIXED_WIDTH_BYTES, VECTOR_BYTES, bf16_row_plan, row_plan

SOURCE = Path(__file__).with_name("ln_train.cu")
ELEMENT = {"fp32": ("float", 4), "bf16": ("bf16", 2)}
BACKWARD_PER_THREAD = 8
BACKWARD_MAX_N = 1024 * BACKWARD_PER_THREAD
BLOCK_THREADS = 1024
MAX_NAMED_GROUPS = 15  # named barriers 1-15 (0 is __syncthreads)
COLUMN_ROWS = 8  # ln_bwd_cols: blocks of 32 columns x 8 threads


def vector_ok(problem: Buffers, names: tuple[str, ...], element_bytes: int) -> bool:
    """Every row of the named 2-D tensors (and every 1-D one) starts on a 16-byte boundary and
    N fills whole vectors."""
    n = problem.shape[1]
    per = VECTOR_BYTES // element_bytes
    tensors = [getattr(problem, name) for name in names]
    aligned = all(t.data_ptr() % VECTOR_BYTES == 0 for t in tensors)
    strides = all(t.dim() == 1 or t.stride(0) % per == 0 for t in tensors)
    return n % per == 0 and aligned and strides


def forward_plan(m: int, n: int, dtype: str, vector: bool, sm_count: int = SM_COUNT_DEFAULT, named: str = "") -> Launch:
    """``ln_fwd`` for ``m x n`` of ``dtype``, by the rows rule, or by the explicit plan ``named``
    (``fwd_t<threads per row>_r<rows per block>_p<preload 0|1>[_f][_c][_g<blocks per SM>]``)."""
    ctype, size = ELEMENT[dtype]
    vec = VECTOR_BYTES // size if vector else 1
    if named:
        found = FORWARD_NAME.match(named)
        if not found:
            raise UnsupportedShape(None, f"{named!r} is not a forward plan", "write fwd_t<threads>_r<rows>_p<0|1>[_f]")
        tpr, rpb = int(found["tpr"]), int(found["rpb"])
        slots, preload = math.ceil(n / vec / tpr), found["preload"] == "1"
        nfix = n if found["fixed"] and n * size <= FIXED_WIDTH_BYTES else 0
        per_sm, cvt = int(found["per_sm"] or 0), bool(found["cvt"])
    else:
        bf16 = dtype == "bf16"
        plan = bf16_row_plan(m, n, vector, sm_count) if bf16 else row_plan(m, n, size, vector, sm_count)
        tpr, rpb, slots, preload, nfix, per_sm, cvt = plan.tpr, plan.rpb, plan.slots, plan.preload, plan.nfix, 0, bf16
    if slots > (8 if vector else 16) or tpr * rpb > BLOCK_THREADS:
        raise UnsupportedShape(None, f"rows of N = {n} {dtype} elements do not fit the register-held forward")
    kernel, groups = ("ln_fwd_loop", per_sm * sm_count) if per_sm else ("ln_fwd", m)
    name = f"{kernel}<{ctype}, {tpr}, {slots}, {vec}, {rpb}, {'true' if preload else 'false'}, {nfix}{', true' if cvt else ''}>"
    return Launch(name, math.ceil(min(m, groups * rpb) / rpb), tpr * rpb)


def backward_plan(m: int, n: int, dtype: str, vector: bool, sm_count: int = SM_COUNT_DEFAULT) -> tuple[Launch, Launch]:
    """``ln_bwd`` and ``ln_bwd_cols`` for ``m x n`` of ``dtype`` (the rule in the module's doc)."""
    if n > BACKWARD_MAX_N:
        raise UnsupportedShape(None, f"our backward holds rows up to N = {BACKWARD_MAX_N}, got N = {n}")
    ctype, size = ELEMENT[dtype]
    vec = VECTOR_BYTES // size if vector else 1
    tpr = 32 * math.ceil(n / BACKWARD_PER_THREAD / 32)
    slots = math.ceil(n / vec / tpr)
    groups = BLOCK_THREADS // tpr
    rpb = max(1, groups if tpr == 32 else min(groups, MAX_NAMED_GROUPS))
    grid = max(1, min(sm_count, math.ceil(m / rpb)))
    shared = rpb * n * 4 if rpb > 1 else 0
    main = Launch(f"ln_bwd<{ctype}, {tpr}, {slots}, {vec}, {rpb}>", grid, tpr * rpb, shared)
    cols = Launch(f"ln_bwd_cols<{ctype}, {COLUMN_ROWS}>", math.ceil(n / 32), 32 * COLUMN_ROWS)
    return main, cols


def _kernels(names: list[str]) -> dict[str, object]:
    return compile_kernels(names, SOURCE, NVRTC_OPTIONS)


def _ptr(t):
    import numpy as np

    return np.uint64(t.data_ptr())


def _device(problem: Buffers) -> int:
    import torch

    return torch.cuda.get_device_properties(problem.x.device).multi_processor_count


def make_forward(problem: Buffers, dtype: str = "bf16", plan: str = ""):
    """Registry factory: ``ln_fwd`` planned for ``problem``'s shape, dtype and alignment (by the
    rule, or the explicit ``plan``)."""
    import numpy as np

    m, n = problem.shape
    vector = vector_ok(problem, ("x", "y", "gamma", "beta"), ELEMENT[dtype][1])
    plan = forward_plan(m, n, dtype, vector, _device(problem), plan)
    kernel = _kernels([plan.kernel])[plan.kernel]
    x, y = problem.x, problem.y
    args = (_ptr(x), _ptr(y), _ptr(problem.gamma), _ptr(problem.beta), np.int32(m), np.int32(n))
    args += (np.int64(x.stride(0)), np.int64(y.stride(0)), np.float32(problem.eps))
    grid, block = (plan.grid,), (plan.block,)

    def launch() -> None:
        kernel(grid, block, args)

    return launch


def make_backward(problem: Buffers, dtype: str = "fp32"):
    """Registry factory: ``ln_bwd`` then ``ln_bwd_cols`` on ``problem``'s buffers; the partial
    sums (one row per block, fp32) are allocated here, once per buffer set."""
    import numpy as np
    import torch

    m, n = problem.shape
    names = ("x", "dy", "dx", "gamma")
    main, cols = backward_plan(m, n, dtype, vector_ok(problem, names, ELEMENT[dtype][1]), _device(problem))
    kernels = _kernels([main.kernel, cols.kernel])
    bwd, reduce = kernels[main.kernel], kernels[cols.kernel]
    if main.shared_bytes > bwd.max_dynamic_shared_size_bytes:
        bwd.max_dynamic_shared_size_bytes = main.shared_bytes
    part = torch.empty(2 * main.grid, n, device=problem.x.device, dtype=torch.float32)
    x, dy, dx = problem.x, problem.dy, problem.dx
    args = (_ptr(x), _ptr(dy), _ptr(problem.gamma), _ptr(problem.mean), _ptr(problem.rstd), _ptr(dx), _ptr(part))
    args += (np.int32(m), np.int32(n), np.int64(x.stride(0)), np.int64(dy.stride(0)), np.int64(dx.stride(0)))
    col_args = (_ptr(part), np.int32(main.grid), np.int32(n), _ptr(problem.dgamma), _ptr(problem.dbeta))

    def launch() -> None:
        bwd((main.grid,), (main.block,), args, shared_mem=main.shared_bytes)
        reduce((cols.grid,), (cols.block,), col_args)

    launch.part = part  # kept alive with the launcher
    return launch
