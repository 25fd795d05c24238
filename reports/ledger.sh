#!/bin/bash
# Rebuilds reports/ledger.sqlite from the committed sweeps and the variants measured and not kept.
# Every metric below is a kernel median from the named sweep (same session as what it is compared with).
set -euo pipefail
cd "$(dirname "$0")/.."
L=reports/ledger.sqlite
rm -f "$L"
nsys-tools ledger add reports/sweeps/*.tar.xz --ledger "$L"
V=20261129-183534-variants
reject() { nsys-tools ledger reject --ledger "$L" "$@"; }
reject ours_nc --sweep $V --metric "35.20 µs at 4096x4096 vs ours 34.50; 15.33 vs 15.01 at 8192x768" \
  --why "ld.global.nc adds nothing: the compiler already emits LDG.E.CONSTANT for the const __restrict__ input"
reject ours_pf --sweep $V --metric "35.39 µs at 4096x4096 vs 34.50; 15.49 vs 15.01 at 8192x768" \
  --why "asking the L2 for 256-byte blocks (ld.global.L2::256B) is slower at every shape"
reject ours_2rows --sweep $V --metric "36.48 µs at 4096x4096 vs 34.50; 6.02 vs 5.73 at 1024x2048" \
  --why "two rows per block halves the blocks but not the work per SM; narrow rows already run four to a block"
reject ours_gridstride --sweep $V --metric "36.86 µs at 4096x4096 vs 34.50; 15.20 vs 15.01 at 8192x768" \
  --why "8 blocks per SM striding over rows: no launch cost worth amortising, and the tail waits on the slowest stride"
reject ours_regcap --sweep $V --metric "38.37 µs at 4096x4096 vs 34.50; 9.06 vs 7.94 at 4096x768" \
  --why "__launch_bounds__ asking for a full SM of blocks caps registers at 32 and the row no longer fits"
reject staged_t256 --sweep $V --metric "35.46 µs at 4096x4096 vs 34.50; 16.26 vs 7.94 at 4096x768" \
  --why "the row staged in shared memory by cp.async frees registers but the shared round trip costs more"
reject row_held --sweep $V --metric "9.31 µs at 4096x768 vs 7.94; 16.74 vs 15.01 at 8192x768" \
  --why "the seed's 128-thread layout (a quad plus a masked tail slot) loses to one warp per row holding six quads"
reject held_t512 --sweep 20261129-182904-candidates --metric "37.41 µs at 4096x4096 vs 34.50 (held_t256_c2)" \
  --why "512 threads per row keep fewer rows in flight per SM than 256"
reject held_t256_c4 --sweep 20261129-182726-candidates --metric "35.71 µs at 4096x4096 vs 34.77 (streaming loads and stores)" \
  --why "streaming stores alone recover less than streaming loads and stores together"
reject bulk_t128_s3_b4 --sweep 20261129-194925-bulk --metric "34.96 µs at 4096x4096 vs ours 34.66 (35.23 vs 34.74 in 20261129-200044-bulk4096); 9.95 vs 7.90 at 4096x768" \
  --why "persistent blocks fed by bulk copies (TMA), three 16 KB rows in flight each: as fast as PyTorch's copy kernel with a clean L2 (31.2 vs 31.0 µs, Nsight Compute) but not in a sweep, where every call writes back the previous call's output"
reject bulk_t512_s3_b1 --sweep 20261129-200325-wide --metric "36.90 µs at 1024x16384 vs 37.82 (held_t512_c2), but 141.92 vs 134.59 at 4096x16384" \
  --why "one persistent block per SM wins with 8 rows per block and loses with 31; not put in the dispatcher"
reject bulk_t128_s3_b4_c8 --op layernorm --metric "37.84 µs per call vs 37.11 with register stores (explore --timer rotate, reports/explore/bulk-rotate)" \
  --why "bulk stores out of shared memory cost a second barrier per row and free each stage a row later"
reject held_t256_c2_o3 --op layernorm --metric "43.77 µs per call at 4096x4096 vs ours 37.78; 38.45 with 6 blocks per SM (explore --timer rotate, reports/explore/occupancy-rotate)" \
  --why "fewer rows in flight per SM (a smaller memory window) is slower at every cap"
reject cluster_c2_t256 --sweep 20261129-201326-cluster --metric "44.45 µs at 4096x4096 vs ours 34.61; 9.06 vs 5.70 at 1024x2048; four blocks per row 71.34" \
  --why "a row split across a thread-block cluster gives each block a copy kernel's few KB, but the cluster barriers and co-scheduling cost far more than they save"
reject held_t512_c2 --sweep 20261129-203009-wide --metric "36.26 µs at 2048x8192 vs 36.51 (256 threads); 50.99 vs 51.60 at 4096x6144; but 69.70 vs 69.31 at 4096x8192" \
  --why "512 threads for rows of 4097-8192 floats: within about 1% either way, not a clear win"
reject held_t64_c8_f --sweep 20261130-012712-ln-reuse --metric "17.95 µs at 8192x1024 vs 17.12 with N an argument (20261129-231949-ln-reuse); held_t128_c8_f 18.02 vs 17.28 at 4096x2048" \
  --why "the row width compiled in, with gamma and beta preloaded and more than one warp per row: slower, where it gains 1-4% for one warp per row or without the preload"
# Matmul (CUDA events, capture/matmul_bench.py, reports/matmul/20261129-2304-final.json): time x cuBLAS's at
# 4096^3, 8192^3, 4096^2x1024, 2048x11008x4096 (reports/matmul-variants.md has the lineage).
mm() { reject "$@"; }
mm mma_128x256 --op matmul_bf16 --metric "0.29 / 0.33 / 0.29 / 0.27 of cuBLAS's throughput (bf16)" \
  --why "8 warps on 128x256 tiles: one block of 228-register warps per SM instead of two; slower than 128x128 at every shape"
mm wgmma_n128 --op matmul_bf16 --metric "0.69 / 0.75 / 0.59 / 0.74 of cuBLAS's throughput (bf16)" \
  --why "128-wide tiles: half the work per barrier and per byte of B; slower everywhere"
mm wgmma_n256_s4_k1 --op matmul_bf16 --metric "0.88 / 0.97 / 0.69 / 0.82 of cuBLAS's throughput (bf16)" \
  --why "one wgmma batch kept in flight: predicted +5-10%, measured no gain"
mm wgmma_n256_s3_k1_e_p --op matmul_bf16 --metric "0.95 / 0.96 / 0.98 / 0.88 of cuBLAS's throughput (bf16)" \
  --why "the chosen kernel with one batch kept in flight: 1-3% under wgmma_n256_s3_e_p at every shape"
mm wgmma_n256_s4_p_tf32 --op matmul_tf32 --metric "0.92 / 0.92 / 0.98 / 1.01 of cuBLAS's throughput (TF32)" \
  --why "a persistent grid is no better than one tile per block; no TMA-store or in-flight variant fits TF32's register budget"
nsys-tools ledger list --ledger "$L" --format csv > /dev/null
