"""The PyTorch controls: ``torch.nn.functional.layer_norm`` and a device-to-device copy."""

from __future__ import annotations

from nsys_tools.plugin import Buffers


def make_layer_norm(problem: Buffers):
    """``F.layer_norm`` into a fresh tensor each call: it allocates its output, so it cannot
    honour the sweep's output policy. PyTorch's caching allocator hands back the block the last
    call freed, so its writes land in lines the L2 may still hold (no device allocation happens
    after warm-up). ``torch.ops.aten.native_layer_norm.out`` is no way around it: its out=
    variant is generated from the functional one, which allocates and then copies into ``out``
    (an extra copy kernel in every call)."""
    import torch.nn.functional as F

    x, w, b, eps = problem.x, problem.gamma, problem.beta, problem.eps
    shape = (x.shape[1],)

    def launch():
        return F.layer_norm(x, shape, w, b, eps)

    return launch


def make_copy(problem: Buffers):
    """``y.copy_(x)``: for contiguous rows a cudaMemcpyAsync device-to-device, the same bytes
    in and out as the LayerNorm's x and y: the bandwidth floor."""
    x, y = problem.x, problem.y

    def launch():
        y.copy_(x)

    return launch
