// LayerNorm as a training step runs it, over the last dimension of a row-major M x N tensor:
//   ln_fwd        forward in bf16 (or fp32): y = (x - mean) * rstd * gamma + beta, statistics in fp32
//   ln_fwd_loop   the same on fewer blocks, each row group loading its next row while it finishes one
//   ln_bwd        backward: dx, and per-block partial sums of dgamma and dbeta, from x, dy, gamma
//                 and the mean and rstd the forward saved
//   ln_bwd_cols   the partial sums reduced over blocks into dgamma and dbeta
// Element type T is float or bf16 (carried as unsigned short: no header needed under NVRTC);
// every sum is fp32. Rows may be strided (sx, sy in elements). kernels/train_cuda.py plans the
// launches; its rule is stated there.

#define FULL_MASK 0xffffffffu

typedef unsigned short bf16;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(bf16 v) { return __uint_as_float(static_cast<unsigned>(v) << 16); }

template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ bf16 from_f<bf16>(float v) {  // round to nearest even; NaN stays NaN
  const unsigned u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16>(0x7fc0u);
  return static_cast<bf16>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// VEC elements of T from p into v (VEC * sizeof(T) is 16 bytes, or VEC is 1), and back.
template <typename T, int VEC>
__device__ __forceinline__ void load_vec(const T* p, float* v) {
  if constexpr (VEC == 1) {
    v[0] = to_f(*p);
  } else {
    static_assert(VEC * sizeof(T) == 16, "16-byte vectors");
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = to_f(e[j]);
  }
}
template <typename T, int VEC>
__device__ __forceinline__ void store_vec(T* p, const float* v) {
  if constexpr (VEC == 1) {
    *p = from_f<T>(v[0]);
  } else {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int j = 0; j < VEC; ++j) e[j] = from_f<T>(v[j]);
    *reinterpret_cast<uint4*>(p) = raw;
  }
}

// The same store, rounded by the conversion instructions: one cvt.rn.bf16x2.f32 for two bf16 of a
// vector (a goes to the upper half, b to the lower: element 2j + 1, then 2j), cvt.rn.bf16.f32 for
// one. Round to nearest even, as from_f; NaN stays NaN.
template <typename T, int VEC>
__device__ __forceinline__ void store_cvt(T* p, const float* v) {
  if constexpr (sizeof(T) == 4) {
    store_vec<T, VEC>(p, v);
  } else if constexpr (VEC == 1) {
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v[0]));
    *p = r;
  } else {
    static_assert(VEC == 8, "16-byte vectors of bf16");
    unsigned w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[j]) : "f"(v[2 * j + 1]), "f"(v[2 * j]));
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// A barrier for the TPR threads of one row group (named barrier 1 + group; 0 is __syncthreads).
template <int TPR>
__device__ __forceinline__ void group_sync(int group) {
  if constexpr (TPR > 32) asm volatile("bar.sync %0, %1;" ::"r"(group + 1), "r"(TPR) : "memory");
  else __syncwarp();
}

// A slot as the forward holds it: the 16 raw bytes of a vector (4 registers, whatever the element
// type: bf16 stays packed until it is used), or one element as a float.
template <typename T, int VEC>
struct Slot {
  uint4 raw;
  __device__ __forceinline__ void load(const T* p) { raw = *reinterpret_cast<const uint4*>(p); }
  __device__ __forceinline__ void zero() { raw = make_uint4(0u, 0u, 0u, 0u); }
  __device__ __forceinline__ float get(int j) const { return to_f(reinterpret_cast<const T*>(&raw)[j]); }
};
template <typename T>
struct Slot<T, 1> {
  float v;
  __device__ __forceinline__ void load(const T* p) { v = to_f(*p); }
  __device__ __forceinline__ void zero() { v = 0.f; }
  __device__ __forceinline__ float get(int) const { return v; }
};

// Element j of a slot, read with one instruction for bf16 when FAST (the even element of a 32-bit
// word is its low half shifted up, the odd one its high half masked); otherwise Slot::get.
template <bool FAST, typename T, int VEC>
__device__ __forceinline__ float val(const Slot<T, VEC>& s, int j) {
  if constexpr (FAST && sizeof(T) == 2 && VEC > 1) {
    const unsigned w = j >> 1 == 0 ? s.raw.x : j >> 1 == 1 ? s.raw.y : j >> 1 == 2 ? s.raw.z : s.raw.w;
    return __uint_as_float(j & 1 ? w & 0xffff0000u : w << 16);
  } else {
    return s.get(j);
  }
}

// ---------------------------------------------------------------------------------------------
// Forward: ln_held's design (kernels/layernorm.cu) for any element type. TPR threads per row,
// RPB rows per block, SLOTS vectors of VEC elements per thread (thread t's slot k holds columns
// (k * TPR + t) * VEC ...). Each warp reduces its slice exactly (sum, then squared deviations
// from its own mean); the warps' (sum, M2, count) merge with Chan's formula after the only
// barrier. PRELOAD loads gamma and beta with x, before the reduction. NFIX > 0 compiles N in.
// CVT converts bf16 by single instructions both ways (val, store_cvt) rather than in code.
template <typename T, int TPR, int SLOTS, int VEC, int RPB, bool PRELOAD, int NFIX, bool CVT = false>
__global__ void __launch_bounds__(TPR * RPB) ln_fwd(
    const T* __restrict__ x, T* __restrict__ y, const T* __restrict__ gamma, const T* __restrict__ beta,
    int M, int N_arg, long long sx, long long sy, float eps) {
  const int N = NFIX > 0 ? NFIX : N_arg;
  constexpr int WARPS = TPR / 32;
  __shared__ float3 part[RPB][WARPS];
  const int sub = threadIdx.x / TPR, t = threadIdx.x % TPR;
  const int lane = threadIdx.x & 31, w = t >> 5;
  const long long row = (long long)blockIdx.x * RPB + sub;
  const bool active = row < M;
  const T* xr = x + (active ? row : 0) * sx;
  T* yr = y + (active ? row : 0) * sy;

  int wn = 0;  // elements this warp covers
#pragma unroll
  for (int k = 0; k < SLOTS; ++k) wn += min(max(N - (k * TPR + w * 32) * VEC, 0), 32 * VEC);

  Slot<T, VEC> v[SLOTS], g[PRELOAD ? SLOTS : 1], b[PRELOAD ? SLOTS : 1];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < SLOTS; ++k) {
    const int col = (k * TPR + t) * VEC;
    if (active && col < N) {
      v[k].load(xr + col);
      if constexpr (PRELOAD) g[k].load(gamma + col), b[k].load(beta + col);
    } else {
      v[k].zero();
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) s += val<CVT>(v[k], j);
  }
  const float wsum = warp_sum(s);
  const float wmean = wn > 0 ? wsum / wn : 0.f;
  float q = 0.f;
#pragma unroll
  for (int k = 0; k < SLOTS; ++k) {
    const bool in = (k * TPR + t) * VEC < N;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float d = in ? val<CVT>(v[k], j) - wmean : 0.f;
      q += d * d;
    }
  }
  const float wm2 = warp_sum(q);
  float mean = wmean, m2 = wm2;
  if constexpr (WARPS > 1) {
    if (lane == 0) part[sub][w] = make_float3(wsum, wm2, (float)wn);
    __syncthreads();
    const float3 p = lane < WARPS ? part[sub][lane] : make_float3(0.f, 0.f, 0.f);
    mean = warp_sum(p.x) / N;
    const float d = p.z > 0.f ? p.x / p.z - mean : 0.f;
    m2 = warp_sum(p.y + p.z * d * d);
  }
  const float rstd = rsqrtf(m2 / N + eps);

#pragma unroll
  for (int k = 0; k < SLOTS; ++k) {
    const int col = (k * TPR + t) * VEC;
    if (active && col < N) {
      Slot<T, VEC> gk, bk;
      if constexpr (PRELOAD) gk = g[k], bk = b[k];
      else gk.load(gamma + col), bk.load(beta + col);
      float o[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) o[j] = (val<CVT>(v[k], j) - mean) * rstd * val<CVT>(gk, j) + val<CVT>(bk, j);
      if constexpr (CVT) store_cvt<T, VEC>(yr + col, o);
      else store_vec<T, VEC>(yr + col, o);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Forward over a grid of fewer blocks than row groups: each row group strides over the rows
// (gridDim.x * RPB apart) and loads its next row before it reduces and stores the current one,
// so a block's loads stay in flight through its reduction, barrier and stores. The partials are
// double-buffered by row parity, so one barrier a row suffices. Otherwise as ln_fwd.
template <typename T, int TPR, int SLOTS, int VEC, int RPB, bool PRELOAD, int NFIX, bool CVT = false>
__global__ void __launch_bounds__(TPR * RPB) ln_fwd_loop(
    const T* __restrict__ x, T* __restrict__ y, const T* __restrict__ gamma, const T* __restrict__ beta,
    int M, int N_arg, long long sx, long long sy, float eps) {
  const int N = NFIX > 0 ? NFIX : N_arg;
  constexpr int WARPS = TPR / 32;
  __shared__ float3 part[2][RPB][WARPS];
  const int sub = threadIdx.x / TPR, t = threadIdx.x % TPR;
  const int lane = threadIdx.x & 31, w = t >> 5;
  const long long stride = (long long)gridDim.x * RPB;

  int wn = 0;  // elements this warp covers
#pragma unroll
  for (int k = 0; k < SLOTS; ++k) wn += min(max(N - (k * TPR + w * 32) * VEC, 0), 32 * VEC);

  Slot<T, VEC> g[PRELOAD ? SLOTS : 1], b[PRELOAD ? SLOTS : 1], v[SLOTS];
  long long row = (long long)blockIdx.x * RPB + sub;
#pragma unroll
  for (int k = 0; k < SLOTS; ++k) {
    const int col = (k * TPR + t) * VEC;
    if (col < N) {
      if constexpr (PRELOAD) g[k].load(gamma + col), b[k].load(beta + col);
    }
    if (row < M && col < N) v[k].load(x + row * sx + col);
    else v[k].zero();
  }
  int parity = 0;
  for (long long base = (long long)blockIdx.x * RPB; base < M; base += stride, row += stride, parity ^= 1) {
    const long long next = row + stride;
    Slot<T, VEC> nv[SLOTS];
#pragma unroll
    for (int k = 0; k < SLOTS; ++k) {
      const int col = (k * TPR + t) * VEC;
      if (next < M && col < N) nv[k].load(x + next * sx + col);
      else nv[k].zero();
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < SLOTS; ++k)
#pragma unroll
      for (int j = 0; j < VEC; ++j) s += val<CVT>(v[k], j);
    const float wsum = warp_sum(s);
    const float wmean = wn > 0 ? wsum / wn : 0.f;
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < SLOTS; ++k) {
      const bool in = (k * TPR + t) * VEC < N;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float d = in ? val<CVT>(v[k], j) - wmean : 0.f;
        q += d * d;
      }
    }
    const float wm2 = warp_sum(q);
    float mean = wmean, m2 = wm2;
    if constexpr (WARPS > 1) {
      if (lane == 0) part[parity][sub][w] = make_float3(wsum, wm2, (float)wn);
      __syncthreads();
      const float3 p = lane < WARPS ? part[parity][sub][lane] : make_float3(0.f, 0.f, 0.f);
      mean = warp_sum(p.x) / N;
      const float d = p.z > 0.f ? p.x / p.z - mean : 0.f;
      m2 = warp_sum(p.y + p.z * d * d);
    }
    const float rstd = rsqrtf(m2 / N + eps);
    if (row < M) {
      T* yr = y + row * sy;
#pragma unroll
      for (int k = 0; k < SLOTS; ++k) {
        const int col = (k * TPR + t) * VEC;
        if (col < N) {
          Slot<T, VEC> gk, bk;
          if constexpr (PRELOAD) gk = g[k], bk = b[k];
          else gk.load(gamma + col), bk.load(beta + col);
          float o[VEC];
#pragma unroll
          for (int j = 0; j < VEC; ++j) o[j] = (val<CVT>(v[k], j) - mean) * rstd * val<CVT>(gk, j) + val<CVT>(bk, j);
          if constexpr (CVT) store_cvt<T, VEC>(yr + col, o);
          else store_vec<T, VEC>(yr + col, o);
        }
      }
    }
#pragma unroll
    for (int k = 0; k < SLOTS; ++k) v[k] = nv[k];
  }
}

// ---------------------------------------------------------------------------------------------
// Backward, one pass over x and dy. A block is RPB row groups of TPR threads; group r of block b
// takes rows b * RPB + r, then + gridDim.x * RPB, ...; thread t holds SLOTS vectors of VEC
// columns of its row (as in the forward) and accumulates dgamma = sum dy * xhat and dbeta =
// sum dy for those columns, in registers, over its rows. Per row:
//   xhat = (x - mean) * rstd, wdy = gamma * dy,
//   dx = (wdy - xhat * c1 - c2) * rstd with c1 = mean(xhat * wdy), c2 = mean(wdy) over the row,
// the two sums reduced by shuffles and one named barrier of the group (partials double-buffered
// by row parity, so no second barrier). At the end the groups' accumulators are summed through
// shared memory and the block writes one row of partials: part[b, :] (dgamma), part[G + b, :]
// (dbeta), with G = gridDim.x. Launch bounds ask for one block of TPR * RPB threads per SM.
template <typename T, int TPR, int SLOTS, int VEC, int RPB>
__global__ void __launch_bounds__(TPR * RPB, 1) ln_bwd(
    const T* __restrict__ x, const T* __restrict__ dy, const T* __restrict__ gamma, const float* __restrict__ mean,
    const float* __restrict__ rstd, T* __restrict__ dx, float* __restrict__ part, int M, int N, long long sx,
    long long sdy, long long sdx) {
  constexpr int WARPS = TPR / 32;
  __shared__ float2 red[2][RPB][WARPS];
  extern __shared__ float acc[];  // RPB x N floats, to sum the groups' accumulators (RPB > 1)
  const int group = threadIdx.x / TPR, t = threadIdx.x % TPR;
  const int lane = threadIdx.x & 31, w = t >> 5;
  const float inv_n = 1.f / N;

  float dg[SLOTS][VEC], db[SLOTS][VEC];
#pragma unroll
  for (int k = 0; k < SLOTS; ++k)
#pragma unroll
    for (int j = 0; j < VEC; ++j) dg[k][j] = 0.f, db[k][j] = 0.f;

  int parity = 0;
  for (long long row = (long long)blockIdx.x * RPB + group; row < M; row += (long long)gridDim.x * RPB) {
    const float mu = mean[row], rs = rstd[row];
    float xh[SLOTS][VEC], d[SLOTS][VEC];  // xhat and dy; gamma * dy is formed again below (gamma stays in L1)
    float s1 = 0.f, s2 = 0.f;
#pragma unroll
    for (int k = 0; k < SLOTS; ++k) {
      const int col = (k * TPR + t) * VEC;
      if (col < N) {
        float gk[VEC];
        load_vec<T, VEC>(x + row * sx + col, xh[k]);
        load_vec<T, VEC>(dy + row * sdy + col, d[k]);
        load_vec<T, VEC>(gamma + col, gk);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          xh[k][j] = (xh[k][j] - mu) * rs;
          const float wdy = gk[j] * d[k][j];
          s1 += xh[k][j] * wdy;
          s2 += wdy;
        }
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) xh[k][j] = 0.f, d[k][j] = 0.f;
      }
    }
    s1 = warp_sum(s1), s2 = warp_sum(s2);
    if constexpr (WARPS > 1) {
      if (lane == 0) red[parity][group][w] = make_float2(s1, s2);
      group_sync<TPR>(group);
      const float2 p = lane < WARPS ? red[parity][group][lane] : make_float2(0.f, 0.f);
      s1 = warp_sum(p.x), s2 = warp_sum(p.y);
      parity ^= 1;
    }
    const float c1 = s1 * inv_n, c2 = s2 * inv_n;
#pragma unroll
    for (int k = 0; k < SLOTS; ++k) {
      const int col = (k * TPR + t) * VEC;
      if (col < N) {
        float gk[VEC], o[VEC];
        load_vec<T, VEC>(gamma + col, gk);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          o[j] = (gk[j] * d[k][j] - xh[k][j] * c1 - c2) * rs;
          dg[k][j] += d[k][j] * xh[k][j];
          db[k][j] += d[k][j];
        }
        store_vec<T, VEC>(dx + row * sdx + col, o);
      }
    }
  }

  // The groups' accumulators into one row of partials per block: dgamma, then dbeta.
  const int G = gridDim.x;
#pragma unroll
  for (int which = 0; which < 2; ++which) {
    float* out = part + (long long)(which * G + blockIdx.x) * N;
    if constexpr (RPB == 1) {
#pragma unroll
      for (int k = 0; k < SLOTS; ++k) {
        const int col = (k * TPR + t) * VEC;
        if (col < N)
#pragma unroll
          for (int j = 0; j < VEC; ++j) out[col + j] = which ? db[k][j] : dg[k][j];
      }
    } else {
      __syncthreads();  // acc[] free (the previous round read it)
#pragma unroll
      for (int k = 0; k < SLOTS; ++k) {
        const int col = (k * TPR + t) * VEC;
        if (col < N)
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc[group * N + col + j] = which ? db[k][j] : dg[k][j];
      }
      __syncthreads();
      for (int col = threadIdx.x; col < N; col += TPR * RPB) {
        float sum = 0.f;
#pragma unroll
        for (int r = 0; r < RPB; ++r) sum += acc[r * N + col];
        out[col] = sum;
      }
    }
  }
}

// dgamma[c] = sum over the G rows of part[:, c], dbeta from the next G rows. Blocks of 32 columns
// x ROWS threads: each thread sums every ROWS-th partial of its column, then the ROWS sums of a
// column are added through shared memory.
template <typename T, int ROWS>
__global__ void __launch_bounds__(32 * ROWS) ln_bwd_cols(const float* __restrict__ part, int G, int N, T* __restrict__ dgamma,
                                                         T* __restrict__ dbeta) {
  __shared__ float sums[2][ROWS][33];
  const int c = blockIdx.x * 32 + threadIdx.x % 32, r = threadIdx.x / 32;
  float a = 0.f, b = 0.f;
  if (c < N)
    for (int i = r; i < G; i += ROWS) a += part[(long long)i * N + c], b += part[(long long)(G + i) * N + c];
  sums[0][r][threadIdx.x % 32] = a;
  sums[1][r][threadIdx.x % 32] = b;
  __syncthreads();
  if (r < 2 && c < N) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ROWS; ++i) s += sums[r][i][threadIdx.x % 32];
    (r == 0 ? dgamma : dbeta)[c] = from_f<T>(s);
  }
}
