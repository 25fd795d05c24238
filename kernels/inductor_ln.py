"""The Inductor control: what ``torch.compile`` makes of ``F.layer_norm``.

One compiled function per shape, with dynamic shapes off, compiled in ``setup`` (the first
call), never in a timed call. The function is ``y.copy_(F.layer_norm(x, ...))`` on the
preallocated ``y``: Inductor keeps the input mutation in the graph and stores the normalized row
straight into ``y`` from the one kernel it generates (one kernel per call, checked on the GPU by
``tests/test_kernels_gpu.py``), so this control honours the output policy like ours does.

Compiled kernels land in ``$TORCHINDUCTOR_CACHE_DIR`` (default here: ``~/.cache/nsys-tools/
inductor``, stable across processes, so that each shape's process of a sweep reuses what an
earlier one compiled). Set ``TORCH_LOGS=output_code`` to print the generated Triton.
"""

from __future__ import annotations

import os
from pathlib import Path

from nsys_tools.plugin import Buffers

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
DEFAULT_CACHE = Path.home() / ".cache" / "nsys-tools" / "inductor"
# Every shape and row stride is one more compiled entry of the same function; Dynamo's default
# limit (8) would silently fall back to eager after that.
RECOMPILE_LIMIT = 256


def layer_norm_into(x, w, b, y, eps: float):
    import torch.nn.functional as F

    return y.copy_(F.layer_norm(x, (x.shape[-1],), w, b, eps))


def configure_dynamo() -> None:
    """The cache folder and a recompile limit that fits a sweep's shapes (also for the
    backward's Inductor control)."""
    import torch

    os.environ.setdefault(CACHE_ENV, str(DEFAULT_CACHE))
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), RECOMPILE_LIMIT))


def _compiled():
    import torch

    configure_dynamo()
    return torch.compile(layer_norm_into, dynamic=False, fullgraph=True)


def make(problem: Buffers):
    """Compile for ``problem``'s shape, strides and eps, then return the launcher."""
    import torch

    fn = _compiled()
    x, y, w, b, eps = problem.x, problem.y, problem.gamma, problem.beta, problem.eps
    with torch.no_grad():
        fn(x, w, b, y, eps)

    def launch() -> None:
        with torch.no_grad():
            fn(x, w, b, y, eps)

    return launch
