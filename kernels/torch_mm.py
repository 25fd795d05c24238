"""The cuBLAS control: ``torch.matmul(a, b, out=c)``, into the preallocated C.

For fp32 operands it sets ``torch.backends.cuda.matmul.allow_tf32 = True`` (process-wide, as
the TF32 op requires), so cuBLAS multiplies in TF32 like the other implementations.
"""

from __future__ import annotations


def launcher(a, b, c):
    import torch

    if a.dtype == torch.float32:
        torch.backends.cuda.matmul.allow_tf32 = True

    def launch() -> None:
        torch.matmul(a, b, out=c)

    return launch


def make(buffers, **_):
    """Op factory: ``buffers.c = buffers.a @ buffers.b`` through cuBLAS."""
    return launcher(buffers.a, buffers.b, buffers.c)
