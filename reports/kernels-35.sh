#!/bin/bash
# The next GPU run for issue 35 (bf16 forward plans, matmul plans, then the sweeps that confirm a
# rule), in the order to run them. From the repository root on the GPU machine, after
# `source .device/nsys-env.sh` (NSYS) and with Liger-Kernel 0.8.5 importable (carried as a wheel):
#     bash reports/kernels-35.sh <step> <commit> <out-dir>
# Steps: tests, explore-bf16, explore-mm, bf16, bf16-held, mm-bf16, mm-tf32, ncu-bf16, tests-fp32,
# explore-fp32, fp32-grid. Sweeps go to
# <out-dir>/sweeps/, the rest to <out-dir>/<step>.
set -uo pipefail
step=$1 commit=$2 out=$3
stamp=$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out/sweeps"
sweep() { python3 -m nsys_tools capture sweep --nsys "$NSYS" --commit "$commit" --prepare-jobs 8 "$@"; }
# 32 bf16 shapes: rows 512 to 16384 wide, widths that are not multiples of 8 (4099, 1537, 1030, 513),
# 128 to 65536 rows; the three shapes issue 35 names and the ones the last pass left behind.
GRID=512x2048,256x4096,1024x768,1000x1537,512x8192,1024x16384,333x5000,128x12800,\
4096x4096,5000x3584,4096x1024,6000x4099,2048x10240,4096x5120,8192x2048,3000x7168,4096x2560,8192x6144,\
24576x896,32768x512,32767x768,16384x1408,20000x1200,12288x1600,12289x513,16384x2048,65536x640,\
16384x4096,30000x1030,8192x12288,2048x16384,50000x1024
# 22 bf16 shapes the bf16 rule (kernels/rows.py) was not fitted on: rows of 256 to 16384, one wave
# or less (64x16384, 96x8192), widths that are not multiples of 8 (1023, 2500, 777).
HELD=64x16384,96x8192,256x1024,512x12288,700x14336,1024x3072,1500x9000,2000x2000,2048x768,2500x2500,\
4095x1023,4096x1536,4096x3072,6000x2304,8000x777,8192x1024,16384x768,40000x384,100000x256,3000x5120,\
12000x2816,20480x1152
# Matmul: 2048-4096 cubes, and the attention (QKV, output) and MLP (up, down) products of 7B, 13B
# and 70B models at 4096 tokens (70B's QKV with 8 key-value heads of 128).
MM=2048x2048x2048,3072x3072x3072,4096x4096x4096,4096x12288x4096,4096x11008x4096,4096x4096x11008,\
4096x15360x5120,4096x13824x5120,4096x5120x13824,4096x10240x8192,4096x28672x8192,4096x8192x28672
# 25 fp32 shapes (issue 35, item 2): one wave or less (M <= 1024, N <= 2048; 128x1024 is the shape
# Inductor led by 1.26x) and rows 8192 to 32768 wide (384x12800: 1.04x behind), widths that are not
# multiples of 4 (2047, 1998, 9001, 16383) and counts of rows around one wave (132, 300, 384).
FP32=128x1024,64x2048,256x768,512x1024,1024x2048,96x1536,333x1000,1024x512,200x2047,768x1280,16x1024,900x1998,\
384x12800,1024x16384,2048x12288,4096x8192,8192x8192,256x32768,300x16384,3072x12800,512x10000,1000x9001,768x16383,\
132x8192,2048x14336
FP32_IMPLS=ours,triton,inductor,liger,torch,copy
# The plans the census finds spilling at these shapes (reports/probes/fp32-plans-census.md), left out.
FP32_DROP=256x768:held_t96_r1_c8_f,333x1000:held_t64_r4_c8_f,768x1280:held_t160_r1_c8_f,384x12800:held_t640_c2,\
384x12800:held_t640_c2_m2,2048x12288:fwd_t1024_r1_p0,3072x12800:held_t640_c2,\
3072x12800:held_t640_c2_m2,512x10000:fwd_t864_r1_p0,512x10000:fwd_t1024_r1_p0,\
1000x9001:held_t1024_c2,768x16383:fwd_t1024_r1_p0_g1
# explore-mm decides the wave rule (kernels/matmul_cuda.py, wave_rule): the shipped 256-wide plans
# (wgmma_n256_s3_e_p bf16, wgmma_n256_s4 tf32) against the 192-wide ones at every shape, and two
# shapes beside the grid where the rule leaves 256 (2048x1536: 96 tiles of 256, 0.73 of a wave;
# 1024x1024: under one wave). TF32 also times k steps kept in flight (_k1, _k2). 5 rounds: the
# round-to-round spread at the MLP shapes was 3-5%. The 128-wide plans (0.6-0.8x, rejected twice)
# are left out but for wgmma_n128_s5_k1_e_p, the best plan at 3072^3 in the last run.
MM_EXPLORE=$MM,2048x1536x8192,1024x1024x8192
MM_BF16=torch,ours,ours_wave,wgmma_n256_s3_e_p,wgmma_n256_s4,wgmma_n256_s4_k1_p,wgmma_n256_s3_k1_e_p,wgmma_n128_s5_k1_e_p,\
wgmma_n192_s4_e_p,wgmma_n192_s4_k1_e_p,wgmma_n192_s5_p,wgmma_n192_s5_k1_p
MM_TF32=torch,ours,ours_wave,wgmma_n256_s4,wgmma_n256_s4_p,wgmma_n256_s4_k1,wgmma_n256_s4_k1_p,\
wgmma_n192_s5,wgmma_n192_s5_k1,wgmma_n192_s5_k2,wgmma_n192_s5_k2_p
case $step in
  tests) python3 -m pytest -q -o addopts="" -p no:cacheprovider -m gpu tests/test_kernels_gpu.py tests/test_matmul_gpu.py \
           tests/test_harness_gpu.py tests/test_train_gpu.py > "$out/tests.txt" 2>&1 ;;
  explore-bf16)
    python3 -m nsys_tools.capture.explore --op layernorm_bf16 --fwd-plans --impls ours,triton,liger,torch,copy \
      --shapes "$GRID" --rounds 3 --iters 30 --out "$out/explore-bf16" > "$out/explore-bf16.txt" 2>&1 ;;
  tests-fp32) python3 -m pytest -q -o addopts="" -p no:cacheprovider -m gpu -k "fp32_forward_plans" \
           tests/test_kernels_gpu.py > "$out/tests-fp32.txt" 2>&1 ;;
  explore-fp32)  # every plan of forward_candidates(m, n, 4) beside the controls, CUPTI kernel times
    python3 -m nsys_tools.capture.explore --op layernorm --fwd-plans --impls "$FP32_IMPLS" --drop "$FP32_DROP" \
      --shapes "$FP32" --rounds 3 --iters 30 --out "$out/explore-fp32" > "$out/explore-fp32.txt" 2>&1 ;;
  fp32-grid)  # the dispatcher on the same grid in Nsight Systems, under both output policies
    for policy in reuse rotate; do
      sweep --op layernorm --shapes "$FP32" --impls "$FP32_IMPLS" --outputs "$policy" \
        --out "$out/sweeps/$stamp-ln-fp32-grid-$policy"
    done ;;
  explore-mm)
    python3 -m nsys_tools.capture.matmul_bench --shapes "$MM_EXPLORE" --dtypes bf16 --impls "$MM_BF16" --rounds 5 \
      --out "$out/explore-mm-bf16" > "$out/explore-mm-bf16.txt" 2>&1
    python3 -m nsys_tools.capture.matmul_bench --shapes "$MM_EXPLORE" --dtypes tf32 --impls "$MM_TF32" --rounds 5 \
      --out "$out/explore-mm-tf32" > "$out/explore-mm-tf32.txt" 2>&1 ;;
  bf16) sweep --plugin nsys_tools.kernels.layernorm_bf16 --op layernorm_bf16 --shapes "$GRID" \
          --impls ours,triton,inductor,liger,torch,copy --control liger --outputs reuse --out "$out/sweeps/$stamp-ln-bf16-grid-reuse" ;;
  bf16-held) sweep --plugin nsys_tools.kernels.layernorm_bf16 --op layernorm_bf16 --shapes "$HELD" \
          --impls ours,triton,inductor,liger,torch,copy --control liger --outputs reuse --out "$out/sweeps/$stamp-ln-bf16-held-reuse" ;;
  mm-bf16) sweep --plugin nsys_tools.kernels.matmul --op matmul_bf16 --shapes "$MM" --impls ours,torch --iters 30 \
             --out "$out/sweeps/$stamp-mm-bf16" ;;
  mm-tf32) sweep --plugin nsys_tools.kernels.matmul --op matmul_tf32 --shapes "$MM" --impls ours,torch --iters 30 \
             --out "$out/sweeps/$stamp-mm-tf32" ;;
  ncu-bf16)
    ncu=$(ls /opt/nvidia/nsight-compute/*/ncu | sort | tail -1)
    metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,\
sm__maximum_warps_per_active_cycle_pct,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,\
launch__registers_per_thread,launch__grid_size,launch__block_size,launch__waves_per_multiprocessor
    "$ncu" --clock-control none --cache-control all -k regex:"ln_fwd|_layer_norm|triton_|copy|elementwise" --metrics "$metrics" \
      python3 -m nsys_tools.capture.explore --op layernorm_bf16 --impls ours,liger,copy \
      --shapes 4096x4096,5000x3584,24576x896 --rounds 1 --iters 3 --out "$out/ncu-explore" > "$out/ncu-bf16.txt" 2>&1 ;;
esac
