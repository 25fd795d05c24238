"""The Liger control: Liger-Kernel's Triton LayerNorm forward (``pip install 'nsys-tools[liger]'``).

Launched the way ``liger_kernel.ops.layer_norm.layer_norm_forward`` launches it, with Liger's own
kernel and launch settings (one program per row, ``BLOCK_SIZE`` the next power of two of N,
``num_warps`` by ``calculate_settings``: 4, then 8 from 2048, 16 from 8192, 32 from 32768), but on
the preallocated ``y``, ``mean`` and ``rstd`` rather than tensors allocated per call, so it honours
the output policy. The kernel writes the row's mean and 1/std for a backward pass, as in Liger.
"""

from __future__ import annotations

from nsys_tools.plugin import Buffers

MODULE = "liger_kernel"


def make(problem: Buffers):
    import torch

    try:
        from liger_kernel.ops.layer_norm import _layer_norm_forward_kernel as kernel
        from liger_kernel.ops.utils import calculate_settings
    except ImportError as exc:
        raise ImportError(f"{exc}: the liger control needs Liger-Kernel (pip install 'nsys-tools[liger]')") from exc
    m, n = problem.shape
    block, warps = calculate_settings(n)
    x, y, w, b, eps = problem.x, problem.y, problem.gamma, problem.beta, problem.eps
    mean = torch.empty(m, device=x.device, dtype=torch.float32)
    rstd = torch.empty_like(mean)
    args = (y, y.stride(0), x, x.stride(0), w, w.stride(0), b, b.stride(0), mean, mean.stride(0), rstd, rstd.stride(0), n, eps)
    launch_kernel = kernel[(m,)]

    def launch() -> None:
        launch_kernel(*args, BLOCK_SIZE=block, num_warps=warps)

    return launch
