"""The LayerNorm forward implementations: ours and the controls, as ``nsys_tools.plugin.Impl``.

Importable with the standard library alone (CI has no GPU stack): each entry's factory is
``plugin.lazy("module:function")``, so the GPU libraries are imported only when it is called.
The op itself (shapes, buffers, reference, bytes) is ``nsys_tools.kernels.layernorm``.

Every implementation computes, for a row-major fp32 M x N tensor ``x`` (rows possibly strided),
``y = (x - mean) / sqrt(var + eps) * gamma + beta`` over the last dimension, into the
preallocated ``y`` of the buffer set it is given (``buffers.x``, ``.y``, ``.gamma``, ``.beta``,
``.eps``); torch's ``layer_norm`` allocates its output instead and returns it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from nsys_tools.errors import UsageError
from nsys_tools.plugin import Buffers, Impl, UnsupportedShape, lazy

from .plans import BULK_NAME, CLUSTER_NAME, FORWARD_NAME, HELD_MAX_N, HELD_NAME, STAGED_NAME

__all__ = ["UnsupportedShape", "HELD_MAX_N", "HELD_NAME", "STAGED_NAME", "BULK_NAME", "CLUSTER_NAME"]  # re-exported

FP32 = 4


def layernorm_bytes(m: int, n: int) -> int:
    """The fewest bytes a LayerNorm forward moves: read x, write y, read gamma and beta."""
    return (2 * m * n + 2 * n) * FP32


def copy_bytes(m: int, n: int) -> int:
    """A device-to-device copy of x into y: read x, write y."""
    return 2 * m * n * FP32


def problem(x: Any, y: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> Buffers:
    """One buffer set built by hand (tests, probes): ``x`` (rows may be strided), ``y``,
    ``gamma``, ``beta`` as torch tensors, and ``eps``."""
    return Buffers(tuple(x.shape), {"x": x}, {"y": y}, {"gamma": gamma, "beta": beta, "eps": eps})


def max_width(n_max: int) -> Callable[[tuple[int, ...]], str | None]:
    """A shape limit: rows of at most ``n_max`` floats."""

    def limit(shape: tuple[int, ...]) -> str | None:
        m, n = shape
        return f"supports rows up to N = {n_max}; got N = {n} ({m}x{n}); use ours or torch" if n > n_max else None

    return limit


def _compile_ours(variant: str, shape: tuple[int, ...], arch: str):
    from .census import compile_ours

    return compile_ours(variant, shape, arch)


def _compile_triton(shape: tuple[int, ...], arch: str):
    from .census import compile_triton

    return compile_triton(shape, arch)


def _compile_forward(plan: str, shape: tuple[int, ...], arch: str):
    from .census import compile_forward

    return compile_forward("fp32", plan, shape, arch)


def _forward(name: str) -> Impl:
    """An explicit plan of the training forward (``ln_fwd`` of ``kernels/ln_train.cu``) on fp32 rows."""
    return Impl(
        name,
        lazy("nsys_tools.kernels.train_cuda:make_forward", dtype="fp32", plan=name),
        "ours",
        "explicit launch plan of the training forward, fp32 (kernels/train_cuda.py)",
        limit=max_width(HELD_MAX_N),
        compile=partial(_compile_forward, name),
    )


def _ours(name: str, summary: str, max_n: int | None = None) -> Impl:
    limit = max_width(max_n) if max_n else None
    census = partial(_compile_ours, name)
    return Impl(
        name, lazy("nsys_tools.kernels.cuda:make"), "ours", summary, limit=limit, options={"variant": name}, compile=census
    )


IMPLS: dict[str, Impl] = {
    impl.name: impl
    for impl in (
        _ours("block_tree", "block per row, shared-memory tree reduction, three scalar passes"),
        _ours("warp_row", "one warp per row, shuffle reductions, three passes"),
        _ours("warp_pair", "two warps per row, shuffle reductions, three passes"),
        _ours(
            "row_held", "block of 128 per row, row held in registers (float4 + masked tail slot), one barrier, approx rsqrt", 1024
        ),
        _ours("wide_held", "the row_held design for rows up to 16384: 128-1024 threads, up to 8 slots", HELD_MAX_N),
        _ours("ours", "dispatcher: the fastest measured variant for the shape"),
        _ours("ours_nc", "ours with read-only non-coherent loads of x (ld.global.nc)", HELD_MAX_N),
        _ours("ours_cs", "ours with streaming loads and stores (ld/st.global.cs, evict-first)", HELD_MAX_N),
        _ours("ours_pf", "ours with loads that ask the L2 for 256-byte blocks (ld.global.L2::256B)", HELD_MAX_N),
        _ours("ours_2rows", "ours with two rows per block", HELD_MAX_N),
        _ours("ours_gridstride", "ours on a grid of 8 row-blocks per SM striding over rows", HELD_MAX_N),
        _ours("ours_regcap", "ours with __launch_bounds__ asking for 2x the resident blocks (a register cap)", HELD_MAX_N),
        _ours("ours_fixed", "ours with the row width compiled into the kernel at every width (ours does up to 2048)", HELD_MAX_N),
        Impl(
            "triton",
            lazy("nsys_tools.kernels.triton_ln:make"),
            "control",
            "Triton LayerNorm forward after the Triton tutorial: one program per row, BLOCK = next_pow2(N)",
            limit=max_width(65536 // FP32),
            compile=_compile_triton,
        ),
        Impl(
            "torch",
            lazy("nsys_tools.kernels.torch_ln:make_layer_norm"),
            "control",
            "torch.nn.functional.layer_norm (allocates its output: the caching allocator hands back the block just freed)",
            allocates=True,
        ),
        # What users run instead, from optional extras: nsys-tools[inductor] (torch alone), nsys-tools[liger].
        Impl(
            "inductor",
            lazy("nsys_tools.kernels.inductor_ln:make"),
            "control",
            "torch.compile of F.layer_norm into y, per shape, dynamic=False: one kernel that writes y",
        ),
        Impl(
            "liger",
            lazy("nsys_tools.kernels.liger_ln:make"),
            "control",
            "Liger-Kernel's Triton LayerNorm forward kernel with Liger's launch settings, writing y",
            limit=max_width(65536),
        ),
        Impl(
            "copy",
            lazy("nsys_tools.kernels.torch_ln:make_copy"),
            "control",
            "device-to-device copy of x into y: the bandwidth floor",
            reference=lambda b: {"y": b.x.double()},
            bytes_moved=lambda shape: copy_bytes(*shape),
            flops=lambda shape: 0,
        ),
    )
}


PLAN_NAMES = (
    (HELD_NAME, "register-held kernel with an explicit launch plan (see kernels/cuda.py)"),
    (STAGED_NAME, "row staged in shared memory by cp.async, with an explicit launch plan"),
    (CLUSTER_NAME, "a row split across a thread-block cluster, merged through distributed shared memory"),
    (BULK_NAME, "persistent blocks, rows brought into shared memory by bulk copies (TMA), explicit plan"),
)


def get(name: str) -> Impl:
    if name in IMPLS:
        return IMPLS[name]
    for pattern, summary in PLAN_NAMES:
        if pattern.match(name):
            return _ours(name, summary, HELD_MAX_N)
    if FORWARD_NAME.match(name):
        return _forward(name)
    hint = f"choose from {', '.join(IMPLS)}, or held_t<threads>..., fwd_t<threads>_r<rows>_p<0|1>..."
    raise UsageError(None, f"unknown implementation {name!r}", hint)
