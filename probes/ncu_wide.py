"""The workload Nsight Compute profiles in ``ncu-wide.txt``: at wide rows, the fp32 dispatcher's
kernel (``ours``), explicit plans given on the command line, Liger's forward kernel, and two
copies (a grid-stride float4 copy and PyTorch's elementwise copy), each over rotated buffer
sets (16, 2 GB together) so that, as in a sweep, no kernel finds its inputs in the L2.

    PYTHONPATH=. $NCU --clock-control none --cache-control none -k regex:"ln_|copy|elementwise|_layer_norm" \
        --metrics <see reports/variants.md> python3 probes/ncu_wide.py 512x16384,1024x8192 ours,held_t1024_c2

Each kernel runs twice per shape (the second, on other buffers, is the one to read).
"""

from __future__ import annotations

import sys

import cupy as cp
import torch

from nsys_tools.kernels.liger_ln import make as liger
from nsys_tools.kernels.registry import get, problem

SETS = 16
SOURCE = r"""
extern "C" __global__ void grid_stride_copy(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x)
    y[i] = x[i];
}
"""


def main() -> None:
    shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[1].split(",")]
    names = sys.argv[2].split(",")
    copy = cp.RawModule(code=SOURCE).get_function("grid_stride_copy")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for m, n in shapes:
        gamma, beta = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        sets = [problem(torch.randn(m, n, device="cuda"), torch.empty(m, n, device="cuda"), gamma, beta) for _ in range(SETS)]
        launches = [[get(name).setup(p) for p in sets] for name in names] + [[liger(p) for p in sets]]
        k = 0
        for _ in range(2):
            for per_set in launches:
                per_set[k % SETS]()
                k += 1
            p = sets[k % SETS]
            copy((16 * sms,), (256,), (cp.from_dlpack(p.x), cp.from_dlpack(p.y), cp.int64(m * n // 4)))
            k += 1
            p = sets[k % SETS]
            torch.add(p.x, 0.0, out=p.y)
            k += 1
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
