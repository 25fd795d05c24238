"""The LayerNorm forward op: the study nsys-tools ships, as a plugin of ``nsys_tools.plugin``.

Registered through the ``nsys_tools.ops`` entry-point group (``pyproject.toml``). Shapes are
``MxN``: M rows of N fp32 values, normalized over N. The implementations are
``nsys_tools.kernels.registry.IMPLS`` plus the explicit launch plans ``nsys_tools.kernels.registry.get`` accepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nsys_tools.plugin import Buffers, Impl, Op, Shape

from . import registry

EPS = 1e-5
# Per element: the sum for the mean (1), the centred square and its sum (3), the scale by 1/std
# (1), gamma and beta (2); the per-row square root and divisions are left out.
FLOPS_PER_ELEMENT = 7


class LayerNorm(Op):
    name = "layernorm"
    title = "LayerNorm"
    dtype = "fp32"
    shape_hint = "MxN"
    default_shapes = ("4096x768", "8192x768", "1024x2048", "4096x4096")
    default_impls = ("ours", "triton", "torch", "copy")
    control = "triton"
    floor = "copy"

    def constants(self, shape: Shape, device: str) -> dict[str, Any]:
        import torch

        n = shape[1]
        return {"gamma": torch.randn(n, device=device), "beta": torch.randn(n, device=device), "eps": EPS}

    def inputs(self, shape: Shape, device: str) -> dict[str, Any]:
        import torch

        return {"x": torch.randn(*shape, device=device)}

    def outputs(self, shape: Shape, device: str) -> dict[str, Any]:
        import torch

        return {"y": torch.empty(*shape, device=device)}

    def reference(self, buffers: Buffers) -> dict[str, Any]:
        import torch.nn.functional as F

        x = buffers.x.double()
        return {"y": F.layer_norm(x, (x.shape[1],), buffers.gamma.double(), buffers.beta.double(), buffers.eps)}

    def bytes_moved(self, shape: Shape) -> int:
        return registry.layernorm_bytes(*shape)

    def flops(self, shape: Shape) -> int:
        return FLOPS_PER_ELEMENT * shape[0] * shape[1]

    def impls(self) -> Sequence[Impl]:
        return list(registry.IMPLS.values())

    def impl(self, name: str) -> Impl:
        return registry.get(name)


OP = LayerNorm()
