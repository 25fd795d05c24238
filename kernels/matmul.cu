// Matrix multiplication C = A * B, row-major A (M x K), B (K x N), C (M x N), any M, N, K >= 1.
//   bf16: bf16 inputs and output, fp32 accumulation.
//   fp32: fp32 inputs and output, fp32 accumulation; the tensor-core kernels multiply in TF32
//         (the tensor cores read the top 19 bits of each fp32 operand: truncated, not rounded),
//         the SIMT kernel in plain fp32.
// Compiled at run time by NVRTC (through CuPy); kernels/matmul_cuda.py instantiates the templates
// by name and plans the launches. The lineage (reports/matmul-variants.md):
//   mm_simt    tiled shared memory, FFMA, a register tile of TM x TN outputs per thread
//   mm_mma     tensor cores through mma.sync (m16n8k16 bf16, m16n8k8 tf32): ldmatrix fragments,
//              a cp.async pipeline of STAGES tiles, rows padded by 16 or 32 bytes so that
//              ldmatrix and the fragment loads are free of bank conflicts; ALIGNED = false loads
//              elements one by one (rows not 16-byte aligned)
//   mm_wgmma_bf16 / mm_wgmma_tf32   sm_90a: tiles brought by the tensor memory accelerator (TMA,
//              128-byte swizzle) into a ring of STAGES shared-memory stages, one producer warp
//              group and two consumer warp groups issuing wgmma (warp specialization),
//              full/empty mbarriers per stage; tiles 128, 192 or 256 wide (the 192-wide ones
//              give tile counts that fill the last wave where 256 leaves it part empty); both
//              optionally keep one wgmma group in flight (KEEP), bf16 can store C through shared
//              memory and TMA (EPI); a block loops over tiles, so a grid of one block per SM is
//              persistent.
//              No setmaxnreg: ptxas allocates every warp group the launch's 168 registers
//              (65536 / 384) whatever setmaxnreg would ask at run time.
//              TF32 wgmma reads only K-major operands from shared memory, and B is N-major here,
//              so the TF32 kernel computes C^T = B^T A^T: B^T comes from registers (loaded from
//              the swizzled tile), A^T is K-major in shared memory; the design of CUTLASS's
//              register-sourced sm90 mainloop.

typedef unsigned short bf16;  // storage only; arithmetic is fp32

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(bf16 v) { return __uint_as_float(static_cast<unsigned>(v) << 16); }

__device__ __forceinline__ void store1(float* p, float v) { *p = v; }
__device__ __forceinline__ void store1(bf16* p, float v) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
  *p = h;
}
__device__ __forceinline__ void store2(float* p, float lo, float hi) { *reinterpret_cast<float2*>(p) = make_float2(lo, hi); }
__device__ __forceinline__ void store2(bf16* p, float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));  // hi to the upper half
  *reinterpret_cast<unsigned*>(p) = r;
}

// C[row, col] and C[row, col + 1], guarded. PAIRS: N is even and C 8-byte aligned, so a pair
// starting at an even column is one aligned store.
template <typename T>
__device__ __forceinline__ void store_pair(T* C, int M, int N, int row, int col, float v0, float v1, bool pairs) {
  if (row >= M) return;
  T* p = C + static_cast<size_t>(row) * N + col;
  if (pairs) {
    if (col < N) store2(p, v0, v1);
  } else {
    if (col < N) store1(p, v0);
    if (col + 1 < N) store1(p + 1, v1);
  }
}

// Tile (tm, tn) of block `pid`: tiles visited in groups of GROUP tile rows, column by column
// within a group, so that the blocks resident at once share rows of A and columns of B in the
// L2 (the Triton tutorial's grouped ordering).
__device__ __forceinline__ void tile_of(int pid, int tiles_m, int tiles_n, int group, int& tm, int& tn) {
  const int in_group = group * tiles_n;
  const int first = (pid / in_group) * group;
  const int rows = min(tiles_m - first, group);
  tm = first + (pid % in_group) % rows;
  tn = (pid % in_group) / rows;
}

// ---------------------------------------------------------------------------------------------
// 1. Tiled shared memory, SIMT: BM x BN outputs per block of (BM/TM)*(BN/TN) threads, each
// thread a TM x TN register tile; A is stored transposed (k-major) so both operands are read as
// rows of floats; BK columns of A and rows of B per step.
template <typename T, int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN)) mm_simt(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                                                                int M, int N, int K, int group, int pairs) {
  constexpr int THREADS = (BM / TM) * (BN / TN);
  constexpr int LDA = BM + 4;  // padding: the transposing stores spread over the banks
  __shared__ __align__(16) float As[BK * LDA];
  __shared__ __align__(16) float Bs[BK * BN];
  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  int tm, tn;
  tile_of(blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN, group, tm, tn);
  const int m0 = tm * BM, n0 = tn * BN;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int i = tid; i < BM * BK; i += THREADS) {
      const int r = i / BK, c = i % BK, gm = m0 + r, gk = k0 + c;
      As[c * LDA + r] = (gm < M && gk < K) ? to_f32(A[static_cast<size_t>(gm) * K + gk]) : 0.f;
    }
#pragma unroll
    for (int i = tid; i < BK * BN; i += THREADS) {
      const int r = i / BN, c = i % BN, gk = k0 + r, gn = n0 + c;
      Bs[r * BN + c] = (gk < K && gn < N) ? to_f32(B[static_cast<size_t>(gk) * N + gn]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k * LDA + ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k * BN + tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; j += 2)
      store_pair(C, M, N, m0 + ty * TM + i, n0 + tx * TN + j, acc[i][j], acc[i][j + 1], pairs != 0);
}

// ---------------------------------------------------------------------------------------------
// 2. Tensor cores through mma.sync.

__device__ __forceinline__ unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
  // src-size 0 writes 16 zero bytes and reads nothing
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ unsigned lds32(unsigned addr) {
  unsigned v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

// D += A * B for one 16 x 8 tile: bf16 (k = 16) or tf32 (k = 8) operands, fp32 accumulators.
__device__ __forceinline__ void mma_16x8(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], bf16) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_16x8(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], float) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// BM x BN outputs per block of WM x WN warps, each warp a (BM/WM) x (BN/WN) tile of 16 x 8 mma
// tiles; BK columns of A (64 bytes) per stage. Shared memory per stage: A as BM rows of BK
// elements plus 16 bytes, B as BK rows of BN elements plus PADB: ldmatrix reads 8 rows of 16
// bytes whose starts then fall on distinct banks, and the tf32 B fragments (4 rows x 8 columns
// per warp) too.
template <typename T, int BM, int BN, int WM, int WN, int STAGES, bool ALIGNED>
__global__ void __launch_bounds__(WM * WN * 32) mm_mma(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                                                       int N, int K, int group, int pairs) {
  constexpr int E = sizeof(T);
  constexpr int THREADS = WM * WN * 32;
  constexpr int BK = 64 / E;              // 32 bf16 or 16 fp32: 64 bytes of each row of A
  constexpr int KSTEP = E == 2 ? 16 : 8;  // the mma's k
  constexpr int CHUNK = 16 / E;           // elements in 16 bytes
  constexpr int LDA = BK + CHUNK;
  constexpr int LDB = BN + 8;       // 16 bytes (bf16) or 32 bytes (fp32) of padding
  constexpr int A_STAGE = BM * LDA, B_STAGE = BK * LDB;
  constexpr int WTM = BM / WM, WTN = BN / WN, MI = WTM / 16, NJ = WTN / 8;
  static_assert(NJ % 2 == 0 && MI >= 1, "warp tile");

  extern __shared__ __align__(1024) unsigned char smem[];
  T* As = reinterpret_cast<T*>(smem);
  T* Bs = As + STAGES * A_STAGE;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / WN, wn = warp % WN;
  const int g = lane / 4, t = lane % 4;
  int tm, tn;
  tile_of(blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN, group, tm, tn);
  const int m0 = tm * BM, n0 = tn * BN;
  const int KT = (K + BK - 1) / BK;

  auto load_tile = [&](int stage, int kt) {
    const int k0 = kt * BK;
    T* as = As + stage * A_STAGE;
    T* bs = Bs + stage * B_STAGE;
    if (ALIGNED) {
#pragma unroll
      for (int i = tid; i < BM * BK / CHUNK; i += THREADS) {
        const int r = i / (BK / CHUNK), c = (i % (BK / CHUNK)) * CHUNK, gm = m0 + r, gk = k0 + c;
        const bool v = gm < M && gk < K;
        cp_async16(smem_u32(as + r * LDA + c), v ? A + static_cast<size_t>(gm) * K + gk : A, v);
      }
#pragma unroll
      for (int i = tid; i < BK * BN / CHUNK; i += THREADS) {
        const int r = i / (BN / CHUNK), c = (i % (BN / CHUNK)) * CHUNK, gk = k0 + r, gn = n0 + c;
        const bool v = gk < K && gn < N;
        cp_async16(smem_u32(bs + r * LDB + c), v ? B + static_cast<size_t>(gk) * N + gn : B, v);
      }
    } else {
      for (int i = tid; i < BM * BK; i += THREADS) {
        const int r = i / BK, c = i % BK, gm = m0 + r, gk = k0 + c;
        as[r * LDA + c] = (gm < M && gk < K) ? A[static_cast<size_t>(gm) * K + gk] : T(0);
      }
      for (int i = tid; i < BK * BN; i += THREADS) {
        const int r = i / BN, c = i % BN, gk = k0 + r, gn = n0 + c;
        bs[r * LDB + c] = (gk < K && gn < N) ? B[static_cast<size_t>(gk) * N + gn] : T(0);
      }
    }
  };

  float acc[MI][NJ][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_tile(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // tile kt is in, and every warp is done with the stage refilled next
    if (kt + STAGES - 1 < KT) load_tile((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    cp_async_commit();
    const T* as = As + (kt % STAGES) * A_STAGE;
    const T* bs = Bs + (kt % STAGES) * B_STAGE;
#pragma unroll
    for (int ks = 0; ks < BK / KSTEP; ++ks) {
      unsigned a[MI][4], b[NJ][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        // matrices: rows 0-7 / 8-15 of the 16-row tile, then the second 16 bytes of k
        const int row = wm * WTM + i * 16 + lane % 8 + ((lane / 8) % 2) * 8;
        ldmatrix_x4(a[i], smem_u32(as + row * LDA + ks * KSTEP + (lane / 16) * CHUNK));
      }
      if (E == 2) {
#pragma unroll
        for (int j = 0; j < NJ; j += 2) {
          // transposed 8x8 matrices: k 0-7 / 8-15 of columns j, then of columns j + 1
          unsigned r[4];
          const int krow = ks * KSTEP + lane % 8 + ((lane / 8) % 2) * 8;
          ldmatrix_x4_trans(r, smem_u32(bs + krow * LDB + wn * WTN + j * 8 + (lane / 16) * 8));
          b[j][0] = r[0];
          b[j][1] = r[1];
          b[j + 1][0] = r[2];
          b[j + 1][1] = r[3];
        }
      } else {
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const int col = wn * WTN + j * 8 + g;
          b[j][0] = lds32(smem_u32(bs + (ks * KSTEP + t) * LDB + col));
          b[j][1] = lds32(smem_u32(bs + (ks * KSTEP + t + 4) * LDB + col));
        }
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NJ; ++j) mma_16x8(acc[i][j], a[i], b[j], T());
    }
  }
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const int row = m0 + wm * WTM + i * 16 + g, col = n0 + wn * WTN + j * 8 + 2 * t;
      store_pair(C, M, N, row, col, acc[i][j][0], acc[i][j][1], pairs != 0);
      store_pair(C, M, N, row + 8, col, acc[i][j][2], acc[i][j][3], pairs != 0);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. sm_90a: TMA, mbarriers, wgmma, warp specialization.

// A CUtensorMap (cuTensorMapEncodeTiled), passed by value as a __grid_constant__ parameter.
struct __align__(64) TensorMap {
  unsigned long long bits[16];
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(unsigned bar, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
// Wait for the phase of parity `parity` to complete. A wait past ~10 s of SM clocks traps: a
// broken pipeline then fails its launch instead of hanging the GPU.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  if (mbar_try_wait(bar, parity)) return;
  const long long start = clock64();
  while (!mbar_try_wait(bar, parity))
    if (clock64() - start > 20000000000LL) __trap();
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// A box of a 2-D tensor map into shared memory at `dst`, counted on the mbarrier `bar`.
// x is the element index along the contiguous dimension, y the row.
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, int x, int y, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// A box of shared memory at `src` to a 2-D tensor map (out-of-bounds elements are not written).
__device__ __forceinline__ void tma_store(const TensorMap* map, int x, int y, unsigned src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   reinterpret_cast<unsigned long long>(map)),
               "r"(x), "r"(y), "r"(src)
               : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until the committed stores have read their shared memory.
__device__ __forceinline__ void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// Shared memory written by this thread, ordered before the tensor memory accelerator reads it.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// A barrier among the `count` threads (whole warps) that name barrier `id` (1-15; 0 is __syncthreads).
__device__ __forceinline__ void named_barrier(int id, int count) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory"); }
__device__ __forceinline__ void stmatrix_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Shared-memory matrix descriptor for a tile stored with the 128-byte swizzle (as TMA writes it):
// start address, leading- and stride-dimension byte offsets (>> 4), swizzle mode 1 (128 B).
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (static_cast<unsigned long long>(lbo >> 4) << 16) |
         (static_cast<unsigned long long>(sbo >> 4) << 32) | (1ull << 62);
}

// wgmma wrappers: PTX names every accumulator register, so the operand lists are spelled out.
__device__ __forceinline__ void wgmma_bf16_n128(float (&d)[64], unsigned long long da, unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db));
}

__device__ __forceinline__ void wgmma_bf16_n256(float (&d)[128], unsigned long long da, unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db));
}

__device__ __forceinline__ void wgmma_bf16_n192(float (&d)[96], unsigned long long da, unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "l"(da), "l"(db));
}

__device__ __forceinline__ void wgmma_tf32_n128(float (&d)[64], const unsigned (&a)[4], unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

__device__ __forceinline__ void wgmma_tf32_n256(float (&d)[128], const unsigned (&a)[4], unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

__device__ __forceinline__ void wgmma_tf32_n192(float (&d)[96], const unsigned (&a)[4], unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, {%96, %97, %98, %99}, %100, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

// wgmma m64nNk16 (bf16) or m64nNk8 (tf32) for N of 128, 192 or 256.
template <int N>
__device__ __forceinline__ void wgmma_bf16(float (&d)[N / 2], unsigned long long da, unsigned long long db) {
  if constexpr (N == 256)
    wgmma_bf16_n256(d, da, db);
  else if constexpr (N == 192)
    wgmma_bf16_n192(d, da, db);
  else
    wgmma_bf16_n128(d, da, db);
}
template <int N>
__device__ __forceinline__ void wgmma_tf32(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long db) {
  if constexpr (N == 256)
    wgmma_tf32_n256(d, a, db);
  else if constexpr (N == 192)
    wgmma_tf32_n192(d, a, db);
  else
    wgmma_tf32_n128(d, a, db);
}

// The tiles of C a block computes: blockIdx.x, then every gridDim.x-th. With one block per tile
// each block computes one; with a persistent grid (one block per SM) the producer runs ahead
// into the next tile while the consumers store the last, and blocks start only once.
#define FOR_EACH_TILE(tile, tiles) for (int tile = blockIdx.x; tile < (tiles); tile += gridDim.x)

// The ring of STAGES stages: full[s] completes when stage s has arrived (one arrival, with its
// bytes), empty[s] when the 8 consumer warps are done with it.
template <int STAGES>
__device__ __forceinline__ void init_ring(unsigned long long (&full)[STAGES], unsigned long long (&empty)[STAGES]) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_u32(&full[s]), 1);
      mbar_init(smem_u32(&empty[s]), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

// The producer (one thread): for every tile of the block and every k step, waits for a free
// stage and loads into it A's box, BM rows of 128 bytes of k, then B's B_BOXES boxes, BK rows (k)
// of 128 bytes of n each (elements of E bytes). `it` counts the stages filled across tiles: the
// ring's position and phase, as the consumers count them.
template <int STAGES, int E, int BM, int BK, int B_BOXES>
__device__ __forceinline__ void produce(const TensorMap* tmA, const TensorMap* tmB, unsigned base, unsigned long long (&full)[STAGES],
                                        unsigned long long (&empty)[STAGES], int tiles_m, int tiles_n, int group, int KT) {
  constexpr unsigned A_BYTES = BM * 128, B_BOX = BK * 128, STAGE = A_BYTES + B_BOXES * B_BOX;
  constexpr int BOX_N = 128 / E, BN = B_BOXES * BOX_N;
  int it = 0;
  FOR_EACH_TILE(tile, tiles_m * tiles_n) {
    int tm, tn;
    tile_of(tile, tiles_m, tiles_n, group, tm, tn);
    for (int kt = 0; kt < KT; ++kt, ++it) {
      const int s = it % STAGES;
      mbar_wait(smem_u32(&empty[s]), ((it / STAGES) & 1) ^ 1);
      const unsigned bar = smem_u32(&full[s]), a = base + s * STAGE;
      mbar_expect_tx(bar, STAGE);
      tma_load(a, tmA, kt * BK, tm * BM, bar);
#pragma unroll
      for (int c = 0; c < B_BOXES; ++c) tma_load(a + A_BYTES + c * B_BOX, tmB, tn * BN + c * BOX_N, kt * BK, bar);
    }
  }
}

// bf16: tiles of 128 x BN outputs, blocks of 3 warp groups; warp group 0 loads, warp groups 1
// and 2 each compute 64 rows with wgmma m64nBNk16. Per stage: A as one 128 x 64 box (K-major,
// rows of 128 bytes), B as BN / 64 boxes of 64 rows (k) x 64 columns (n) (N-major, `tnspB`).
// KEEP = 1: a consumer issues stage k's wgmmas before waiting for stage k - 1's to finish (one
// batch in flight), and frees stage k - 1 then; KEEP = 0 waits for every batch.
// EPI = 0: the accumulators go to C by 4-byte stores (a pair of columns per thread and row);
// EPI = 1: each consumer warp group writes its 64 x BN tile to shared memory with stmatrix (in
// the 128-byte swizzle, as boxes of 64 x 64) and one thread stores it to C with TMA, which runs
// on while the warp group starts the next tile.
template <int BN, int STAGES, int KEEP, int EPI>
__global__ void __launch_bounds__(384, 1) mm_wgmma_bf16(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                                                        const __grid_constant__ TensorMap tmC, bf16* __restrict__ C, int M, int N, int K,
                                                        int group) {
  constexpr int BM = 128, BK = 64;
  constexpr unsigned A_BYTES = BM * BK * 2, B_BOX = 64 * BK * 2, STAGE = A_BYTES + BN / 64 * B_BOX;
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned base = (smem_u32(smem) + 1023u) & ~1023u;  // the swizzle needs 1024-byte alignment
  const int wg = threadIdx.x / 128, lane = threadIdx.x % 32;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
  const int KT = (K + BK - 1) / BK;
  init_ring(full, empty);

  if (wg == 0) {
    if (threadIdx.x == 0) produce<STAGES, 2, BM, BK, BN / 64>(&tmA, &tmB, base, full, empty, tiles_m, tiles_n, group, KT);
  } else {
    const unsigned a_off = (wg - 1) * 64 * 128;  // this warp group's 64 rows of A
    const int w = threadIdx.x / 32 % 4, g = lane / 4, t = lane % 4;
    int it = 0;
    FOR_EACH_TILE(tile, tiles) {
      int tm, tn;
      tile_of(tile, tiles_m, tiles_n, group, tm, tn);
      float d[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
      int prev = 0;
      for (int kt = 0; kt < KT; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(smem_u32(&full[s]), (it / STAGES) & 1);
        const unsigned a = base + s * STAGE + a_off, b = base + s * STAGE + A_BYTES;
        wgmma_fence();
        fence_regs(d);
#pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks) {
          // A: K-major, 8-row groups 1024 bytes apart, k advances 32 bytes within the swizzled row.
          // B: N-major, 64-column boxes B_BOX apart (leading), 8-row (k) groups 1024 bytes apart.
          const unsigned long long da = smem_desc(a + ks * 32, 16, 1024);
          const unsigned long long db = smem_desc(b + ks * 16 * 128, B_BOX, 1024);
          wgmma_bf16<BN>(d, da, db);
        }
        wgmma_commit();
        if constexpr (KEEP == 1) {
          wgmma_wait1();  // the previous stage's batch is done
          fence_regs(d);
          if (kt > 0 && lane == 0) mbar_arrive(smem_u32(&empty[prev]));
          prev = s;
        } else {
          wgmma_wait0();
          fence_regs(d);
          if (lane == 0) mbar_arrive(smem_u32(&empty[s]));
        }
      }
      if constexpr (KEEP == 1) {
        wgmma_wait0();
        fence_regs(d);
        if (lane == 0) mbar_arrive(smem_u32(&empty[prev]));
      }
      // accumulator fragment: d[4j + r] is row 16 * warp + g (+ 8 for r >= 2), column 8j + 2t (+ 1)
      if constexpr (EPI == 0) {
        const int row = tm * BM + (wg - 1) * 64 + 16 * w + g;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int col = tn * BN + 8 * j + 2 * t;
          store_pair(C, M, N, row, col, d[4 * j], d[4 * j + 1], true);
          store_pair(C, M, N, row + 8, col, d[4 * j + 2], d[4 * j + 3], true);
        }
      } else {
        // stmatrix x4: matrices (rows 0-7, columns 8j..), (rows 8-15, 8j..), (0-7, 8j + 8..),
        // (8-15, 8j + 8..) of this warp's 16 rows; lane l gives the address of row l % 8 of
        // matrix l / 8. Box b = column / 64 of the staging tile, 128-byte rows, 16-byte unit
        // (column % 64) / 8 swizzled by row % 8.
        const unsigned tile_smem = base + STAGES * STAGE + (wg - 1) * 64 * BN * 2;
        const int r = 16 * w + lane % 8 + ((lane / 8) % 2) * 8;
        if (threadIdx.x % 128 == 0) tma_store_wait_read();  // the last tile's stores are done reading
        named_barrier(wg, 128);
#pragma unroll
        for (int j = 0; j < BN / 8; j += 2) {
          const int c = j + lane / 16;
          const unsigned addr = tile_smem + (c / 8) * 64 * 128 + r * 128 + (((c % 8) ^ (r % 8)) * 16);
          stmatrix_x4(addr, pack_bf16x2(d[4 * j], d[4 * j + 1]), pack_bf16x2(d[4 * j + 2], d[4 * j + 3]),
                      pack_bf16x2(d[4 * j + 4], d[4 * j + 5]), pack_bf16x2(d[4 * j + 6], d[4 * j + 7]));
        }
        fence_async_shared();
        named_barrier(wg, 128);
        if (threadIdx.x % 128 == 0) {
#pragma unroll
          for (int b = 0; b < BN / 64; ++b) tma_store(&tmC, tn * BN + 64 * b, tm * BM + (wg - 1) * 64, tile_smem + b * 64 * 128);
          tma_store_commit();
        }
      }
    }
    if (EPI == 1 && threadIdx.x % 128 == 0) tma_store_wait_read();  // shared memory outlives its readers
  }
}

// tf32: C^T = B^T A^T on tiles of 128 columns (n) x BMT rows (m) of C. Warp group 0 loads; warp
// groups 1 and 2 each compute 64 columns of C as 64 rows of C^T with wgmma m64nBMTk8, A operand
// (B^T) from registers, B operand (A^T) from shared memory. Per stage: A as one BMT x 32 box
// (K-major, rows of 128 bytes), B as 4 boxes of 32 rows (k) x 32 columns (n).
// KEEP = 0: two k steps per commit group, waited for before the next two are loaded, fragments
// of two steps in registers. KEEP = 1 or 2: one k step per commit group, the wait after each
// issue leaving KEEP groups in flight, so the next steps' fragments load while earlier steps run;
// fragments of KEEP + 1 steps live at once, held in 2 (KEEP = 1) or 4 buffers (KEEP = 2, a buffer
// per step of a stage, so that every index is a constant). A stage is freed once the wait after
// the next stage's step KEEP - 1 has seen its last step complete.
template <int BMT, int STAGES, int KEEP>
__global__ void __launch_bounds__(384, 1) mm_wgmma_tf32(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                                                        float* __restrict__ C, int M, int N, int K, int group) {
  constexpr int BN = 128, BK = 32;
  constexpr unsigned A_BYTES = BMT * BK * 4, B_BOX = 32 * BK * 4, STAGE = A_BYTES + 4 * B_BOX;
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned base = (smem_u32(smem) + 1023u) & ~1023u;
  const int wg = threadIdx.x / 128, lane = threadIdx.x % 32;
  const int tiles_m = (M + BMT - 1) / BMT, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
  const int KT = (K + BK - 1) / BK;
  init_ring(full, empty);

  if (wg == 0) {
    if (threadIdx.x == 0) produce<STAGES, 4, BMT, BK, 4>(&tmA, &tmB, base, full, empty, tiles_m, tiles_n, group, KT);
  } else {
    const int w = threadIdx.x / 32 % 4, g = lane / 4, t = lane % 4;
    const int nl = (wg - 1) * 64 + 16 * w + g;  // this thread's first column of the tile (row of C^T)
    // B^T fragments: (row g, k t), (g + 8, t), (g, t + 4), (g + 8, t + 4) of each 16 x 8 slice,
    // read from the swizzled N-major boxes: element (k, n) is in box n / 32, row k, 16-byte unit
    // ((n % 32) / 4) ^ (k % 8), word n % 4. k % 8 does not depend on the k step (8 rows, 1024
    // bytes), so four offsets serve every step.
    unsigned frag_off[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int n = nl + (r & 1) * 8, k = t + (r >> 1) * 4;
      frag_off[r] = A_BYTES + (n / 32) * B_BOX + k * 128 + ((((n % 32) / 4) ^ k) * 16) + (n % 4) * 4;
    }
    int it = 0;
    FOR_EACH_TILE(tile, tiles) {
      int tm, tn;
      tile_of(tile, tiles_m, tiles_n, group, tm, tn);
      float d[BMT / 2];
#pragma unroll
      for (int i = 0; i < BMT / 2; ++i) d[i] = 0.f;
      constexpr int BUFS = KEEP == 2 ? 4 : 2;
      unsigned frag[BUFS][4];
      int prev = 0;
      for (int kt = 0; kt < KT; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(smem_u32(&full[s]), (it / STAGES) & 1);
        const unsigned a = base + s * STAGE;
        if constexpr (KEEP >= 1) {
          // k step ks reads frag[ks % BUFS]: the step BUFS before read them last, and the wait
          // after the previous step's issue saw it complete (BK / 8 = 4 steps a stage, a multiple
          // of BUFS, so the buffer of a step is the same in every stage).
#pragma unroll
          for (int ks = 0; ks < BK / 8; ++ks) {
#pragma unroll
            for (int r = 0; r < 4; ++r) frag[ks % BUFS][r] = lds32(a + frag_off[r] + ks * 1024);
            wgmma_fence();
            fence_regs(d);
            const unsigned long long da = smem_desc(a + ks * 32, 16, 1024);
            wgmma_tf32<BMT>(d, frag[ks % BUFS], da);
            wgmma_commit();
            wgmma_wait<KEEP>();  // all but the last KEEP steps done: at ks = KEEP - 1, the previous stage's
            fence_regs(d);
            if (ks == KEEP - 1 && kt > 0 && lane == 0) mbar_arrive(smem_u32(&empty[prev]));
          }
          prev = s;
        } else {
          // Two k steps per commit group: the registers of a fragment stay untouched until its
          // wgmma completes, and four steps' fragments besides 128 accumulators exceed the 168
          // registers a thread has at launch (ptxas then serializes the wgmmas).
#pragma unroll
          for (int half = 0; half < 2; ++half) {
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
              for (int r = 0; r < 4; ++r) frag[i][r] = lds32(a + frag_off[r] + (2 * half + i) * 1024);
            wgmma_fence();
            fence_regs(d);
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              const unsigned long long da = smem_desc(a + (2 * half + i) * 32, 16, 1024);  // A^T: K-major, all BMT rows
              wgmma_tf32<BMT>(d, frag[i], da);
            }
            wgmma_commit();
            wgmma_wait0();
            fence_regs(d);
          }
          if (lane == 0) mbar_arrive(smem_u32(&empty[s]));
        }
      }
      if constexpr (KEEP >= 1) {
        wgmma_wait0();
        fence_regs(d);
        if (lane == 0) mbar_arrive(smem_u32(&empty[prev]));
      }
      // d[4j + r] is C^T row nl (+ 8 for r >= 2), column 8j + 2t (+ 1 for odd r): C[m][n]
#pragma unroll
      for (int j = 0; j < BMT / 8; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int row = tm * BMT + 8 * j + 2 * t + (r & 1), col = tn * BN + nl + (r >> 1) * 8;
          if (row < M && col < N) C[static_cast<size_t>(row) * N + col] = d[4 * j + r];
        }
    }
  }
}

#else  // not sm_90a: the wgmma kernels exist (so that names resolve) but cannot run

template <int BN, int STAGES, int KEEP, int EPI>
__global__ void mm_wgmma_bf16(const __grid_constant__ TensorMap, const __grid_constant__ TensorMap, const __grid_constant__ TensorMap, bf16*,
                              int, int, int, int) {
  __trap();
}
template <int BMT, int STAGES, int KEEP>
__global__ void mm_wgmma_tf32(const __grid_constant__ TensorMap, const __grid_constant__ TensorMap, float*, int, int, int, int) {
  __trap();
}

#endif
