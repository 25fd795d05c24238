import sys, torch, cupy as cp
from kernels.registry import Problem, get
m, n = 4096, 4096
x = torch.randn(m, n, device="cuda"); y = torch.empty_like(x)
g = torch.randn(n, device="cuda"); b = torch.randn(n, device="cuda")
prob = Problem(x, y, g, b)
src = r'''
extern "C" __global__ void vcopy(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) y[i] = x[i];
}'''
k = cp.RawKernel(src, "vcopy")
xs, ys = cp.from_dlpack(x), cp.from_dlpack(y)
names = sys.argv[1].split(",")
fns = {nm: get(nm).setup(prob) for nm in names}
for _ in range(2):
    for nm in names:
        fns[nm]()
    k((132 * 16,), (256,), (xs, ys, cp.int64(m * n // 4)))
    torch.add(x, 0.0, out=y)
torch.cuda.synchronize()
