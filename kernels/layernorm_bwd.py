"""The LayerNorm backward ops, fp32 and bf16: dx, dgamma and dbeta from x, dy, gamma and the
mean and rstd the forward saved (fp32 in both).

Loaded as a plugin (``--plugin nsys_tools.kernels.layernorm_bwd``, as the matmul ops are); the
ops are ``layernorm_bwd_fp32`` and ``layernorm_bwd_bf16``. Shapes are ``MxN``; gradients are in the op's precision (dgamma and
dbeta summed in fp32 first). Per row, with xhat = (x - mean) * rstd and wdy = gamma * dy:

    dx = (wdy - xhat * mean(xhat * wdy) - mean(wdy)) * rstd,
    dgamma = sum over rows of dy * xhat,   dbeta = sum over rows of dy.

The reference computes this in float64 from the same inputs and the same saved statistics.
The floor is a copy of the bytes the op must move (``copy``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nsys_tools.plugin import Buffers, Impl, Op, Shape, lazy

from .registry import max_width
from .train_cuda import BACKWARD_MAX_N

ELEMENT_BYTES = {"fp32": 4, "bf16": 2}
TORCH_DTYPE = {"fp32": "float32", "bf16": "bfloat16"}
# Per element: xhat (2), gamma * dy (1), the two row sums (3), dx (4), dgamma and dbeta (3).
FLOPS_PER_ELEMENT = 13
EPS = 1e-5


def backward_bytes(m: int, n: int, element_bytes: int) -> int:
    """The fewest bytes: read x and dy, write dx; read gamma, mean and rstd; write dgamma and dbeta."""
    return 3 * m * n * element_bytes + 3 * n * element_bytes + 2 * m * 4


class LayerNormBackward(Op):
    shape_hint = "MxN"
    default_shapes = ("4096x768", "8192x768", "1024x2048", "4096x4096", "16384x1024", "2048x8192")
    default_impls = ("ours", "liger", "inductor", "torch", "copy")
    control = "liger"
    floor = "copy"

    def __init__(self, dtype: str):
        self.dtype = dtype
        self.name = f"layernorm_bwd_{dtype}"
        self.title = f"LayerNorm backward ({dtype})"

    def _dtype(self):
        import torch

        return getattr(torch, TORCH_DTYPE[self.dtype])

    def constants(self, shape: Shape, device: str) -> dict[str, Any]:
        import torch

        n, dt = shape[1], self._dtype()
        return {"gamma": torch.randn(n, device=device, dtype=dt), "beta": torch.randn(n, device=device, dtype=dt)}

    def inputs(self, shape: Shape, device: str) -> dict[str, Any]:
        """x and dy, and the statistics a forward of x saves (fp32)."""
        import torch

        x = torch.randn(*shape, device=device, dtype=self._dtype())
        dy = torch.randn(*shape, device=device, dtype=self._dtype())
        var, mean = torch.var_mean(x.float(), dim=1, unbiased=False)
        return {"x": x, "dy": dy, "mean": mean, "rstd": torch.rsqrt(var + EPS)}

    def outputs(self, shape: Shape, device: str) -> dict[str, Any]:
        import torch

        m, n = shape
        dt = self._dtype()
        return {
            "dx": torch.empty(m, n, device=device, dtype=dt),
            "dgamma": torch.empty(n, device=device, dtype=dt),
            "dbeta": torch.empty(n, device=device, dtype=dt),
        }

    def reference(self, buffers: Buffers) -> dict[str, Any]:
        x, dy, g = buffers.x.double(), buffers.dy.double(), buffers.gamma.double()
        mean, rstd = buffers.mean.double()[:, None], buffers.rstd.double()[:, None]
        xhat = (x - mean) * rstd
        wdy = g * dy
        dx = (wdy - xhat * (xhat * wdy).mean(1, keepdim=True) - wdy.mean(1, keepdim=True)) * rstd
        return {"dx": dx, "dgamma": (dy * xhat).sum(0), "dbeta": dy.sum(0)}

    def bytes_moved(self, shape: Shape) -> int:
        return backward_bytes(*shape, ELEMENT_BYTES[self.dtype])

    def flops(self, shape: Shape) -> int:
        return FLOPS_PER_ELEMENT * shape[0] * shape[1]

    def impls(self) -> Sequence[Impl]:
        dtype = self.dtype
        return [
            Impl(
                "ours",
                lazy("nsys_tools.kernels.train_cuda:make_backward", dtype=dtype),
                "ours",
                "one pass over x and dy: 8 elements a thread, one block per SM of row groups, dgamma/dbeta partials per SM",
                limit=max_width(BACKWARD_MAX_N),
            ),
            Impl(
                "liger",
                lazy("nsys_tools.kernels.ln_bwd_controls:make_liger"),
                "control",
                "Liger-Kernel's layer_norm_backward: its Triton kernel on one program per SM, then a sum of the partials",
                allocates=True,
                limit=max_width(65536),
            ),
            Impl(
                "inductor",
                lazy("nsys_tools.kernels.ln_bwd_controls:make_inductor"),
                "control",
                "torch.compile of aten.native_layer_norm_backward into dx, dgamma, dbeta, per shape, dynamic=False",
            ),
            Impl(
                "torch",
                lazy("nsys_tools.kernels.ln_bwd_controls:make_torch"),
                "control",
                "torch.ops.aten.native_layer_norm_backward (allocates its outputs)",
                allocates=True,
            ),
            Impl(
                "copy",
                lazy("nsys_tools.kernels.ln_bwd_controls:make_copy"),
                "control",
                "device-to-device copies of the op's bytes (x into dx, and the rest from a scratch buffer): the floor",
                reference=lambda b: {"dx": b.x.double()},
            ),
        ]


OPS = [LayerNormBackward(dtype) for dtype in ELEMENT_BYTES]
