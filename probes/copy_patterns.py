"""How fast can a kernel with our access pattern copy 4096x4096 fp32, under the sweep's rotation?

    PYTHONPATH=. python3 probes/copy_patterns.py > reports/probes/copy-patterns.txt   # on the H200

Times back-to-back calls rotating over three buffer sets (192 MiB each way, past twice the
60 MB L2, so every call finds the previous call's output dirty in the L2), as
``nsys_tools.capture.explore --timer rotate`` does: the mean per call, launch gaps included, median of 7
batches of 60, twice. The copies: cudaMemcpy D2D (the ``copy`` control); PyTorch's elementwise
kernel (``torch.add(x, 0, out=y)``); a grid-stride float4 copy with 16 blocks per SM, plain and
with streaming loads and stores; a float4 copy with one vector per thread over a full grid; and a
copy shaped like ``ln_held<256,4,...>``: each 256-thread block moves one 16 KB row, four float4
per thread, all loads before any store. Then our kernels.
"""

from __future__ import annotations

import cupy as cp
import torch

from nsys_tools.capture.explore import _problems, rotated_us
from nsys_tools.kernels.registry import get

M, N = 4096, 4096
SOURCE = r"""
extern "C" __global__ void grid_stride(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x)
    y[i] = x[i];
}
extern "C" __global__ void grid_stride_cs(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x)
    __stcs(y + i, __ldcs(x + i));
}
extern "C" __global__ void row_of_quads(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  const long long i = blockIdx.x * 1024LL + threadIdx.x;
  const float4 a = x[i], b = x[i + 256], c = x[i + 512], d = x[i + 768];
  y[i] = a; y[i + 256] = b; y[i + 512] = c; y[i + 768] = d;
}
"""


def main() -> None:
    module = cp.RawModule(code=SOURCE)
    probs = _problems(M, N, 3)
    n4 = M * N // 4
    sms = torch.cuda.get_device_properties(0).multi_processor_count

    def kernel(name: str, grid: int, block: int):
        f = module.get_function(name)
        fns = []
        for p in probs:
            args = (cp.from_dlpack(p.x), cp.from_dlpack(p.y), cp.int64(n4))
            fns.append(lambda f=f, args=args: f((grid,), (block,), args))
        return fns

    cases = {
        "memcpy D2D (copy control)": [lambda p=p: p.y.copy_(p.x) for p in probs],
        "torch elementwise copy": [lambda p=p: torch.add(p.x, 0.0, out=p.y) for p in probs],
        "grid-stride float4, 16 blocks/SM": kernel("grid_stride", 16 * sms, 256),
        "grid-stride float4 .cs, 16 blocks/SM": kernel("grid_stride_cs", 16 * sms, 256),
        "one float4 per thread, full grid": kernel("grid_stride", n4 // 256, 256),
        "16 KB row per 256-thread block (ln_held's pattern)": kernel("row_of_quads", n4 // 1024, 256),
    }
    for name in ("ours", "bulk_t128_s3_b4", "held_t256"):
        cases[f"LayerNorm {name}"] = [get(name).setup(p) for p in probs]
    print(f"{torch.cuda.get_device_name()}, {M}x{N} fp32, mean µs per call over 3 rotated buffer sets")
    for rep in range(2):
        for name, fns in cases.items():
            print(f"{rep}  {rotated_us(fns):8.2f}  {name}", flush=True)


if __name__ == "__main__":
    main()
