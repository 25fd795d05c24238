// LayerNorm forward, fp32, over the last dimension of a row-major M x N tensor.
//   y[r, :] = (x[r, :] - mean_r) * rstd_r * gamma + beta,   rstd_r = 1 / sqrt(var_r + eps)
// Rows may be strided (sx, sy in elements). Compiled at run time by NVRTC (through CuPy) for
// the GPU in use; kernels/cuda.py instantiates the templates by name.
//
// The kernels follow the lineage of the LayerNorm gap investigation:
//   ln_block_tree  one block per row, shared-memory tree reduction, three scalar passes
//   ln_warps       WARPS warps per row (warp_row, warp_pair), shuffles, three passes
//   ln_held        a group of TPR threads per row holding the row in registers (SLOTS vectors of
//                  VEC floats each, the last slot masked): one read of x, warp shuffles, one
//                  barrier to combine the warps' (mean, M2) pairs, an approximate rsqrt.
// and the variants measured against it (reports/variants.md):
//   ln_staged      the row staged in shared memory by cp.async
//   ln_bulk        persistent blocks fed by bulk copies (TMA) into shared memory (sm_90)
//   ln_cluster     a row split across a thread-block cluster (sm_90)

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}

// Cache policy for the read of x and the write of y:
//   0: default,  1: read-only non-coherent loads (ld.global.nc),
//   2: streaming (ld.global.cs / st.global.cs, evict-first: x and y are touched once),
//   3: loads that ask the L2 to fetch 256-byte blocks (ld.global.L2::256B, sm_80 and later),
//   4: default loads, streaming stores (st.global.cs),
//   5: streaming loads, default stores (x leaves the L2 first; y stays as long as it can).
template <int CACHE>
__device__ __forceinline__ float4 load4(const float* p) {
  if (CACHE == 1) return __ldg(reinterpret_cast<const float4*>(p));
  if (CACHE == 2 || CACHE == 5) return __ldcs(reinterpret_cast<const float4*>(p));
  if (CACHE == 3) {
    float4 r;
    asm("ld.global.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w) : "l"(p));
    return r;
  }
  return *reinterpret_cast<const float4*>(p);
}
template <int CACHE>
__device__ __forceinline__ float load1(const float* p) {
  if (CACHE == 1) return __ldg(p);
  if (CACHE == 2 || CACHE == 5) return __ldcs(p);
  if (CACHE == 3) {
    float r;
    asm("ld.global.L2::256B.f32 %0, [%1];" : "=f"(r) : "l"(p));
    return r;
  }
  return *p;
}
template <int CACHE>
__device__ __forceinline__ void store4(float* p, float4 v) {
  if (CACHE == 2 || CACHE == 4) __stcs(reinterpret_cast<float4*>(p), v);
  else *reinterpret_cast<float4*>(p) = v;
}
template <int CACHE>
__device__ __forceinline__ void store1(float* p, float v) {
  if (CACHE == 2 || CACHE == 4) __stcs(p, v);
  else *p = v;
}

// Sum of a quad, and the sum of its squared deviations from m.
__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }
__device__ __forceinline__ float sqdev4(float4 v, float m) {
  const float a = v.x - m, b = v.y - m, c = v.z - m, d = v.w - m;
  return (a * a + b * b) + (c * c + d * d);
}

// A row's mean and M2 from its warps' partials, one (sum, M2, count) per lane (zeros on the
// lanes past the last), merged with Chan's formula by every warp itself with shuffles.
__device__ __forceinline__ float2 merge_partials(float sum, float m2, float count, int N) {
  const float mean = warp_sum(sum) / N;
  const float d = count > 0.f ? sum / count - mean : 0.f;
  return make_float2(mean, warp_sum(m2 + count * d * d));
}

// One quad of the output: (v - mean) * rstd * gamma + beta.
__device__ __forceinline__ float4 normalize4(float4 v, float mean, float rstd, float4 g, float4 b) {
  return make_float4((v.x - mean) * rstd * g.x + b.x, (v.y - mean) * rstd * g.y + b.y, (v.z - mean) * rstd * g.z + b.z,
                     (v.w - mean) * rstd * g.w + b.w);
}

// ---------------------------------------------------------------------------------------------
// Step 1: one block of 256 threads per row, tree reduction in shared memory, three passes.
extern "C" __global__ void __launch_bounds__(256) ln_block_tree(
    const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ gamma,
    const float* __restrict__ beta, int M, int N, long long sx, long long sy, float eps) {
  __shared__ float red[256];
  const int t = threadIdx.x;
  const float* xr = x + blockIdx.x * sx;
  float* yr = y + blockIdx.x * sy;

  float s = 0.f;
  for (int i = t; i < N; i += 256) s += xr[i];
  red[t] = s;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (t < k) red[t] += red[t + k];
    __syncthreads();
  }
  const float mean = red[0] / N;
  __syncthreads();

  float q = 0.f;
  for (int i = t; i < N; i += 256) {
    const float d = xr[i] - mean;
    q += d * d;
  }
  red[t] = q;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (t < k) red[t] += red[t + k];
    __syncthreads();
  }
  const float rstd = 1.f / sqrtf(red[0] / N + eps);

  for (int i = t; i < N; i += 256) yr[i] = (xr[i] - mean) * rstd * gamma[i] + beta[i];
}

// ---------------------------------------------------------------------------------------------
// Steps 2 and 3: WARPS warps per row (1: warp_row, 2: warp_pair), three passes over the row.
// VEC = 4 needs N % 4 == 0 and 16-byte aligned rows; VEC = 1 takes any row.
template <int WARPS, int VEC>
__global__ void __launch_bounds__(128) ln_warps(
    const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ gamma,
    const float* __restrict__ beta, int M, int N, long long sx, long long sy, float eps) {
  constexpr int ROWS = 128 / (32 * WARPS);
  constexpr int STEP = 32 * WARPS * VEC;
  __shared__ float part[ROWS][WARPS];
  const int sub = threadIdx.x / (32 * WARPS);
  const int t = threadIdx.x % (32 * WARPS);
  const int lane = threadIdx.x & 31, w = t >> 5;
  const long long row = (long long)blockIdx.x * ROWS + sub;
  const bool active = row < M;
  const float* xr = x + (active ? row : 0) * sx;
  float* yr = y + (active ? row : 0) * sy;

  float s = 0.f;
  if (active)
    for (int i = t * VEC; i < N; i += STEP) {
      if (VEC == 4) {
        s += sum4(load4<0>(xr + i));
      } else {
        s += xr[i];
      }
    }
  s = warp_sum(s);
  if (WARPS > 1) {
    if (lane == 0) part[sub][w] = s;
    __syncthreads();
    s = 0.f;
#pragma unroll
    for (int k = 0; k < WARPS; ++k) s += part[sub][k];
    __syncthreads();
  }
  const float mean = s / N;

  float q = 0.f;
  if (active)
    for (int i = t * VEC; i < N; i += STEP) {
      if (VEC == 4) {
        q += sqdev4(load4<0>(xr + i), mean);
      } else {
        const float a = xr[i] - mean;
        q += a * a;
      }
    }
  q = warp_sum(q);
  if (WARPS > 1) {
    if (lane == 0) part[sub][w] = q;
    __syncthreads();
    q = 0.f;
#pragma unroll
    for (int k = 0; k < WARPS; ++k) q += part[sub][k];
  }
  const float rstd = rsqrtf(q / N + eps);

  if (active)
    for (int i = t * VEC; i < N; i += STEP) {
      if (VEC == 4) {
        const float4 v = load4<0>(xr + i);
        const float4 g = load4<0>(gamma + i), b = load4<0>(beta + i);
        const float4 o = normalize4(v, mean, rstd, g, b);
        store4<0>(yr + i, o);
      } else {
        yr[i] = (xr[i] - mean) * rstd * gamma[i] + beta[i];
      }
    }
}

// ---------------------------------------------------------------------------------------------
// Step 4 and the wide-row path: the row held in registers, one pass over x.
//   TPR threads per row (a multiple of 32), RPB rows per block, SLOTS vectors of VEC floats per
//   thread (thread t's slot k holds columns (k * TPR + t) * VEC ...). Covers N <= TPR*SLOTS*VEC.
//   Each warp reduces its own slice exactly (sum, then the squared deviations from its mean);
//   the warps' (sum, M2, count) are merged with Chan's formula after the only barrier, each
//   warp merging them itself with shuffles.
//   The grid may be smaller than M / RPB: blocks then stride over row groups (grid-stride).
//   MINB > 0 passes a minimum blocks-per-SM to __launch_bounds__, which caps registers.
//   CACHE: the cache policy above in its low three bits; bit 8 loads gamma and beta into
//   registers with x, before the reduction (as Liger's kernel does), instead of after it.
//   NFIX > 0 compiles the row width in (the N argument is then ignored): masks the width
//   fills disappear and divisions by N become products, as Inductor's kernels specialize.
template <int TPR, int SLOTS, int VEC, int RPB, int CACHE, int MINB, int NFIX>
__global__ void __launch_bounds__(TPR * RPB, MINB) ln_held(
    const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ gamma,
    const float* __restrict__ beta, int M, int N_arg, long long sx, long long sy, float eps) {
  const int N = NFIX > 0 ? NFIX : N_arg;
  constexpr int WARPS = TPR / 32;
  constexpr int POLICY = CACHE & 7;
  constexpr bool PRELOAD = (CACHE & 8) != 0;
  __shared__ float3 part[RPB][WARPS > 1 ? WARPS : 1];  // per warp: sum, M2, count
  const int sub = threadIdx.x / TPR;
  const int t = threadIdx.x % TPR;
  const int lane = threadIdx.x & 31, w = t >> 5;

  // Elements this warp covers (the same in every row): its lanes' slots, clipped to N.
  int wn = 0;
#pragma unroll
  for (int k = 0; k < SLOTS; ++k) wn += min(max(N - (k * TPR + w * 32) * VEC, 0), 32 * VEC);

  for (long long base = (long long)blockIdx.x * RPB; base < M; base += (long long)gridDim.x * RPB) {
    const long long row = base + sub;
    const bool active = row < M;
    const float* xr = x + (active ? row : 0) * sx;
    float* yr = y + (active ? row : 0) * sy;

    float v[SLOTS][VEC];
    float4 gk[PRELOAD ? SLOTS : 1], bk[PRELOAD ? SLOTS : 1];  // gamma and beta, when preloaded
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < SLOTS; ++k) {
      const int col = (k * TPR + t) * VEC;
      if (active && col < N) {
        if (VEC == 4) {
          const float4 q = load4<POLICY>(xr + col);
          v[k][0] = q.x; v[k][1 % VEC] = q.y; v[k][2 % VEC] = q.z; v[k][3 % VEC] = q.w;
          if constexpr (PRELOAD) gk[k] = load4<0>(gamma + col), bk[k] = load4<0>(beta + col);
        } else {
          v[k][0] = load1<POLICY>(xr + col);
          if constexpr (PRELOAD) gk[k].x = gamma[col], bk[k].x = beta[col];
        }
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) v[k][j] = 0.f;
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) s += v[k][j];
    }
    const float wsum = warp_sum(s);
    const float wmean = wn > 0 ? wsum / wn : 0.f;
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < SLOTS; ++k) {
      const bool in = (k * TPR + t) * VEC < N;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float d = in ? v[k][j] - wmean : 0.f;
        q += d * d;
      }
    }
    const float wm2 = warp_sum(q);

    float mean = wmean, m2 = wm2;
    if (WARPS > 1) {
      // Every warp merges the row's (at most 32) partials itself, one per lane, with shuffles:
      // a constant cost per thread whatever the block size, and no second barrier.
      if (lane == 0) part[sub][w] = make_float3(wsum, wm2, (float)wn);
      __syncthreads();
      // merge_partials, spelled out: through the helper NVRTC schedules these instructions in
      // another order, and this is the kernel the committed measurements ran.
      const float3 p = lane < WARPS ? part[sub][lane] : make_float3(0.f, 0.f, 0.f);
      mean = warp_sum(p.x) / N;
      const float d = p.z > 0.f ? p.x / p.z - mean : 0.f;
      m2 = warp_sum(p.y + p.z * d * d);
      if (base + (long long)gridDim.x * RPB < M) __syncthreads();  // part[] is reused next round
    }
    const float rstd = rsqrtf(m2 / N + eps);

#pragma unroll
    for (int k = 0; k < SLOTS; ++k) {
      const int col = (k * TPR + t) * VEC;
      if (active && col < N) {
        if (VEC == 4) {
          float4 g, b;
          if constexpr (PRELOAD) g = gk[k], b = bk[k];
          else g = load4<0>(gamma + col), b = load4<0>(beta + col);
          const float4 q = make_float4(v[k][0], v[k][1 % VEC], v[k][2 % VEC], v[k][3 % VEC]);
          store4<POLICY>(yr + col, normalize4(q, mean, rstd, g, b));
        } else {
          float g, b;
          if constexpr (PRELOAD) g = gk[k].x, b = bk[k].x;
          else g = gamma[col], b = beta[col];
          store1<POLICY>(yr + col, (v[k][0] - mean) * rstd * g + b);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The row staged in shared memory by asynchronous copies (cp.async, sm_80 and later): the bytes
// in flight wait in shared memory instead of registers, so registers stay few and more rows are
// in flight per SM. Each thread copies its own quads and reads back only those, so no barrier is
// needed before the reduction; the warps' partials merge as in ln_held. Needs 16-byte aligned
// rows with N % 4 == 0 and N * 4 bytes of dynamic shared memory. CACHE 2 or 4: streaming stores;
// MINB > 0: a minimum of resident blocks for __launch_bounds__ (a register cap).
template <int TPR, int CACHE, int MINB>
__global__ void __launch_bounds__(TPR, MINB) ln_staged(
    const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ gamma,
    const float* __restrict__ beta, int M, int N, long long sx, long long sy, float eps) {
  constexpr int WARPS = TPR / 32;
  extern __shared__ float4 srow[];
  __shared__ float3 part[WARPS];
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  const int quads = N >> 2;
  const float* xr = x + blockIdx.x * sx;
  float* yr = y + blockIdx.x * sy;

  for (int q = t; q < quads; q += TPR) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(srow + q));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(xr + 4 * q) : "memory");
  }
  asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");

  int wn = 0;
  for (int base = w * 32; base < quads; base += TPR) wn += 4 * min(quads - base, 32);
  float s = 0.f;
  for (int q = t; q < quads; q += TPR) {
    s += sum4(srow[q]);
  }
  const float wsum = warp_sum(s);
  const float wmean = wn > 0 ? wsum / wn : 0.f;
  float qs = 0.f;
  for (int q = t; q < quads; q += TPR) qs += sqdev4(srow[q], wmean);
  const float wm2 = warp_sum(qs);

  float mean = wmean, m2 = wm2;
  if (WARPS > 1) {
    if (lane == 0) part[w] = make_float3(wsum, wm2, (float)wn);
    __syncthreads();
    const float3 p = lane < WARPS ? part[lane] : make_float3(0.f, 0.f, 0.f);
    const float2 row = merge_partials(p.x, p.y, p.z, N);
    mean = row.x, m2 = row.y;
  }
  const float rstd = rsqrtf(m2 / N + eps);

  for (int q = t; q < quads; q += TPR) {
    const float4 v = srow[q];
    const float4 g = load4<0>(gamma + 4 * q), b = load4<0>(beta + 4 * q);
    const float4 o = normalize4(v, mean, rstd, g, b);
    store4<CACHE>(yr + 4 * q, o);
  }
}

// ---------------------------------------------------------------------------------------------
// Persistent blocks fed by bulk copies (cp.async.bulk, the TMA engine of sm_90 and later).
// Block b walks rows b, b + gridDim.x, ...; one thread keeps STAGES of them in flight as single
// bulk copies of the whole row into shared memory, each completing on its own mbarrier, while the
// block reduces and writes the oldest. gamma and beta are read once per block and stay in
// registers. __launch_bounds__ asks for BPS resident blocks per SM, the grid's blocks per SM.
// Needs 16-byte aligned rows, N % 4 == 0 and STAGES * N * 4 bytes of dynamic shared memory.
// CACHE (bits): 2, loads hinted evict-first and streaming stores; 4, streaming stores only;
// 8, the normalized row is written back into its stage and leaves by one bulk copy too.
//   Register stores: a stage is refilled right after the barrier that merges the warps'
//   partials, the point where every thread has read it.
//   Bulk stores: a stage is refilled one row later, once the copy out of it has read it.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

template <bool EVICT_FIRST>
__device__ __forceinline__ void bulk_row(unsigned dst, const float* src, unsigned bytes, unsigned bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
  if (EVICT_FIRST)
    asm volatile(
        "{\n\t.reg .b64 policy;\n\tcreatepolicy.fractional.L2::evict_first.b64 policy, 1.0;\n\t"
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], policy;\n\t}" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
  else
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst), "l"(src),
                 "r"(bytes), "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void wait_phase(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
}

template <int TPR, int SLOTS, int STAGES, int CACHE, int BPS>
__global__ void __launch_bounds__(TPR, BPS) ln_bulk(
    const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ gamma,
    const float* __restrict__ beta, int M, int N, long long sx, long long sy, float eps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int WARPS = TPR / 32;
  constexpr bool EVICT_FIRST = (CACHE & 2) != 0, BULK_STORE = (CACHE & 8) != 0;
  constexpr int STORE = CACHE & 6;  // the store4 policy for register stores
  extern __shared__ float4 rows[];  // STAGES rows of N floats
  __shared__ __align__(8) unsigned long long full[STAGES];
  __shared__ float3 part[2][WARPS];  // per warp: sum, M2, count; alternate rounds use alternate halves
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  const int quads = N >> 2;
  const unsigned bytes = static_cast<unsigned>(N) * 4u;
  const int count = blockIdx.x < M ? (M - 1 - blockIdx.x) / gridDim.x + 1 : 0;  // rows of this block
  const float* x0 = x + blockIdx.x * sx;
  const long long xstep = gridDim.x * sx;
  // The stage refilled after row i's barrier, and with which row (none when negative).
  const int lag = BULK_STORE ? 1 : 0;

  if (t == 0) {
    for (int s = 0; s < STAGES; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(full + s)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int s = 0; s < STAGES && s < count; ++s)
      bulk_row<EVICT_FIRST>(smem_addr(rows + s * quads), x0 + s * xstep, bytes, smem_addr(full + s));
  }

  float4 g[SLOTS], b[SLOTS];
  int wn = 0;
#pragma unroll
  for (int k = 0; k < SLOTS; ++k) {
    const int q = k * TPR + t;
    g[k] = q < quads ? reinterpret_cast<const float4*>(gamma)[q] : make_float4(0.f, 0.f, 0.f, 0.f);
    b[k] = q < quads ? reinterpret_cast<const float4*>(beta)[q] : make_float4(0.f, 0.f, 0.f, 0.f);
    wn += 4 * min(max(quads - (k * TPR + w * 32), 0), 32);
  }
  __syncthreads();

  for (int i = 0; i < count; ++i) {
    const int s = i % STAGES;
    wait_phase(smem_addr(full + s), (i / STAGES) & 1);
    float4* stage = rows + s * quads;
    float4 v[SLOTS];
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < SLOTS; ++k) {
      const int q = k * TPR + t;
      v[k] = q < quads ? stage[q] : make_float4(0.f, 0.f, 0.f, 0.f);
      sum += sum4(v[k]);
    }
    const float wsum = warp_sum(sum);
    const float wmean = wn > 0 ? wsum / wn : 0.f;
    float sq = 0.f;
#pragma unroll
    for (int k = 0; k < SLOTS; ++k) {
      if (k * TPR + t < quads) sq += sqdev4(v[k], wmean);
    }
    const float wm2 = warp_sum(sq);
    if (lane == 0) part[i & 1][w] = make_float3(wsum, wm2, (float)wn);
    __syncthreads();  // every thread has read stage s (and, with bulk stores, row i - 1 has left)
    const int done = i - lag, refill = done + STAGES;
    if (t == 0 && done >= 0 && refill < count) {
      if (BULK_STORE) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      bulk_row<EVICT_FIRST>(smem_addr(rows + (done % STAGES) * quads), x0 + refill * xstep, bytes, smem_addr(full + done % STAGES));
    }
    const float3 p = lane < WARPS ? part[i & 1][lane] : make_float3(0.f, 0.f, 0.f);
    const float2 row = merge_partials(p.x, p.y, p.z, N);
    const float mean = row.x, rstd = rsqrtf(row.y / N + eps);

    float* yr = y + (blockIdx.x + (long long)i * gridDim.x) * sy;
#pragma unroll
    for (int k = 0; k < SLOTS; ++k) {
      const int q = k * TPR + t;
      if (q < quads) {
        const float4 o = normalize4(v[k], mean, rstd, g[k], b[k]);
        if (BULK_STORE) stage[q] = o;
        else store4<STORE>(yr + 4 * q, o);
      }
    }
    if (BULK_STORE) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // our writes, visible to the bulk copy
      __syncthreads();
      if (t == 0) {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(yr), "r"(smem_addr(stage)), "r"(bytes)
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      }
    }
  }
  if (BULK_STORE && t == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#else
  __trap();  // the launcher never plans this kernel before sm_90
#endif
}

// ---------------------------------------------------------------------------------------------
// A row split across a thread-block cluster (sm_90 and later): CS blocks of TPB threads share one
// row, block r of the cluster holding slots k of TPB quads at quad (k * CS + r) * TPB, so each
// block touches a few KB, as a plain copy kernel's blocks do. Each warp reduces its slice
// exactly and publishes (sum, M2, count) in its block's shared memory; after one cluster barrier
// every warp reads the cluster's CS * WARPS <= 32 partials through distributed shared memory, one
// per lane, and merges them with Chan's formula as ln_held does. A second barrier, waited on only
// before exit, keeps each block's partials alive until the others have read them. Needs 16-byte
// aligned rows, N % 4 == 0 and a grid of M * CS blocks.
template <int CS, int TPB, int SLOTS, int CACHE>
__global__ void __cluster_dims__(CS, 1, 1) __launch_bounds__(TPB) ln_cluster(
    const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ gamma,
    const float* __restrict__ beta, int M, int N, long long sx, long long sy, float eps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int WARPS = TPB / 32;
  static_assert(CS * WARPS <= 32, "one partial per lane");
  __shared__ float4 part[WARPS];  // per warp: sum, M2, count
  unsigned rank;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  const long long row = blockIdx.x / CS;
  const int quads = N >> 2;
  const float* xr = x + row * sx;
  float* yr = y + row * sy;

  float4 v[SLOTS];
  float s = 0.f;
  int wn = 0;
#pragma unroll
  for (int k = 0; k < SLOTS; ++k) {
    const int base = (k * CS + rank) * TPB, q = base + t;
    v[k] = q < quads ? load4<CACHE>(xr + 4 * q) : make_float4(0.f, 0.f, 0.f, 0.f);
    s += sum4(v[k]);
    wn += 4 * min(max(quads - (base + w * 32), 0), 32);
  }
  const float wsum = warp_sum(s);
  const float wmean = wn > 0 ? wsum / wn : 0.f;
  float sq = 0.f;
#pragma unroll
  for (int k = 0; k < SLOTS; ++k) {
    if ((k * CS + rank) * TPB + t < quads) sq += sqdev4(v[k], wmean);
  }
  const float wm2 = warp_sum(sq);
  if (lane == 0) part[w] = make_float4(wsum, wm2, (float)wn, 0.f);
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");

  float4 p = make_float4(0.f, 0.f, 0.f, 0.f);
  if (lane < CS * WARPS) {
    unsigned remote;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_addr(part + lane % WARPS)), "r"(lane / WARPS));
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(p.x), "=f"(p.y), "=f"(p.z), "=f"(p.w) : "r"(remote) : "memory");
  }
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");  // done reading the others' partials
  const float2 stats = merge_partials(p.x, p.y, p.z, N);
  const float mean = stats.x, rstd = rsqrtf(stats.y / N + eps);

#pragma unroll
  for (int k = 0; k < SLOTS; ++k) {
    const int q = (k * CS + rank) * TPB + t;
    if (q < quads) {
      const float4 g = load4<0>(gamma + 4 * q), b = load4<0>(beta + 4 * q);
      const float4 o = normalize4(v[k], mean, rstd, g, b);
      store4<CACHE>(yr + 4 * q, o);
    }
  }
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");  // keep part[] until all have read it
#else
  __trap();  // the launcher never plans this kernel before sm_90
#endif
}
