"""A user-defined op for nsys-tools: row softmax in fp32, with our Triton kernel against PyTorch.

Nothing in nsys-tools is edited to measure it. On a GPU machine with Nsight Systems:

    nsys-tools capture list --plugin examples/softmax_op.py
    nsys-tools capture sweep --plugin examples/softmax_op.py --op softmax --out reports/sweeps/<id>
    nsys-tools report reports/sweeps/<id> --issue

The op is written against ``nsys_tools.plugin``: shapes ``MxN`` (M rows of N floats, softmax over
each row), one set of device buffers per rotation slot, a float64 reference, the bytes one call
must move and its FLOPs, and four implementations:

- ``rowwise`` (ours): one Triton program per row, the row held in registers (``softmax_triton.py``);
- ``torch`` (the control): ATen's softmax kernel writing into the preallocated output
  (``torch.ops.aten._softmax.out``), so it follows the sweep's output policy like ours;
- ``torch_alloc``: ``torch.softmax`` as most code calls it, allocating its output in the call
  (marked as such in every table: it cannot follow the output policy);
- ``copy``: x copied into y, the bandwidth floor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nsys_tools.plugin import Buffers, Impl, Op, resolve

KERNELS = Path(__file__).with_name("softmax_triton.py")
FP32 = 4
MAX_N = 16384  # the Triton kernel holds a row of at most this many floats in registers


def make_rowwise(buffers: Buffers):
    """One Triton program per row (``softmax_triton.py``, imported when first used)."""
    return resolve(f"{KERNELS}:make")(buffers)


def make_torch(buffers: Buffers):
    """ATen's softmax into ``y``: no allocation in the call."""
    import torch

    x, y = buffers.x, buffers.y
    softmax = torch.ops.aten._softmax.out

    def launch() -> None:
        softmax(x, -1, False, out=y)

    return launch


def make_torch_alloc(buffers: Buffers):
    """``torch.softmax`` returning a new tensor each call."""
    import torch

    x = buffers.x

    def launch():
        return torch.softmax(x, -1)

    return launch


def make_copy(buffers: Buffers):
    x, y = buffers.x, buffers.y

    def launch() -> None:
        y.copy_(x)

    return launch


def widest(shape: tuple[int, ...]) -> str | None:
    return f"holds rows of at most {MAX_N} floats, got N = {shape[1]}" if shape[1] > MAX_N else None


class Softmax(Op):
    name = "softmax"
    title = "Softmax"
    dtype = "fp32"
    default_shapes = ("4096x1000", "4096x4096", "8192x2048", "1024x16384")
    default_impls = ("rowwise", "torch", "torch_alloc", "copy")
    control = "torch"
    floor = "copy"

    def inputs(self, shape: tuple[int, ...], device: str) -> dict[str, Any]:
        import torch

        return {"x": 4 * torch.randn(*shape, device=device)}  # a spread that makes the max matter

    def outputs(self, shape: tuple[int, ...], device: str) -> dict[str, Any]:
        import torch

        return {"y": torch.empty(*shape, device=device)}

    def reference(self, buffers: Buffers) -> dict[str, Any]:
        return {"y": buffers.x.double().softmax(-1)}

    def bytes_moved(self, shape: tuple[int, ...]) -> int:
        m, n = shape
        return 2 * m * n * FP32  # read x once, write y once

    def flops(self, shape: tuple[int, ...]) -> int:
        m, n = shape
        return 4 * m * n  # subtract the max, exponentiate, sum, scale

    def impls(self) -> list[Impl]:
        return [
            Impl("rowwise", make_rowwise, "ours", "one Triton program per row, the row in registers", limit=widest),
            Impl("torch", make_torch, "control", "ATen softmax into the preallocated output (aten._softmax.out)"),
            Impl("torch_alloc", make_torch_alloc, "control", "torch.softmax, allocating its output", allocates=True),
            Impl(
                "copy",
                make_copy,
                "control",
                "y.copy_(x): the bandwidth floor",
                reference=lambda b: {"y": b.x.double()},
                flops=lambda shape: 0,
            ),
        ]


OPS = [Softmax()]
