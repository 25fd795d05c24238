import torch, cupy as cp
from capture.explore import rotated_us, _problems
from kernels.registry import get
m, n = 4096, 4096
probs = _problems(m, n, 3)
src = r'''
extern "C" __global__ void vcopy(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) y[i] = x[i];
}
extern "C" __global__ void vcopy_cs(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) __stcs(y + i, __ldcs(x + i));
}
extern "C" __global__ void vcopy4(const float4* __restrict__ x, float4* __restrict__ y) {
  long long i = (blockIdx.x * (long long)blockDim.x) * 4 + threadIdx.x;
  float4 a = x[i], b = x[i + 256], c = x[i + 512], d = x[i + 768];
  y[i] = a; y[i + 256] = b; y[i + 512] = c; y[i + 768] = d;
}'''
mod = cp.RawModule(code=src)
def k(name, grid, block, p, extra=()):
    f = mod.get_function(name); xs, ys = cp.from_dlpack(p.x), cp.from_dlpack(p.y)
    return lambda: f((grid,), (block,), (xs, ys, *extra))
n4 = m * n // 4
cands = {
  "memcpy": [lambda p=p: p.y.copy_(p.x) for p in probs],
  "torch_add0": [lambda p=p: torch.add(p.x, 0.0, out=p.y) for p in probs],
  "vcopy_gs16": [k("vcopy", 132 * 16, 256, p, (cp.int64(n4),)) for p in probs],
  "vcopy_cs": [k("vcopy_cs", 132 * 16, 256, p, (cp.int64(n4),)) for p in probs],
  "vcopy_full": [k("vcopy", n4 // 256, 256, p, (cp.int64(n4),)) for p in probs],
  "vcopy4": [k("vcopy4", n4 // 1024, 256, p) for p in probs],
}
for name in ["ours", "bulk_t128_s3_b4", "held_t256"]:
    cands[name] = [get(name).setup(p) for p in probs]
for rep in range(2):
    for name, fns in cands.items():
        print(rep, f"{rotated_us(fns):8.2f}", name, flush=True)
