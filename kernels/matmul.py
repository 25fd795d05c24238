"""The matmul ops: C = A B for row-major A (M x K), B (K x N), C (M x N), shapes written MxNxK.

Two ops, one precision each (``nsys_tools.plugin``):

- ``matmul_bf16``: bf16 A, B and C, products accumulated in fp32;
- ``matmul_tf32``: fp32 A, B and C, multiplied in TF32 on the tensor cores (operands keep 10
  mantissa bits), accumulated in fp32. Every implementation is asked for TF32: ours by
  construction (the SIMT variant alone multiplies in plain fp32), Triton with
  ``input_precision="tf32"``, cuBLAS with ``torch.backends.cuda.matmul.allow_tf32 = True``.

Inputs are standard normal; the reference is ``A.double() @ B.double()`` from the same inputs
(so bf16's input rounding is not counted as error). The error is the relative Frobenius error,
accepted up to 1e-2 for bf16 (C rounded to bf16 alone gives about 2e-3) and 3e-3 for TF32
(operands cut to TF32 give about 5e-4 to 1e-3). ``elementwise_error`` is the stricter check
the tests use: each element's error over the sum of the magnitudes of its K products.

FLOPs are 2 M N K. The bytes are the fewest that must move: A and B read once, C written once,
``(M K + K N + M N) * element size``.
"""

from __future__ import annotations

from nsys_tools.plugin import Impl, Op, lazy

from .matmul_cuda import DTYPES, ELEMENT_BYTES, VARIANTS, compile_for_census, is_variant, variants

TORCH_DTYPE = {"bf16": "bfloat16", "tf32": "float32"}
# Dense tensor-core peaks (the datasheets quote twice these, "with sparsity"). The H200's
# compute is the H100 SXM's; both datasheets give 1,979 TFLOPS BF16 and 989 TFLOPS TF32 sparse.
DATASHEET = "NVIDIA {} Tensor Core GPU datasheet, SXM: half the quoted {} TFLOPS with sparsity"
PEAKS = {
    "bf16": {gpu: (989.5, DATASHEET.format(gpu.split()[1], "1,979 BF16")) for gpu in ("NVIDIA H200", "NVIDIA H100 80GB HBM3")},
    "tf32": {gpu: (494.5, DATASHEET.format(gpu.split()[1], "989 TF32")) for gpu in ("NVIDIA H200", "NVIDIA H100 80GB HBM3")},
}
# Each element's error over sum_k |A[m,k] B[k,n]|, the bound a dot product's rounding obeys: C
# rounded to bf16 contributes at most 2^-9, operands cut to TF32 at most 2^-9 as well (2^-10 per
# operand), fp32 accumulation K 2^-24.
ELEMENTWISE_TOLERANCE = {"bf16": 4e-3, "tf32": 4e-3}


class Matmul(Op):
    shape_rank = 3
    shape_hint = "MxNxK"
    default_shapes = ("4096x4096x4096", "8192x8192x8192", "4096x4096x1024", "2048x11008x4096")
    default_impls = ("ours", "triton", "torch")
    control = "torch"
    floor = None
    tolerances = {"bf16": 1e-2, "tf32": 3e-3}

    def __init__(self, dtype: str):
        self.dtype = dtype
        self.peaks = PEAKS[dtype]
        self.name = f"matmul_{dtype}"
        math = "bf16 inputs and output, fp32 accumulation" if dtype == "bf16" else "fp32 inputs and output, TF32 math"
        self.title = f"Matmul ({math})"

    def torch_dtype(self):
        import torch

        return getattr(torch, TORCH_DTYPE[self.dtype])

    def inputs(self, shape, device):
        import torch

        m, n, k = shape
        dt = self.torch_dtype()
        return {"a": torch.randn(m, k, device=device, dtype=dt), "b": torch.randn(k, n, device=device, dtype=dt)}

    def outputs(self, shape, device):
        import torch

        m, n, _ = shape
        return {"c": torch.empty(m, n, device=device, dtype=self.torch_dtype())}

    def reference(self, buffers):
        return {"c": buffers.a.double() @ buffers.b.double()}

    def bytes_moved(self, shape) -> int:
        m, n, k = shape
        return (m * k + k * n + m * n) * ELEMENT_BYTES[self.dtype]

    def flops(self, shape) -> int:
        m, n, k = shape
        return 2 * m * n * k

    def impls(self) -> list[Impl]:
        ours = [self._ours(name, VARIANTS[name]) for name in variants(self.dtype)]
        return [
            *ours,
            Impl(
                "triton",
                lazy("nsys_tools.kernels.triton_mm:make"),
                family="control",
                summary="Triton tutorial matmul (grouped ordering, its autotune configs)"
                + ("; TF32 dot" if self.dtype == "tf32" else ""),
                compile=self._triton_compile,
            ),
            Impl(
                "torch",
                lazy("nsys_tools.kernels.torch_mm:make"),
                family="control",
                summary="torch.matmul(out=C), cuBLAS" + (", allow_tf32 = True" if self.dtype == "tf32" else ""),
            ),
        ]

    def _triton_compile(self, shape, arch):
        from .triton_mm import compile_for_census as triton_cubin

        return triton_cubin(self.dtype, tuple(shape), arch)

    def impl(self, name: str) -> Impl:
        """A shipped implementation, or an explicit plan (``wgmma_n128_s5``, ``mma_128x256_w2x4_s3``)."""
        if is_variant(name) and name not in VARIANTS:
            return self._ours(name, "explicit launch plan (see kernels/matmul_cuda.py)")
        return super().impl(name)

    def _ours(self, name: str, summary: str) -> Impl:
        dtype = self.dtype

        def compile(shape, arch):
            return compile_for_census(name, dtype, shape, arch)

        return Impl(
            name, lazy("nsys_tools.kernels.matmul_cuda:make", variant=name, dtype=dtype), summary=summary, compile=compile
        )


def elementwise_error(c, a, b, expected) -> float:
    """max over elements of |C - expected| / sum_k |A[m,k] B[k,n]| (inf if C holds a NaN or
    infinity): unlike a norm of the whole matrix, it catches one wrong element, and unlike a
    relative error per element it does not blow up where the products cancel."""
    import torch

    out = c.double()
    if not torch.isfinite(out).all():
        return float("inf")
    scale = a.double().abs() @ b.double().abs()
    return float(((out - expected).abs() / scale.clamp_min(1e-300)).max())


OPS = [Matmul(dtype) for dtype in DTYPES]
