"""The controls of the LayerNorm backward ops (``nsys_tools.kernels.layernorm_bwd``): Liger's
backward, torch's native backward, Inductor's compilation of it, and the bytes-moved copy."""

from __future__ import annotations

from nsys_tools.plugin import Buffers

from .inductor_ln import configure_dynamo


def make_liger(problem: Buffers):
    """``liger_kernel.ops.layer_norm.layer_norm_backward`` as Liger calls it (it allocates dx
    and its per-SM partials, and sums them with torch)."""
    try:
        from liger_kernel.ops.layer_norm import layer_norm_backward
    except ImportError as exc:
        raise ImportError(f"{exc}: the liger control needs Liger-Kernel (pip install 'nsys-tools[liger]')") from exc
    b = problem

    def launch():
        return layer_norm_backward(b.dy, b.x, b.gamma, b.beta, b.mean, b.rstd)

    return launch


def _native(dy, x, mean, rstd, gamma, beta):
    import torch

    n = x.shape[-1]
    return torch.ops.aten.native_layer_norm_backward(
        dy, x, [n], mean.view(-1, 1), rstd.view(-1, 1), gamma, beta, [True, True, True]
    )


def make_torch(problem: Buffers):
    """The CUDA kernels behind ``LayerNorm``'s autograd: two kernels, new outputs each call."""
    b = problem

    def launch():
        return _native(b.dy, b.x, b.mean, b.rstd, b.gamma, b.beta)

    return launch


def _backward_into(dy, x, mean, rstd, gamma, beta, dx, dgamma, dbeta):
    got = _native(dy, x, mean, rstd, gamma, beta)
    dx.copy_(got[0])
    dgamma.copy_(got[1])
    dbeta.copy_(got[2])


def make_inductor(problem: Buffers):
    """``torch.compile`` of the native backward written into the op's outputs, compiled here
    for this shape (dynamic shapes off), never in a timed call."""
    import torch

    configure_dynamo()
    fn = torch.compile(_backward_into, dynamic=False, fullgraph=True)
    b = problem
    args = (b.dy, b.x, b.mean, b.rstd, b.gamma, b.beta, b.dx, b.dgamma, b.dbeta)
    with torch.no_grad():
        fn(*args)

    def launch() -> None:
        with torch.no_grad():
            fn(*args)

    return launch


def make_copy(problem: Buffers):
    """Copies that move the op's bytes: x into dx (read and write M x N elements), then a
    scratch buffer of half the remaining bytes into another (gamma, mean, rstd, dgamma, dbeta
    and dy's read, as bytes). Scratch buffers are per buffer set, so they rotate as x does."""
    import torch

    from .layernorm_bwd import backward_bytes

    m, n = problem.shape
    size = problem.x.element_size()
    rest = (backward_bytes(m, n, size) - 2 * m * n * size) // 2
    src = torch.randint(0, 255, (rest,), device=problem.x.device, dtype=torch.uint8)
    dst = torch.empty_like(src)
    x, dx = problem.x, problem.dx

    def launch() -> None:
        dx.copy_(x)
        dst.copy_(src)

    return launch
