// A benchmark in plain CUDA C++ that follows the nsys-tools capture convention, so that
// `nsys-tools capture run -- ./softmax ...` can capture it and `nsys-tools report --issue` read it.
//
// Row softmax, fp32, M x N: y[r, :] = exp(x[r, :] - max_r) / sum(exp(x[r, :] - max_r)).
//   block   one block of 256 threads per row, three passes over the row (max, sum, write),
//           shared-memory reductions: the control
//   online  one warp per row, the running maximum and sum in one pass (rescaling the sum when
//           the maximum grows), then a second pass writes: ours
//
// The convention (README, "Bring your own kernel"):
//   - each timed range is an NVTX range named <op>/<impl>/<shape>/<l2>/r<round>/n<calls>, the
//     calls being how many it makes (each call's GPU operations are then summed into one time);
//   - every round runs every implementation once, the order rotated by one each round;
//   - the buffers it times are allocated before timing; with --l2 cold, the inputs rotate over
//     enough sets to exceed twice the L2, so no call finds its input in cache;
//   - the timed rounds sit between cudaProfilerStart and cudaProfilerStop.
//
// Build (NVTX3 is header-only and ships with the CUDA toolkit):
//   nvcc -O3 -std=c++17 -arch=native -o softmax softmax.cu -ldl
// Run under nsys-tools:
//   nsys-tools capture run --control block --outputs reuse -- ./softmax --shapes 4096x1000,8192x4096

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#define CK(call)                                                                             \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

constexpr unsigned FULL = 0xffffffffu;
constexpr int BLOCK_THREADS = 256;
constexpr int WARPS_PER_BLOCK = 4;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
  return v;
}

// Reduce across the block: every warp reduces, warp 0 reduces the warps' results, all read it.
template <bool MAX>
__device__ float block_reduce(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = MAX ? warp_max(v) : warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < BLOCK_THREADS / 32 ? shared[lane] : (MAX ? -INFINITY : 0.f);
    w = MAX ? warp_max(w) : warp_sum(w);
    if (lane == 0) shared[0] = w;
  }
  __syncthreads();
  const float out = shared[0];
  __syncthreads();  // shared[] is reused by the next reduction
  return out;
}

__global__ void __launch_bounds__(BLOCK_THREADS) softmax_block(const float* __restrict__ x, float* __restrict__ y, int n) {
  __shared__ float shared[32];
  const float* row = x + static_cast<size_t>(blockIdx.x) * n;
  float* out = y + static_cast<size_t>(blockIdx.x) * n;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < n; i += BLOCK_THREADS) m = fmaxf(m, row[i]);
  m = block_reduce<true>(m, shared);
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += BLOCK_THREADS) s += expf(row[i] - m);
  const float inv = 1.f / block_reduce<false>(s, shared);
  for (int i = threadIdx.x; i < n; i += BLOCK_THREADS) out[i] = expf(row[i] - m) * inv;
}

__global__ void softmax_online(const float* __restrict__ x, float* __restrict__ y, int rows, int n) {
  const int r = blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (r >= rows) return;
  const float* row = x + static_cast<size_t>(r) * n;
  float* out = y + static_cast<size_t>(r) * n;
  float m = -INFINITY, s = 0.f;
  for (int i = lane; i < n; i += 32) {
    const float v = row[i];
    if (v > m) {
      s = s * expf(m - v) + 1.f;  // exp(-inf) = 0 on the first element
      m = v;
    } else {
      s += expf(v - m);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {  // merge (max, sum) pairs across the warp
    const float om = __shfl_xor_sync(FULL, m, o), os = __shfl_xor_sync(FULL, s, o);
    const float nm = fmaxf(m, om);
    if (nm != -INFINITY) s = (m == -INFINITY ? 0.f : s * expf(m - nm)) + (om == -INFINITY ? 0.f : os * expf(om - nm));
    m = nm;
  }
  const float inv = 1.f / s;
  for (int i = lane; i < n; i += 32) out[i] = expf(row[i] - m) * inv;
}

struct Options {
  std::vector<std::pair<int, int>> shapes{{4096, 1000}, {8192, 4096}};
  std::vector<std::string> impls{"online", "block"};
  int rounds = 3, iters = 100, warmup = 20;
  std::string l2 = "cold", outputs = "reuse";
};

static void usage() {
  std::fprintf(stderr,
               "usage: softmax [--shapes MxN,...] [--impls online,block] [--rounds 3] [--iters 100] [--warmup 20]\n"
               "               [--l2 cold|warm] [--outputs reuse|rotate]\n");
  std::exit(2);
}

static std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find(',', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

static Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage();
    const std::string v = argv[++i];
    if (a == "--shapes") {
      o.shapes.clear();
      for (const auto& s : split(v)) {
        int m = 0, n = 0;
        if (std::sscanf(s.c_str(), "%dx%d", &m, &n) != 2 || m < 1 || n < 1) usage();
        o.shapes.push_back({m, n});
      }
    } else if (a == "--impls") {
      o.impls = split(v);
    } else if (a == "--rounds") {
      o.rounds = std::atoi(v.c_str());
    } else if (a == "--iters") {
      o.iters = std::atoi(v.c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atoi(v.c_str());
    } else if (a == "--l2") {
      o.l2 = v;
    } else if (a == "--outputs") {
      o.outputs = v;
    } else {
      usage();
    }
  }
  for (const auto& name : o.impls)
    if (name != "online" && name != "block") usage();
  if (o.rounds < 1 || o.iters < 1 || o.warmup < 0 || (o.l2 != "cold" && o.l2 != "warm") ||
      (o.outputs != "reuse" && o.outputs != "rotate"))
    usage();
  return o;
}

static void launch(const std::string& impl, const float* x, float* y, int m, int n) {
  if (impl == "block")
    softmax_block<<<m, BLOCK_THREADS>>>(x, y, n);
  else
    softmax_online<<<(m + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK, 32 * WARPS_PER_BLOCK>>>(x, y, m, n);
}

struct Shape {
  int m, n;
  std::string name;
  std::vector<float*> x, y;  // y holds one buffer (reuse) or one per set (rotate)
};

// Relative Frobenius error of y against a float64 softmax of x.
static double check(const float* dx, const float* dy, int m, int n) {
  std::vector<float> x(static_cast<size_t>(m) * n), y(x.size());
  CK(cudaMemcpy(x.data(), dx, x.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  std::vector<double> e(n);
  for (int r = 0; r < m; ++r) {
    const float* row = &x[static_cast<size_t>(r) * n];
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(row[i]));
    for (int i = 0; i < n; ++i) s += (e[i] = std::exp(row[i] - mx));
    for (int i = 0; i < n; ++i) {
      const double ref = e[i] / s, got = y[static_cast<size_t>(r) * n + i];
      if (!std::isfinite(got)) return INFINITY;
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  }
  return std::sqrt(num / den);
}

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  int dev = 0, l2 = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  std::mt19937 gen(0);
  std::normal_distribution<float> normal(0.f, 4.f);

  std::vector<Shape> shapes;
  bool ok = true;
  for (const auto& [m, n] : o.shapes) {
    Shape s{m, n, std::to_string(m) + "x" + std::to_string(n), {}, {}};
    const size_t bytes = static_cast<size_t>(m) * n * sizeof(float);
    const size_t rotating = bytes * (o.outputs == "rotate" ? 2 : 1);
    const int sets = o.l2 == "warm" ? 1 : std::max<int>(2, static_cast<int>((2.0 * l2 + rotating - 1) / rotating) + 1);
    std::vector<float> host(static_cast<size_t>(m) * n);
    for (int k = 0; k < sets; ++k) {
      for (auto& v : host) v = normal(gen);
      float* x = nullptr;
      CK(cudaMalloc(&x, bytes));
      CK(cudaMemcpy(x, host.data(), bytes, cudaMemcpyHostToDevice));
      s.x.push_back(x);
      if (o.outputs == "rotate" || k == 0) {
        float* y = nullptr;
        CK(cudaMalloc(&y, bytes));
        s.y.push_back(y);
      }
    }
    for (const auto& impl : o.impls) {  // outputs poisoned (all bits set: NaN) before the check
      CK(cudaMemset(s.y[0], 0xff, bytes));
      launch(impl, s.x[0], s.y[0], m, n);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      const double err = check(s.x[0], s.y[0], m, n);
      std::printf("check softmax/%s/%s: relative error %.2e over %d buffer sets\n", impl.c_str(), s.name.c_str(), err,
                  sets);
      ok = ok && err < 1e-5;
    }
    shapes.push_back(std::move(s));
  }
  if (!ok) {
    std::fprintf(stderr, "an implementation failed its check: not timing\n");
    return 1;
  }

  long calls = 0;
  auto call = [&](const Shape& s, const std::string& impl) {
    const size_t k = static_cast<size_t>(calls++);
    launch(impl, s.x[k % s.x.size()], s.y[k % s.y.size()], s.m, s.n);
  };
  for (const auto& s : shapes)
    for (const auto& impl : o.impls)
      for (int i = 0; i < o.warmup; ++i) call(s, impl);
  CK(cudaDeviceSynchronize());

  CK(cudaProfilerStart());
  for (const auto& s : shapes) {
    for (int r = 0; r < o.rounds; ++r) {
      const size_t count = o.impls.size();
      for (size_t j = 0; j < count; ++j) {
        const std::string& impl = o.impls[(j + r) % count];  // rotated by one each round
        const std::string range =
            "softmax/" + impl + "/" + s.name + "/" + o.l2 + "/r" + std::to_string(r) + "/n" + std::to_string(o.iters);
        nvtxRangePushA(range.c_str());
        for (int i = 0; i < o.iters; ++i) call(s, impl);
        nvtxRangePop();
      }
    }
  }
  CK(cudaDeviceSynchronize());
  CK(cudaGetLastError());
  CK(cudaProfilerStop());

  for (auto& s : shapes) {
    for (float* p : s.x) CK(cudaFree(p));
    for (float* p : s.y) CK(cudaFree(p));
  }
  return 0;
}
