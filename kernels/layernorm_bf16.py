"""The LayerNorm forward op in bf16: bf16 x, gamma, beta and y, statistics in fp32.

Loaded as a plugin (``--plugin nsys_tools.kernels.layernorm_bf16``, as the matmul ops are),
named ``layernorm_bf16``, beside the fp32 op (``nsys_tools.kernels.layernorm``), with the same
shapes (``MxN``), the same reference
(float64 from the same bf16 inputs) and the same controls, run on bf16 tensors. Ours is
``ln_fwd`` of ``kernels/ln_train.cu``, laid out by the bf16 rule of ``nsys_tools.kernels.rows``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from nsys_tools.plugin import Buffers, Impl, Op, Shape, lazy

from . import registry
from .layernorm import EPS, FLOPS_PER_ELEMENT
from .plans import FORWARD_NAME

BF16 = 2
OURS_MAX_N = 16384


def layernorm_bytes(m: int, n: int) -> int:
    """Read x, write y, read gamma and beta, in bf16."""
    return (2 * m * n + 2 * n) * BF16


class LayerNormBf16(Op):
    name = "layernorm_bf16"
    title = "LayerNorm (bf16 in and out, fp32 statistics)"
    dtype = "bf16"
    shape_hint = "MxN"
    default_shapes = ("4096x768", "8192x768", "1024x2048", "4096x4096", "8192x2048", "1024x8192", "512x16384")
    default_impls = ("ours", "triton", "inductor", "liger", "torch", "copy")
    control = "liger"
    floor = "copy"

    def constants(self, shape: Shape, device: str) -> dict[str, Any]:
        import torch

        n = shape[1]
        dt = torch.bfloat16
        return {"gamma": torch.randn(n, device=device, dtype=dt), "beta": torch.randn(n, device=device, dtype=dt), "eps": EPS}

    def inputs(self, shape: Shape, device: str) -> dict[str, Any]:
        import torch

        return {"x": torch.randn(*shape, device=device, dtype=torch.bfloat16)}

    def outputs(self, shape: Shape, device: str) -> dict[str, Any]:
        import torch

        return {"y": torch.empty(*shape, device=device, dtype=torch.bfloat16)}

    def reference(self, buffers: Buffers) -> dict[str, Any]:
        import torch.nn.functional as F

        x = buffers.x.double()
        return {"y": F.layer_norm(x, (x.shape[1],), buffers.gamma.double(), buffers.beta.double(), buffers.eps)}

    def bytes_moved(self, shape: Shape) -> int:
        return layernorm_bytes(*shape)

    def flops(self, shape: Shape) -> int:
        return FLOPS_PER_ELEMENT * shape[0] * shape[1]

    def impls(self) -> Sequence[Impl]:
        ours = _ours("ours", "register-held rows laid out by the bf16 rule (kernels/rows.py), converted by single instructions")
        controls = [registry.IMPLS[name] for name in ("triton", "inductor", "liger", "torch")]
        copy = replace(registry.IMPLS["copy"], bytes_moved=lambda shape: 2 * shape[0] * shape[1] * BF16)
        return [ours, *controls, copy]

    def impl(self, name: str) -> Impl:
        """A shipped implementation, or an explicit forward plan (``fwd_t256_r1_p0``; see
        ``kernels/train_cuda.py``)."""
        if FORWARD_NAME.match(name):
            return _ours(name, "explicit launch plan of the register-held forward (kernels/train_cuda.py)", plan=name)
        return super().impl(name)


def _census(plan: str, shape: Shape, arch: str):
    from .census import compile_forward

    return compile_forward("bf16", plan, shape, arch)


def _ours(name: str, summary: str, plan: str = "") -> Impl:
    return Impl(
        name,
        lazy("nsys_tools.kernels.train_cuda:make_forward", dtype="bf16", plan=plan),
        "ours",
        summary,
        limit=registry.max_width(OURS_MAX_N),
        compile=partial(_census, plan),
    )


OP = LayerNormBf16()
