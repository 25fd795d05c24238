"""The workload Nsight Compute profiles in ``ncu.txt``: our kernels and two copies, 4096x4096 fp32.

    NCU=/opt/nvidia/nsight-compute/2025.3.1/ncu   # the bundle's ncu; the clocks are left alone
    PYTHONPATH=. $NCU --clock-control none --cache-control all -k regex:"ln_|copy|elementwise" \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,\
lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,\
launch__registers_per_thread \
        python3 probes/ncu_kernels.py ours,bulk_t128_s3_b4 > reports/probes/ncu.txt

``--cache-control all`` flushes and invalidates the caches before every kernel: these are
clean-L2 numbers, unlike a sweep's, where each call finds the previous call's output dirty in
the L2. Each kernel runs twice.
"""

from __future__ import annotations

import sys

import cupy as cp
import torch

from nsys_tools.kernels.registry import get, problem

M, N = 4096, 4096
SOURCE = r"""
extern "C" __global__ void grid_stride_copy(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x)
    y[i] = x[i];
}
"""


def main() -> None:
    x, y = torch.randn(M, N, device="cuda"), torch.empty(M, N, device="cuda")
    prob = problem(x, y, torch.randn(N, device="cuda"), torch.randn(N, device="cuda"))
    copy = cp.RawModule(code=SOURCE).get_function("grid_stride_copy")
    args = (cp.from_dlpack(x), cp.from_dlpack(y), cp.int64(M * N // 4))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    launches = [get(name).setup(prob) for name in sys.argv[1].split(",")]
    for _ in range(2):
        for launch in launches:
            launch()
        copy((16 * sms,), (256,), args)
        torch.add(x, 0.0, out=y)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
