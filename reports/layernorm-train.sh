#!/bin/bash
# The H200 captures behind reports/variants.md's bf16, backward, rules-grid and wide-row sections.
# Run from the repository root on the GPU machine, after `source .device/nsys-env.sh` (NSYS) and
# with Liger-Kernel 0.8.5 importable:  bash reports/layernorm-train.sh <step> <commit> <out-dir>
# Steps: tests, ncu, bf16, bwd32, bwd16, grid-reuse, grid-rotate, grid-resume. Each writes its folder under
# reports/sweeps/ (sweeps) or its text under <out-dir> (tests, ncu).
set -uo pipefail
step=$1 commit=$2 out=$3
stamp=$(date -u +%Y%m%d-%H%M%S)
sweep() { python3 -m nsys_tools capture sweep --nsys "$NSYS" --commit "$commit" "$@"; }
# 42 shapes the dispatcher rule was not fitted on (M 256-32768, N 512-16384; widths that are not
# multiples of 4, 8 or 32; odd M), plus none of the 12 fitting shapes.
GRID=256x512,257x4096,300x16384,384x12288,511x8192,640x5120,768x1000,1000x3000,1023x2047,1536x6144,\
2000x1536,2048x2560,2049x777,3000x1280,3072x12800,4095x1025,4096x5120,4096x14336,5000x3584,6144x2304,\
7168x1002,8191x640,8192x1536,8192x6144,10000x896,12288x1600,12289x513,16384x2048,16384x4096,16384x700,\
20000x1200,24576x960,32768x512,32768x1024,32767x768,32768x2052,1024x16384,2048x10240,4096x9000,768x16383,\
6000x4099,32768x8192
case $step in
  tests) python3 -m pytest -q -p no:cacheprovider -m gpu -x tests/test_train_gpu.py 2>&1 | tail -40 > "$out/tests.txt" ;;
  ncu)
    ncu=$(ls /opt/nvidia/nsight-compute/*/ncu | sort | tail -1)
    metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,\
lts__throughput.avg.pct_of_peak_sustained_elapsed,\
l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,\
l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,\
sm__warps_active.avg.pct_of_peak_sustained_active,sm__maximum_warps_per_active_cycle_pct,\
launch__registers_per_thread,launch__grid_size,launch__block_size,launch__waves_per_multiprocessor
    "$ncu" --clock-control none --cache-control none -k regex:"ln_|copy|elementwise|_layer_norm" --metrics "$metrics" \
      python3 probes/ncu_wide.py 512x16384,1024x8192,4096x4096 ours,held_t1024_c2,held_t512_c0 > "$out/ncu-wide.txt" 2>&1 ;;
  bf16) sweep --plugin nsys_tools.kernels.layernorm_bf16 --op layernorm_bf16 --control liger --outputs reuse --out "reports/sweeps/$stamp-ln-bf16-reuse" ;;
  bwd32) sweep --plugin nsys_tools.kernels.layernorm_bwd --op layernorm_bwd_fp32 --control liger --outputs reuse --out "reports/sweeps/$stamp-ln-bwd-fp32-reuse" ;;
  bwd16) sweep --plugin nsys_tools.kernels.layernorm_bwd --op layernorm_bwd_bf16 --control liger --outputs reuse --out "reports/sweeps/$stamp-ln-bwd-bf16-reuse" ;;
  grid-reuse | grid-rotate)
    policy=${step#grid-}
    sweep --op layernorm --shapes "$GRID" --impls ours,liger,copy --control liger --outputs "$policy" \
      --out "reports/sweeps/$stamp-ln-grid-$policy" ;;
  grid-resume)  # bash reports/layernorm-train.sh grid-resume <commit> <out-dir> <policy> <sweep folder>
    sweep --resume --op layernorm --shapes "$GRID" --impls ours,liger,copy --control liger --outputs "$4" --out "$5" ;;
esac
