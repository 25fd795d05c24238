#!/usr/bin/env bash
# Peak memory and wall time of the whole-run views on an export replicated from the derived
# two-GPU NCCL export (tests/fixtures/nccl-derived/make.py over the real multi-gpu fixture:
# 78 kernels, 3,538 runtime calls and 32 NVTX ranges per copy), each in a fresh process with
# the report cache off. From the repository root:
#   KERNELS=300000 bash reports/big-exports/whole-run-views.sh > reports/big-exports/whole-run-views.log 2>&1
set -uo pipefail
PY=${PYTHON:-python3}
KERNELS=${KERNELS:-300000}
WORK=${WORK:-bench-exports}
mkdir -p "$WORK"
SRC=$WORK/nccl-derived.sqlite
BIG=$WORK/nccl-derived-$KERNELS.sqlite
[ -f "$SRC" ] || "$PY" tests/fixtures/nccl-derived/make.py "$SRC"
if [ ! -f "$BIG" ]; then
  /usr/bin/time -f "build: %e s %M KB" "$PY" -c "
from pathlib import Path
from nsys_tools.run.bigexport import replicate
print(replicate(Path('$SRC'), Path('$BIG'), round($KERNELS / 78) - 1))"
fi
ls -l "$BIG" | awk '{print "export bytes:", $5}'
echo "# $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg); $(git rev-parse --short HEAD)"
for view in utilization "utilization --window 10s" idle "idle --longest 10" launch sync nccl overlap stragglers; do
  printf '%-24s ' "$view"
  NSYS_TOOLS_CACHE=0 /usr/bin/time -f "%e s %M KB" "$PY" -m nsys_tools report "$BIG" --view $view --format csv -o "$WORK/out.csv" 2>&1 \
    | grep -v '^Wrote' | tr '\n' ' '
  echo "rows: $(($(wc -l < "$WORK/out.csv") - 1))"
done
printf '%-24s ' summary
NSYS_TOOLS_CACHE=0 /usr/bin/time -f "%e s %M KB" "$PY" -m nsys_tools summary "$BIG" -o "$WORK/summary.md" 2>&1 | grep -v '^Wrote' | tr '\n' ' '
echo "lines: $(wc -l < "$WORK/summary.md")"
