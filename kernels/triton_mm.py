"""The Triton control: a matmul written after the design of the Triton tutorial "Matrix
Multiplication" (https://triton-lang.org/main/getting-started/tutorials/03-matrix-multiplication.html).

The tutorial's design, kept here: one program per BLOCK_M x BLOCK_N tile of C, programs
visited in groups of GROUP_M tile rows (the "grouped ordering" that raises L2 reuse); A and B
walked in BLOCK_K steps with masks on K, an fp32 accumulator through ``tl.dot``, the output
converted to C's type and stored with a mask; and the tutorial's CUDA autotune configurations,
all of them, keyed on (M, N, K). For fp32 inputs ``tl.dot`` multiplies in TF32
(``input_precision="tf32"``, stated rather than left to Triton's default; it does not apply to
bf16 inputs). The tutorial's fused activation and int8 path are left out.
"""

from __future__ import annotations

import triton
import triton.language as tl


def _config(m: int, n: int, k: int, stages: int, warps: int) -> triton.Config:
    return triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_stages=stages, num_warps=warps)


# The tutorial's get_cuda_autotune_config(): (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps); the last
# eight are the ones it marks as good for fp8 inputs. Configurations that need more shared memory
# than the GPU has are skipped by the autotuner.
TUTORIAL_CONFIGS = [
    _config(128, 256, 64, 3, 8),
    _config(64, 256, 32, 4, 4),
    _config(128, 128, 32, 4, 4),
    _config(128, 64, 32, 4, 4),
    _config(64, 128, 32, 4, 4),
    _config(128, 32, 32, 4, 4),
    _config(64, 32, 32, 5, 2),
    _config(32, 64, 32, 5, 2),
    _config(128, 256, 128, 3, 8),
    _config(256, 128, 128, 3, 8),
    _config(256, 64, 128, 4, 4),
    _config(64, 256, 128, 4, 4),
    _config(128, 128, 128, 4, 4),
    _config(128, 64, 64, 4, 4),
    _config(64, 128, 64, 4, 4),
    _config(128, 32, 64, 4, 4),
]


@triton.autotune(configs=TUTORIAL_CONFIGS, key=["M", "N", "K"])
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def launcher(a, b, c):
    """``c = a @ b`` (A M x K, B K x N, C M x N); fp32 operands multiply in TF32."""
    m, k = a.shape
    n = b.shape[1]

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    kernel = matmul_kernel[grid]

    def launch() -> None:
        kernel(a, b, c, m, n, k, *strides, PRECISION="tf32")

    return launch


def make(buffers, **_):
    """Op factory: ``buffers.c = buffers.a @ buffers.b``."""
    return launcher(buffers.a, buffers.b, buffers.c)


def compile_for_census(dtype: str, shape: tuple[int, int, int], arch: str, config: triton.Config | None = None):
    """``Impl.compile`` hook: the kernel compiled for ``arch`` without a GPU, specialized as
    Triton's launcher would specialize it for contiguous operands at ``shape`` (16-byte aligned
    pointers and integers divisible by 16 marked so, unit strides constant), with ``config``
    (default: the one the autotuner picked at that shape on the H200, else the tutorial's first)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from nsys_tools.plugin import Cubin, arch_number

    m, n, k = shape
    cfg = config or TUTORIAL_CONFIGS[H200_PICKS.get((dtype, shape), 0)]
    element = {"bf16": "bf16", "tf32": "fp32"}[dtype]
    ints = {
        "M": m,
        "N": n,
        "K": k,
        "stride_am": k,
        "stride_ak": 1,
        "stride_bk": n,
        "stride_bn": 1,
        "stride_cm": n,
        "stride_cn": 1,
    }
    signature = {**dict.fromkeys(("a_ptr", "b_ptr", "c_ptr"), f"*{element}"), **{name: "i32" for name in ints}}
    constexprs = {**cfg.kwargs, "PRECISION": "tf32", **{name: 1 for name, v in ints.items() if v == 1}}
    signature.update(dict.fromkeys(constexprs, "constexpr"))
    names = matmul_kernel.fn.arg_names
    aligned = ["a_ptr", "b_ptr", "c_ptr", *(name for name, v in ints.items() if v % 16 == 0)]
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    src = ASTSource(fn=matmul_kernel.fn, signature=signature, constexprs=constexprs, attrs=attrs)
    options = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    kernel = triton.compile(src, target=GPUTarget("cuda", arch_number(arch), 32), options=options)
    grid = triton.cdiv(m, cfg.kwargs["BLOCK_M"]) * triton.cdiv(n, cfg.kwargs["BLOCK_N"])
    return Cubin(kernel.metadata.name, kernel.asm["cubin"], grid, cfg.num_warps * 32, kernel.metadata.shared)


# Index into TUTORIAL_CONFIGS of the configuration the autotuner picked on the H200, by (dtype,
# shape) (reports/matmul-variants.md); the census compiles that one. bf16 took
# 128 x 256 x 64 (index 0) at every shape.
H200_PICKS: dict[tuple[str, tuple[int, int, int]], int] = {
    ("tf32", (4096, 4096, 4096)): 6,  # 64 x 32 x 32, 5 stages, 2 warps
    ("tf32", (8192, 8192, 8192)): 15,  # 128 x 32 x 64, 4 stages, 4 warps
    ("tf32", (4096, 4096, 1024)): 6,
    ("tf32", (2048, 11008, 4096)): 6,
}
